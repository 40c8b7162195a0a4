'use strict';

// One line per item: "[x] #3 Buy milk (due 2024-05-01) #home".
function formatItem(item) {
  const box = item.done ? '[x]' : '[ ]';
  const due = item.due ? ` (due ${item.due})` : '';
  const tags = item.tags.map((t) => ` #${t}`).join('');
  return `${box} #${item.id} ${item.title}${due}${tags}`;
}

function formatList(items) {
  return items.length ? items.map(formatItem).join('\n') : '(nothing to do)';
}

module.exports = { formatItem, formatList };
