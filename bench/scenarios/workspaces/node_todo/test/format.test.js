'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { formatItem, formatList } = require('../src/format');

test('formatItem shows box, id, title, due date and tags', () => {
  const item = { id: 3, title: 'Buy milk', done: false, due: '2024-05-01', tags: ['home'] };
  assert.strictEqual(formatItem(item), '[ ] #3 Buy milk (due 2024-05-01) #home');
});

test('formatList of nothing says so', () => {
  assert.strictEqual(formatList([]), '(nothing to do)');
});
