// The stand-in console's page for one panel or card (`loop-plugins conformance --bundle`):
// frames the page from its link in a sandboxed frame, as the console does, and answers its
// bridge with the console's own code (bridge.js's `answer`, frames.js's handlers, theme.js's
// theme: served from crates/server/src/console/assets as they are). Only what the console
// gets from the host API is played here: settings are the manifest's defaults, and
// api.request reaches the plugin's /x through the stand-in (/plugin/x/...), with its secret.
//
// What the check reads back (window.conformance): whether the frame loaded, whether it took
// the port (made a call over it), the calls answered and those answered with an error. With
// `config.bridge` false (the reference's NoBridge) no port is posted: only the load is seen.

import { INIT, answer } from "./bridge.js";
import { frameHandlers, memoryState } from "./frames.js";
import { theme } from "./theme.js";

const config = JSON.parse(document.getElementById("config").textContent);

const seen = (window.conformance = {
  loaded: false,
  took: false,
  pending: 0,
  calls: [],
  failed: [],
});

const api = {
  plugin: (_chat, _plugin, path) => `/plugin${path}`,
  get: async (path) => {
    if (path === "/plugin/settings") return { settings: config.settings };
    throw new Error(`the stand-in has no ${path}`);
  },
  raw: (method, path, { body, contentType } = {}) =>
    fetch(path, {
      method,
      body,
      headers: contentType ? { "content-type": contentType } : {},
    }),
};

const handlers = frameHandlers({
  api,
  context: config.context,
  state: memoryState(),
  theme: () => theme("light"),
  resize: config.context.card ? () => {} : null,
  gone: () => null,
});

const frame = document.createElement("iframe");
frame.sandbox = "allow-scripts";
frame.title = config.title;
frame.addEventListener("load", () => {
  seen.loaded = true;
  if (config.bridge === false) return;
  const channel = new MessageChannel();
  const port = channel.port1;
  port.onmessage = async (event) => {
    seen.took = true;
    seen.pending += 1;
    const method = event.data?.method ?? "?";
    try {
      const reply = await answer(handlers, event.data);
      if (!reply) return;
      seen.calls.push(method);
      if (reply.error) {
        seen.failed.push({ method, code: reply.error.code, message: reply.error.message });
      }
      port.postMessage(reply);
    } finally {
      seen.pending -= 1;
    }
  };
  frame.contentWindow?.postMessage({ type: INIT }, "*", [channel.port2]);
});
frame.src = config.src;
document.body.append(frame);
