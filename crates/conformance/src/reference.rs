//! The sentences of the reference a check enforces, quoted as the reference writes them: Loop's
//! plugin documentation (the host → plugin contract, the Plugin API, the SDK's `Check` and
//! `CheckUI`) and, for admission's stages on an image, zeroclaw's trust model, which the host
//! adopts. A FAIL line names one of these ([`Rule`]); what the host asks beyond them (the
//! exact status, the `{"error"}` body, the answer to a call the reference says nothing about:
//! `openapi/plugin-contract-v1.yaml`'s conventions) is a WARN line instead, and never makes
//! the check fail.

use std::fmt;

/// Whose documentation a sentence is from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Loop's plugin documentation.
    Loop,
    /// zeroclaw's "How Plugins Work" (admission and trust).
    Zeroclaw,
}

/// One sentence of the reference, verbatim.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rule {
    pub source: Source,
    pub text: &'static str,
}

impl fmt::Display for Rule {
    /// `the reference: "..."`, or `the reference (zeroclaw): "..."`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            Source::Loop => write!(f, "the reference: \"{}\"", self.text),
            Source::Zeroclaw => write!(f, "the reference (zeroclaw): \"{}\"", self.text),
        }
    }
}

const fn loop_says(text: &'static str) -> Rule {
    Rule {
        source: Source::Loop,
        text,
    }
}

const fn zeroclaw_says(text: &'static str) -> Rule {
    Rule {
        source: Source::Zeroclaw,
        text,
    }
}

/// Every request is refused without the secret (any 4xx is a refusal; answering is not).
pub const SECRET: Rule = loop_says(
    "Every request carries Authorization: Bearer <contents of LOOP_PLUGIN_SECRET_FILE>; refuse any other.",
);

/// What the SDK's `Check` drives, and so what a plugin must answer: its health and version,
/// every declared action with each trigger, every tool as both callers, every switch both ways,
/// the end of each run it started (each with a success status).
pub const CHECK: Rule = loop_says(
    "Check drives a plugin through the Loop → plugin contract: its health and version, the secret, every action with each trigger, every tool as an agent’s and as a workflow’s call, every composer switch turned on and off, and the end of each run it started.",
);

/// `/healthz` reports the manifest's version.
pub const HEALTH_VERSION: Rule =
    loop_says("ReadManifest parses plugin.json, so /healthz can report its version.");

/// The routes' time limits.
pub const TIME_LIMITS: Rule = loop_says(
    "Each call has a time limit: 10 s for actions, /runs/{run_id}/done, /events and /switches, 60 s for tools, 30 s for /x.",
);

/// The caps on what a plugin answers.
pub const CAPS: Rule = loop_says("A tool answer is capped at 1 MB and an /x body at 8 MB.");

/// A call the container did not answer at all fails.
pub const UNANSWERED: Rule = loop_says(
    "When a container leaves 3 calls in a row unanswered (it refused the connection or ran out of time), Loop stops calling it for 30 s and fails those calls at once: /x and actions with 503, tool calls with an is_error result the agent sees.",
);

/// `structured_content` is a JSON object.
pub const STRUCTURED_CONTENT: Rule = loop_says(
    "A tool may also answer with structured_content, the result as a JSON object, like MCP’s structuredContent.",
);

/// A tool with an `output_schema` answers `structured_content` that matches it.
pub const OUTPUT_SCHEMA: Rule = loop_says(
    "A tool that declares an output_schema, a JSON schema of type object, must answer with structured_content that matches it; Loop checks it, and turns a result that doesn’t into an is_error one (a workflow node fails).",
);

/// Why an event the plugin does not take is not a failure (quoted in WARN lines).
pub const EVENTS_BEST_EFFORT: Rule = loop_says(
    "Delivery is best effort: each event is sent once, in no set order, and dropped when the plugin doesn’t take it.",
);

/// The plugin's own calls carry its token.
pub const TOKEN: Rule = loop_says(
    "Calls go to $LOOP_API_URL/api/plugin/v1/... with Authorization: Bearer <contents of LOOP_PLUGIN_TOKEN_FILE>.",
);

/// A route needing a capability the manifest does not declare (so the owner never approved
/// it) is refused.
pub const CAPABILITY: Rule =
    loop_says("A route needing a capability the owner didn’t approve answers 403.");

/// `POST /runs` names one of the manifest's agents.
pub const AGENTS: Rule = loop_says(
    "POST /runs starts a run of one of the plugin’s agents in the channel’s hidden plugin:<id> thread, with a fresh session.",
);

/// `POST /cards` posts one of the manifest's cards.
pub const CARDS: Rule = loop_says(
    "A plugin approved for ui.notification.card declares pages in the manifest’s ui.cards (id and entry, checked like a panel’s) and posts one with POST /cards.",
);

/// A live control request's subtype is one the manifest lists.
pub const LIVE_CONTROL: Rule = loop_says(
    "The manifest’s live.control lists the subtypes of the control requests it may send with POST /channel/live/control, and live.messages the subtypes of the session’s system messages it gets as live.system events.",
);

/// A composer switch is one the manifest declares.
pub const SWITCHES: Rule = loop_says(
    "A plugin approved for ui.composer_switch declares up to four on/off pills in the manifest’s ui.composer_switches: id, label (at most 24 characters), icon (an .svg under ui/, at most 16 KB) and title, the tooltip until the plugin sets one (at most 200 characters).",
);

/// What the SDK's `CheckUI` reports of a panel or card.
pub const CHECK_UI: Rule = loop_says(
    "It returns the problems it saw: a load or inline script the policy blocked, an uncaught error or unhandled rejection, a file of the bundle that didn’t load, a failed bridge call, and a page that didn’t load or take the bridge’s port within UIOptions.Timeout (10 seconds; NoBridge skips the bridge).",
);

/// The host switch.
pub const PLUGINS_ENABLED: Rule =
    loop_says("Plugins are off unless plugins.enabled is set in the global config.");

/// What an image is.
pub const IMAGE: Rule = loop_says(
    "A Loop plugin is an OCI image that Loop installs by digest and runs in its own container, one per channel.",
);

/// The image's label and user.
pub const IMAGE_LABEL_USER: Rule = loop_says(
    "The image carries the label dev.loop.plugin=1, runs as a non-root USER (a numeric uid:gid works) and serves HTTP on $LOOP_PLUGIN_PORT.",
);

/// The cap on `/loop-plugin`.
pub const LOOP_PLUGIN_CAP: Rule =
    loop_says("/loop-plugin may hold at most 50 MB; install refuses a bigger one.");

/// Rows of the reference's image layout table (its columns joined by one space).
pub const LAYOUT_MANIFEST: Rule = loop_says("/loop-plugin/plugin.json manifest (required)");
pub const LAYOUT_UI: Rule =
    loop_says("/loop-plugin/ui/<panel>/... static UI bundle per panel (index.html plus assets)");
pub const LAYOUT_DATA: Rule = loop_says("/data/ must exist, owned by the image's USER");

/// What a composer switch's click gets back.
pub const SWITCH_ANSWER: Rule = loop_says(
    "A click calls POST /switches/{switch} on the channel’s container, with the thread’s id for a thread, and the pill shows the answer.",
);

/// Capabilities are the owner's to approve.
pub const CAPABILITIES_APPROVED: Rule =
    loop_says("Capabilities are approved by the owner at install and checked on every call:");

/// A manifest that breaks a rule is not loaded.
pub const MALFORMED_MANIFEST: Rule =
    zeroclaw_says("A malformed manifest is skipped with a warning, never loaded.");

/// A signature the policy refuses.
pub const SIGNATURE_POLICY: Rule = zeroclaw_says(
    "A plugin that fails the policy is dropped from the loaded set, not surfaced as a tool.",
);

/// Names held by another plugin.
pub const NAME_CONFLICT: Rule = zeroclaw_says(
    "Registration refuses a name conflict instead of letting one tool shadow another.",
);

/// A tool name with `__`.
pub const NAME_RESERVED: Rule = zeroclaw_says(
    "A tool name that contains __ is refused even when nothing holds it yet, because MCP tools are named <server>__<tool> and register after plugin tools.",
);

/// Every sentence above, for the tests.
pub const ALL: &[Rule] = &[
    SECRET,
    CHECK,
    HEALTH_VERSION,
    TIME_LIMITS,
    CAPS,
    UNANSWERED,
    STRUCTURED_CONTENT,
    OUTPUT_SCHEMA,
    EVENTS_BEST_EFFORT,
    TOKEN,
    CAPABILITY,
    AGENTS,
    CARDS,
    LIVE_CONTROL,
    SWITCHES,
    CHECK_UI,
    PLUGINS_ENABLED,
    IMAGE,
    IMAGE_LABEL_USER,
    LOOP_PLUGIN_CAP,
    LAYOUT_MANIFEST,
    LAYOUT_UI,
    LAYOUT_DATA,
    SWITCH_ANSWER,
    CAPABILITIES_APPROVED,
    MALFORMED_MANIFEST,
    SIGNATURE_POLICY,
    NAME_CONFLICT,
    NAME_RESERVED,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_sentence_is_quoted_once_and_whole() {
        for (i, rule) in ALL.iter().enumerate() {
            assert!(ALL[..i].iter().all(|r| r.text != rule.text), "{rule} twice");
            let table_row = [LAYOUT_MANIFEST, LAYOUT_UI, LAYOUT_DATA].contains(rule);
            let last = rule.text.chars().last().unwrap();
            assert!(
                matches!(last, '.' | ':') || table_row,
                "{rule}: not a whole sentence"
            );
        }
        assert_eq!(
            SECRET.to_string(),
            "the reference: \"Every request carries Authorization: Bearer <contents of \
             LOOP_PLUGIN_SECRET_FILE>; refuse any other.\""
        );
        assert!(
            NAME_RESERVED
                .to_string()
                .starts_with("the reference (zeroclaw): \"A tool")
        );
    }
}
