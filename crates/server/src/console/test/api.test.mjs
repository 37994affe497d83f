// The console's host API end: server-sent events parsed as the host API sends them (the
// plugins.changed stream), and which answers are the host API's own errors.

import { test } from "node:test";
import assert from "node:assert/strict";

import { HostApi, HostError, hostError, parseEvent, pendingWait, HOST_CODES } from "../assets/api.js";

test("a stream's blocks become events; comments alone are none", () => {
  assert.equal(parseEvent(": following plugins.changed"), null);
  assert.deepEqual(
    parseEvent('event: plugins.changed\ndata: {"plugin":"echo","change":"removed"}'),
    { event: "plugins.changed", data: '{"plugin":"echo","change":"removed"}', id: undefined },
  );
  assert.deepEqual(parseEvent("id: 7\ndata: a\ndata: b"), { event: "message", data: "a\nb", id: "7" });
});

test("only the host API's codes are the host's errors", () => {
  const e = hostError(409, { error: { code: "plugin_not_enabled", message: "off here" } });
  assert.equal(e.status, 409);
  assert.equal(e.code, "plugin_not_enabled");
  assert.equal(e.message, "off here");
  assert.equal(hostError(404, { error: { code: "no_such_item", message: "a plugin's own" } }), null);
  assert.equal(hostError(500, { text: "hi" }), null);
  assert.ok(HOST_CODES.has("breaker_open"));
});

test("only instance_pending is asked again, after its Retry-After", () => {
  const pending = new HostError(503, "instance_pending", "not made yet");
  assert.equal(pendingWait(pending, "2"), 2000);
  assert.equal(pendingWait(pending, null), 1000);
  assert.equal(pendingWait(pending, "600"), 5000);
  assert.equal(pendingWait(new HostError(503, "breaker_open", "open"), "30"), null);
  assert.equal(pendingWait(new HostError(409, "plugin_not_enabled", "off"), null), null);
});

test("a click answered instance_pending reaches the plugin once the instance is made", async () => {
  const answers = [
    [503, { error: { code: "instance_pending", message: "not made yet" } }, { "Retry-After": "1" }],
    [503, { error: { code: "instance_pending", message: "not made yet" } }, { "Retry-After": "1" }],
    [200, { id: "mode", on: true }, {}],
  ];
  const calls = [];
  const waits = [];
  const saved = globalThis.fetch;
  globalThis.fetch = async (path, init) => {
    calls.push([init.method, path, init.body]);
    const [status, body, headers] = answers.shift();
    return new Response(JSON.stringify(body), { status, headers });
  };
  try {
    const api = new HostApi("t", "team");
    api.sleep = async (ms) => { waits.push(ms); };
    const now = await api.post("/switches/mode", { on: true });
    assert.deepEqual(now, { id: "mode", on: true });
    assert.equal(calls.length, 3);
    assert.ok(calls.every(([m, , b]) => m === "POST" && b === '{"on":true}'));
    assert.deepEqual(waits, [1000, 1000]);

    answers.push([409, { error: { code: "plugin_not_enabled", message: "off here" } }, {}]);
    await assert.rejects(api.post("/switches/mode", { on: true }), { code: "plugin_not_enabled" });
    assert.equal(calls.length, 4);

    // A read answered instance_pending is the answer: the page loads again on the next change.
    answers.push([503, { error: { code: "instance_pending", message: "not made yet" } }, { "Retry-After": "1" }]);
    await assert.rejects(api.get("/switches"), { code: "instance_pending" });
    assert.equal(calls.length, 5);
    assert.deepEqual(waits, [1000, 1000]);
  } finally {
    globalThis.fetch = saved;
  }
});
