//! The settings a plugin sees: the manifest's default, then the global config's value, then the
//! project's, setting by setting. A value for a setting the manifest doesn't declare, or one its
//! schema refuses, is left out (the value below applies) and reported.
//!
//! A project's settings apply without its owner trusting the config (they only tune the
//! plugin), so callers pass the project's current config. A `null` value counts as unset.
//!
//! Secret settings (`"secret": true` in the manifest, issue 30) never take a value from
//! `settings`: an inline value for one is left out, and reported without the value. Their
//! values are in Secrets, which `secretSettings` references setting by setting, the project's
//! over the global config's ([`secret_source`]). A reference grants the plugin a Secret's
//! value, so unlike a setting's value it counts from the project's config only once the owner
//! trusts it: callers of [`secret_source`] pass the approved config
//! ([`crate::resolve::approved_plugins`]). A reference to a setting the manifest does not
//! declare, or does not mark secret, is left out and reported by [`resolve_settings`], which
//! checks the project's current config, as for values.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::config::ConfigLevel;
use crate::config::{PluginConfig, SecretKeyRef, SecretSettingSource};
use crate::manifest::{Manifest, json_schema};
use crate::resources::{RefusedSetting, SettingSource};

/// The values a plugin sees and the values left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResolvedSettings {
    /// Each setting that has a value, by name; never a secret setting.
    pub values: BTreeMap<String, Value>,
    /// Where each of `values` came from: the last level whose value was kept.
    pub sources: BTreeMap<String, SettingSource>,
    pub left_out: Vec<LeftOut>,
}

/// A configured value, or Secret reference, that doesn't apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftOut {
    pub level: ConfigLevel,
    pub setting: String,
    /// Where in the entry it was: `settings` or `secretSettings`.
    pub field: ConfigField,
    /// The value as configured (a reference as JSON, for `secretSettings`); `None` for a
    /// secret setting's inline value, which is never kept nor shown.
    pub value: Option<Value>,
    pub reason: LeftOutReason,
}

/// The field of a plugin's config entry a left-out entry was in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigField {
    /// `settings`: values.
    Settings,
    /// `secretSettings`: Secret references.
    SecretSettings,
}

impl LeftOut {
    /// Why it is left out, in words. Never the value: a secret setting's would be a credential.
    pub fn why(&self) -> String {
        match &self.reason {
            LeftOutReason::Undeclared => "the manifest declares no such setting".into(),
            LeftOutReason::Refused(why) => format!("its schema refuses it: {why}"),
            LeftOutReason::SecretInline => "the setting is secret: its value comes only from a \
                                            Secret reference (secretSettings), never inline; \
                                            the value is not shown"
                .into(),
            LeftOutReason::NotSecret => "the manifest does not mark the setting secret: set \
                                         its value in settings, not a Secret reference"
                .into(),
        }
    }

    /// As a status shows it.
    pub fn to_refused(&self) -> RefusedSetting {
        RefusedSetting {
            setting: self.setting.clone(),
            source: self.level,
            value: self.value.clone(),
            reason: self.why(),
        }
    }
}

/// Why a value was left out.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeftOutReason {
    /// The manifest declares no such setting.
    Undeclared,
    /// The setting's schema refuses the value.
    Refused(String),
    /// A value in `settings` for a secret setting.
    SecretInline,
    /// A Secret reference for a setting the manifest does not mark secret.
    NotSecret,
}

impl fmt::Display for LeftOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.field {
            ConfigField::Settings => "value",
            ConfigField::SecretSettings => "Secret reference",
        };
        write!(
            f,
            "the {} {what} of setting \"{}\" is left out: {}",
            self.level,
            self.setting,
            self.why()
        )
    }
}

/// Layers the manifest's defaults, the global values and the project's values, and checks
/// both configs' Secret references.
pub fn resolve_settings(
    manifest: &Manifest,
    global: Option<&PluginConfig>,
    project: Option<&PluginConfig>,
) -> ResolvedSettings {
    let mut out = ResolvedSettings::default();
    for (name, schema) in manifest.setting_schemas() {
        if let Some(default) = schema.get("default") {
            out.values.insert(name.to_string(), default.clone());
            out.sources.insert(name.to_string(), SettingSource::Default);
        }
    }
    for (level, config) in [
        (ConfigLevel::Global, global),
        (ConfigLevel::Project, project),
    ] {
        for (name, value) in config.into_iter().flat_map(|c| &c.settings) {
            if value.is_null() {
                continue;
            }
            let left_out = |reason, value: Option<&Value>| LeftOut {
                level,
                setting: name.clone(),
                field: ConfigField::Settings,
                value: value.cloned(),
                reason,
            };
            let Some(validator) = manifest.setting_validator(name) else {
                out.left_out
                    .push(left_out(LeftOutReason::Undeclared, Some(value)));
                continue;
            };
            // Before the schema: its reasons would quote the value.
            if manifest.is_secret_setting(name) {
                out.left_out
                    .push(left_out(LeftOutReason::SecretInline, None));
                continue;
            }
            let checked = match validator {
                Ok(v) => json_schema::check(v, value),
                Err(e) => Err(format!(
                    "the manifest's schema for it does not compile: {e}"
                )),
            };
            match checked {
                Ok(()) => {
                    out.values.insert(name.clone(), value.clone());
                    out.sources.insert(name.clone(), level.into());
                }
                Err(why) => out
                    .left_out
                    .push(left_out(LeftOutReason::Refused(why), Some(value))),
            }
        }
        for (name, source) in config.into_iter().flat_map(|c| &c.secret_settings) {
            let reason = if manifest.setting_schema(name).is_none() {
                LeftOutReason::Undeclared
            } else if !manifest.is_secret_setting(name) {
                LeftOutReason::NotSecret
            } else {
                continue;
            };
            out.left_out.push(LeftOut {
                level,
                setting: name.clone(),
                field: ConfigField::SecretSettings,
                value: serde_json::to_value(source).ok(),
                reason,
            });
        }
    }
    out
}

/// Where a secret setting's value is for a chat: the Secret reference that applies, and the
/// config it came from (a project's Secret is in the project's namespace, the global config's
/// in the release namespace).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretSource {
    pub level: ConfigLevel,
    pub secret: SecretKeyRef,
}

/// Why a name has no Secret reference to read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NoSecretSource {
    #[error("the manifest declares no setting \"{0}\"")]
    Undeclared(String),
    #[error("setting \"{0}\" is not secret: GET /channel answers its value")]
    NotSecret(String),
    #[error(
        "secret setting \"{0}\" has no Secret reference (secretSettings) in the project's \
         trusted config or the global config"
    )]
    NotSet(String),
}

/// The Secret reference of secret setting `name`: the project's (from its approved config),
/// else the global config's.
pub fn secret_source(
    manifest: &Manifest,
    name: &str,
    global: Option<&PluginConfig>,
    approved_project: Option<&PluginConfig>,
) -> Result<SecretSource, NoSecretSource> {
    if manifest.setting_schema(name).is_none() {
        return Err(NoSecretSource::Undeclared(name.into()));
    }
    if !manifest.is_secret_setting(name) {
        return Err(NoSecretSource::NotSecret(name.into()));
    }
    [
        (ConfigLevel::Project, approved_project),
        (ConfigLevel::Global, global),
    ]
    .into_iter()
    .find_map(|(level, config)| {
        let source: &SecretSettingSource = config?.secret_settings.get(name)?;
        Some(SecretSource {
            level,
            secret: source.secret_key_ref.clone(),
        })
    })
    .ok_or_else(|| NoSecretSource::NotSet(name.into()))
}

/// Every secret setting's Secret reference that applies (for `explain`), by setting name.
pub fn secret_sources(
    manifest: &Manifest,
    global: Option<&PluginConfig>,
    approved_project: Option<&PluginConfig>,
) -> BTreeMap<String, SecretSource> {
    manifest
        .secret_settings()
        .filter_map(|name| {
            let source = secret_source(manifest, name, global, approved_project).ok()?;
            Some((name.to_string(), source))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resolve::fixtures::{entry, manifest};

    fn settings(v: Value) -> PluginConfig {
        entry(json!({ "settings": v }))
    }

    #[test]
    fn each_setting_schema_compiles_once_per_manifest() {
        let m = manifest();
        let first: *const _ = m.setting_validator("count").expect("declared");
        let again: *const _ = m.setting_validator("count").expect("declared");
        assert!(std::ptr::eq(first, again), "compiled twice");
        assert!(m.setting_validator("undeclared").is_none());
        // A copy compiles its own, and compares equal.
        let copy = m.clone();
        assert!(!std::ptr::eq(
            first,
            copy.setting_validator("count").expect("declared")
        ));
        assert_eq!(copy, m);
    }

    #[test]
    fn defaults_apply_when_nothing_is_set() {
        let r = resolve_settings(&manifest(), None, None);
        assert_eq!(
            r.values,
            BTreeMap::from([("count".into(), json!(3)), ("sync".into(), json!(false))])
        );
        assert!(r.left_out.is_empty());
    }

    #[test]
    fn global_then_project_setting_by_setting() {
        let global = settings(json!({ "count": 5, "mode": "fast" }));
        let project = settings(json!({ "count": 8 }));
        let r = resolve_settings(&manifest(), Some(&global), Some(&project));
        assert_eq!(r.values["count"], 8);
        assert_eq!(r.values["mode"], "fast");
        assert_eq!(r.values["sync"], false);
        assert!(r.left_out.is_empty());
        assert_eq!(
            r.sources,
            BTreeMap::from([
                ("count".into(), SettingSource::Project),
                ("mode".into(), SettingSource::Global),
                ("sync".into(), SettingSource::Default),
            ])
        );
    }

    #[test]
    fn a_refused_value_is_left_out_and_the_value_below_applies() {
        let global = settings(json!({ "count": 5 }));
        let project = settings(json!({ "count": 11, "mode": "medium" }));
        let r = resolve_settings(&manifest(), Some(&global), Some(&project));
        assert_eq!(r.values["count"], 5);
        assert!(!r.values.contains_key("mode"));
        // The refused project value is not where the value came from.
        assert_eq!(r.sources["count"], SettingSource::Global);
        assert!(!r.sources.contains_key("mode"));
        assert_eq!(r.left_out.len(), 2);
        let count = r.left_out.iter().find(|l| l.setting == "count").unwrap();
        assert_eq!(count.level, ConfigLevel::Project);
        assert!(
            matches!(&count.reason, LeftOutReason::Refused(why) if why.contains("10")),
            "{count:?}"
        );
        assert!(
            count
                .to_string()
                .starts_with("the project value of setting \"count\" is left out")
        );
        let shown = count.to_refused();
        assert_eq!(
            (shown.setting.as_str(), shown.source, &shown.value),
            ("count", ConfigLevel::Project, &Some(json!(11)))
        );
        assert!(
            shown.reason.starts_with("its schema refuses it: "),
            "{shown:?}"
        );
        // A refused global value leaves the default.
        let r = resolve_settings(
            &manifest(),
            Some(&settings(json!({ "count": "many" }))),
            None,
        );
        assert_eq!(r.values["count"], 3);
        assert_eq!(r.sources["count"], SettingSource::Default);
        assert_eq!(r.left_out[0].level, ConfigLevel::Global);
    }

    #[test]
    fn an_undeclared_setting_is_left_out() {
        let project = settings(json!({ "colour": "red" }));
        let r = resolve_settings(&manifest(), None, Some(&project));
        assert!(!r.values.contains_key("colour"));
        assert_eq!(
            r.left_out,
            vec![LeftOut {
                level: ConfigLevel::Project,
                setting: "colour".into(),
                field: ConfigField::Settings,
                value: Some(json!("red")),
                reason: LeftOutReason::Undeclared,
            }]
        );
    }

    #[test]
    fn null_unsets() {
        let global = settings(json!({ "count": 5 }));
        let project = settings(json!({ "count": null }));
        let r = resolve_settings(&manifest(), Some(&global), Some(&project));
        assert_eq!(r.values["count"], 5);
        assert!(r.left_out.is_empty());
    }

    /// The fixture's manifest with a secret setting `token` (and `secrets.read`).
    fn with_secret() -> Manifest {
        let mut m = serde_json::to_value(manifest()).unwrap();
        m["capabilities"] = json!(["schedule", "secrets.read"]);
        m["settings"]["token"] = json!({ "type": "string", "pattern": "^x", "secret": true });
        crate::manifest::from_value(&m).expect("a valid manifest")
    }

    fn refs(v: Value) -> PluginConfig {
        entry(json!({ "secretSettings": v }))
    }

    fn key_of(name: &str, key: &str) -> Value {
        json!({ "secretKeyRef": { "name": name, "key": key } })
    }

    #[test]
    fn a_secret_settings_inline_value_is_left_out_without_being_shown() {
        let m = with_secret();
        let secret = "hunter2-do-not-show";
        let global = settings(json!({ "token": secret }));
        let project = settings(json!({ "token": secret, "count": 4 }));
        let r = resolve_settings(&m, Some(&global), Some(&project));
        assert!(!r.values.contains_key("token"), "{r:?}");
        assert_eq!(r.values["count"], 4);
        assert_eq!(r.left_out.len(), 2);
        for (left, level) in r
            .left_out
            .iter()
            .zip([ConfigLevel::Global, ConfigLevel::Project])
        {
            assert_eq!(
                (
                    left.level,
                    left.setting.as_str(),
                    left.field,
                    &left.reason,
                    &left.value
                ),
                (
                    level,
                    "token",
                    ConfigField::Settings,
                    &LeftOutReason::SecretInline,
                    &None
                )
            );
            // Its schema would refuse it too ("^x"), quoting it: the secret reason comes first.
            let shown = format!("{left} {:?}", left.to_refused());
            assert!(!shown.contains(secret), "{shown}");
            assert!(shown.contains("the setting is secret"), "{shown}");
            assert_eq!(left.to_refused().value, None);
        }
        // null still unsets, and says nothing.
        let r = resolve_settings(&m, None, Some(&settings(json!({ "token": null }))));
        assert!(r.left_out.is_empty());
    }

    #[test]
    fn a_secret_reference_to_a_setting_that_is_not_secret_is_left_out() {
        let m = with_secret();
        let project = refs(json!({
            "count": key_of("creds", "count"),
            "colour": key_of("creds", "colour"),
            "token": key_of("creds", "token"),
        }));
        let r = resolve_settings(&m, None, Some(&project));
        let left: Vec<(&str, ConfigField, &LeftOutReason)> = r
            .left_out
            .iter()
            .map(|l| (l.setting.as_str(), l.field, &l.reason))
            .collect();
        assert_eq!(
            left,
            [
                (
                    "colour",
                    ConfigField::SecretSettings,
                    &LeftOutReason::Undeclared
                ),
                (
                    "count",
                    ConfigField::SecretSettings,
                    &LeftOutReason::NotSecret
                ),
            ]
        );
        let count = &r.left_out[1];
        assert_eq!(count.value, Some(key_of("creds", "count")));
        assert!(
            count
                .to_string()
                .starts_with("the project Secret reference of setting \"count\" is left out: the manifest does not mark"),
            "{count}"
        );
        // A reference is never a value the plugin sees.
        assert!(!r.values.contains_key("token"));
    }

    #[test]
    fn the_projects_secret_reference_applies_over_the_global_one_setting_by_setting() {
        let m = with_secret();
        let global = refs(json!({ "token": key_of("host-creds", "token") }));
        let project = refs(json!({ "token": key_of("team-creds", "api") }));
        let source =
            |g: Option<&PluginConfig>, p: Option<&PluginConfig>| secret_source(&m, "token", g, p);
        assert_eq!(
            source(Some(&global), Some(&project)),
            Ok(SecretSource {
                level: ConfigLevel::Project,
                secret: SecretKeyRef {
                    name: "team-creds".into(),
                    key: "api".into()
                },
            })
        );
        assert_eq!(
            source(Some(&global), None),
            Ok(SecretSource {
                level: ConfigLevel::Global,
                secret: SecretKeyRef {
                    name: "host-creds".into(),
                    key: "token".into()
                },
            })
        );
        // A project entry without a reference of its own leaves the global one.
        let other = settings(json!({ "count": 2 }));
        assert_eq!(
            source(Some(&global), Some(&other)).unwrap().level,
            ConfigLevel::Global
        );
        assert_eq!(
            source(None, Some(&other)),
            Err(NoSecretSource::NotSet("token".into()))
        );
        assert_eq!(
            secret_sources(&m, Some(&global), Some(&project))
                .keys()
                .collect::<Vec<_>>(),
            ["token"]
        );
        assert!(secret_sources(&m, None, None).is_empty());
    }

    #[test]
    fn only_a_declared_secret_setting_has_a_secret_source() {
        let m = with_secret();
        let project = refs(json!({ "count": key_of("creds", "count") }));
        assert_eq!(
            secret_source(&m, "count", None, Some(&project)),
            Err(NoSecretSource::NotSecret("count".into()))
        );
        assert_eq!(
            secret_source(&m, "colour", None, Some(&project)),
            Err(NoSecretSource::Undeclared("colour".into()))
        );
        assert!(
            NoSecretSource::NotSet("token".into())
                .to_string()
                .contains("trusted config")
        );
    }
}
