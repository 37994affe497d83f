import { test } from "node:test";
import assert from "node:assert/strict";
import { connect, applyTheme, syncTheme, THEME_VARS, ErrorCode } from "../index.js";
import { fakeHost, fakeRoot, settle } from "./host.mjs";

const light = {
  "--bg": "#ffffff", "--surface": "#f4f4f5", "--fg": "#18181b", "--muted": "#71717a",
  "--border": "#e4e4e7", "--accent": "#2563eb", "--success": "#16a34a", "--danger": "#dc2626",
  "--font": "system-ui, sans-serif", "--mono": "ui-monospace, monospace",
};
const dark = Object.fromEntries(Object.keys(light).map((k) => [k, `dark(${k})`]));

test("THEME_VARS are the reference's ten", () => {
  assert.deepEqual([...THEME_VARS], ["--bg", "--surface", "--fg", "--muted", "--border", "--accent", "--success", "--danger", "--font", "--mono"]);
});

test("applyTheme sets exactly the ten variables and ignores other keys", () => {
  const root = fakeRoot();
  applyTheme({ ...light, "--evil": "url(x)", bg: "#123", color: "red", "--accent": "#2563eb" }, root);
  assert.deepEqual(Object.fromEntries(root.set), light);
});

test("applyTheme skips values that are not strings and keys not given", () => {
  const root = fakeRoot();
  applyTheme({ "--bg": "#000", "--fg": 12, "--muted": null }, root);
  assert.deepEqual(Object.fromEntries(root.set), { "--bg": "#000" });
  applyTheme(undefined, root);
  assert.equal(root.set.size, 1);
});

test("applyTheme without a document or root throws a TypeError", () => {
  assert.throws(() => applyTheme(light), TypeError);
});

async function connected(t) {
  const host = fakeHost();
  t.after(() => host.close());
  const pending = connect({ window: host.window });
  host.init();
  return { host, bridge: await pending };
}

test("syncTheme applies theme.get's theme, follows theme.changed and stops on unsubscribe", async (t) => {
  const { host, bridge } = await connected(t);
  const root = fakeRoot();
  const synced = syncTheme(bridge, root);
  const sent = await host.next();
  assert.deepEqual(sent, { jsonrpc: "2.0", id: 1, method: "theme.get", params: {} });
  host.answer(sent.id, { vars: light, scheme: "light" });
  const off = await synced;
  assert.deepEqual(Object.fromEntries(root.set), light);
  assert.equal(root.style.colorScheme, "light");

  host.notify("theme.changed", { vars: dark, scheme: "dark" });
  await settle();
  assert.deepEqual(Object.fromEntries(root.set), dark);
  assert.equal(root.style.colorScheme, "dark");

  off();
  host.notify("theme.changed", { vars: light, scheme: "light" });
  await settle();
  assert.deepEqual(Object.fromEntries(root.set), dark, "no longer follows");
});

test("syncTheme keeps a theme.changed that arrived before theme.get's answer", async (t) => {
  const { host, bridge } = await connected(t);
  const root = fakeRoot();
  const synced = syncTheme(bridge, root);
  const sent = await host.next();
  host.notify("theme.changed", { vars: dark, scheme: "dark" });
  await settle();
  host.answer(sent.id, { vars: light, scheme: "light" });
  await synced;
  assert.deepEqual(Object.fromEntries(root.set), dark);
});

test("syncTheme rejects when theme.get fails, and does not follow changes then", async (t) => {
  const { host, bridge } = await connected(t);
  const root = fakeRoot();
  const synced = syncTheme(bridge, root);
  const sent = await host.next();
  host.fail(sent.id, { code: -32603, message: "no theme" });
  await assert.rejects(synced, { code: ErrorCode.INTERNAL, message: "no theme" });
  host.notify("theme.changed", { vars: dark, scheme: "dark" });
  await settle();
  assert.equal(root.set.size, 0);
});
