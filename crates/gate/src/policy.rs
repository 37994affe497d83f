//! The policy file: what the init container writes (compiled from the manifest's `gate` rules
//! at admission) and what the gate reads at start. Plain serde types, their defaults (a pod's
//! `/data`, `/tmp`, `/dev/shm`) and their validation; no decisions and no I/O beyond reading
//! the file. The rules' vocabulary (operations, decisions, the rule types and their limits and
//! checks) is the manifest crate's (`manifest::gate`), re-exported here.
//!
//! ```json
//! {
//!   "version": 1,
//!   "plugin": "echo",
//!   "chat": "team-a/general",
//!   "writable": ["/data", "/tmp"],
//!   "no_exec": ["/data", "/tmp", "/dev/shm"],
//!   "gate": {
//!     "files": [{ "paths": ["/data/cache/**"], "operations": ["delete"], "decision": "deny" }],
//!     "commands": [{ "commands": ["curl", "wget"], "decision": "deny" }]
//!   },
//!   "audit": {
//!     "destination": "/data/.loop-audit",
//!     "retention": { "max_age_days": 30, "max_bytes": 67108864 },
//!     "protect": true
//!   }
//! }
//! ```
//!
//! Every field but `version` may be left out. Unknown fields are refused, so a misspelt rule
//! never silently weakens the gate; so is `"decision": "approve"`: nobody is there to answer a
//! prompt, so a plugin's rules may only allow or deny (the manifest check refuses it at
//! admission, and this loader refuses it again).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize};
use sha2::{Digest, Sha256};

pub use manifest::gate::{
    CommandRule, Decision, FileRule, GateRules, Operation, RuleError, rule_limits,
};

/// The only policy format this gate reads.
pub const POLICY_VERSION: u32 = 1;

/// Where the audit goes when the policy does not say: a per-chat dir on the chat's volume.
pub const DEFAULT_AUDIT_DIR: &str = "/data/.loop-audit";
/// Audit segments older than this many days are deleted, unless the policy says otherwise.
pub const DEFAULT_RETENTION_DAYS: u32 = 30;
/// Past this many bytes of audit in all the oldest segments go, unless the policy says otherwise.
pub const DEFAULT_RETENTION_BYTES: u64 = 64 << 20;
/// The least `max_bytes` a policy may keep.
pub const MIN_RETENTION_BYTES: u64 = 1 << 16;

/// Why a policy (or a manifest's `gate` rules) was refused.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("reading the gate policy {path}: {source}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the gate policy {path} is not valid: {source}")]
    Parse {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("the manifest {path} is not valid JSON5: {source}")]
    Manifest {
        path: String,
        #[source]
        source: manifest::ManifestError,
    },
    #[error("the manifest's gate rules in {path}: {source}")]
    ManifestRules {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("gate policy field {field}: {reason}")]
    Field { field: String, reason: String },
}

/// A rule the manifest crate's checks refuse, named as every other policy field.
impl From<RuleError> for PolicyError {
    fn from(e: RuleError) -> Self {
        PolicyError::Field {
            field: e.field,
            reason: e.reason,
        }
    }
}

fn field_error(field: impl Into<String>, reason: impl Into<String>) -> PolicyError {
    PolicyError::Field {
        field: field.into(),
        reason: reason.into(),
    }
}

/// The `gate` rules of a plugin manifest (JSON5, read as the manifest crate reads every
/// plugin.json: [`manifest::json5_value`], bounded): the object under the top-level `gate`
/// key, or the whole document when it has no such key (a file holding only the rules). Read
/// as the policy file is, refusing keys a rule does not know, and checked.
pub fn rules_from_manifest(text: &str, path: &str) -> Result<GateRules, PolicyError> {
    let doc = manifest::json5_value(text).map_err(|source| PolicyError::Manifest {
        path: path.into(),
        source,
    })?;
    let gate = match doc.get("gate") {
        Some(g) => g.clone(),
        None if doc.get("files").is_some() || doc.get("commands").is_some() => doc,
        None => serde_json::Value::Object(Default::default()),
    };
    let rules: GateRules =
        serde_json::from_value(gate).map_err(|source| PolicyError::ManifestRules {
            path: path.into(),
            source,
        })?;
    rules.validate("gate")?;
    Ok(rules)
}

/// Where the audit lines go.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AuditDestination {
    /// The gate's standard output (`"-"`): the container log.
    Stdout,
    /// A directory of JSONL segments (and `counters.json`).
    Dir(PathBuf),
}

impl Default for AuditDestination {
    fn default() -> Self {
        AuditDestination::Dir(PathBuf::from(DEFAULT_AUDIT_DIR))
    }
}

impl AuditDestination {
    /// `-` for stdout, anything else a directory.
    pub fn parse(s: &str) -> AuditDestination {
        if s == "-" {
            AuditDestination::Stdout
        } else {
            AuditDestination::Dir(PathBuf::from(s))
        }
    }
}

impl Serialize for AuditDestination {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            AuditDestination::Stdout => s.serialize_str("-"),
            AuditDestination::Dir(p) => s.serialize_str(&p.to_string_lossy()),
        }
    }
}

impl<'de> Deserialize<'de> for AuditDestination {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(AuditDestination::parse(&String::deserialize(d)?))
    }
}

/// How long audit segments are kept: older than `max_age_days`, or past `max_bytes` in all
/// (oldest first), they are deleted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Retention {
    #[serde(default = "default_max_age_days")]
    pub max_age_days: u32,
    #[serde(default = "default_max_bytes")]
    pub max_bytes: u64,
}

fn default_max_age_days() -> u32 {
    DEFAULT_RETENTION_DAYS
}

fn default_max_bytes() -> u64 {
    DEFAULT_RETENTION_BYTES
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            max_age_days: default_max_age_days(),
            max_bytes: default_max_bytes(),
        }
    }
}

/// `audit`: destination, retention, and whether the gate keeps the plugin away from an audit
/// dir that lies inside a writable dir (it has to trap every file-changing call for that).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditSettings {
    #[serde(default)]
    pub destination: AuditDestination,
    #[serde(default)]
    pub retention: Retention,
    #[serde(default = "yes")]
    pub protect: bool,
}

fn yes() -> bool {
    true
}

impl Default for AuditSettings {
    fn default() -> Self {
        AuditSettings {
            destination: AuditDestination::default(),
            retention: Retention::default(),
            protect: true,
        }
    }
}

/// The dirs a plugin can write in a pod.
pub fn default_writable() -> Vec<PathBuf> {
    vec![PathBuf::from("/data"), PathBuf::from("/tmp")]
}

/// The dirs nothing may run from in a pod: the writable ones and `/dev/shm`.
pub fn default_no_exec() -> Vec<PathBuf> {
    vec![
        PathBuf::from("/data"),
        PathBuf::from("/tmp"),
        PathBuf::from("/dev/shm"),
    ]
}

/// The gate's policy: labels for the audit, the writable and no-exec dirs, the manifest's
/// rules, and the audit settings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    pub version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plugin: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub chat: Option<String>,
    #[serde(default = "default_writable")]
    pub writable: Vec<PathBuf>,
    #[serde(default = "default_no_exec")]
    pub no_exec: Vec<PathBuf>,
    #[serde(default)]
    pub gate: GateRules,
    #[serde(default)]
    pub audit: AuditSettings,
}

impl Default for Policy {
    fn default() -> Self {
        Policy {
            version: POLICY_VERSION,
            plugin: None,
            chat: None,
            writable: default_writable(),
            no_exec: default_no_exec(),
            gate: GateRules::default(),
            audit: AuditSettings::default(),
        }
    }
}

impl Policy {
    /// The policy for a manifest's `gate` rules with a pod's defaults, validated.
    pub fn from_rules(rules: GateRules) -> Result<Policy, PolicyError> {
        let policy = Policy {
            gate: rules,
            ..Policy::default()
        };
        policy.validate()?;
        Ok(policy)
    }

    /// Parses and validates a policy file's text; `path` names it in errors.
    pub fn from_json(text: &str, path: &str) -> Result<Policy, PolicyError> {
        let policy: Policy = serde_json::from_str(text).map_err(|source| PolicyError::Parse {
            path: path.into(),
            source,
        })?;
        policy.validate()?;
        Ok(policy)
    }

    /// Reads, parses and validates the policy file at `path`.
    pub fn load(path: &Path) -> Result<Policy, PolicyError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Read {
            path: shown.clone(),
            source,
        })?;
        Policy::from_json(&text, &shown)
    }

    /// The policy as the file the init container writes.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a policy always serializes")
    }

    /// The SHA-256 of the policy's canonical JSON, named in every audit line.
    pub fn sha256(&self) -> String {
        let bytes = serde_json::to_vec(self).expect("a policy always serializes");
        let digest = Sha256::digest(&bytes);
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Everything serde does not check.
    pub fn validate(&self) -> Result<(), PolicyError> {
        if self.version != POLICY_VERSION {
            return Err(field_error(
                "version",
                format!(
                    "this gate reads version {POLICY_VERSION}, not {}",
                    self.version
                ),
            ));
        }
        for (name, dirs) in [("writable", &self.writable), ("no_exec", &self.no_exec)] {
            for (i, d) in dirs.iter().enumerate() {
                let f = format!("{name}[{i}]");
                if !d.is_absolute() {
                    return Err(field_error(
                        f,
                        format!("{} must be an absolute path", d.display()),
                    ));
                }
                if d == Path::new("/") {
                    return Err(field_error(f, "must not be / (the whole filesystem)"));
                }
            }
        }
        if let AuditDestination::Dir(d) = &self.audit.destination
            && !d.is_absolute()
        {
            return Err(field_error(
                "audit.destination",
                format!("{} must be an absolute dir or - for stdout", d.display()),
            ));
        }
        if self.audit.retention.max_age_days == 0 {
            return Err(field_error(
                "audit.retention.max_age_days",
                "must be at least 1",
            ));
        }
        if self.audit.retention.max_bytes < MIN_RETENTION_BYTES {
            return Err(field_error(
                "audit.retention.max_bytes",
                format!("must be at least {MIN_RETENTION_BYTES}"),
            ));
        }
        Ok(self.gate.validate("gate")?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses_and_round_trips() {
        let text = r#"{
          "version": 1, "plugin": "echo", "chat": "team-a/general",
          "writable": ["/data", "/tmp"], "no_exec": ["/data", "/tmp", "/dev/shm"],
          "gate": {
            "files": [{ "paths": ["/data/cache/**"], "operations": ["delete"], "decision": "deny" }],
            "commands": [{ "commands": ["curl", "wget"], "decision": "deny" }]
          },
          "audit": { "destination": "/data/.loop-audit", "retention": { "max_age_days": 30, "max_bytes": 67108864 }, "protect": true }
        }"#;
        let p = Policy::from_json(text, "policy.json").unwrap();
        assert_eq!(p.gate.files[0].operations, vec![Operation::Delete]);
        assert_eq!(p.gate.commands[0].decision, Decision::Deny);
        assert_eq!(Policy::from_json(&p.to_json(), "again").unwrap(), p);
        assert_eq!(p.sha256().len(), 64);
    }

    #[test]
    fn defaults_are_a_pods() {
        let p = Policy::from_json(r#"{"version": 1}"#, "p").unwrap();
        assert_eq!(p, Policy::default());
        assert_eq!(
            p.writable,
            vec![PathBuf::from("/data"), PathBuf::from("/tmp")]
        );
        assert!(p.no_exec.contains(&PathBuf::from("/dev/shm")));
        assert_eq!(
            p.audit.destination,
            AuditDestination::Dir(DEFAULT_AUDIT_DIR.into())
        );
    }

    #[test]
    fn approve_is_refused_by_the_loader() {
        let text =
            r#"{"version":1,"gate":{"commands":[{"commands":["curl"],"decision":"approve"}]}}"#;
        let err = Policy::from_json(text, "p").unwrap_err().to_string();
        assert!(err.contains("approve is refused"), "{err}");
        assert!(err.contains("line 1"), "{err}");
        let text = r#"{"version":1,"gate":{"files":[{"paths":["/data/**"],"decision":"ask"}]}}"#;
        let err = Policy::from_json(text, "p").unwrap_err().to_string();
        assert!(err.contains("allow or deny"), "{err}");
    }

    #[test]
    fn bad_fields_are_named() {
        let cases = [
            (r#"{"version":2}"#, "version"),
            (r#"{"version":1,"writable":["data"]}"#, "writable[0]"),
            (r#"{"version":1,"no_exec":["/"]}"#, "no_exec[0]"),
            (
                r#"{"version":1,"gate":{"files":[{"paths":[],"decision":"deny"}]}}"#,
                "gate.files[0].paths",
            ),
            (
                r#"{"version":1,"gate":{"files":[{"paths":["cache/**"],"decision":"deny"}]}}"#,
                "gate.files[0].paths[0]",
            ),
            (
                r#"{"version":1,"gate":{"files":[{"paths":["/a/[b"],"decision":"deny"}]}}"#,
                "gate.files[0].paths[0]",
            ),
            (
                r#"{"version":1,"gate":{"commands":[{"commands":[""],"decision":"deny"}]}}"#,
                "gate.commands[0].commands[0]",
            ),
            (
                r#"{"version":1,"gate":{"commands":[{"commands":["bin/x"],"decision":"deny"}]}}"#,
                "gate.commands[0].commands[0]",
            ),
            (
                r#"{"version":1,"audit":{"destination":"rel"}}"#,
                "audit.destination",
            ),
            (
                r#"{"version":1,"audit":{"retention":{"max_age_days":0}}}"#,
                "audit.retention.max_age_days",
            ),
        ];
        for (text, field) in cases {
            let err = Policy::from_json(text, "p").unwrap_err().to_string();
            assert!(err.contains(field), "{text}: {err}");
        }
    }

    #[test]
    fn unknown_fields_and_operations_are_refused() {
        for text in [
            r#"{"version":1,"writeable":["/data"]}"#,
            r#"{"version":1,"gate":{"files":[{"paths":["/data/**"],"operations":["remove"],"decision":"deny"}]}}"#,
            r#"{"version":1,"gate":{"files":[{"path":["/data/**"],"decision":"deny"}]}}"#,
        ] {
            assert!(Policy::from_json(text, "p").is_err(), "{text}");
        }
    }

    #[test]
    fn manifest_rules_come_from_a_json5_plugin_manifest() {
        let manifest = r#"{
          name: "cogtest", // JSON5, as plugin.json is
          "gate": {
            "files": [{ "paths": ["/data/cache/**"], "operations": ["delete"], "decision": "deny" }],
            "commands": [{ "commands": ["curl", "wget"], "decision": "deny" }],
          },
        }"#;
        let rules = rules_from_manifest(manifest, "plugin.json").unwrap();
        assert_eq!(rules.files.len(), 1);
        assert_eq!(rules.commands[0].commands, vec!["curl", "wget"]);
        let only = r#"{ commands: [{ commands: ["git"], decision: "allow" }] }"#;
        assert_eq!(rules_from_manifest(only, "g").unwrap().commands.len(), 1);
        let none = r#"{ name: "x" }"#;
        assert_eq!(
            rules_from_manifest(none, "g").unwrap(),
            GateRules::default()
        );
        let bad = r#"{ gate: { commands: [{ commands: ["curl"], decision: "approve" }] } }"#;
        let err = rules_from_manifest(bad, "plugin.json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("approve is refused"), "{err}");
        let policy = Policy::from_rules(rules).unwrap();
        assert_eq!(policy.writable, default_writable());
    }

    #[test]
    fn the_manifest_is_read_as_every_plugin_json_is() {
        // The manifest crate's one reader: bounded in size, and a syntax error placed.
        let huge = format!(
            "{{ pad: \"{}\" }}",
            "x".repeat(manifest::limits::MAX_TEXT_BYTES)
        );
        let err = rules_from_manifest(&huge, "plugin.json").unwrap_err();
        assert!(matches!(err, PolicyError::Manifest { .. }), "{err}");
        assert!(err.to_string().contains("bytes"), "{err}");
        let err = rules_from_manifest("{\n  gate: ,\n}", "plugin.json")
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 2"), "{err}");
    }
}
