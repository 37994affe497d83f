import { test } from "node:test";
import assert from "node:assert/strict";
import { connect, BridgeError, ErrorCode } from "../index.js";
import { fakeHost, settle } from "./host.mjs";

async function connected(t, options = {}) {
  const host = fakeHost();
  t.after(() => host.close());
  const pending = connect({ window: host.window, ...options });
  host.init();
  return { host, bridge: await pending };
}

// Each method: how the page calls it, the request docs/bridge.md says goes out, what the host
// answers and what the page gets.
const methods = [
  {
    name: "api.request with everything",
    call: (b) => b.api.request({ method: "POST", path: "/x/echo", body: { text: "hi" }, headers: { "content-type": "application/json" } }),
    method: "api.request",
    params: { method: "POST", path: "/x/echo", body: { text: "hi" }, headers: { "content-type": "application/json" } },
    result: { status: 200, headers: { "content-type": "application/json" }, body: { text: "hi" } },
    gets: { status: 200, headers: { "content-type": "application/json" }, body: { text: "hi" } },
  },
  {
    name: "api.request, GET by default, no body or headers sent",
    call: (b) => b.api.request({ path: "/x/items?limit=5" }),
    method: "api.request",
    params: { method: "GET", path: "/x/items?limit=5" },
    result: { status: 404, headers: {}, body: "" },
    gets: { status: 404, headers: {}, body: "" },
  },
  {
    name: "api.request with a string body",
    call: (b) => b.api.request({ method: "PUT", path: "/x/note", body: "plain text" }),
    method: "api.request",
    params: { method: "PUT", path: "/x/note", body: "plain text" },
    result: { status: 204, headers: {}, body: "" },
    gets: { status: 204, headers: {}, body: "" },
  },
  {
    name: "context.get",
    call: (b) => b.context.get(),
    method: "context.get",
    params: {},
    result: { namespace: "team", chat: "general", kind: "channel", plugin: "echo", panel: "main" },
    gets: { namespace: "team", chat: "general", kind: "channel", plugin: "echo", panel: "main" },
  },
  {
    name: "settings.get",
    call: (b) => b.settings.get(),
    method: "settings.get",
    params: {},
    result: { verbose: true },
    gets: { verbose: true },
  },
  {
    name: "state.get",
    call: (b) => b.state.get(),
    method: "state.get",
    params: {},
    result: { seen: 3 },
    gets: { seen: 3 },
  },
  {
    name: "state.get with nothing stored",
    call: (b) => b.state.get(),
    method: "state.get",
    params: {},
    result: null,
    gets: null,
  },
  {
    name: "state.set",
    call: (b) => b.state.set({ seen: 4 }),
    method: "state.set",
    params: { value: { seen: 4 } },
    result: null,
    gets: undefined,
  },
  {
    name: "state.set of undefined clears (null)",
    call: (b) => b.state.set(undefined),
    method: "state.set",
    params: { value: null },
    result: null,
    gets: undefined,
  },
  {
    name: "ui.resize",
    call: (b) => b.ui.resize(240),
    method: "ui.resize",
    params: { height: 240 },
    result: null,
    gets: undefined,
  },
  {
    name: "theme.get",
    call: (b) => b.theme.get(),
    method: "theme.get",
    params: {},
    result: { vars: { "--bg": "#fff" }, scheme: "light" },
    gets: { vars: { "--bg": "#fff" }, scheme: "light" },
  },
  {
    name: "call, the low-level request",
    call: (b) => b.call("custom.thing", { a: 1 }),
    method: "custom.thing",
    params: { a: 1 },
    result: [1, 2],
    gets: [1, 2],
  },
  {
    name: "call without params sends {}",
    call: (b) => b.call("custom.other"),
    method: "custom.other",
    params: {},
    result: "ok",
    gets: "ok",
  },
];

test("each method sends the documented JSON-RPC request and resolves with its result", async (t) => {
  const { host, bridge } = await connected(t);
  let id = 0;
  for (const m of methods) {
    const answer = m.call(bridge);
    const sent = await host.next();
    id += 1;
    assert.deepEqual(sent, { jsonrpc: "2.0", id, method: m.method, params: m.params }, m.name);
    host.answer(sent.id, m.result);
    assert.deepEqual(await answer, m.gets, m.name);
  }
  assert.equal(host.pending(), 0, "one message per call");
});

test("notify sends a notification without an id", async (t) => {
  const { host, bridge } = await connected(t);
  bridge.notify("page.ready", { at: 1 });
  assert.deepEqual(await host.next(), { jsonrpc: "2.0", method: "page.ready", params: { at: 1 } });
});

test("a host error becomes a BridgeError with its code, message and data", async (t) => {
  const { host, bridge } = await connected(t);
  const answer = bridge.api.request({ path: "/x/slow" });
  const sent = await host.next();
  host.fail(sent.id, { code: -32002, message: "the plugin did not answer in 30 s", data: { reason: "plugin_timeout", status: 504 } });
  await assert.rejects(answer, (error) => {
    assert.ok(error instanceof BridgeError);
    assert.ok(error instanceof Error);
    assert.equal(error.name, "BridgeError");
    assert.equal(error.code, ErrorCode.UPSTREAM);
    assert.equal(error.message, "the plugin did not answer in 30 s");
    assert.deepEqual(error.data, { reason: "plugin_timeout", status: 504 });
    return true;
  });
});

test("a malformed error is an INTERNAL BridgeError", async (t) => {
  const { host, bridge } = await connected(t);
  const answer = bridge.context.get();
  const sent = await host.next();
  host.fail(sent.id, "nope");
  await assert.rejects(answer, (error) => error instanceof BridgeError && error.code === ErrorCode.INTERNAL && /nope/.test(error.message));
});

test("concurrent calls are matched by id, whatever the answers' order", async (t) => {
  const { host, bridge } = await connected(t);
  const a = bridge.call("m.a");
  const b = bridge.call("m.b");
  const c = bridge.call("m.c");
  const sent = [await host.next(), await host.next(), await host.next()];
  assert.deepEqual(sent.map((s) => s.method), ["m.a", "m.b", "m.c"]);
  assert.equal(new Set(sent.map((s) => s.id)).size, 3, "ids are distinct");
  const aFailed = assert.rejects(a, { code: ErrorCode.METHOD_NOT_FOUND, message: "no method m.a" });
  host.answer(sent[2].id, "c");
  host.fail(sent[0].id, { code: -32601, message: "no method m.a" });
  host.answer(sent[1].id, "b");
  host.answer(999, "nobody asked"); // ignored
  assert.equal(await c, "c");
  assert.equal(await b, "b");
  await aFailed;
});

test("a call's timeout rejects it and a late answer is ignored", async (t) => {
  const { host, bridge } = await connected(t);
  const slow = bridge.settings.get({ timeoutMs: 30 });
  const sent = await host.next();
  await assert.rejects(slow, (error) => error.code === ErrorCode.TIMEOUT && /settings\.get/.test(error.message));
  host.answer(sent.id, { late: true });
  await settle();
  // The bridge still works after it.
  const next = bridge.context.get();
  const again = await host.next();
  host.answer(again.id, { chat: "x" });
  assert.deepEqual(await next, { chat: "x" });
});

test("connect's callTimeoutMs is every call's default", async (t) => {
  const { host, bridge } = await connected(t, { callTimeoutMs: 30 });
  await assert.rejects(bridge.theme.get(), { code: ErrorCode.TIMEOUT });
  await host.next();
});

test("close rejects the calls in flight and every later call", async (t) => {
  const { host, bridge } = await connected(t);
  const inFlight = bridge.state.get();
  await host.next();
  assert.equal(bridge.closed, false);
  bridge.close();
  assert.equal(bridge.closed, true);
  await assert.rejects(inFlight, { code: ErrorCode.CLOSED });
  await assert.rejects(bridge.context.get(), { code: ErrorCode.CLOSED });
  bridge.notify("dropped"); // no throw
});

test("the host closing its end rejects the calls in flight and later ones", async (t) => {
  const { host, bridge } = await connected(t);
  const inFlight = bridge.api.request({ path: "/x/wait" });
  await host.next();
  host.port.close();
  await assert.rejects(inFlight, { code: ErrorCode.CLOSED });
  assert.equal(bridge.closed, true);
  await assert.rejects(bridge.settings.get(), { code: ErrorCode.CLOSED });
});

test("a request from the host is answered method-not-found", async (t) => {
  const { host } = await connected(t);
  host.port.postMessage({ jsonrpc: "2.0", id: 7, method: "frame.do" });
  const answer = await host.next();
  assert.equal(answer.id, 7);
  assert.equal(answer.error.code, ErrorCode.METHOD_NOT_FOUND);
});

test("an answer posted as JSON text is taken too; other junk is ignored", async (t) => {
  const { host, bridge } = await connected(t);
  const answer = bridge.context.get();
  const sent = await host.next();
  host.port.postMessage("not json");
  host.port.postMessage({ id: sent.id, result: "no jsonrpc member" });
  host.port.postMessage(JSON.stringify({ jsonrpc: "2.0", id: sent.id, result: { chat: "text" } }));
  assert.deepEqual(await answer, { chat: "text" });
});
