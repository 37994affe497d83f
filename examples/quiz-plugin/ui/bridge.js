// The host's bridge as the reference speaks it: JSON-RPC 2.0 over the MessagePort the host
// posts with {"type": "loop-plugin:init"}. A few lines are enough for this plugin's pages;
// packages/loop-plugin-ui is the module with every method typed.

/** Waits for the host's port; answers `request(method, params)`. */
export function connect() {
  return new Promise((resolve) => {
    window.addEventListener("message", function init(event) {
      if (event.data?.type !== "loop-plugin:init" || !event.ports[0]) return;
      window.removeEventListener("message", init);
      const port = event.ports[0];
      let next = 1;
      const waiting = new Map();
      port.onmessage = ({ data }) => {
        const call = waiting.get(data?.id);
        if (!call) return;
        waiting.delete(data.id);
        data.error ? call.reject(new Error(data.error.message)) : call.resolve(data.result);
      };
      resolve((method, params = {}) =>
        new Promise((done, fail) => {
          const id = next++;
          waiting.set(id, { resolve: done, reject: fail });
          port.postMessage({ jsonrpc: "2.0", id, method, params });
        }));
    });
  });
}

/** The host's theme on this page: its CSS variables and colour scheme. */
export function applyTheme({ vars, scheme }) {
  for (const [name, value] of Object.entries(vars ?? {})) {
    document.documentElement.style.setProperty(name, value);
  }
  document.documentElement.style.colorScheme = scheme ?? "light";
}
