// loop-plugin-ui: the frame end of the Loop plugin bridge (docs/bridge.md), for panels and cards.
// One ES module, no dependencies, no build step: copy it into the plugin's bundle and import it.
// It speaks only the protocol in docs/bridge.md, so a page can do without it.

/** The error codes of docs/bridge.md; TIMEOUT and CLOSED are this module's own. */
export const ErrorCode = Object.freeze({
  INVALID_REQUEST: -32600,
  METHOD_NOT_FOUND: -32601,
  INVALID_PARAMS: -32602,
  INTERNAL: -32603,
  FORBIDDEN: -32000,
  NOT_ENABLED: -32001,
  UPSTREAM: -32002,
  TIMEOUT: -32010,
  CLOSED: -32011,
});

/** The theme's ten CSS variables, in the reference's order. */
export const THEME_VARS = Object.freeze([
  "--bg", "--surface", "--fg", "--muted", "--border",
  "--accent", "--success", "--danger", "--font", "--mono",
]);

/** An error the host answered (or TIMEOUT / CLOSED from this module). */
export class BridgeError extends Error {
  /** @param {number} code @param {string} message @param {unknown} [data] */
  constructor(code, message, data) {
    super(message);
    this.name = "BridgeError";
    this.code = code;
    if (data !== undefined) this.data = data;
  }
}

const INIT = "loop-plugin:init";

// Per window: the first init message (kept even when it comes before connect()) and the bridge
// made from its port, so that connect() called twice, or late, still gets the one port.
const windows = new WeakMap();

function track(win) {
  let entry = windows.get(win);
  if (entry) return entry;
  entry = { init: null, waiters: new Set(), bridge: null };
  windows.set(win, entry);
  const fromParent = (event) => {
    const parent = win.parent;
    return !parent || parent === win || event.source === parent;
  };
  const onMessage = (event) => {
    const port = event.ports?.[0];
    if (event.data?.type !== INIT || !port || !fromParent(event)) return;
    win.removeEventListener("message", onMessage);
    entry.init = port;
    for (const wake of entry.waiters) wake(port);
    entry.waiters.clear();
  };
  win.addEventListener("message", onMessage);
  return entry;
}

// In a browser, listen from the moment the module loads: the host posts init on the frame's
// load, which may come before a page that awaits something else calls connect().
if (typeof globalThis.window?.addEventListener === "function") track(globalThis.window);

/**
 * Waits for the host's loop-plugin:init and returns the bridge over its port.
 * @param {{timeoutMs?: number, callTimeoutMs?: number, window?: EventTarget}} [options]
 */
export function connect(options = {}) {
  const { timeoutMs = 10_000, callTimeoutMs = 0, window: win = globalThis.window } = options;
  if (typeof win?.addEventListener !== "function") {
    return Promise.reject(new TypeError("loop-plugin-ui: connect() needs a window to listen on"));
  }
  const entry = track(win);
  if (entry.bridge) return Promise.resolve(entry.bridge);
  const made = (port) => (entry.bridge ??= createBridge(port, { callTimeoutMs }));
  if (entry.init) return Promise.resolve(made(entry.init));
  return new Promise((resolve, reject) => {
    const wake = (port) => {
      clearTimeout(timer);
      resolve(made(port));
    };
    const timer = setTimeout(() => {
      entry.waiters.delete(wake);
      reject(new BridgeError(ErrorCode.TIMEOUT,
        `loop-plugin-ui: no ${INIT} message from the host within ${timeoutMs} ms ` +
        "(is this page open in a Loop pane or card?)"));
    }, timeoutMs);
    entry.waiters.add(wake);
  });
}

/**
 * The bridge over a port already taken from a loop-plugin:init message (connect() does this).
 * @param {MessagePort} port @param {{callTimeoutMs?: number}} [options]
 */
export function createBridge(port, { callTimeoutMs = 0 } = {}) {
  let nextId = 1;
  let closed = false;
  const waiting = new Map(); // id -> {resolve, reject, timer}
  const listeners = new Map(); // notification method -> Set<fn>

  const fail = (call, error) => {
    clearTimeout(call.timer);
    call.reject(error);
  };
  const shut = () => {
    if (closed) return;
    closed = true;
    port.removeEventListener("message", onMessage);
    port.removeEventListener("close", shut);
    const error = new BridgeError(ErrorCode.CLOSED, "loop-plugin-ui: the bridge's port is closed");
    for (const call of waiting.values()) fail(call, error);
    waiting.clear();
  };
  const send = (message) => port.postMessage(message);

  function onMessage(event) {
    let msg = event.data;
    if (typeof msg === "string") {
      try { msg = JSON.parse(msg); } catch { return; }
    }
    if (!msg || typeof msg !== "object" || msg.jsonrpc !== "2.0") return;
    if (typeof msg.method === "string") {
      if (msg.id !== undefined && msg.id !== null) {
        const message = `the frame answers no requests (${msg.method})`;
        send({ jsonrpc: "2.0", id: msg.id, error: { code: ErrorCode.METHOD_NOT_FOUND, message } });
        return;
      }
      dispatch(msg.method, msg.params);
      return;
    }
    const call = waiting.get(msg.id);
    if (!call) return;
    waiting.delete(msg.id);
    clearTimeout(call.timer);
    if (msg.error !== undefined) call.reject(toError(msg.error));
    else call.resolve(msg.result);
  }

  function dispatch(method, params) {
    for (const fn of [...(listeners.get(method) ?? [])]) {
      try {
        fn(params);
      } catch (error) {
        // One listener's throw must not stop the others; it still reaches the page's handlers.
        if (typeof globalThis.reportError === "function") globalThis.reportError(error);
        else queueMicrotask(() => { throw error; });
      }
    }
  }

  /** Sends a request and resolves with its result (rejects with a BridgeError). */
  function call(method, params = {}, { timeoutMs = callTimeoutMs } = {}) {
    if (closed) {
      const message = `loop-plugin-ui: ${method} after the bridge's port closed`;
      return Promise.reject(new BridgeError(ErrorCode.CLOSED, message));
    }
    const id = nextId++;
    return new Promise((resolve, reject) => {
      const entry = { resolve, reject, timer: undefined };
      if (timeoutMs > 0) {
        entry.timer = setTimeout(() => {
          waiting.delete(id);
          const message = `loop-plugin-ui: no answer to ${method} within ${timeoutMs} ms`;
          reject(new BridgeError(ErrorCode.TIMEOUT, message));
        }, timeoutMs);
      }
      waiting.set(id, entry);
      try {
        send({ jsonrpc: "2.0", id, method, params });
      } catch (error) {
        waiting.delete(id);
        fail(entry, error);
      }
    });
  }

  /** Sends a notification (no answer); dropped once the port is closed. */
  function notify(method, params = {}) {
    if (!closed) send({ jsonrpc: "2.0", method, params });
  }

  /** Calls fn(params) on each host notification of that method; returns the unsubscribe. */
  function on(method, fn) {
    if (typeof fn !== "function") throw new TypeError("loop-plugin-ui: a listener is a function");
    let set = listeners.get(method);
    if (!set) listeners.set(method, (set = new Set()));
    const entry = (params) => fn(params);
    set.add(entry);
    return () => { set.delete(entry); };
  }

  port.addEventListener("message", onMessage);
  port.addEventListener("close", shut);
  port.start?.();

  const nothing = () => undefined;
  return {
    call,
    notify,
    on,
    close() {
      shut();
      port.close();
    },
    get closed() { return closed; },
    api: {
      request({ method = "GET", path, body, headers }, options) {
        const params = { method, path };
        if (body !== undefined) params.body = body;
        if (headers !== undefined) params.headers = headers;
        return call("api.request", params, options);
      },
    },
    context: { get: (options) => call("context.get", {}, options) },
    settings: { get: (options) => call("settings.get", {}, options) },
    state: {
      get: (options) => call("state.get", {}, options).then((value) => value ?? null),
      set: (value, options) => call("state.set", { value: value ?? null }, options).then(nothing),
    },
    ui: { resize: (height, options) => call("ui.resize", { height }, options).then(nothing) },
    theme: {
      get: (options) => call("theme.get", {}, options),
      on: (fn) => on("theme.changed", (params) => fn(params)),
    },
    events: {
      /** fn(data, event) for each `event` notification of that type; "*" takes every type. */
      on(type, fn) {
        return on("event", (event) => {
          if (event && (type === "*" || event.type === type)) fn(event.data, event);
        });
      },
    },
  };
}

function toError(error) {
  if (error && typeof error === "object" && Number.isInteger(error.code)) {
    return new BridgeError(error.code, String(error.message ?? "the host refused"), error.data);
  }
  const message = `the host answered a malformed error: ${JSON.stringify(error)}`;
  return new BridgeError(ErrorCode.INTERNAL, message);
}

function rootElement(root) {
  const el = root ?? globalThis.document?.documentElement;
  if (!el?.style) throw new TypeError("loop-plugin-ui: no root element to set the theme on");
  return el;
}

/** Sets the ten theme variables present in vars (strings only) on root; other keys are ignored. */
export function applyTheme(vars, root) {
  const el = rootElement(root);
  for (const name of THEME_VARS) {
    const value = vars?.[name];
    if (typeof value === "string") el.style.setProperty(name, value);
  }
}

/**
 * Applies the host's theme now and on each theme.changed (with `color-scheme` from its scheme);
 * resolves to the unsubscribe once the first theme is applied.
 */
export async function syncTheme(bridge, root) {
  const el = rootElement(root);
  let changed = false;
  const apply = (theme) => {
    applyTheme(theme?.vars, el);
    if (theme?.scheme === "light" || theme?.scheme === "dark") el.style.colorScheme = theme.scheme;
  };
  const off = bridge.theme.on((theme) => {
    changed = true;
    apply(theme);
  });
  try {
    const theme = await bridge.theme.get();
    if (!changed) apply(theme); // a theme.changed that came meanwhile is newer
  } catch (error) {
    off();
    throw error;
  }
  return off;
}

/**
 * A localStorage stand-in kept in the frame's state (the whole state: an object of strings).
 * Loads once; each change is written through with state.set (changes in one task make one write).
 * @param {{onError?: (error: unknown) => void}} [options] failed writes go to onError
 *   (default console.error)
 */
export async function createStorage(bridge, { onError } = {}) {
  const stored = await bridge.state.get();
  const items = new Map();
  if (stored && typeof stored === "object" && !Array.isArray(stored)) {
    for (const [key, value] of Object.entries(stored)) {
      if (typeof value === "string") items.set(key, value);
    }
  }
  let last = Promise.resolve();
  let queued = null;
  const report = onError ?? ((error) => console.error("loop-plugin-ui: a write failed", error));
  const persist = () => {
    if (queued) return; // the write already queued takes this change too
    queued = last.catch(() => {}).then(() => {
      queued = null;
      return bridge.state.set(Object.fromEntries(items));
    });
    last = queued.catch((error) => {
      report(error);
      throw error;
    });
    last.catch(() => {}); // reported above; flush() still rejects with it
  };
  return {
    get length() { return items.size; },
    key(index) { return [...items.keys()][index] ?? null; },
    getItem(key) { return items.get(String(key)) ?? null; },
    setItem(key, value) {
      items.set(String(key), String(value));
      persist();
    },
    removeItem(key) {
      if (items.delete(String(key))) persist();
    },
    clear() {
      if (items.size === 0) return;
      items.clear();
      persist();
    },
    /** Resolves when every change so far is stored; rejects with the last failed write. */
    flush() { return last; },
  };
}
