// A task's own options as the Tasks panel sets them (the reference: "With Worktree on, the
// action runs in a worktree thread made on the first run, its later runs first rebased onto the
// origin branch when Update before run is on, and Auto-delete deletes the thread that many
// seconds after the action started"): what the form sends, refused here with the field's name
// before the host API would, and the few words a task's row shows of them. Pure.

/** The longest Auto-delete the host takes: 30 days. */
export const MAX_AUTO_DELETE_SECONDS = 30 * 24 * 3600;

/** The options the form's values make, or why not: `{options}` or `{refused}`.
 * `autoDelete` is the field's text (empty: off), in seconds. */
export function optionsFrom({ worktree, updateBeforeRun, autoDelete }) {
  const options = { worktree: Boolean(worktree), updateBeforeRun: Boolean(updateBeforeRun) };
  const text = String(autoDelete ?? "").trim();
  if (text !== "") {
    if (!/^[0-9]{1,8}$/.test(text)) return { refused: "Auto-delete: a whole number of seconds" };
    const seconds = Number(text);
    if (seconds < 1 || seconds > MAX_AUTO_DELETE_SECONDS) {
      return { refused: `Auto-delete: between 1 and ${MAX_AUTO_DELETE_SECONDS} seconds (30 days)` };
    }
    options.autoDeleteSeconds = seconds;
  }
  if (!options.worktree && options.updateBeforeRun) {
    return { refused: "Update before run: needs Worktree (it rebases the task's worktree)" };
  }
  if (!options.worktree && options.autoDeleteSeconds !== undefined) {
    return { refused: "Auto-delete: needs Worktree (it deletes the task's worktree thread)" };
  }
  return { options };
}

/** `3600` → `1h`, `90` → `1m30s`: how long, as the row shows it. */
export function duration(seconds) {
  const parts = [];
  let left = Math.floor(Number(seconds) || 0);
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["m", 60], ["s", 1]]) {
    if (left >= size) {
      parts.push(`${Math.floor(left / size)}${unit}`);
      left %= size;
    }
  }
  return parts.join("") || "0s";
}

/** The words a task's row shows of its options: none for a plain task. */
export function optionsSummary(options) {
  if (!options?.worktree) return [];
  const words = ["worktree"];
  if (options.updateBeforeRun) words.push("update before run");
  if (Number.isInteger(options.autoDeleteSeconds)) {
    words.push(`auto-delete ${duration(options.autoDeleteSeconds)}`);
  }
  return words;
}
