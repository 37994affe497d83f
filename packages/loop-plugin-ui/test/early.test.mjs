// In a browser the module listens from the moment it loads, so an init posted before the page
// calls connect() is not lost. Its own process (node --test runs each file alone), so the
// global window can exist before the import.
import { test } from "node:test";
import assert from "node:assert/strict";
import { fakeHost } from "./host.mjs";

test("an init posted before connect() is kept", async (t) => {
  const host = fakeHost();
  t.after(() => host.close());
  globalThis.window = host.window;
  const { connect } = await import("../index.js");
  host.init(); // before connect()
  const bridge = await connect({ timeoutMs: 100 });
  const answer = bridge.settings.get();
  const sent = await host.next();
  assert.deepEqual(sent, { jsonrpc: "2.0", id: 1, method: "settings.get", params: {} });
  host.answer(sent.id, { level: "easy" });
  assert.deepEqual(await answer, { level: "easy" });
});
