//! The settings a plugin sees: the manifest's default, then the global config's value, then the
//! project's, setting by setting. A value for a setting the manifest doesn't declare, or one its
//! schema refuses, is left out (the value below applies) and reported.
//!
//! A project's settings apply without its owner trusting the config (they only tune the
//! plugin), so callers pass the project's current config. A `null` value counts as unset.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::config::ConfigLevel;
use crate::config::PluginConfig;
use crate::manifest::{Manifest, json_schema};
use crate::resources::RefusedSetting;

/// The values a plugin sees and the values left out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ResolvedSettings {
    /// Each setting that has a value, by name.
    pub values: BTreeMap<String, Value>,
    pub left_out: Vec<LeftOut>,
}

/// A configured value that doesn't apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeftOut {
    pub level: ConfigLevel,
    pub setting: String,
    /// The value as configured.
    pub value: Value,
    pub reason: LeftOutReason,
}

impl LeftOut {
    /// Why it is left out, in words.
    pub fn why(&self) -> String {
        match &self.reason {
            LeftOutReason::Undeclared => "the manifest declares no such setting".into(),
            LeftOutReason::Refused(why) => format!("its schema refuses it: {why}"),
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
}

impl fmt::Display for LeftOut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the {} value of setting \"{}\" is left out: {}",
            self.level,
            self.setting,
            self.why()
        )
    }
}

/// Layers the manifest's defaults, the global values and the project's values.
pub fn resolve_settings(
    manifest: &Manifest,
    global: Option<&PluginConfig>,
    project: Option<&PluginConfig>,
) -> ResolvedSettings {
    let mut out = ResolvedSettings::default();
    for (name, schema) in manifest.setting_schemas() {
        if let Some(default) = schema.get("default") {
            out.values.insert(name.to_string(), default.clone());
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
            let left_out = |reason| LeftOut {
                level,
                setting: name.clone(),
                value: value.clone(),
                reason,
            };
            let Some(validator) = manifest.setting_validator(name) else {
                out.left_out.push(left_out(LeftOutReason::Undeclared));
                continue;
            };
            let checked = match validator {
                Ok(v) => json_schema::check(v, value),
                Err(e) => Err(format!(
                    "the manifest's schema for it does not compile: {e}"
                )),
            };
            match checked {
                Ok(()) => {
                    out.values.insert(name.clone(), value.clone());
                }
                Err(why) => out.left_out.push(left_out(LeftOutReason::Refused(why))),
            }
        }
    }
    out
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
    }

    #[test]
    fn a_refused_value_is_left_out_and_the_value_below_applies() {
        let global = settings(json!({ "count": 5 }));
        let project = settings(json!({ "count": 11, "mode": "medium" }));
        let r = resolve_settings(&manifest(), Some(&global), Some(&project));
        assert_eq!(r.values["count"], 5);
        assert!(!r.values.contains_key("mode"));
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
            ("count", ConfigLevel::Project, &json!(11))
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
                value: json!("red"),
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
}
