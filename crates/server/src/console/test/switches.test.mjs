// The console's switch book: a list read while a click is out, or before its answer, does not
// undo the click.

import { test } from "node:test";
import assert from "node:assert/strict";

import { SwitchBook, switchKey } from "../assets/switches.js";

const off = { id: "mode", label: "Mode", on: false, title: "Mode is off" };
const key = switchKey("general", "echo", "mode");

test("a switch nobody clicked shows as listed", () => {
  const book = new SwitchBook();
  assert.deepEqual(book.shown(key, off, book.mark()), off);
});

test("while a click is out, a fresh list shows the state asked for, busy", () => {
  const book = new SwitchBook();
  book.clicked(key, true);
  assert.ok(book.pending(key));
  assert.deepEqual(book.shown(key, off, book.mark()), { ...off, on: true, busy: true });
});

test("a list asked for before the answer shows the answer", () => {
  const book = new SwitchBook();
  book.clicked(key, true);
  const mark = book.mark();
  book.settled(key, { on: true, title: "Mode is on" });
  assert.ok(!book.pending(key));
  assert.deepEqual(book.shown(key, off, mark), { ...off, on: true, title: "Mode is on" });
});

test("a list asked for after the answer is the truth again", () => {
  const book = new SwitchBook();
  book.clicked(key, true);
  book.settled(key, { on: true, title: "Mode is on" });
  const later = { ...off, on: false, title: "turned off elsewhere" };
  assert.deepEqual(book.shown(key, later, book.mark()), later);
});

test("keys keep chats, plugins and switches apart", () => {
  assert.notEqual(switchKey("a", "b/c", "d"), switchKey("a/b", "c", "d"));
  const book = new SwitchBook();
  book.clicked(switchKey("random", "echo", "mode"), true);
  assert.deepEqual(book.shown(key, off, book.mark()), off);
});
