// Generated hostile messages to the console's host end of the bridge (issue 39): a panel or a
// card is a plugin's code, and what it posts on its port reaches the console's handlers. Each
// message (JSON-RPC 2.0 requests with their values replaced, any values, nesting 100,000 deep,
// cycles, prototype keys, strings past the 8 MB body cap) is structured-cloned as a port
// would, then answered: never a throw, at most one reply, a reply carries the request's id and
// a result or an error with a numeric code and a message, and each answer comes in bounded
// time. Seeded (LOOP_FUZZ_SEED repeats a run); LOOP_FUZZ_SECONDS bounds it (3 s by default).

import { test } from "node:test";
import assert from "node:assert/strict";

import { answer } from "../assets/bridge.js";
import { frameHandlers, memoryState } from "../assets/frames.js";
import { theme } from "../assets/theme.js";

const seed = Number(process.env.LOOP_FUZZ_SEED ?? Date.now() % 2 ** 31);
const seconds = Number(process.env.LOOP_FUZZ_SECONDS ?? 3);

/** A small seeded generator (mulberry32). */
function dice(s) {
  let a = s >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    below: (n) => Math.floor(next() * n),
    pick: (list) => list[Math.floor(next() * list.length)],
    chance: (p) => next() < p,
  };
}

const STRINGS = ["", "..", "/x/../../etc", "/x/%2e%2e/a", "/x/ok", "__proto__", "constructor",
  "GET", "post", "DELETE", "\u0000", "\u202e", "é".repeat(10), "x".repeat(9 * 1024 * 1024)];
const METHODS = ["context.get", "theme.get", "settings.get", "api.request", "state.get",
  "state.set", "ui.resize", "nope", "__proto__", "constructor", "toString", "hasOwnProperty"];

function scalar(d) {
  switch (d.below(8)) {
    case 0: return null;
    case 1: return d.chance(0.5);
    case 2: return d.pick([0, -1, 1e308, -0, NaN, Infinity, -Infinity, 2 ** 53 + 1]);
    case 3: return d.below(1000);
    case 4: return undefined;
    default: return d.pick(STRINGS);
  }
}

function value(d, depth) {
  if (depth <= 0 || d.chance(0.4)) return scalar(d);
  if (d.chance(0.5)) return Array.from({ length: d.below(4) }, () => value(d, depth - 1));
  const o = {};
  for (let i = d.below(4); i > 0; i--) o[d.pick([...STRINGS.slice(0, 13), "a", "b"])] = value(d, depth - 1);
  return o;
}

function nested(depth) {
  let v = [];
  for (let i = 0; i < depth; i++) v = d0.chance(0.5) ? [v] : { a: v };
  return v;
}
const d0 = dice(seed ^ 0x5eed);

/** A message: a request with its parts replaced, or anything. */
function message(d) {
  const request = {
    jsonrpc: "2.0",
    id: d.pick([1, "a", 0, -1, 1.5, null, undefined, {}, []]),
    method: d.pick(METHODS),
    params: d.pick([
      undefined, null, [], "s",
      { method: d.pick(STRINGS.slice(0, 13)), path: d.pick(STRINGS), body: value(d, 3),
        headers: d.chance(0.5) ? { "content-type": d.pick(STRINGS.slice(0, 13)) } : value(d, 2) },
      { value: value(d, 4) },
      { height: scalar(d) },
    ]),
  };
  switch (d.below(7)) {
    case 0: return value(d, 5);
    case 1: request.params = { value: nested(1 + d.below(100_000)) }; return request;
    case 2: { const cyclic = { a: 1 }; cyclic.self = cyclic; request.params = { value: cyclic, body: cyclic }; return request; }
    case 3: delete request.jsonrpc; return request;
    case 4: return { jsonrpc: "2.0", id: 1, result: value(d, 3) };
    default: return request;
  }
}

function fakeApi() {
  return {
    plugin: (chat, plugin, rest) => `/api/host/v1/namespaces/team/channels/${chat}/plugins/${plugin}${rest}`,
    async get() { return { settings: { verbose: true } }; },
    async raw(method, path, { body, contentType } = {}) {
      return new Response(body ?? "", { status: 200, headers: { "content-type": contentType ?? "text/plain" } });
    },
  };
}

test(`hostile bridge messages are answered well (seed ${seed})`, async () => {
  const handlers = frameHandlers({
    api: fakeApi(),
    context: { namespace: "team", chat: "general", kind: "channel", plugin: "echo", panel: "main" },
    state: memoryState(),
    theme: () => theme("dark"),
    resize: () => {},
    gone: () => null,
  });
  const d = dice(seed);
  const until = Date.now() + seconds * 1000;
  let count = 0;
  let slowest = 0;
  while (Date.now() < until) {
    let sent;
    try {
      sent = structuredClone(message(d));
    } catch {
      continue; // what a port could not carry never reaches the host
    }
    const started = performance.now();
    const reply = await answer(handlers, sent);
    const took = performance.now() - started;
    slowest = Math.max(slowest, took);
    count += 1;
    assert.ok(took < 2000, `an answer took ${took} ms`);
    if (reply === null) continue;
    assert.equal(reply.jsonrpc, "2.0");
    const id = sent && typeof sent === "object" ? sent.id : undefined;
    assert.deepEqual(reply.id, id === undefined ? null : id, "the reply carries the request's id");
    assert.ok(("result" in reply) !== ("error" in reply), "a result or an error");
    if (reply.error) {
      assert.equal(typeof reply.error.code, "number");
      assert.equal(typeof reply.error.message, "string");
    }
  }
  console.log(`hostile bridge: ${count} messages in ${seconds}s (seed ${seed}); slowest ${slowest.toFixed(1)} ms`);
  assert.ok(count > 100, `only ${count} messages ran`);
});
