// The console's approvals: which wait where, how long each has left, what was decided, and a
// call's input as a person reads it (hostile inputs included: deep, long, odd).

import { test } from "node:test";
import assert from "node:assert/strict";

import {
  DECIDED_SHOWN, INPUT_SHOWN, decisionText, forChat, inputText, pendingByChat, refusalText,
  timeLeft,
} from "../assets/approvals.js";

const a = (name, chat, decision, extra = {}) => ({
  name, chat, decision, tool: "plugin_grade", plugin: "quiz", agent: "ask",
  requestedAt: "2026-12-06T10:00:00Z", deadline: "2026-12-06T10:05:00Z", ...extra,
});

test("only waiting approvals count, by chat", () => {
  const counts = pendingByChat([
    a("one", "general", "Pending"), a("two", "general", "Pending"),
    a("three", "random", "Approved"), a("four", "random", "Pending"), null, { decision: "Pending" },
  ]);
  assert.deepEqual([...counts], [["general", 2], ["random", 1]]);
  assert.equal(pendingByChat(undefined).size, 0);
});

test("a chat's drawer: waiting soonest deadline first, then the latest decided", () => {
  const list = [
    a("late", "general", "Pending", { deadline: "2026-12-06T10:09:00Z" }),
    a("soon", "general", "Pending", { deadline: "2026-12-06T10:01:00Z" }),
    a("other", "random", "Pending"),
    ...Array.from({ length: DECIDED_SHOWN + 2 }, (_, i) =>
      a(`d${i}`, "general", "Denied", { decidedAt: `2026-12-06T10:0${i}:30Z` })),
  ];
  const { pending, decided } = forChat(list, "general");
  assert.deepEqual(pending.map((x) => x.name), ["soon", "late"]);
  assert.equal(decided.length, DECIDED_SHOWN);
  assert.equal(decided[0].name, `d${DECIDED_SHOWN + 1}`);
});

test("time left counts down to the deadline and says when it passed", () => {
  const deadline = "2026-12-06T10:05:00Z";
  const at = (s) => Date.parse(deadline) - s * 1000;
  assert.equal(timeLeft(deadline, at(272)), "4:32 left");
  assert.equal(timeLeft(deadline, at(5)), "0:05 left");
  assert.equal(timeLeft(deadline, at(3 * 3600 + 61)), "3:01:01 left");
  assert.equal(timeLeft(deadline, at(0)), "past its deadline");
  assert.equal(timeLeft(deadline, at(-10)), "past its deadline");
  assert.equal(timeLeft("not a time"), "");
  assert.equal(timeLeft(undefined), "");
});

test("each decision reads as a sentence with who and why", () => {
  assert.equal(
    decisionText({ decision: "Approved", decidedBy: "alice", reason: "fine" }),
    "Approved once by alice: fine");
  assert.equal(decisionText({ decision: "ApprovedAlways", decidedBy: "bob" }),
    "Approved for the rest of the run by bob");
  assert.equal(decisionText({ decision: "Expired", decidedBy: "loop-plugins", reason: "x" }),
    "Denied: nobody decided in time");
  assert.equal(decisionText({ decision: "Something new" }), "Something new");
  assert.equal(decisionText(null), "Unknown");
});

test("a call's input is shown as JSON, cut, whatever it is", () => {
  assert.equal(inputText({ answer: "4" }), '{\n  "answer": "4"\n}');
  const long = inputText({ text: "x".repeat(INPUT_SHOWN * 3) });
  assert.equal([...long].length, INPUT_SHOWN + 1);
  assert.ok(long.endsWith("…"));
  // Astral characters are cut whole, never halved.
  const emoji = inputText("😀".repeat(INPUT_SHOWN));
  assert.ok(!/[\uD800-\uDBFF](?![\uDC00-\uDFFF])/.test(emoji));
  // Generated inputs: deep, wide, odd values; never throws, never longer than the cap.
  let seed = 7;
  const next = () => (seed = (seed * 1103515245 + 12345) % 2147483648);
  for (let i = 0; i < 300; i++) {
    let v = ["", 0, null, true, "\u0000<script>", -1e308][next() % 6];
    for (let d = next() % 200; d > 0; d--) v = next() % 2 ? [v] : { [String(next())]: v };
    const text = inputText(v);
    assert.ok([...text].length <= INPUT_SHOWN + 1, text.length);
  }
  const cyclic = {};
  cyclic.self = cyclic;
  assert.equal(inputText(cyclic), "[object Object]");
  assert.equal(inputText(10n), "10");
  let deep = [];
  for (let d = 0; d < 200000; d++) deep = [deep];
  assert.ok([...inputText(deep)].length <= INPUT_SHOWN + 1);
});

test("a refused decision says what the person can do about it", () => {
  assert.match(refusalText({ code: "forbidden", message: "no" }), /approver role/);
  assert.match(refusalText({ code: "approval_decided", message: "by bob" }), /first: by bob/);
  assert.match(refusalText({ code: "approval_expired", message: "gone" }), /Too late/);
  assert.equal(refusalText({ code: "internal", message: "boom" }), "boom");
});
