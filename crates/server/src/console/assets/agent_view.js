// The agent view (the reference's "Panels": once a plugin started a run in the chat, its panes
// show the agent label, and it opens the panel beside the run's chat): which plugins have runs
// here, which run a pane's agent view follows, and the run's chat as entries to draw, read-only.
// Pure.

/** Runs still going: the view reads them again, and its mark moves. */
export function isLive(phase) {
  return phase === "Queued" || phase === "Running";
}

/** The plugins that started a run in the chat: their panes show the agent label. */
export function pluginsWithRuns(runs) {
  return new Set((Array.isArray(runs) ? runs : []).map((r) => r?.plugin).filter((p) => typeof p === "string"));
}

/** The run a pane of `plugin` follows: its newest going run, else its newest (runs come newest
 * first). */
export function runFor(runs, plugin) {
  const mine = (Array.isArray(runs) ? runs : []).filter((r) => r?.plugin === plugin);
  return mine.find((r) => isLive(r.phase)) ?? mine[0] ?? null;
}

/** At most this many characters of one input or answer are drawn; the rest is said to be cut. */
export const MAX_SHOWN = 4000;

function cut(text) {
  const t = typeof text === "string" ? text : JSON.stringify(text, null, 2) ?? "";
  return t.length > MAX_SHOWN ? `${t.slice(0, MAX_SHOWN)}… (${t.length - MAX_SHOWN} more characters)` : t;
}

/**
 * The run's chat as entries, in order: the prompt (`user`), each tool call with its input and
 * its answer (`tool`), and the final message or why it failed (`agent` / `failed`); `live`
 * says the mark moves.
 */
export function entries(run) {
  if (!run || typeof run !== "object") return { live: false, items: [] };
  const items = [];
  if (typeof run.prompt === "string") items.push({ kind: "user", text: cut(run.prompt) });
  for (const call of Array.isArray(run.calls) ? run.calls : []) {
    if (!call || typeof call !== "object") continue;
    const result = call.result && typeof call.result === "object" ? call.result : {};
    items.push({
      kind: "tool",
      tool: typeof call.tool === "string" ? call.tool : "a tool",
      input: cut(call.input ?? {}),
      answer: cut(result.structured ?? result.text ?? ""),
      error: result.is_error === true,
      at: typeof call.at === "string" ? call.at : "",
    });
  }
  if (Number.isInteger(run.dropped) && run.dropped > 0) {
    items.push({ kind: "note", text: `${run.dropped} earlier tool call${run.dropped === 1 ? "" : "s"} not kept` });
  }
  const live = isLive(run.phase);
  if (run.phase === "Succeeded" && typeof run.result === "string") items.push({ kind: "agent", text: cut(run.result) });
  if (run.phase === "Failed") {
    items.push({ kind: "failed", text: cut([run.reason, run.result].filter(Boolean).join(": ") || "failed") });
  }
  return { live, items };
}
