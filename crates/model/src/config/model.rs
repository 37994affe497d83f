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
    /// Where each secret setting's value is (a setting the manifest marks `"secret": true`),
    /// by setting name: a key of a Secret, never the value itself. In a Project, the Secret is
    /// in the Project's namespace and the reference counts once the owner trusts the config;
    /// in HostConfig, the Secret is in the release namespace.
    #[serde(
        default,
        rename = "secretSettings",
        skip_serializing_if = "BTreeMap::is_empty"
    )]
    pub secret_settings: BTreeMap<String, SecretSettingSource>,
    /// The risk profile the plugin's agents get (one of HostConfig's `riskProfiles`); in a
    /// Project it counts once the owner trusts the config, as `enabled` does.
    #[serde(
        default,
        rename = "riskProfile",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(length(min = 1, max = 63))]
    pub risk_profile: Option<String>,
}

/// `plugins.<id>.secretSettings.<setting>`: where a secret setting's value comes from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretSettingSource {
    pub secret_key_ref: SecretKeyRef,
}

/// A key of a Secret. It has no namespace field, so a Project can name only a Secret of its
/// own namespace (and HostConfig only one of the release namespace).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct SecretKeyRef {
    /// The Secret's name (a DNS subdomain, at most 253 characters, as Kubernetes names it).
    #[schemars(
        regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"),
        length(min = 1, max = 253)
    )]
    pub name: String,
    /// The key of its `data` holding the value (at most 253 of `-._a-zA-Z0-9`, as Kubernetes
    /// allows).
    #[schemars(regex(pattern = r"^[-._a-zA-Z0-9]+$"), length(min = 1, max = 253))]
    pub key: String,
}

impl SecretSettingSource {
    /// The reference to `key` of Secret `name`.
    pub fn key_of(name: &str, key: &str) -> Self {
        Self {
            secret_key_ref: SecretKeyRef {
                name: name.into(),
                key: key.into(),
            },
        }
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::config_hash;

    #[test]
    fn secret_settings_are_references_by_setting_name() {
        let entry = json!({
            "enabled": true,
            "secretSettings": { "api_token": { "secretKeyRef": { "name": "creds", "key": "token" } } },
        });
        let config: PluginConfig = serde_json::from_value(entry.clone()).unwrap();
        assert_eq!(
            config.secret_settings["api_token"],
            SecretSettingSource::key_of("creds", "token")
        );
        assert_eq!(serde_json::to_value(&config).unwrap(), entry);
        // An entry without any keeps the hash it had before the field existed.
        let plain: PluginsConfig =
            serde_json::from_value(json!({ "echo": { "enabled": true } })).unwrap();
        assert!(
            !serde_json::to_string(&plain)
                .unwrap()
                .contains("secretSettings")
        );
        assert_eq!(
            config_hash(&plain),
            crate::config::hash_json(&json!({ "echo": { "enabled": true } }))
        );
    }
}
