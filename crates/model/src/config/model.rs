//! The shapes of a config, shared by `HostConfig` (the global config) and `Project`.

use std::collections::BTreeMap;

use schemars::JsonSchema;

use crate::schedule::ScheduleType;
use serde::{Deserialize, Serialize};

/// `plugins.<id>` of a config, by plugin id.
pub type PluginsConfig = BTreeMap<String, PluginConfig>;

/// One plugin's entry in a config: `plugins.<id>`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct PluginConfig {
    /// Whether the plugin runs; in the global config, the default for every project.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// Values for the settings the manifest declares, by setting name.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(schema_with = "crate::schema::any_json_map")]
    pub settings: BTreeMap<String, serde_json::Value>,
    /// Scheduled tasks asked for, by action id.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub schedules: BTreeMap<String, ScheduleEntry>,
}

/// `plugins.<id>.schedules.<action>`: every field defaults from the action's default_schedule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ScheduleEntry {
    /// `false` keeps the task but turned off; defaults to true.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// cron or interval; defaults to the action's default_schedule.
    #[serde(default, rename = "type", skip_serializing_if = "Option::is_none")]
    pub kind: Option<ScheduleType>,
    /// A 5-field cron expression, or an interval such as 5m, 1h or 2h30m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
}
