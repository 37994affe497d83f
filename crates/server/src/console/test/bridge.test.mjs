// The console's host end of the bridge against the panel authors' module (the frame end),
// over a real MessageChannel: every method of docs/bridge.md answers, and refusals carry the
// codes the doc gives. Run by `make bridge-test` (node --test).

import { test } from "node:test";
import assert from "node:assert/strict";

import { answer, Code } from "../assets/bridge.js";
import { frameHandlers, memoryState, xRequest } from "../assets/frames.js";
import { HostError } from "../assets/api.js";
import { theme, THEMES } from "../assets/theme.js";
import { createBridge } from "../../../../../packages/loop-plugin-ui/index.js";

const context = { namespace: "team", chat: "general", kind: "channel", plugin: "echo", panel: "main" };

function fakeApi(seen, { settingsError } = {}) {
  return {
    plugin: (chat, plugin, rest) => `/api/host/v1/namespaces/team/channels/${chat}/plugins/${plugin}${rest}`,
    async get(path) {
      seen.push(["GET", path]);
      if (settingsError) throw settingsError;
      return { settings: { verbose: true } };
    },
    async raw(method, path, { body, contentType } = {}) {
      seen.push([method, path, body, contentType]);
      if (path.endsWith("/x/missing")) return new Response("nope", { status: 404 });
      if (path.endsWith("/x/open")) {
        return new Response(JSON.stringify({ error: { code: "breaker_open", message: "open" } }),
          { status: 503, headers: { "content-type": "application/json" } });
      }
      return new Response(body ?? "", {
        status: 200, headers: { "content-type": contentType ?? "text/plain" },
      });
    },
  };
}

function connected(handlers) {
  const channel = new MessageChannel();
  channel.port1.onmessage = async (event) => {
    const reply = await answer(handlers, event.data);
    if (reply) channel.port1.postMessage(reply);
  };
  const bridge = createBridge(channel.port2);
  return { bridge, close: () => { bridge.close(); channel.port1.close(); } };
}

test("a pane's bridge answers every method", async () => {
  const seen = [];
  const heights = [];
  const { bridge, close } = connected(frameHandlers({
    api: fakeApi(seen),
    context,
    state: memoryState(),
    theme: () => theme("dark"),
    resize: (h) => heights.push(h),
    gone: () => null,
  }));
  try {
    assert.deepEqual(await bridge.context.get(), context);
    assert.deepEqual(await bridge.settings.get(), { verbose: true });
    const echoed = await bridge.api.request({ method: "POST", path: "/x/echo?x=1", body: { text: "hi" } });
    assert.deepEqual(echoed, { status: 200, headers: { "content-type": "application/json" }, body: { text: "hi" } });
    assert.deepEqual(seen.at(-1), [
      "POST", "/api/host/v1/namespaces/team/channels/general/plugins/echo/x/echo?x=1",
      "{\"text\":\"hi\"}", "application/json",
    ]);
    const missing = await bridge.api.request({ path: "/x/missing" });
    assert.deepEqual(missing, { status: 404, headers: { "content-type": "text/plain;charset=UTF-8" }, body: "nope" });
    assert.equal(await bridge.state.get(), null);
    await bridge.state.set({ n: 1 });
    assert.deepEqual(await bridge.state.get(), { n: 1 });
    await bridge.ui.resize(200.2);
    assert.deepEqual(heights, [201]);
    const t = await bridge.theme.get();
    assert.equal(t.scheme, "dark");
    assert.deepEqual(Object.keys(t.vars), Object.keys(THEMES.dark));
    assert.equal(Object.keys(t.vars).length, 10);
  } finally {
    close();
  }
});

test("refusals carry the doc's codes", async () => {
  const seen = [];
  let gone = null;
  const { bridge, close } = connected(frameHandlers({
    api: fakeApi(seen, { settingsError: new HostError(403, "forbidden", "alice may not") }),
    context,
    state: memoryState(),
    theme: () => theme("light"),
    resize: null,
    gone: () => gone,
  }));
  const code = (p) => p.then(() => "answered", (e) => e.code);
  try {
    assert.equal(await code(bridge.api.request({ path: "/api/host/v1/x" })), Code.INVALID_PARAMS);
    assert.equal(await code(bridge.api.request({ path: "/x/a/../b" })), Code.INVALID_PARAMS);
    assert.equal(await code(bridge.api.request({ method: "TRACE", path: "/x/a" })), Code.INVALID_PARAMS);
    assert.equal(await code(bridge.call("no.such")), Code.METHOD_NOT_FOUND);
    assert.equal(await code(bridge.ui.resize(-1)), Code.INVALID_PARAMS);
    assert.equal(await code(bridge.settings.get()), Code.FORBIDDEN);
    assert.equal(await code(bridge.api.request({ path: "/x/open" })), Code.UPSTREAM);
    // In a pane, ui.resize changes nothing and answers null.
    assert.equal(await bridge.ui.resize(100), undefined);
    gone = "plugin echo was removed";
    assert.equal(await code(bridge.api.request({ path: "/x/echo" })), Code.NOT_ENABLED);
    assert.equal(await code(bridge.settings.get()), Code.NOT_ENABLED);
  } finally {
    close();
  }
});

test("messages that are not requests", async () => {
  const handlers = { "context.get": () => context };
  assert.equal((await answer(handlers, { jsonrpc: "1.0", id: 1, method: "x" })).error.code, Code.INVALID_REQUEST);
  assert.equal(await answer(handlers, { jsonrpc: "2.0", method: "context.get" }), null);
  assert.equal((await answer(handlers, { jsonrpc: "2.0", id: 2, method: "context.get", params: [] })).error.code, Code.INVALID_PARAMS);
  assert.equal((await answer(handlers, { jsonrpc: "2.0", id: 3, method: "toString" })).error.code, Code.METHOD_NOT_FOUND);
  assert.deepEqual(xRequest({ path: "/x/a", body: "raw", headers: { "X-Other": "1" } }),
    { method: "GET", path: "/x/a", body: "raw", contentType: undefined });
});
