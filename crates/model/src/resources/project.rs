//! `Project`: a project's plugin config (the `plugins` part of `.loop/config.json`). The
//! version its owner trusts is a resource of its own, the same-named `ProjectTrust`, so that
//! editing and trusting are two RBAC permissions; status says whether the current config is
//! the trusted one.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;
use crate::config::PluginsConfig;

/// A project: its current plugin config.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "plugins.loop.dev",
    version = "v1alpha1",
    kind = "Project",
    namespaced,
    status = "ProjectStatus",
    shortname = "proj",
    category = "loop-plugins",
    doc = "A Loop project: the plugins part of its .loop/config.json (the same-named ProjectTrust holds the version its owner trusts)",
    printcolumn(
        name = "Trusted",
        type_ = "string",
        json_path = ".status.conditions[?(@.type==\"Trusted\")].status"
    ),
    printcolumn(
        name = "Config",
        type_ = "string",
        json_path = ".status.configHash",
        priority = 1
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProjectSpec {
    /// `plugins.<id>` of the project's config, as it is now. Its `enabled` values and schedules
    /// apply once the owner trusts it (a `ProjectTrust` of its hash); its settings at once.
    #[serde(default, skip_serializing_if = "PluginsConfig::is_empty")]
    pub plugins: PluginsConfig,
}

/// What the controller observed of the project.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProjectStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The canonical hash of the current config: what `loop-plugins project trust --hash`
    /// takes, and what a `ProjectTrust` must name for the config to count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
