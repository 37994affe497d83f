// The host API, called with the signed-in user's Kubernetes token (Authorization: Bearer):
// everything the console does is that user's RBAC. Errors are HostError with the host API's
// code (openapi/host-api-v1.yaml, ErrorCode).

export const PREFIX = "/api/host/v1";

/** The host API's error codes: an answer of `/x` carrying one of these is the host's own. */
export const HOST_CODES = new Set([
  "missing_token", "invalid_token", "forbidden", "invalid_body", "body_too_large", "not_found",
  "method_not_allowed", "channel_not_found", "plugin_not_found", "action_not_found",
  "tool_not_found", "agent_not_found", "switch_not_found", "request_not_found", "scan_not_found",
  "tool_not_given",
  "plugin_not_enabled", "instance_pending", "queue_full", "start_timeout", "cannot_start",
  "breaker_open", "plugin_timeout", "plugin_unreachable", "plugin_error", "answer_too_large",
  "invalid_answer", "input_invalid", "output_invalid", "approval_not_found",
  "run_not_found", "approval_other_chat", "approval_decided", "approval_expired", "approval_denied",
  "project_not_found", "plugin_not_admitted", "config_changed", "image_unreadable",
  "upgrade_refused", "unavailable",
  "internal",
]);

export class HostError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = "HostError";
    this.status = status;
    this.code = code;
  }
}

/** The host API's error in an answer's JSON, or null when it is not one. */
export function hostError(status, json) {
  const e = json?.error;
  if (!e || typeof e !== "object" || !HOST_CODES.has(e.code)) return null;
  return new HostError(status, e.code, String(e.message ?? e.code));
}

/** How long a call answered `instance_pending` is asked again, in milliseconds. */
export const PENDING_PATIENCE_MS = 30_000;

/**
 * How long to wait before asking again after `error`, in milliseconds: its Retry-After
 * (seconds, 1 when absent, at most 5) for `instance_pending`, which reached no plugin; null
 * for every other error, which is the answer.
 */
export function pendingWait(error, retryAfter) {
  if (error.status !== 503 || error.code !== "instance_pending") return null;
  const seconds = Number.parseInt(retryAfter ?? "", 10);
  return Math.min(Number.isFinite(seconds) && seconds > 0 ? seconds : 1, 5) * 1000;
}

export class HostApi {
  /** @param {string} token @param {string} namespace */
  constructor(token, namespace) {
    this.token = token;
    this.namespace = namespace;
  }

  /** The path of a namespace route: ns("/chats"). */
  ns(rest) {
    return `${PREFIX}/namespaces/${encodeURIComponent(this.namespace)}${rest}`;
  }

  /** The path of a chat's route. */
  chat(chat, rest = "") {
    return this.ns(`/channels/${encodeURIComponent(chat)}${rest}`);
  }

  /** The path of a plugin's route in a chat. */
  plugin(chat, plugin, rest = "") {
    return this.chat(chat, `/plugins/${encodeURIComponent(plugin)}${rest}`);
  }

  /** fetch with the token; the Response as it came. */
  raw(method, path, { body, contentType, signal } = {}) {
    const headers = { Authorization: `Bearer ${this.token}` };
    if (contentType) headers["Content-Type"] = contentType;
    return fetch(path, { method, headers, body, signal, cache: "no-store", credentials: "omit" });
  }

  /**
   * A JSON call: the answer's JSON, or a HostError. A person's click (a POST) answered
   * `instance_pending` (the controller has not made the plugin's instance in that chat yet, so
   * nothing reached the plugin) is asked again after its Retry-After, for up to
   * PENDING_PATIENCE_MS. A read is not: the lists load again on the next change, and one
   * plugin's pending instance must not hold the whole chat's page.
   */
  async json(method, path, body) {
    const options = body === undefined
      ? {}
      : { body: JSON.stringify(body), contentType: "application/json" };
    const deadline = Date.now() + PENDING_PATIENCE_MS;
    for (;;) {
      const response = await this.raw(method, path, options);
      const text = await response.text();
      let json = null;
      try { json = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
      if (response.ok) return json;
      const error = hostError(response.status, json)
        ?? new HostError(response.status, "internal", `${method} ${path} answered ${response.status}`);
      const wait = method === "GET" ? null : pendingWait(error, response.headers.get("retry-after"));
      if (wait === null || Date.now() + wait > deadline) throw error;
      await this.sleep(wait);
    }
  }

  /** Waits `ms` milliseconds (a test replaces it). */
  sleep(ms) { return new Promise((resolve) => setTimeout(resolve, ms)); }

  get(path) { return this.json("GET", path); }
  post(path, body = {}) { return this.json("POST", path, body); }
  patch(path, body = {}) { return this.json("PATCH", path, body); }
  put(path, body = {}) { return this.json("PUT", path, body); }
  delete(path) { return this.json("DELETE", path); }

  /** The path of a route of the whole host (the global config). */
  host(rest) {
    return `${PREFIX}${rest}`;
  }

  /**
   * Follows a server-sent events route (EventSource cannot send a token, so this reads the
   * stream with fetch). onEvent({event, data, id}) for each event; onOpen() once the first
   * bytes came. Resolves when the stream ends; rejects on a refusal.
   */
  async follow(path, { onEvent, onOpen, signal }) {
    const response = await this.raw("GET", path, { signal });
    if (!response.ok) {
      let json = null;
      try { json = await response.json(); } catch { /* not JSON */ }
      throw hostError(response.status, json)
        ?? new HostError(response.status, "internal", `GET ${path} answered ${response.status}`);
    }
    const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = "";
    let opened = false;
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      if (!opened) { opened = true; onOpen?.(); }
      buffer += value.replaceAll("\r\n", "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = parseEvent(block);
        if (event) onEvent(event);
      }
    }
  }
}

/** One server-sent event block as {event, data, id}; null for a comment alone. */
export function parseEvent(block) {
  let event = "message";
  let id;
  const data = [];
  let any = false;
  for (const line of block.split("\n")) {
    if (!line || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    any = true;
    if (field === "event") event = value;
    else if (field === "data") data.push(value);
    else if (field === "id") id = value;
  }
  return any ? { event, data: data.join("\n"), id } : null;
}
