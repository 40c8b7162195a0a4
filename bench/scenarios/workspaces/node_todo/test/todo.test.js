'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { TodoList, isOverdue } = require('../src/todo');

test('add assigns increasing ids', () => {
  const list = new TodoList();
  assert.strictEqual(list.add('a').id, 1);
  assert.strictEqual(list.add('b').id, 2);
});

test('add rejects an empty title', () => {
  assert.throws(() => new TodoList().add('  '), /must not be empty/);
});

test('complete marks an item done and open() leaves it out', () => {
  const list = new TodoList();
  const a = list.add('a');
  list.add('b');
  list.complete(a.id);
  assert.deepStrictEqual(list.open().map((i) => i.title), ['b']);
});

test('an item due today is not overdue', () => {
  const item = { done: false, due: '2024-05-01' };
  assert.strictEqual(isOverdue(item, '2024-05-01'), false);
});

test('an item due yesterday is overdue', () => {
  const item = { done: false, due: '2024-04-30' };
  assert.strictEqual(isOverdue(item, '2024-05-01'), true);
});
