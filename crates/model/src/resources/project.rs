//! `Project`: a project's plugin config (the `plugins` part of `.loop/config.json`) and the
//! config version its owner trusts.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;
use crate::config::PluginsConfig;

/// A project: its current plugin config and the last version the owner approved.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "plugins.loop.dev",
    version = "v1alpha1",
    kind = "Project",
    namespaced,
    status = "ProjectStatus",
    shortname = "proj",
    category = "loop-plugins",
    doc = "A Loop project: the plugins part of its .loop/config.json and the version its owner trusts",
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
    /// `plugins.<id>` of the project's config, as it is now.
    #[serde(default, skip_serializing_if = "PluginsConfig::is_empty")]
    pub plugins: PluginsConfig,
    /// The last config the owner trusted (`loop-plugins project trust` records it). Its values
    /// apply while the current config is untrusted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted: Option<TrustedConfig>,
}

/// A config version the owner approved: its canonical hash and the config itself.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct TrustedConfig {
    /// `sha256:<hex>` of the canonical JSON of `plugins`.
    #[x_kube(validation = Rule::new("self.matches('^sha256:[0-9a-f]{64}$')").message("sha256:<64 hex>"))]
    pub hash: String,
    #[serde(default, skip_serializing_if = "PluginsConfig::is_empty")]
    pub plugins: PluginsConfig,
}

/// What the controller observed of the project.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ProjectStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The canonical hash of the current config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
