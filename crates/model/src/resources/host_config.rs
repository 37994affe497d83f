//! `HostConfig`: the global config, a cluster-wide singleton named `default`.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;
use super::runner::AgentRunner;
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
    /// What runs each agent run (see [`AgentRunner`]); none: runs stay queued.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runner: Option<AgentRunner>,
    /// How an agent's plugin tool call waits for a person (see [`ApprovalSettings`]).
    #[serde(default)]
    pub approval: ApprovalSettings,
    /// Risk profiles by name: which tools an agent may call without asking a person. A
    /// plugin's agents get `default` unless `plugins.<id>.riskProfile` (in HostConfig's
    /// `plugins.defaults` or, once trusted, a Project) names another. The built-in defaults
    /// are merged into `default`; a profile of another name keeps only what it lists
    /// (`crate::resolve::approval`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(length(max = 64))]
    pub risk_profiles: BTreeMap<String, RiskProfile>,
}

/// `approval`: how long an agent's tool call waits for a person.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalSettings {
    /// How long a call waits for a decision (a duration: 5m, 90s; a year at most); past it,
    /// the call is denied and does not run. The tool's own time limit starts once it is
    /// approved.
    #[serde(default = "default_approval_wait")]
    #[schemars(regex(pattern = r"^([0-9]+h)?([0-9]+m)?([0-9]+s)?$"))]
    pub wait: String,
}

impl Default for ApprovalSettings {
    fn default() -> Self {
        Self {
            wait: default_approval_wait(),
        }
    }
}

fn default_approval_wait() -> String {
    "5m".into()
}

/// A risk profile: which of a plugin's tools its agents call without asking (zeroclaw's
/// `risk_profiles.<name>`). Tools are named as the agent sees them (`plugin_<tool>`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RiskProfile {
    /// Tools called without asking; `*` for every tool.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 128)))]
    pub auto_approve: Vec<String>,
    /// Tools asked for every time, whatever else pre-approves them (`*`, `full`, an Always
    /// answer).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 256), inner(length(min = 1, max = 128)))]
    pub always_ask: Vec<String>,
    /// `full` pre-approves every tool not in `alwaysAsk`; `supervised` (the default) asks for
    /// every tool not in `autoApprove`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<RiskLevel>,
    /// No person attends these agents' runs: a call that needs approval is denied at once
    /// instead of waiting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unattended: Option<bool>,
}

/// A risk profile's level.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum RiskLevel {
    /// Ask for every tool not pre-approved.
    Supervised,
    /// Pre-approve every tool not in `alwaysAsk`.
    Full,
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
    /// How long an instance stays up unused, as a duration (10m, 1h30m): after its last
    /// activity, or after its Pod became Ready if that came later. A Pod still starting
    /// (placed, its volume bound, its image pulled) is kept for up to 5 minutes.
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
    /// How plugin images are pulled: credentials, plain-HTTP registries, other addresses.
    #[serde(default, skip_serializing_if = "RegistryConfig::is_empty")]
    pub registry: RegistryConfig,
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
            registry: RegistryConfig::default(),
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

/// signature_mode: disabled, permissive or strict. Any other value is kept as written and acts
/// as strict, and the Plugin's status says so (zeroclaw's rule: a misspelt mode never loosens
/// the policy).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum SignatureMode {
    #[default]
    Disabled,
    Permissive,
    Strict,
    /// A value that is none of the three.
    Unknown(String),
}

impl SignatureMode {
    /// The mode as written.
    pub fn as_str(&self) -> &str {
        match self {
            SignatureMode::Disabled => "disabled",
            SignatureMode::Permissive => "permissive",
            SignatureMode::Strict => "strict",
            SignatureMode::Unknown(other) => other,
        }
    }

    pub fn parse(mode: &str) -> SignatureMode {
        match mode {
            "disabled" => SignatureMode::Disabled,
            "permissive" => SignatureMode::Permissive,
            "strict" => SignatureMode::Strict,
            other => SignatureMode::Unknown(other.to_string()),
        }
    }
}

impl Serialize for SignatureMode {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for SignatureMode {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(SignatureMode::parse(&String::deserialize(d)?))
    }
}

impl JsonSchema for SignatureMode {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "SignatureMode".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "description": "disabled, permissive or strict; any other value acts as strict",
            "maxLength": 64
        })
    }
}

/// `plugins.registry`: how the controller (and the CLI) reach plugin images.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RegistryConfig {
    /// A `kubernetes.io/dockerconfigjson` Secret in the controller's namespace: the
    /// credentials admission pulls with, copied beside each plugin Pod as its imagePullSecret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub credentials_secret: Option<String>,
    /// Registries (`host:port` as image references name them) reached over plain HTTP;
    /// loopback registries always are.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub insecure: Vec<String>,
    /// Registries the controller reaches at another address than their name (kind: images
    /// named `localhost:5001/...` are at `kind-registry:5000` from inside the cluster).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub mirrors: Vec<RegistryMirror>,
}

impl RegistryConfig {
    pub fn is_empty(&self) -> bool {
        *self == RegistryConfig::default()
    }
}

/// A registry, as references name it, reached at another address.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RegistryMirror {
    /// `host:port` as image references name it.
    #[schemars(length(min = 1, max = 253))]
    pub registry: String,
    /// `host:port` to connect to.
    #[schemars(length(min = 1, max = 253))]
    pub address: String,
    /// Plain HTTP to that address (a registry inside the cluster without TLS).
    #[serde(default)]
    pub plain_http: bool,
}

/// `gates.*` of the global config.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Gates {
    #[serde(default)]
    pub agentgate: AgentGate,
    /// gates.audit: where the gate's decisions go and how long they are kept.
    #[serde(default)]
    pub audit: GateAudit,
}

/// `gates.audit`: one JSON line per decision, per chat.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct GateAudit {
    /// `stdout` (the plugin container's log), or a dir under /data (the chat's own volume,
    /// kept with it; the gate keeps the plugin from touching it, which costs a trap on each
    /// file-changing call).
    #[serde(default = "default_audit_destination")]
    #[x_kube(validation = Rule::new("self == 'stdout' || (self.startsWith('/data/') && !self.contains('/../') && !self.endsWith('/..'))").message("stdout, or a dir under /data"))]
    #[schemars(length(max = 256))]
    pub destination: String,
    /// Segments older than this many days are deleted.
    #[serde(default = "default_audit_days")]
    #[schemars(range(min = 1, max = 3650))]
    pub max_age_days: u32,
    /// Past this many bytes in all, the oldest segments are deleted (at least 65536).
    #[serde(default = "default_audit_bytes")]
    #[schemars(range(min = gate::policy::MIN_RETENTION_BYTES))]
    pub max_bytes: u64,
}

// The gate's own defaults: what it does when a policy leaves `audit` out is what HostConfig
// asks for when it does.
fn default_audit_destination() -> String {
    gate::policy::DEFAULT_AUDIT_DIR.into()
}

fn default_audit_days() -> u32 {
    gate::policy::DEFAULT_RETENTION_DAYS
}

fn default_audit_bytes() -> u64 {
    gate::policy::DEFAULT_RETENTION_BYTES
}

impl Default for GateAudit {
    fn default() -> Self {
        Self {
            destination: default_audit_destination(),
            max_age_days: default_audit_days(),
            max_bytes: default_audit_bytes(),
        }
    }
}

impl GateAudit {
    /// Whether the audit goes to the container's log.
    pub fn to_stdout(&self) -> bool {
        self.destination == "stdout"
    }
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
