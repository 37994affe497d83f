// The console's UI commands: each step by its doer, in order; what it cannot do is said so,
// a failure stops the rest, and nothing a plugin sends makes it throw.

import { test } from "node:test";
import assert from "node:assert/strict";

import { MAX_STEP_ERROR, runSteps, summary } from "../assets/commands.js";

test("each step runs by its doer, in order, and what has none is unsupported", async () => {
  const done = [];
  const doers = {
    select_chat: async () => done.push("chat"),
    notify: async (s) => done.push(`notify:${s.message}`),
  };
  const answer = await runSteps([
    { type: "select_chat" },
    { type: "compose", text: "hi" },
    { type: "notify", message: "ready" },
  ], doers);
  assert.deepEqual(done, ["chat", "notify:ready"]);
  assert.deepEqual(answer, { steps: [
    { status: "ran" },
    { status: "unsupported", error: "this console has no composer" },
    { status: "ran" },
  ] });
  assert.equal(summary({ plugin: "echo" }, answer), "echo asked for 3 steps: 2 ran");
});

test("a failed step says why and the steps after it are skipped", async () => {
  const answer = await runSteps([
    { type: "open_panel", panel: "main" },
    { type: "notify", message: "never" },
  ], {
    open_panel: async () => { throw new Error("x".repeat(2 * MAX_STEP_ERROR)); },
    notify: async () => assert.fail("a step after a failure ran"),
  });
  assert.equal(answer.steps[0].status, "failed");
  assert.equal(answer.steps[0].error.length, MAX_STEP_ERROR);
  assert.deepEqual(answer.steps[1], { status: "skipped" });
});

test("whatever a plugin sends, there is one result per step and no throw", async () => {
  const junk = [null, 5, "x", {}, { type: 7 }, { type: "__proto__" }, { type: "constructor" },
    { type: "toString" }, { type: "a".repeat(10000) }];
  for (let i = 0; i < 200; i++) {
    const steps = Array.from({ length: i % 17 }, (_, j) => junk[(i * 7 + j) % junk.length]);
    const answer = await runSteps(steps, { select_chat: async () => {} });
    assert.equal(answer.steps.length, steps.length);
    for (const r of answer.steps) {
      assert.ok(["ran", "unsupported", "skipped", "failed"].includes(r.status));
      if (r.error) assert.ok(r.error.length <= MAX_STEP_ERROR);
    }
  }
  assert.deepEqual(await runSteps("not a list", {}), { steps: [] });
});
