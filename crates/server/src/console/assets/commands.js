// The console's side of UI commands (`sdk::api::ui_command` defines the steps): each step of a
// plugin's command is carried out in order by the doer of its type; a step with no doer is
// `unsupported`, a doer that throws makes its step `failed` with the error's message, and the
// steps after a failure are `skipped`. The answer is what the host API's
// POST .../ui/commands/{id} takes: one result per step.

/** The longest error the host takes for a step. */
export const MAX_STEP_ERROR = 500;

/** Why this console cannot carry out a step of each type it has no doer for. */
export const UNSUPPORTED = {
  open_file: "this console has no file view",
  compose: "this console has no composer",
};

/** Runs `steps` with `doers` (type → async (step) => void); resolves to the answer. */
export async function runSteps(steps, doers) {
  const results = [];
  let failed = false;
  for (const step of Array.isArray(steps) ? steps : []) {
    const type = typeof step?.type === "string" ? step.type : "";
    if (failed) {
      results.push({ status: "skipped" });
      continue;
    }
    const doer = Object.hasOwn(doers, type) ? doers[type] : null;
    if (!doer) {
      const why = Object.hasOwn(UNSUPPORTED, type) ? UNSUPPORTED[type] : `this console cannot do ${JSON.stringify(type).slice(0, 80)}`;
      results.push({ status: "unsupported", error: why });
      continue;
    }
    try {
      await doer(step);
      results.push({ status: "ran" });
    } catch (e) {
      failed = true;
      const message = String(e?.message ?? e ?? "failed") || "failed";
      results.push({ status: "failed", error: message.slice(0, MAX_STEP_ERROR) });
    }
  }
  return { steps: results };
}

/** One line saying what became of a command, for the person watching. */
export function summary(command, answer) {
  const n = answer.steps.length;
  const ran = answer.steps.filter((s) => s.status === "ran").length;
  const steps = `${n} step${n === 1 ? "" : "s"}`;
  return ran === n
    ? `${command.plugin} ran ${steps} here`
    : `${command.plugin} asked for ${steps}: ${ran} ran`;
}
