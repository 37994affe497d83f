import { test } from "node:test";
import assert from "node:assert/strict";
import { connect, createStorage } from "../index.js";
import { fakeHost, settle } from "./host.mjs";

// A host that keeps the frame's state as docs/bridge.md says (state.get / state.set) and counts
// the writes.
async function stateHost(t, initial = null) {
  const host = fakeHost();
  t.after(() => host.close());
  const pending = connect({ window: host.window });
  host.init();
  const bridge = await pending;
  const served = { state: initial, gets: 0, sets: [] };
  let failNext = false;
  host.port.addEventListener("message", ({ data }) => {
    if (data.method === "state.get") {
      served.gets += 1;
      host.answer(data.id, served.state);
    } else if (data.method === "state.set") {
      if (failNext) {
        failNext = false;
        host.fail(data.id, { code: -32602, message: "state over 1 MiB" });
        return;
      }
      served.state = data.params.value;
      served.sets.push(data.params.value);
      host.answer(data.id, null);
    }
  });
  return { host, bridge, served, failNextWrite: () => { failNext = true; } };
}

test("createStorage loads once and round-trips through state.get/state.set", async (t) => {
  const { bridge, served } = await stateHost(t);
  const storage = await createStorage(bridge);
  assert.equal(storage.length, 0);
  assert.equal(storage.getItem("missing"), null);
  storage.setItem("a", "1");
  storage.setItem("b", 2); // stored as a string, as localStorage does
  assert.equal(storage.getItem("b"), "2");
  await storage.flush();
  assert.deepEqual(served.state, { a: "1", b: "2" });

  // A new frame (a reload of the pane) reads it back.
  const again = await createStorage(bridge);
  assert.equal(again.getItem("a"), "1");
  assert.equal(again.getItem("b"), "2");
  assert.equal(again.length, 2);
  assert.equal(again.key(0), "a");
  assert.equal(again.key(1), "b");
  assert.equal(again.key(2), null);
  again.removeItem("a");
  await again.flush();
  assert.deepEqual(served.state, { b: "2" });
  again.clear();
  await again.flush();
  assert.deepEqual(served.state, {});
  assert.equal(served.gets, 2, "one state.get per storage");
});

test("createStorage takes the string entries of an object state and ignores the rest", async (t) => {
  const { bridge } = await stateHost(t, { keep: "yes", n: 3, o: { x: 1 } });
  const storage = await createStorage(bridge);
  assert.equal(storage.length, 1);
  assert.equal(storage.getItem("keep"), "yes");
  assert.equal(storage.getItem("n"), null);
  const fromArray = await createStorage((await stateHost(t, ["x"])).bridge);
  assert.equal(fromArray.length, 0);
});

test("changes made together make one write, in order with later ones", async (t) => {
  const { bridge, served } = await stateHost(t);
  const storage = await createStorage(bridge);
  storage.setItem("a", "1");
  storage.setItem("b", "2");
  storage.removeItem("a");
  await storage.flush();
  assert.deepEqual(served.sets, [{ b: "2" }]);
  storage.setItem("c", "3");
  await settle(0);
  storage.setItem("d", "4");
  await storage.flush();
  assert.deepEqual(served.sets.at(-1), { b: "2", c: "3", d: "4" });
  assert.ok(served.sets.length <= 3);
});

test("removing a missing key or clearing an empty storage writes nothing", async (t) => {
  const { bridge, served } = await stateHost(t);
  const storage = await createStorage(bridge);
  storage.removeItem("nope");
  storage.clear();
  await storage.flush();
  await settle();
  assert.deepEqual(served.sets, []);
});

test("a failed write goes to onError and flush rejects; the next write still goes", async (t) => {
  const { bridge, served, failNextWrite } = await stateHost(t);
  const errors = [];
  const storage = await createStorage(bridge, { onError: (error) => errors.push(error.message) });
  failNextWrite();
  storage.setItem("big", "x");
  await assert.rejects(storage.flush(), { message: "state over 1 MiB" });
  assert.deepEqual(errors, ["state over 1 MiB"]);
  storage.setItem("small", "y");
  await storage.flush();
  assert.deepEqual(served.state, { big: "x", small: "y" });
});
