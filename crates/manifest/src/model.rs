//! The typed manifest, as the controller and the API server use it once the rules passed.
//! Schema documents (tool input and output, settings) stay JSON values.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::capability::Capability;
use super::quantity;
use crate::gate::GateRules;
use crate::schedule::ScheduleType;

/// A valid `plugin.json`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Manifest {
    /// `[a-z][a-z0-9-]{1,31}`.
    pub id: String,
    pub name: String,
    pub version: String,
    /// Always "1".
    pub api: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub capabilities: Vec<Capability>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<Agent>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<Tool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<Action>,
    /// Each setting's schema, by setting name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, Value>,
    #[serde(default, skip_serializing_if = "Ui::is_empty")]
    pub ui: Ui,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<Live>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// Loop events the plugin subscribes to.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<String>,
    /// When set, an event starts a stopped container only while one of these is on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_start: Option<EventsStart>,
    #[serde(default)]
    pub thread_events: ThreadEvents,
    /// The rules for the syscall gate.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "crate::gate::read_manifest_gate"
    )]
    pub gate: Option<GateRules>,
    /// The destinations beyond the host the plugin's container reaches (`egress`, our
    /// addition to the reference's keys); none reaches nothing else.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<Egress>,
    /// The settings' schemas, compiled on first use.
    #[serde(skip)]
    pub compiled_settings: super::json_schema::CompiledSchemas,
}

/// An agent the plugin may run with `POST /runs`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Agent {
    pub id: String,
    #[serde(default)]
    pub read_only: bool,
    /// Names of the manifest's tools the agent gets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<String>,
}

/// A tool agents and workflows call.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Tool {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// A JSON schema of type object.
    pub input_schema: Value,
    /// A JSON schema of type object that `structured_content` must match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
}

impl Tool {
    /// The name agents call it by, as an MCP tool.
    pub fn mcp_name(&self) -> String {
        format!("{MCP_TOOL_PREFIX}{}", self.name)
    }
}

/// What agents see before a tool's name.
pub const MCP_TOOL_PREFIX: &str = "plugin_";

/// An action, run by `POST /actions/{id}` from a schedule, a workflow or a person.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Action {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_schedule: Option<DefaultSchedule>,
}

/// An action's default schedule (needs the `schedule` capability).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct DefaultSchedule {
    #[serde(rename = "type")]
    pub kind: ScheduleType,
    pub schedule: String,
}

/// `ui`: panels, cards and composer switches.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Ui {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub panels: Vec<Panel>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cards: Vec<Card>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub composer_switches: Vec<ComposerSwitch>,
}

impl Ui {
    pub fn is_empty(&self) -> bool {
        self.panels.is_empty() && self.cards.is_empty() && self.composer_switches.is_empty()
    }
}

/// A panel for the workspace's add-pane menus.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Panel {
    pub id: String,
    pub label: String,
    /// A path under `ui/` in `/loop-plugin`.
    pub entry: String,
    #[serde(default)]
    pub singleton: bool,
}

/// A card page for the notification drawer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Card {
    pub id: String,
    /// A path under `ui/` in `/loop-plugin`.
    pub entry: String,
}

/// An on/off pill in the composer.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ComposerSwitch {
    pub id: String,
    /// At most 24 characters.
    pub label: String,
    /// An .svg under `ui/`.
    pub icon: String,
    /// The tooltip until the plugin sets one, at most 200 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
}

/// The event that brings the live session's system messages (a subscriber needs
/// `live.control`, and gets only the subtypes `live.messages` lists).
pub const LIVE_SYSTEM_EVENT: &str = "live.system";

/// `live`: what the plugin may do with the chat's live session.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct Live {
    /// Subtypes of the control requests it may send.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub control: Vec<String>,
    /// Subtypes of the system messages it gets as `live.system` events.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<String>,
}

/// One destination of `egress`: a host name or a CIDR block, and the TCP ports on it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Hash)]
#[serde(deny_unknown_fields)]
pub struct Egress {
    /// A DNS name: `api.github.com`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// An IPv4 or IPv6 block: `10.20.0.0/16`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cidr: Option<String>,
    /// TCP ports, 1 to 65535.
    pub ports: Vec<u16>,
}

impl Egress {
    /// What the owner approves: `api.github.com:443` or `10.20.0.0/16:5432,5433` (ports
    /// sorted). A destination whose host, block or ports change is a new one, approved anew.
    pub fn destination(&self) -> String {
        let mut ports = self.ports.clone();
        ports.sort_unstable();
        let ports: Vec<String> = ports.iter().map(u16::to_string).collect();
        format!(
            "{}:{}",
            self.host.as_deref().or(self.cidr.as_deref()).unwrap_or(""),
            ports.join(",")
        )
    }
}

/// `resources`, as Docker takes them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Resources {
    /// `128m`, `1g`, `512k`, or bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<MemoryLimit>,
    /// CPUs, such as 0.5.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<f64>,
}

/// A memory limit as written: a size with a unit, or bytes.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(untagged)]
pub enum MemoryLimit {
    Bytes(u64),
    Size(String),
}

impl MemoryLimit {
    fn to_json(&self) -> Value {
        match self {
            MemoryLimit::Bytes(b) => Value::from(*b),
            MemoryLimit::Size(s) => Value::from(s.as_str()),
        }
    }
}

/// `events_start`: the boolean settings and composer switches that let an event start the
/// container. Both empty (`{}`): events never start it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct EventsStart {
    #[serde(default)]
    pub settings: Vec<String>,
    #[serde(default)]
    pub switches: Vec<String>,
}

/// `thread_events`: which container gets an event that happened in a thread.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ThreadEvents {
    /// The thread's own container.
    #[default]
    Thread,
    /// The channel's container.
    Channel,
    /// Both.
    Both,
}

impl Manifest {
    /// The tool with this name.
    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The agent with this id.
    pub fn agent(&self, id: &str) -> Option<&Agent> {
        self.agents.iter().find(|a| a.id == id)
    }

    /// The action with this id.
    pub fn action(&self, id: &str) -> Option<&Action> {
        self.actions.iter().find(|a| a.id == id)
    }

    /// The panel with this id.
    pub fn panel(&self, id: &str) -> Option<&Panel> {
        self.ui.panels.iter().find(|p| p.id == id)
    }

    /// The card with this id.
    pub fn card(&self, id: &str) -> Option<&Card> {
        self.ui.cards.iter().find(|c| c.id == id)
    }

    /// The composer switch with this id.
    pub fn composer_switch(&self, id: &str) -> Option<&ComposerSwitch> {
        self.ui.composer_switches.iter().find(|s| s.id == id)
    }

    /// Whether the manifest asks for the capability.
    pub fn declares_capability(&self, capability: Capability) -> bool {
        self.capabilities.contains(&capability)
    }

    /// Each setting's name and schema, by name.
    pub fn setting_schemas(&self) -> impl Iterator<Item = (&str, &Value)> {
        self.settings.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// One setting's schema.
    pub fn setting_schema(&self, name: &str) -> Option<&Value> {
        self.settings.get(name)
    }

    /// Whether the manifest declares `name` as a secret setting (`"secret": true`): its value
    /// comes from a Secret reference, never inline, and only `GET /settings/secrets/{name}`
    /// answers it.
    pub fn is_secret_setting(&self, name: &str) -> bool {
        self.settings
            .get(name)
            .is_some_and(super::settings_schema::is_secret)
    }

    /// The names of the secret settings, in order.
    pub fn secret_settings(&self) -> impl Iterator<Item = &str> {
        self.settings
            .iter()
            .filter(|(_, schema)| super::settings_schema::is_secret(schema))
            .map(|(name, _)| name.as_str())
    }

    /// One setting's compiled schema (None: no such setting; an error: it does not compile),
    /// compiled once per manifest.
    pub fn setting_validator(&self, name: &str) -> Option<&Result<jsonschema::Validator, String>> {
        self.compiled_settings
            .get_or_compile(&self.settings)
            .get(name)
    }

    /// The manifest's memory and CPU limits as Kubernetes quantities (memory `128Mi`, cpu
    /// `500m`). A value the rules would refuse gives `None`; a parsed manifest has none.
    pub fn resources_as_quantities(&self) -> (Option<Quantity>, Option<Quantity>) {
        let Some(r) = &self.resources else {
            return (None, None);
        };
        let memory = r
            .memory
            .as_ref()
            .and_then(|m| quantity::memory_quantity(&m.to_json()).ok());
        let cpu = r
            .cpus
            .and_then(|c| quantity::cpu_quantity(&Value::from(c)).ok());
        (memory, cpu)
    }
}
