//! The plugin manifest (`plugin.json`): parsing (JSON with comments and trailing commas) and
//! every rule the reference states or implies, each problem reported at its JSON path. One
//! parser for everyone who reads a manifest: the controller's admission, the API server, the
//! operator's verbs and plugin authors (the SDK). No Kubernetes client, no I/O; `model`
//! re-exports it as `model::manifest`, with [`schedule`] and [`time`].
//!
//! - [`time`]: timestamps as statuses and schedules record them;
//! - [`schedule`]: cron and interval schedules, and how a CronJob runs each;
//! - [`parse`]: text or JSON value to a checked [`Manifest`], and the one reader of JSON5
//!   text that others wrote;
//! - [`limits`]: how deep that JSON may nest, and the reader that holds a parse to it;
//! - `rules`: the rules, one module per section of the manifest;
//! - [`gate`]: the `gate` rules' vocabulary, which the gate (crates/gate) enforces: its
//!   operations, decisions, rule types and limits, and the checks serde cannot make;
//! - [`capability`]: the capabilities a manifest may declare;
//! - [`settings_schema`]: what a setting's schema may say;
//! - [`json_schema`]: compiling schemas and checking values against them;
//! - [`quantity`]: `resources` as Kubernetes quantities;
//! - [`bundle`]: what the manifest names in the image's /loop-plugin tree (panel and card
//!   pages, switch icons of at most 16 KB);
//! - [`sizes`]: what the reference's "MB" and "KB" mean (binary units), and its caps.

pub mod bundle;
pub mod capability;
pub mod gate;
pub mod schedule;
pub mod time;

mod error;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod json_schema;
pub mod limits;
mod model;
pub mod parse;
pub mod quantity;
mod rules;
pub mod settings_schema;
pub mod sizes;

pub use capability::{Capability, UnknownCapability};

pub use error::{ManifestError, Problem};
pub use model::{
    Action, Agent, Card, ComposerSwitch, DefaultSchedule, Egress, EventsStart, LIVE_SYSTEM_EVENT,
    Live, MCP_TOOL_PREFIX, Manifest, MemoryLimit, Panel, Resources, ThreadEvents, Tool, Ui,
};
pub use parse::{from_value, json5_value, parse_str};

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    use super::*;

    const ECHO: &str = include_str!("../../../examples/manifests/echo.json");
    const FULL: &str = include_str!("../../../examples/manifests/full.json");

    #[test]
    fn the_examples_parse() {
        let echo = parse_str(ECHO).unwrap_or_else(|e| panic!("echo.json: {e}"));
        assert_eq!(echo.id, "echo");
        let full = parse_str(FULL).unwrap_or_else(|e| panic!("full.json: {e}"));
        // full.json uses every field.
        assert_eq!(full.capabilities.len(), Capability::ALL.len());
        assert!(full.live.is_some() && full.gate.is_some() && full.events_start.is_some());
        assert_eq!(full.egress.len(), 2);
        assert!(!full.ui.panels.is_empty() && !full.ui.cards.is_empty());
        assert!(!full.ui.composer_switches.is_empty());
        assert!(full.tools.iter().any(|t| t.output_schema.is_some()));
        assert_eq!(full.thread_events, ThreadEvents::Both);
        assert_eq!(full.secret_settings().collect::<Vec<_>>(), ["api_token"]);
        assert!(full.is_secret_setting("api_token"));
        assert!(!full.is_secret_setting("question_count"));
        assert!(!full.is_secret_setting("nothing"));
    }

    #[test]
    fn helpers_find_what_the_manifest_declares() {
        let m = parse_str(ECHO).unwrap();
        assert_eq!(m.tool("echo").unwrap().mcp_name(), "plugin_echo");
        assert!(m.tool("shout").is_none());
        assert!(m.agent("say").unwrap().read_only);
        assert!(m.agent("nobody").is_none());
        assert!(m.action("daily").unwrap().default_schedule.is_some());
        assert!(m.action("ping").unwrap().default_schedule.is_none());
        assert!(m.action("nope").is_none());
        assert!(m.declares_capability(Capability::UiPanel));
        assert!(!m.declares_capability(Capability::MemoryWrite));
        assert_eq!(m.panel("main").unwrap().entry, "ui/main/index.html");
        assert_eq!(m.card("score").unwrap().entry, "ui/score.html");
        assert_eq!(m.composer_switch("mode").unwrap().label, "Mode");
        assert_eq!(
            m.setting_schemas().map(|(n, _)| n).collect::<Vec<_>>(),
            ["count"]
        );
        assert_eq!(m.setting_schema("count").unwrap()["default"], 3);
        assert_eq!(
            m.resources_as_quantities(),
            (
                Some(Quantity("128Mi".into())),
                Some(Quantity("500m".into()))
            )
        );
    }

    #[test]
    fn a_manifest_without_resources_has_no_quantities() {
        let m = parse_str(r#"{"id": "ab", "name": "A", "version": "1", "api": "1", "capabilities": ["files.read"]}"#).unwrap();
        assert_eq!(m.resources_as_quantities(), (None, None));
        assert_eq!(m.thread_events, ThreadEvents::Thread);
    }

    #[test]
    fn a_manifest_round_trips_through_json() {
        let m = parse_str(FULL).unwrap();
        let again = from_value(&serde_json::to_value(&m).unwrap()).unwrap();
        assert_eq!(m, again);
    }
}
