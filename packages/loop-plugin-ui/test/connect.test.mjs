import { test } from "node:test";
import assert from "node:assert/strict";
import { connect, BridgeError, ErrorCode } from "../index.js";
import { fakeHost } from "./host.mjs";

test("connect ignores unrelated messages and takes the init's port", async (t) => {
  const host = fakeHost();
  t.after(() => host.close());
  const bridge = connect({ window: host.window, timeoutMs: 1000 });
  const other = new MessageChannel();
  t.after(() => other.port1.close());
  host.post({ type: "something-else" }, { ports: [other.port2] }); // wrong type
  host.post("loop-plugin:init", { ports: [other.port2] }); // not an object
  host.post({ type: "loop-plugin:init" }); // no port
  host.init();
  const b = await bridge;
  const answer = b.context.get();
  const sent = await host.next();
  assert.equal(sent.method, "context.get", "the call went over the init's port");
  host.answer(sent.id, { chat: "general" });
  assert.deepEqual(await answer, { chat: "general" });
  assert.equal(host.pending(), 0);
});

test("connect takes init only from the parent window when framed", async (t) => {
  const parent = { name: "host" };
  const host = fakeHost({ parent });
  t.after(() => host.close());
  const decoy = new MessageChannel();
  t.after(() => decoy.port1.close());
  const bridge = connect({ window: host.window, timeoutMs: 1000 });
  host.post({ type: "loop-plugin:init" }, { ports: [decoy.port2], source: { name: "not the parent" } });
  host.init({ source: parent });
  const b = await bridge;
  b.notify("hello");
  assert.deepEqual(await host.next(), { jsonrpc: "2.0", method: "hello", params: {} });
});

test("connect rejects with a clear error when no init comes in time", async () => {
  const host = fakeHost();
  try {
    const started = Date.now();
    await assert.rejects(connect({ window: host.window, timeoutMs: 50 }), (error) => {
      assert.ok(error instanceof BridgeError);
      assert.equal(error.code, ErrorCode.TIMEOUT);
      assert.match(error.message, /loop-plugin:init/);
      assert.match(error.message, /50 ms/);
      return true;
    });
    assert.ok(Date.now() - started >= 45, "waited for the timeout");
  } finally {
    host.close();
  }
});

test("connect called again gives the same bridge", async (t) => {
  const host = fakeHost();
  t.after(() => host.close());
  // The first connect() takes the port; a later one must not wait for a second init.
  const first = connect({ window: host.window });
  host.init();
  const a = await first;
  const b = await connect({ window: host.window });
  assert.equal(a, b);
});

test("connect without a window rejects", async () => {
  await assert.rejects(connect({ window: null }), TypeError);
});
