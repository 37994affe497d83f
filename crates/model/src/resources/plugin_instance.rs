//! `PluginInstance`: one per (plugin, chat) that the chat's project enables. The controller
//! keeps it; the API server records demand and per-chat state on it.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;
use crate::config::ConfigLevel;

/// A plugin's instance in one chat.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "plugins.loop.dev",
    version = "v1alpha1",
    kind = "PluginInstance",
    namespaced,
    status = "PluginInstanceStatus",
    shortname = "pi",
    category = "loop-plugins",
    doc = "A plugin's instance in one chat: its container's desired and observed state",
    printcolumn(name = "Plugin", type_ = "string", json_path = ".spec.plugin"),
    printcolumn(name = "Chat", type_ = "string", json_path = ".spec.channel"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Pod", type_ = "string", json_path = ".status.pod"),
    printcolumn(
        name = "Settings",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"SettingsValid\")].reason",
        description = "SettingsLeftOut while a configured setting value does not apply"
    ),
    printcolumn(
        name = "Last Activity",
        type_ = "date",
        json_path = ".status.lastActivity"
    ),
    printcolumn(
        name = "Breaker",
        type_ = "string",
        json_path = ".status.breaker.state",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct PluginInstanceSpec {
    /// The Plugin's name (its manifest id).
    pub plugin: String,
    /// The chat: a Channel in this namespace.
    pub channel: String,
    /// The chat's project.
    pub project: String,
}

/// The container's observed state and the per-chat state the API server keeps.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PluginInstanceStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<InstancePhase>,
    /// The Pod running the container, while there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    /// The last call, event or schedule that needed the container (written by the API server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::timestamp")]
    pub last_activity: Option<String>,
    /// When an operator stopped the container (`loop-plugins plugin stop`, the reference's
    /// Stop button): demand recorded up to then counts for nothing, and the next activity
    /// starts it again (written by the stop verb).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::timestamp")]
    pub stopped_at: Option<String>,
    /// Composer switches' state in this chat (written by the API server).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub switches: Vec<SwitchState>,
    /// The plugin holds the chat's live session (PUT /channel/live/hold).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub live_hold: bool,
    /// The breaker in front of the container (written by the API server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub breaker: Option<BreakerState>,
    /// Configured setting values left out (the value below each applies), with where each
    /// came from and why (written by the controller; the SettingsValid condition sums it up).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_settings: Vec<RefusedSetting>,
    /// Where the value of each setting the plugin sees here came from: the manifest's default,
    /// the global config (HostConfig) or the project's; never the value (written by the
    /// controller; `loop-plugins explain` shows the values).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub setting_sources: BTreeMap<String, SettingSource>,
    /// The destinations beyond the host the plugin's Pods may reach here, as its approved
    /// `egress` lists them (`api.github.com:443`), where the controller opened them with the
    /// plugin's NetworkPolicy (written by the controller).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub egress: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// Where a setting's value came from: the highest level whose value the settings layering kept.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SettingSource {
    /// The manifest's `default`.
    Default,
    /// The global config's value (HostConfig).
    Global,
    /// The project's value.
    Project,
}

impl From<ConfigLevel> for SettingSource {
    fn from(level: ConfigLevel) -> Self {
        match level {
            ConfigLevel::Global => SettingSource::Global,
            ConfigLevel::Project => SettingSource::Project,
        }
    }
}

impl std::fmt::Display for SettingSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SettingSource::Default => "the manifest's default",
            SettingSource::Global => "the global config",
            SettingSource::Project => "the project's config",
        })
    }
}

/// Where an instance's container is.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum InstancePhase {
    /// No container runs; the next call starts one.
    Stopped,
    /// A Pod exists and is not Ready yet.
    Starting,
    /// The Pod is Ready.
    Running,
}

/// One composer switch's state in a chat.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SwitchState {
    /// The switch's id in the manifest.
    pub id: String,
    pub on: bool,
    /// The tooltip the plugin set (at most 200 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 200))]
    pub title: Option<String>,
    /// Shown red, with the error in its tooltip.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub error: bool,
    /// Shown with a dashed border.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub busy: bool,
}

/// A configured setting value that does not apply: the reference's "refused values left out
/// and shown".
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RefusedSetting {
    /// The setting's name.
    pub setting: String,
    /// The config the value came from: global (HostConfig) or project (the Project).
    pub source: ConfigLevel,
    /// The value as configured (a Secret reference as configured, for `secretSettings`);
    /// absent for a secret setting's inline value, which is never shown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::any_json")]
    pub value: Option<serde_json::Value>,
    /// Why it is left out: the manifest declares no such setting, what its schema refuses, a
    /// secret setting's value written inline, or a Secret reference for a setting that is not
    /// secret.
    pub reason: String,
}

/// The breaker's state: closed, open until a time, or trying one call.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct BreakerState {
    /// Closed, Open or HalfOpen.
    pub state: String,
    /// Calls left unanswered in a row.
    #[serde(default)]
    pub failures: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "crate::schema::timestamp")]
    pub open_until: Option<String>,
    /// The container it stands in front of, `<Pod UID>/<restarts>`: the API replicas take on
    /// an Open breaker another one opened only for that container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub container: Option<String>,
}
