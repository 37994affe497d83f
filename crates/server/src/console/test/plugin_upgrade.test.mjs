// Upgrade in Settings → Plugins: the review's rows, its one-line summary, and the body sent;
// generated reviews as well as the cases named.

import { test } from "node:test";
import assert from "node:assert/strict";

import { reviewRows, reviewSummary, upgradeBody } from "../assets/plugin_upgrade.js";

const review = {
  plugin: "echo",
  current: { image: "r/echo:0.1.0@sha256:aa", version: "0.1.0", approved: ["agent.readonly", "files.read"], resourceVersion: "42" },
  candidate: {
    image: "r/echo:0.2.0@sha256:bb",
    version: "0.2.0",
    signed: true,
    capabilities: [
      { capability: "agent.readonly", allows: "read the chat", before: "approved", approved: true },
      { capability: "schedule", allows: "run on a schedule", before: "declined", approved: false },
      { capability: "notifications.send", allows: "notify people", before: "new", approved: false },
    ],
    dropped: ["files.read"],
    admission: [],
  },
  refused: null,
};

test("the rows tell what carries over from what the person chooses", () => {
  const rows = reviewRows(review);
  assert.deepEqual(rows.map((r) => [r.capability, r.choice]), [
    ["agent.readonly", "carried"], ["schedule", "ask"], ["notifications.send", "ask"],
  ]);
  assert.match(rows[2].says, /^new/);
});

test("the summary names the versions, what is new and what goes", () => {
  assert.equal(reviewSummary(review), "echo 0.1.0 → 0.2.0 · asks for 1 new capability · drops 1 approved before");
  const unsigned = { ...review, candidate: { ...review.candidate, signed: false, capabilities: [], dropped: [] } };
  assert.equal(reviewSummary(unsigned), "echo 0.1.0 → 0.2.0 · asks for nothing new · unsigned");
});

test("the body sends the reviewed image and version, and only choices the review asked for", () => {
  assert.deepEqual(upgradeBody(review, new Set(["notifications.send", "agent.readonly", "files.write"])), {
    image: "r/echo:0.2.0@sha256:bb",
    resourceVersion: "42",
    approve: ["notifications.send"],
  });
});

test("a review of any shape gives rows and a summary, never a throw", () => {
  const values = [null, undefined, 0, "", "x", [], {}, { capability: 1 }, { capability: "a", before: "zz" }];
  let seed = 7;
  const pick = () => values[(seed = (seed * 1103515245 + 12345) % 2147483648) % values.length];
  for (let i = 0; i < 500; i++) {
    const r = { plugin: pick(), current: pick(), candidate: { capabilities: [pick(), pick()], dropped: pick(), signed: pick() } };
    const rows = reviewRows(r);
    assert.ok(Array.isArray(rows));
    for (const row of rows) assert.equal(typeof row.capability, "string");
    assert.equal(typeof reviewSummary(r), "string");
    assert.equal(typeof reviewSummary(pick()), "string");
  }
});
