//! A project's trust: its config counts for `enabled` and `schedules` once the owner trusted it;
//! until then the last approved version does.
//!
//! A config version is named by `config_hash`: `sha256:<hex>` of its canonical JSON (object
//! keys sorted by their UTF-8 bytes, no whitespace, integral numbers written as integers so
//! that `1.0` and `1` hash alike after a trip through the API server).

use serde_json::{Number, Value};
use sha2::{Digest, Sha256};

use super::model::{PluginConfig, PluginsConfig};
use crate::resources::ProjectSpec;

/// `sha256:<hex>` of the canonical JSON of a project's `plugins`.
pub fn config_hash(plugins: &PluginsConfig) -> String {
    hash_json(&serde_json::to_value(plugins).unwrap_or(Value::Null))
}

/// `sha256:<hex>` of the canonical JSON of any value.
pub fn hash_json(value: &Value) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical_json(value).as_bytes()))
    )
}

/// The canonical JSON text of a value: sorted keys, no whitespace.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&canonical_number(n)),
        Value::String(s) => out.push_str(&Value::String(s.clone()).to_string()),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
    }
}

fn canonical_number(n: &Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    match n.as_f64() {
        // Integral floats within the exact range of f64 are written as integers.
        Some(f) if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => {
            format!("{}", f as i64)
        }
        _ => n.to_string(),
    }
}

/// Where a project stands with its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrustState {
    /// The owner trusted the current config.
    Trusted,
    /// The current config changed since; the last approved version applies.
    LastApproved,
    /// No version was ever approved; the project's values don't apply.
    NeverTrusted,
    /// The recorded approved config does not match its own hash, so it is not used.
    ApprovedHashMismatch { stated: String, actual: String },
}

/// Which of a project's configs counts for `enabled` and `schedules`.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovedConfig<'a> {
    /// The hash of the current config (for `status.configHash`).
    pub current_hash: String,
    pub state: TrustState,
    /// The config that counts: the current one when trusted, the last approved one otherwise,
    /// none when there is none to trust.
    pub approved: Option<&'a PluginsConfig>,
}

/// The config of a project that has none approved.
static NO_PLUGINS: PluginsConfig = PluginsConfig::new();

impl<'a> ApprovedConfig<'a> {
    /// Whether the owner trusted the current config.
    pub fn is_trusted(&self) -> bool {
        self.state == TrustState::Trusted
    }

    /// The config that counts; empty when none was approved.
    pub fn plugins(&self) -> &'a PluginsConfig {
        self.approved.unwrap_or(&NO_PLUGINS)
    }

    /// The approved entry of one plugin.
    pub fn plugin(&self, id: &str) -> Option<&'a PluginConfig> {
        self.plugins().get(id)
    }
}

/// Whether the project's current config is trusted, and which config counts.
pub fn approved_plugins(project: &ProjectSpec) -> ApprovedConfig<'_> {
    let current_hash = config_hash(&project.plugins);
    let (state, approved) = match &project.trusted {
        None => (TrustState::NeverTrusted, None),
        Some(t) if t.hash == current_hash => (TrustState::Trusted, Some(&project.plugins)),
        Some(t) => {
            let actual = config_hash(&t.plugins);
            if actual == t.hash {
                (TrustState::LastApproved, Some(&t.plugins))
            } else {
                (
                    TrustState::ApprovedHashMismatch {
                        stated: t.hash.clone(),
                        actual,
                    },
                    None,
                )
            }
        }
    };
    ApprovedConfig {
        current_hash,
        state,
        approved,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::fixtures::{config, project, trusted};

    #[test]
    fn canonical_json_sorts_keys_without_whitespace() {
        let v = json!({ "b": [1, { "z": true, "a": null }], "a": "x\"y", "é": 1.5, "c": 2.0 });
        assert_eq!(
            canonical_json(&v),
            r#"{"a":"x\"y","b":[1,{"a":null,"z":true}],"c":2,"é":1.5}"#
        );
    }

    #[test]
    fn the_hash_ignores_key_order_and_spacing() {
        let a: PluginsConfig =
            serde_json::from_str(r#"{"p":{"enabled":true,"settings":{"b":1,"a":2}}}"#).unwrap();
        let b: PluginsConfig = serde_json::from_str(
            r#"{ "p" : { "settings" : { "a" : 2.0 , "b" : 1 } , "enabled" : true } }"#,
        )
        .unwrap();
        assert_eq!(config_hash(&a), config_hash(&b));
        assert!(config_hash(&a).starts_with("sha256:"));
        assert_eq!(config_hash(&a).len(), 7 + 64);
        let c = config(&[("p", json!({ "enabled": false }))]);
        assert_ne!(config_hash(&a), config_hash(&c));
    }

    #[test]
    fn a_trusted_config_counts() {
        let current = config(&[("p", json!({ "enabled": true }))]);
        let spec = project(current.clone(), Some(trusted(&current)));
        let a = approved_plugins(&spec);
        assert!(a.is_trusted());
        assert_eq!(a.approved, Some(&current));
        assert_eq!(a.current_hash, config_hash(&current));
        assert_eq!(a.plugin("p").unwrap().enabled, Some(true));
    }

    #[test]
    fn an_untrusted_config_falls_back_to_the_last_approved() {
        let old = config(&[("p", json!({ "enabled": false }))]);
        let current = config(&[("p", json!({ "enabled": true }))]);
        let spec = project(current, Some(trusted(&old)));
        let a = approved_plugins(&spec);
        assert_eq!(a.state, TrustState::LastApproved);
        assert!(!a.is_trusted());
        assert_eq!(a.approved, Some(&old));
    }

    #[test]
    fn a_never_trusted_config_has_none() {
        let spec = project(config(&[("p", json!({ "enabled": true }))]), None);
        let a = approved_plugins(&spec);
        assert_eq!(a.state, TrustState::NeverTrusted);
        assert_eq!(a.approved, None);
        assert!(a.plugins().is_empty());
        assert!(a.plugin("p").is_none());
    }

    #[test]
    fn an_approved_config_that_fails_its_hash_is_not_used() {
        let old = config(&[("p", json!({ "enabled": false }))]);
        let mut t = trusted(&old);
        t.plugins = config(&[("p", json!({ "enabled": true }))]);
        let spec = project(config(&[]), Some(t));
        let a = approved_plugins(&spec);
        assert!(matches!(a.state, TrustState::ApprovedHashMismatch { .. }));
        assert_eq!(a.approved, None);
    }
}
