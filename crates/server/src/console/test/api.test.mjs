// The console's host API end: server-sent events parsed as the host API sends them (the
// plugins.changed stream), and which answers are the host API's own errors.

import { test } from "node:test";
import assert from "node:assert/strict";

import { hostError, parseEvent, HOST_CODES } from "../assets/api.js";

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
