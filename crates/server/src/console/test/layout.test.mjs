// The console's layout of panes: the add-pane menu, a singleton once per layout, and what the
// browser keeps per user and chat, whatever the storage holds.

import { test } from "node:test";
import assert from "node:assert/strict";

import {
  MAX_PANES, add, initialLayout, layoutKey, menu, panelOf, paneKey, readLayout, userOf, writeLayout,
} from "../assets/layout.js";

const echo = { plugin: "echo", id: "main", label: "Echo", singleton: true };
const board = { plugin: "quiz", id: "board", label: "Board", singleton: false };
const panels = [echo, board];

function storage() {
  const m = new Map();
  return { getItem: (k) => (m.has(k) ? m.get(k) : null), setItem: (k, v) => m.set(k, String(v)), map: m };
}

test("with nothing kept, every panel is shown once, in the menu's order", () => {
  assert.deepEqual(initialLayout(null, panels), ["echo/main", "quiz/board"]);
  assert.deepEqual(initialLayout([], panels), [], "a layout the person emptied stays empty");
});

test("a singleton is added once per layout; another panel as often as there is room", () => {
  assert.deepEqual(add(echo, []), { key: "echo/main" });
  assert.match(add(echo, ["echo/main"]).refused, /once per layout/);
  assert.deepEqual(add(board, ["quiz/board"]), { key: "quiz/board#2" });
  assert.deepEqual(add(board, ["quiz/board", "quiz/board#3"]), { key: "quiz/board#2" });
  const full = Array.from({ length: MAX_PANES }, (_, i) => paneKey("quiz", "board", i + 1));
  assert.match(add(board, full).refused, /at most/);
  const entries = menu(panels, ["echo/main"]);
  assert.deepEqual(entries.map((e) => [e.panel, e.disabled]), [["main", true], ["board", false]]);
});

test("the layout is kept per user and chat, and junk kept is dropped, not thrown", () => {
  const s = storage();
  const mine = layoutKey("team", "system:serviceaccount:team:ana", "general");
  const theirs = layoutKey("team", "system:serviceaccount:team:bo", "general");
  writeLayout(s, mine, ["quiz/board"]);
  assert.deepEqual(readLayout(s, mine), ["quiz/board"]);
  assert.equal(readLayout(s, theirs), null);
  for (const junk of ["{", "5", "null", '{"a":1}', '["../x", "a/b/c", 7, "echo/main", "echo/main"]', "x".repeat(20000)]) {
    s.setItem(mine, junk);
    const got = readLayout(s, mine);
    assert.ok(got === null || got.every((k) => panelOf(k)), junk);
  }
  s.setItem(mine, '["../x", "echo/main", "echo/main"]');
  assert.deepEqual(readLayout(s, mine), ["echo/main"]);
});

test("the user is a token's JWT sub, or nobody in particular", () => {
  const payload = btoa(JSON.stringify({ sub: "system:serviceaccount:team:ana" })).replaceAll("=", "");
  assert.equal(userOf(`h.${payload}.s`), "system:serviceaccount:team:ana");
  for (const t of [undefined, "", "opaque", "a.%%%.b", "a.bnVsbA.b", `a.${"A".repeat(9000)}.b`]) {
    assert.equal(userOf(t), "", String(t).slice(0, 20));
  }
});
