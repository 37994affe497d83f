// The echo panel, speaking the reference's bridge protocol directly (JSON-RPC 2.0 over the
// MessagePort the host posts with {"type": "loop-plugin:init"}): the chat from context.get,
// the verbose setting from settings.get (and again from each settings.changed event), and the
// echo tool's answer through api.request to the container's /x. The form never submits (the policy forbids it): its button is a call.

const $ = (id) => document.getElementById(id);

function connect() {
  return new Promise((resolve) => {
    window.addEventListener("message", function init(event) {
      if (event.data?.type !== "loop-plugin:init" || !event.ports[0]) return;
      window.removeEventListener("message", init);
      const port = event.ports[0];
      let next = 1;
      const waiting = new Map();
      port.onmessage = ({ data }) => {
        // The host's notifications have no id: a settings.changed event brings the settings.
        if (data?.method === "event" && data.params?.type === "settings.changed") {
          const verbose = data.params.data?.settings?.verbose;
          $("verbose").textContent = verbose ? "on" : "off";
          return;
        }
        const call = waiting.get(data?.id);
        if (!call) return;
        waiting.delete(data.id);
        data.error ? call.reject(new Error(data.error.message)) : call.resolve(data.result);
      };
      const request = (method, params = {}) =>
        new Promise((resolve, reject) => {
          const id = next++;
          waiting.set(id, { resolve, reject });
          port.postMessage({ jsonrpc: "2.0", id, method, params });
        });
      resolve(request);
    });
  });
}

const request = await connect();
$("status").textContent = "Connected";
try {
  const context = await request("context.get");
  $("chat").textContent = context.chat ?? "–";
  const settings = await request("settings.get");
  $("verbose").textContent = settings.verbose ? "on" : "off";
} catch (e) {
  $("status").textContent = `The host refused: ${e.message}`;
}
// A sandboxed frame without allow-forms never fires submit (the browser blocks the form
// first), so the button and Enter in the field make the call themselves.
async function say() {
  const text = $("text").value;
  try {
    const answer = await request("api.request", {
      method: "POST",
      path: "/x/echo",
      body: { text },
    });
    $("echo").textContent = answer?.body?.text ?? JSON.stringify(answer);
  } catch (e) {
    $("echo").textContent = `Refused: ${e.message}`;
  }
}
$("send").addEventListener("click", say);
$("text").addEventListener("keydown", (event) => {
  if (event.key === "Enter") {
    event.preventDefault();
    say();
  }
});
