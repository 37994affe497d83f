// What the console decides about the agents' tool calls waiting for a person (the host API's
// approvals, docs/host-api.md "Approving an agent's tool calls"), as pure functions the page
// renders and the tests call: which wait in which chat, how long each has left, what was
// decided by whom, and the call's input as a person reads it.

/** The most characters of a call's input shown; the rest is cut with "…". */
export const INPUT_SHOWN = 2000;
/** How many decided approvals of the chosen chat the drawer keeps showing. */
export const DECIDED_SHOWN = 5;

/** The answers a person gives, as the route takes them, with their buttons' labels. */
export const ANSWERS = [
  { answer: "once", label: "Approve once", kind: "approve" },
  { answer: "always", label: "Always in this run", kind: "approve" },
  { answer: "deny", label: "Deny", kind: "deny" },
];

/** Whether an approval still waits for someone. */
export function isPending(a) {
  return a?.decision === "Pending";
}

/** Chat name → how many of its approvals wait (only chats with some). */
export function pendingByChat(approvals) {
  const counts = new Map();
  for (const a of approvals ?? []) {
    if (!isPending(a) || typeof a.chat !== "string") continue;
    counts.set(a.chat, (counts.get(a.chat) ?? 0) + 1);
  }
  return counts;
}

/**
 * The chat's approvals as the drawer shows them: those waiting, the soonest deadline first,
 * then the latest DECIDED_SHOWN decided, newest decision first.
 */
export function forChat(approvals, chat) {
  const mine = (approvals ?? []).filter((a) => a?.chat === chat);
  const pending = mine.filter(isPending)
    .sort((a, b) => String(a.deadline).localeCompare(String(b.deadline))
      || String(a.name).localeCompare(String(b.name)));
  const decided = mine.filter((a) => !isPending(a))
    .sort((a, b) => String(b.decidedAt ?? b.requestedAt).localeCompare(String(a.decidedAt ?? a.requestedAt)))
    .slice(0, DECIDED_SHOWN);
  return { pending, decided };
}

/**
 * How long is left before a call is denied for want of a decision: "4:32 left", "0:05 left",
 * "past its deadline"; "" for a deadline that is not a time.
 */
export function timeLeft(deadline, now = Date.now()) {
  const at = Date.parse(deadline ?? "");
  if (!Number.isFinite(at)) return "";
  const seconds = Math.floor((at - now) / 1000);
  if (seconds <= 0) return "past its deadline";
  const h = Math.floor(seconds / 3600);
  const m = Math.floor((seconds % 3600) / 60);
  const s = String(seconds % 60).padStart(2, "0");
  return h > 0 ? `${h}:${String(m).padStart(2, "0")}:${s} left` : `${m}:${s} left`;
}

/** The decision as a sentence: "Approved by alice: fine", "Denied when nobody decided". */
export function decisionText(a) {
  const verb = {
    Approved: "Approved once",
    ApprovedAlways: "Approved for the rest of the run",
    Denied: "Denied",
    Expired: "Denied: nobody decided in time",
    Pending: "Waiting",
  }[a?.decision] ?? String(a?.decision ?? "Unknown");
  const by = a?.decidedBy && a.decision !== "Expired" ? ` by ${a.decidedBy}` : "";
  const why = a?.reason && a.decision !== "Expired" ? `: ${a.reason}` : "";
  return `${verb}${by}${why}`;
}

/** The call's input as indented JSON, cut to INPUT_SHOWN characters. */
export function inputText(input) {
  let text;
  try {
    text = JSON.stringify(input ?? null, null, 2) ?? "null";
  } catch {
    try {
      text = String(input);
    } catch {
      text = "(the input cannot be shown: nested too deep)";
    }
  }
  const chars = [...text];
  return chars.length > INPUT_SHOWN ? `${chars.slice(0, INPUT_SHOWN).join("")}…` : text;
}

/** What a refused decision means to the person who clicked. */
export function refusalText(error) {
  switch (error?.code) {
    case "forbidden":
      return "You may not decide here: it takes the approver role (approve on toolcallapprovals) in this namespace.";
    case "approval_decided":
      return `Someone decided first: ${error.message}`;
    case "approval_expired":
      return `Too late: ${error.message}`;
    default:
      return error?.message ?? String(error);
  }
}
