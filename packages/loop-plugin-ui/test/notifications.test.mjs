import { test } from "node:test";
import assert from "node:assert/strict";
import { connect } from "../index.js";
import { fakeHost, settle } from "./host.mjs";

async function connected(t) {
  const host = fakeHost();
  t.after(() => host.close());
  const pending = connect({ window: host.window });
  host.init();
  return { host, bridge: await pending };
}

test("event notifications reach events.on by type, and '*' takes all", async (t) => {
  const { host, bridge } = await connected(t);
  const messages = [];
  const all = [];
  const off = bridge.events.on("message.created", (data, event) => messages.push([data, event]));
  bridge.events.on("*", (data, event) => all.push(event.type));
  host.notify("event", { type: "message.created", data: { text: "hi" }, thread_id: "t1" });
  host.notify("event", { type: "settings.changed", data: { settings: { verbose: true } } });
  await settle();
  assert.deepEqual(messages, [[{ text: "hi" }, { type: "message.created", data: { text: "hi" }, thread_id: "t1" }]]);
  assert.deepEqual(all, ["message.created", "settings.changed"]);
  off();
  host.notify("event", { type: "message.created", data: { text: "again" } });
  await settle();
  assert.equal(messages.length, 1, "unsubscribed");
  assert.deepEqual(all, ["message.created", "settings.changed", "message.created"]);
});

test("theme.changed reaches theme.on; other notifications do not", async (t) => {
  const { host, bridge } = await connected(t);
  const seen = [];
  const off = bridge.theme.on((theme) => seen.push(theme));
  host.notify("event", { type: "theme.changed", data: {} });
  host.notify("theme.changed", { vars: { "--bg": "#000" }, scheme: "dark" });
  await settle();
  assert.deepEqual(seen, [{ vars: { "--bg": "#000" }, scheme: "dark" }]);
  off();
  host.notify("theme.changed", { vars: { "--bg": "#fff" }, scheme: "light" });
  await settle();
  assert.equal(seen.length, 1);
});

test("on() takes any notification by method; a throwing listener does not stop the others", async (t) => {
  const { host, bridge } = await connected(t);
  const seen = [];
  const thrown = [];
  // A browser's reportError sends it to the page's error handlers (window.onerror).
  const had = Object.getOwnPropertyDescriptor(globalThis, "reportError");
  globalThis.reportError = (error) => thrown.push(error.message);
  t.after(() => (had ? Object.defineProperty(globalThis, "reportError", had) : delete globalThis.reportError));
  bridge.on("future.thing", () => {
    throw new Error("listener broke");
  });
  bridge.on("future.thing", (params) => seen.push(params));
  host.notify("future.thing", { n: 1 });
  await settle();
  assert.deepEqual(seen, [{ n: 1 }]);
  assert.deepEqual(thrown, ["listener broke"], "the throw is reported, not swallowed");
});

test("the same function subscribed twice is two subscriptions", async (t) => {
  const { host, bridge } = await connected(t);
  let count = 0;
  const fn = () => count++;
  const off1 = bridge.on("x.y", fn);
  bridge.on("x.y", fn);
  off1();
  host.notify("x.y", {});
  await settle();
  assert.equal(count, 1);
});
