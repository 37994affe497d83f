//! `HostConfig`: the global config, a cluster-wide singleton named `default`.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;
use crate::config::PluginsConfig;

/// The only name a HostConfig may have.
pub const HOST_CONFIG_NAME: &str = "default";

/// The host's global config: Loop's `plugins.*` and `gates.*`.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "plugins.loop.dev",
    version = "v1alpha1",
    kind = "HostConfig",
    status = "HostConfigStatus",
    shortname = "hostcfg",
    category = "loop-plugins",
    doc = "The plugin host's global config (a singleton named default)",
    validation = Rule::new("self.metadata.name == 'default'").message("the HostConfig must be named default"),
    printcolumn(name = "Plugins", type_ = "boolean", json_path = ".spec.plugins.enabled", description = "plugins.enabled"),
    printcolumn(name = "Gate", type_ = "boolean", json_path = ".spec.gates.agentgate.enabled", description = "gates.agentgate.enabled"),
    printcolumn(name = "Signatures", type_ = "string", json_path = ".spec.plugins.signatureMode"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct HostConfigSpec {
    #[serde(default)]
    pub plugins: HostPlugins,
    #[serde(default)]
    pub gates: Gates,
    /// The Plugin API's address as plugin pods reach it (LOOP_API_URL).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_url: Option<String>,
}

/// `plugins.*` of the global config.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HostPlugins {
    /// plugins.enabled: nothing runs while this is off.
    #[serde(default)]
    pub enabled: bool,
    /// plugins.daily_runs: agent runs each plugin may start in any 24 hours.
    #[serde(default = "default_daily_runs")]
    #[schemars(range(min = 0))]
    pub daily_runs: u32,
    /// How long an instance stays up after its last activity, as a duration (10m, 1h30m).
    #[serde(default = "default_idle_timeout")]
    #[schemars(regex(pattern = r"^([0-9]+h)?([0-9]+m)?([0-9]+s)?$"))]
    pub idle_timeout: String,
    /// How strictly plugin signatures are enforced.
    #[serde(default)]
    pub signature_mode: SignatureMode,
    /// Hex-encoded Ed25519 public keys allowed to publish plugins under strict mode.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(inner(regex(pattern = "^[0-9a-f]{64}$")), length(max = 64))]
    pub trusted_publisher_keys: Vec<String>,
    /// plugins.<id> of the global config: the defaults for every project.
    #[serde(default, skip_serializing_if = "PluginsConfig::is_empty")]
    pub defaults: PluginsConfig,
}

impl Default for HostPlugins {
    fn default() -> Self {
        Self {
            enabled: false,
            daily_runs: default_daily_runs(),
            idle_timeout: default_idle_timeout(),
            signature_mode: SignatureMode::default(),
            trusted_publisher_keys: Vec::new(),
            defaults: PluginsConfig::new(),
        }
    }
}

fn default_daily_runs() -> u32 {
    50
}

fn default_idle_timeout() -> String {
    "10m".into()
}

/// signature_mode: disabled, permissive or strict.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SignatureMode {
    #[default]
    Disabled,
    Permissive,
    Strict,
}

/// `gates.*` of the global config.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Gates {
    #[serde(default)]
    pub agentgate: AgentGate,
}

/// `gates.agentgate`: plugin containers run under the syscall gate while on.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentGate {
    #[serde(default)]
    pub enabled: bool,
    /// The image holding the `loop-plugins` binary, pinned by digest, copied in by an init container.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = Rule::new("self.matches('^[^@\\\\s]+@sha256:[0-9a-f]{64}$')").message("the gate image must be pinned by digest (name@sha256:<64 hex>)"))]
    #[schemars(length(max = 512))]
    pub image: Option<String>,
}

/// What the controller observed of the global config.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct HostConfigStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
