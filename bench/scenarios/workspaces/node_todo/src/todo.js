'use strict';

// A tiny in-memory todo list: items have an id, a title, tags and an optional due date (YYYY-MM-DD).

class TodoList {
  constructor() {
    this.items = [];
    this.nextId = 1;
  }

  add(title, { tags = [], due = null } = {}) {
    if (!title || !title.trim()) {
      throw new Error('title must not be empty');
    }
    const item = { id: this.nextId++, title: title.trim(), tags, due, done: false };
    this.items.push(item);
    return item;
  }

  complete(id) {
    const item = this.items.find((i) => i.id === id);
    if (!item) {
      throw new Error(`no item ${id}`);
    }
    item.done = true;
    return item;
  }

  open() {
    return this.items.filter((i) => !i.done);
  }
}

// An item is overdue when it is open and its due date is before today.
function isOverdue(item, today) {
  if (item.done || !item.due) {
    return false;
  }
  return item.due <= today;
}

module.exports = { TodoList, isOverdue };
