// What the bridge's methods answer for one frame: a pane (a panel of a plugin in a chat) or a
// card of the drawer (docs/bridge.md, "Methods"). The frame reaches only its own plugin in
// its own chat, with the signed-in user's rights: nothing in params names another.

import { BridgeError, Code } from "./bridge.js";
import { HostError, hostError } from "./api.js";

const METHODS = new Set(["GET", "POST", "PUT", "PATCH", "DELETE"]);
/** Bodies, each way: the host API's cap on /x, the reference's 8 MB in binary units
 * (crates/manifest/src/sizes.rs). */
export const MAX_BODY = 8 * 1024 * 1024;
/** A frame's state, as JSON. */
export const MAX_STATE = 1024 * 1024;
/** The tallest a card may ask to be. */
export const MAX_CARD_HEIGHT = 640;

/** The bridge error for a host API refusal (docs/bridge.md, "Errors"). */
export function bridgeErrorOf(e) {
  if (!(e instanceof HostError)) {
    return new BridgeError(Code.INTERNAL, `the host failed: ${e?.message ?? e}`);
  }
  const data = { reason: e.code, status: e.status };
  if (e.status === 401 || e.status === 403) return new BridgeError(Code.FORBIDDEN, e.message, data);
  if (e.status === 409 || e.code === "plugin_not_found") {
    return new BridgeError(Code.NOT_ENABLED, e.message, data);
  }
  if ([502, 503, 504].includes(e.status)) return new BridgeError(Code.UPSTREAM, e.message, data);
  return new BridgeError(Code.INTERNAL, e.message, data);
}

const invalid = (message) => new BridgeError(Code.INVALID_PARAMS, message);

/** The checked request of api.request: {method, path, body?, contentType?}; throws -32602. */
export function xRequest(params) {
  const method = params.method === undefined ? "GET" : params.method;
  if (typeof method !== "string" || !METHODS.has(method.toUpperCase())) {
    throw invalid(`method must be one of ${[...METHODS].join(", ")}`);
  }
  const path = params.path;
  if (typeof path !== "string" || !path.startsWith("/x/")) {
    throw invalid("path must be a string starting with /x/");
  }
  const bare = path.split(/[?#]/, 1)[0];
  if (bare.split("/").some((s) => s === ".." || s === "." || /^%2e%2e$/i.test(s))) {
    throw invalid("path may not hold a .. segment");
  }
  let contentType;
  const headers = params.headers;
  if (headers !== undefined) {
    if (headers === null || typeof headers !== "object" || Array.isArray(headers)) {
      throw invalid("headers must be an object of strings");
    }
    for (const [name, value] of Object.entries(headers)) {
      if (typeof value !== "string") throw invalid(`header ${name} must be a string`);
      if (name.toLowerCase() === "content-type") contentType = value;
    }
  }
  let body;
  if (params.body !== undefined) {
    if (typeof params.body === "string") {
      body = params.body;
    } else {
      body = JSON.stringify(params.body);
      contentType ??= "application/json";
    }
    if (new TextEncoder().encode(body).length > MAX_BODY) throw invalid("body is over 8 MB");
  }
  return { method: method.toUpperCase(), path, body, contentType };
}

/** The result of api.request from the container's answer: {status, headers, body}. */
export async function xResult(response) {
  const type = response.headers.get("content-type") ?? "";
  const text = await response.text();
  let body = text;
  const isJson = /^application\/([\w.+-]*\+)?json\b/i.test(type);
  if (isJson && text) {
    try { body = JSON.parse(text); } catch { body = text; }
  }
  const headers = {};
  if (type) headers["content-type"] = type;
  return { status: response.status, headers, body };
}

/** The host's own error in an /x answer (not the plugin's): a refusal, a container not had. */
async function hostRefusal(response) {
  if (![401, 403, 404, 409, 413, 502, 503, 504].includes(response.status)) return null;
  if (!(response.headers.get("content-type") ?? "").startsWith("application/json")) return null;
  try {
    return hostError(response.status, await response.clone().json());
  } catch {
    return null;
  }
}

/**
 * The handlers of one frame.
 * @param {object} o
 * @param {import("./api.js").HostApi} o.api
 * @param {object} o.context what context.get answers
 * @param {{get(): unknown, set(v: unknown): void}} o.state the frame's state
 * @param {() => object} o.theme what theme.get answers now
 * @param {((height: number) => void) | null} o.resize a card's resize; null for a pane
 * @param {() => string | null} o.gone why the frame's plugin can no longer be used, or null
 */
export function frameHandlers({ api, context, state, theme, resize, gone }) {
  const { chat, plugin } = context;
  const usable = () => {
    const why = gone();
    if (why) throw new BridgeError(Code.NOT_ENABLED, why, { reason: "not_enabled" });
  };
  return {
    "context.get": () => structuredClone(context),
    "theme.get": () => theme(),
    "settings.get": async () => {
      usable();
      try {
        return (await api.get(api.plugin(chat, plugin, "/settings"))).settings;
      } catch (e) {
        throw bridgeErrorOf(e);
      }
    },
    "api.request": async (params) => {
      usable();
      const request = xRequest(params);
      let response;
      try {
        response = await api.raw(request.method, api.plugin(chat, plugin, request.path), {
          body: request.body,
          contentType: request.contentType,
        });
      } catch (e) {
        throw new BridgeError(Code.UPSTREAM, `the host API could not be reached: ${e.message}`);
      }
      const refusal = await hostRefusal(response);
      if (refusal) throw bridgeErrorOf(refusal);
      return xResult(response);
    },
    "state.get": () => state.get() ?? null,
    "state.set": (params) => {
      if (!("value" in params)) throw invalid("state.set takes {value}");
      const text = JSON.stringify(params.value ?? null);
      if (text.length > MAX_STATE) throw invalid("the state is over 1 MiB as JSON");
      state.set(params.value ?? null);
      return null;
    },
    "ui.resize": (params) => {
      const height = params.height;
      if (typeof height !== "number" || !Number.isFinite(height) || height <= 0) {
        throw invalid("height must be a positive number");
      }
      resize?.(Math.min(Math.ceil(height), MAX_CARD_HEIGHT));
      return null;
    },
  };
}

/** A pane's state, kept in sessionStorage by namespace, chat, plugin and panel. */
export function paneState(storage, { namespace, chat, plugin, panel }) {
  const key = `loop-console:state:${namespace}/${chat}/${plugin}/${panel}`;
  return {
    get() {
      const text = storage.getItem(key);
      if (text === null) return null;
      try { return JSON.parse(text); } catch { return null; }
    },
    set(value) {
      if (value === null) storage.removeItem(key);
      else storage.setItem(key, JSON.stringify(value));
    },
  };
}

/** A card's state: as long as its frame. */
export function memoryState() {
  let value = null;
  return { get: () => value, set: (v) => { value = v; } };
}
