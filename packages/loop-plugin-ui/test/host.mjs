// A fake host for the tests: a window (an EventTarget) to post loop-plugin:init to, and the host
// end of a real MessageChannel that reads the frame's JSON-RPC messages and answers them.

export function fakeHost({ parent } = {}) {
  const window = new EventTarget();
  if (parent !== undefined) window.parent = parent;
  const { port1: port, port2: framePort } = new MessageChannel();
  const inbox = [];
  const wanted = [];
  port.addEventListener("message", ({ data }) => {
    const take = wanted.shift();
    if (take) take(data);
    else inbox.push(data);
  });
  port.start();

  return {
    window,
    port,
    framePort,
    /** Dispatches a message event on the window, as the browser does for postMessage. */
    post(data, { ports = [], source = parent } = {}) {
      const event = Object.assign(new Event("message"), { data, ports, source });
      window.dispatchEvent(event);
    },
    init({ source = parent } = {}) {
      this.post({ type: "loop-plugin:init" }, { ports: [framePort], source });
    },
    /** The next message the frame sent (rejects after ms). */
    next(ms = 1000) {
      if (inbox.length) return Promise.resolve(inbox.shift());
      return new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          wanted.splice(wanted.indexOf(take), 1);
          reject(new Error(`the frame sent nothing within ${ms} ms`));
        }, ms);
        const take = (data) => {
          clearTimeout(timer);
          resolve(data);
        };
        wanted.push(take);
      });
    },
    /** How many messages arrived that no next() took yet. */
    pending() {
      return inbox.length;
    },
    answer(id, result) {
      port.postMessage({ jsonrpc: "2.0", id, result });
    },
    fail(id, error) {
      port.postMessage({ jsonrpc: "2.0", id, error });
    },
    notify(method, params) {
      port.postMessage({ jsonrpc: "2.0", method, params });
    },
    close() {
      port.close();
      framePort.close();
    },
  };
}

/** Waits for the messages already posted to be delivered (MessagePort delivery is a task). */
export function settle(ms = 20) {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** A root element's style, recording what was set. */
export function fakeRoot() {
  const set = new Map();
  return {
    set,
    style: {
      setProperty(name, value) {
        set.set(name, value);
      },
    },
  };
}
