// The host end of the bridge (docs/bridge.md): on each load of a frame, a new MessageChannel;
// {"type": "loop-plugin:init"} posted to the frame with the channel's other port; JSON-RPC 2.0
// over the port, every request answered exactly once. What each method answers is the
// handlers' (frames.js); this file knows only the protocol.

export const INIT = "loop-plugin:init";

export const Code = Object.freeze({
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL: -32603,
  FORBIDDEN: -32000,
  NOT_ENABLED: -32001,
  UPSTREAM: -32002,
});

/** An error a handler answers with. */
export class BridgeError extends Error {
  constructor(code, message, data) {
    super(message);
    this.name = "BridgeError";
    this.code = code;
    if (data !== undefined) this.data = data;
  }
}

/**
 * The answer to one message from a frame, or null when none is owed (a notification, or a
 * message that is not JSON-RPC and has no id).
 * @param {Record<string, (params: object) => unknown>} handlers
 */
export async function answer(handlers, message) {
  const id = message && typeof message === "object" ? message.id : undefined;
  const hasId = id !== undefined && id !== null;
  const fail = (code, text, data) => {
    const error = { code, message: text };
    if (data !== undefined) error.data = data;
    return { jsonrpc: "2.0", id: hasId ? id : null, error };
  };
  if (!message || typeof message !== "object" || message.jsonrpc !== "2.0"
      || typeof message.method !== "string") {
    // Answers to nothing the host asked (it asks nothing) are ignored; the rest is refused.
    if (message && typeof message === "object" && ("result" in message || "error" in message)) {
      return null;
    }
    return fail(Code.INVALID_REQUEST, "not a JSON-RPC 2.0 request");
  }
  if (!hasId) return null; // A notification: none are defined; ignored.
  const params = message.params === undefined ? {} : message.params;
  if (params === null || typeof params !== "object" || Array.isArray(params)) {
    return fail(Code.INVALID_PARAMS, "params must be an object");
  }
  const handler = Object.hasOwn(handlers, message.method) ? handlers[message.method] : null;
  if (typeof handler !== "function") {
    return fail(Code.METHOD_NOT_FOUND, `no method ${message.method}`);
  }
  try {
    const result = await handler(params);
    return { jsonrpc: "2.0", id, result: result === undefined ? null : result };
  } catch (e) {
    if (e instanceof BridgeError) return fail(e.code, e.message, e.data);
    return fail(Code.INTERNAL, `the host failed: ${e?.message ?? e}`);
  }
}

/**
 * Connects a frame: a new port on each of its loads. Answers with `handlers`, which may be
 * changed later (bridge.handlers = ...). notify(method, params) reaches the frame's current
 * page. calls counts the requests answered, by method (the tests read it).
 */
export function bridgeFrame(frame, handlers) {
  const bridge = {
    handlers,
    port: null,
    calls: {},
    notify(method, params = {}) {
      this.port?.postMessage({ jsonrpc: "2.0", method, params });
    },
    close() {
      this.port?.close();
      this.port = null;
      frame.removeEventListener("load", onLoad);
    },
  };
  function onLoad() {
    bridge.port?.close();
    const channel = new MessageChannel();
    const port = channel.port1;
    bridge.port = port;
    port.onmessage = async (event) => {
      const reply = await answer(bridge.handlers, event.data);
      if (reply) {
        const method = event.data?.method ?? "?";
        bridge.calls[method] = (bridge.calls[method] ?? 0) + 1;
        if (bridge.port === port) port.postMessage(reply);
      }
    };
    frame.contentWindow?.postMessage({ type: INIT }, "*", [channel.port2]);
  }
  frame.addEventListener("load", onLoad);
  return bridge;
}
