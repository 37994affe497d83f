// The agent view: which panes show the agent label, which run a pane follows, and the run's
// chat drawn from whatever the host answers.

import { test } from "node:test";
import assert from "node:assert/strict";

import { MAX_SHOWN, entries, pluginsWithRuns, runFor } from "../assets/agent_view.js";

test("a pane follows its plugin's going run, else its newest", () => {
  const runs = [
    { id: "r3", plugin: "quiz", phase: "Succeeded" },
    { id: "r2", plugin: "quiz", phase: "Running" },
    { id: "r1", plugin: "echo", phase: "Failed" },
  ];
  assert.deepEqual([...pluginsWithRuns(runs)], ["quiz", "echo"]);
  assert.equal(runFor(runs, "quiz").id, "r2");
  assert.equal(runFor(runs, "echo").id, "r1");
  assert.equal(runFor(runs, "other"), null);
  assert.deepEqual([...pluginsWithRuns(null)], []);
});

test("the run's chat: the prompt, each call with its answer, the final message", () => {
  const run = {
    phase: "Succeeded", prompt: "Ask what 2+2 is", result: "It is 4.",
    calls: [{ tool: "plugin_grade", input: { answer: "4" }, result: { text: '{"correct":true}', is_error: false }, at: "t" },
      { tool: "plugin_grade", input: {}, result: { text: "input: answer missing", is_error: true } }],
  };
  const { live, items } = entries(run);
  assert.equal(live, false);
  assert.deepEqual(items.map((i) => i.kind), ["user", "tool", "tool", "agent"]);
  assert.equal(items[1].input, '{\n  "answer": "4"\n}');
  assert.equal(items[2].error, true);
  assert.equal(entries({ ...run, phase: "Running", result: undefined }).live, true);
  const failed = entries({ phase: "Failed", reason: "DeadlineExceeded", prompt: "p" });
  assert.equal(failed.items.at(-1).text, "DeadlineExceeded");
});

test("whatever the host answers, entries are drawn and bounded", () => {
  const junk = [null, 5, "x", [], {}, { calls: "x" }, { calls: [null, 3, { result: 7 }] }, { prompt: 9 },
    { prompt: "p".repeat(MAX_SHOWN * 3), calls: [{ input: "i".repeat(MAX_SHOWN * 2) }], dropped: 4 }];
  for (const run of junk) {
    const { items } = entries(run);
    for (const i of items) {
      for (const v of [i.text, i.input, i.answer]) {
        if (v !== undefined) assert.ok(v.length <= MAX_SHOWN + 40, `${v.length}`);
      }
    }
  }
  assert.equal(entries(junk.at(-1)).items.find((i) => i.kind === "note").text, "4 earlier tool calls not kept");
});
