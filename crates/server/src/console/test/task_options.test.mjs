// A task's own options in the Tasks panel: what the form sends, refused by field, and what a
// row shows; generated inputs as well as the cases named.

import { test } from "node:test";
import assert from "node:assert/strict";

import { MAX_AUTO_DELETE_SECONDS, duration, optionsFrom, optionsSummary } from "../assets/task_options.js";

test("the form's values make the options the host takes", () => {
  assert.deepEqual(optionsFrom({ worktree: false, updateBeforeRun: false, autoDelete: "" }),
    { options: { worktree: false, updateBeforeRun: false } });
  assert.deepEqual(optionsFrom({ worktree: true, updateBeforeRun: true, autoDelete: " 3600 " }),
    { options: { worktree: true, updateBeforeRun: true, autoDeleteSeconds: 3600 } });
});

test("each refusal names its field, before anything is sent", () => {
  assert.match(optionsFrom({ updateBeforeRun: true }).refused, /^Update before run: needs Worktree/);
  assert.match(optionsFrom({ autoDelete: "60" }).refused, /^Auto-delete: needs Worktree/);
  for (const bad of ["0", String(MAX_AUTO_DELETE_SECONDS + 1), "-5", "1.5", "1e3", "soon", "999999999"]) {
    assert.match(optionsFrom({ worktree: true, autoDelete: bad }).refused, /^Auto-delete: /, bad);
  }
});

test("a row shows what is on, with Auto-delete's time readable", () => {
  assert.deepEqual(optionsSummary(undefined), []);
  assert.deepEqual(optionsSummary({ worktree: false, updateBeforeRun: true }), []);
  assert.deepEqual(optionsSummary({ worktree: true, updateBeforeRun: true, autoDeleteSeconds: 5400 }),
    ["worktree", "update before run", "auto-delete 1h30m"]);
  assert.equal(duration(90), "1m30s");
  assert.equal(duration(MAX_AUTO_DELETE_SECONDS), "30d");
  assert.equal(duration(0), "0s");
});

test("whatever the form holds, the answer is options the host's rules accept, or a refusal", () => {
  const texts = ["", " ", "1", "59", "3600", "2592000", "2592001", "x", "１２", "1\n2", "0x10", null, undefined, 7];
  for (const worktree of [true, false, "", 1]) {
    for (const updateBeforeRun of [true, false, null]) {
      for (const autoDelete of texts) {
        const got = optionsFrom({ worktree, updateBeforeRun, autoDelete });
        if (got.refused) {
          assert.equal(typeof got.refused, "string");
          continue;
        }
        const o = got.options;
        assert.equal(typeof o.worktree, "boolean");
        assert.ok(o.worktree || (!o.updateBeforeRun && o.autoDeleteSeconds === undefined));
        if (o.autoDeleteSeconds !== undefined) {
          assert.ok(Number.isInteger(o.autoDeleteSeconds)
            && o.autoDeleteSeconds >= 1 && o.autoDeleteSeconds <= MAX_AUTO_DELETE_SECONDS);
        }
      }
    }
  }
});
