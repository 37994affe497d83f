//! A person's edit of one plugin's entry in the global or a project's config (the reference's
//! Settings → Plugins): what the edit says, the entry it makes, whether the manifest takes it,
//! and the merge patch that writes exactly it. Pure; the host API writes the patch with the
//! person's own token, so Kubernetes RBAC decides who may.
//!
//! Each field the edit gives replaces the entry's; in `settings`, `schedules` and
//! `secretSettings`, a `null` takes that one name out (an emptied field unsets), and names the
//! edit does not give are kept as they are.

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer};
use serde_json::{Map, Value, json};

use crate::config::{ConfigLevel, PluginConfig, ScheduleEntry, SecretSettingSource};
use crate::manifest::Manifest;
use crate::resolve::schedules::{ScheduleProblemKind, resolve_schedules};
use crate::resolve::settings::{ConfigField, resolve_settings};

/// The most names one edit may give in each of its maps.
pub const MAX_NAMES: usize = 256;

/// One plugin's entry, as a person edits it.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EntryEdit {
    /// `Some(None)` (`"enabled": null`) takes `enabled` out: the level below decides.
    #[serde(default, deserialize_with = "present")]
    pub enabled: Option<Option<bool>>,
    #[serde(default)]
    pub settings: BTreeMap<String, Value>,
    #[serde(default)]
    pub schedules: BTreeMap<String, Option<ScheduleEntry>>,
    #[serde(default)]
    pub secret_settings: BTreeMap<String, Option<SecretSettingSource>>,
}

/// A field given, `null` included (serde's default for a missing one stays `None`).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Option<bool>>, D::Error> {
    Option::<bool>::deserialize(d).map(Some)
}

impl EntryEdit {
    /// Whether the edit changes nothing.
    pub fn is_empty(&self) -> bool {
        self.enabled.is_none()
            && self.settings.is_empty()
            && self.schedules.is_empty()
            && self.secret_settings.is_empty()
    }
}

/// The entry `edit` makes of `entry`.
pub fn apply(entry: Option<&PluginConfig>, edit: &EntryEdit) -> PluginConfig {
    let mut out = entry.cloned().unwrap_or_default();
    if let Some(enabled) = edit.enabled {
        out.enabled = enabled;
    }
    for (name, value) in &edit.settings {
        if value.is_null() {
            out.settings.remove(name);
        } else {
            out.settings.insert(name.clone(), value.clone());
        }
    }
    for (action, schedule) in &edit.schedules {
        match schedule {
            Some(s) => out.schedules.insert(action.clone(), s.clone()),
            None => out.schedules.remove(action),
        };
    }
    for (name, source) in &edit.secret_settings {
        match source {
            Some(s) => out.secret_settings.insert(name.clone(), s.clone()),
            None => out.secret_settings.remove(name),
        };
    }
    out
}

/// Why `manifest`'s plugin does not take `edit` at `level`, each reason naming its field
/// (`settings.verbose`, `schedules.tick.schedule`); empty when it does. Only what the edit
/// gives is judged: a value set earlier that no longer applies is the controller's to report.
pub fn refusals(manifest: &Manifest, level: ConfigLevel, edit: &EntryEdit) -> Vec<String> {
    let mut out = Vec::new();
    for (what, n) in [
        ("settings", edit.settings.len()),
        ("schedules", edit.schedules.len()),
        ("secretSettings", edit.secret_settings.len()),
    ] {
        if n > MAX_NAMES {
            out.push(format!(
                "{what}: at most {MAX_NAMES} names in one edit, not {n}"
            ));
        }
    }
    if !out.is_empty() {
        return out;
    }
    // The values and references given, judged as the settings a plugin sees are.
    let given = PluginConfig {
        settings: edit
            .settings
            .iter()
            .filter(|(_, v)| !v.is_null())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        secret_settings: edit
            .secret_settings
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.clone()?)))
            .collect(),
        ..Default::default()
    };
    let (global, project) = match level {
        ConfigLevel::Global => (Some(&given), None),
        ConfigLevel::Project => (None, Some(&given)),
    };
    for left in resolve_settings(manifest, global, project).left_out {
        let field = match left.field {
            ConfigField::Settings => "settings",
            ConfigField::SecretSettings => "secretSettings",
        };
        out.push(format!("{field}.{}: {}", left.setting, left.why()));
    }
    let schedules = PluginConfig {
        schedules: edit
            .schedules
            .iter()
            .map(|(k, v)| (k.clone(), v.clone().unwrap_or_default()))
            .collect(),
        ..Default::default()
    };
    let (global, project) = match level {
        ConfigLevel::Global => (Some(&schedules), None),
        ConfigLevel::Project => (None, Some(&schedules)),
    };
    for problem in resolve_schedules(manifest, global, project).problems {
        // A removal is judged only for its action's name.
        let removed = edit.schedules.get(&problem.action) == Some(&None);
        if removed && problem.kind != ScheduleProblemKind::UnknownAction {
            continue;
        }
        let why = match &problem.kind {
            ScheduleProblemKind::UnknownAction => {
                format!("the manifest has no action {:?}", problem.action)
            }
            ScheduleProblemKind::NoDefault { missing } => {
                format!("the action has no default_schedule, so the entry must set {missing}")
            }
            ScheduleProblemKind::Invalid(e) => e.to_string(),
        };
        out.push(format!("schedules.{}: {why}", problem.action));
    }
    out
}

/// The JSON merge patch of the entry that writes exactly `edit`: a `null` takes a name out.
pub fn entry_patch(edit: &EntryEdit) -> Value {
    let mut patch = Map::new();
    if let Some(enabled) = edit.enabled {
        patch.insert("enabled".into(), json!(enabled));
    }
    let map = |m: BTreeMap<String, Value>| Value::Object(m.into_iter().collect());
    if !edit.settings.is_empty() {
        patch.insert("settings".into(), map(edit.settings.clone()));
    }
    if !edit.schedules.is_empty() {
        let schedules = edit
            .schedules
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    serde_json::to_value(v).expect("a schedule serializes"),
                )
            })
            .collect();
        patch.insert("schedules".into(), map(schedules));
    }
    if !edit.secret_settings.is_empty() {
        let sources = edit
            .secret_settings
            .iter()
            .map(|(k, v)| {
                (
                    k.clone(),
                    serde_json::to_value(v).expect("a reference serializes"),
                )
            })
            .collect();
        patch.insert("secretSettings".into(), map(sources));
    }
    Value::Object(patch)
}

/// The merge patch of a Project that writes `edit` to `plugin`'s entry.
pub fn project_patch(plugin: &str, edit: &EntryEdit) -> Value {
    json!({ "spec": { "plugins": { plugin: entry_patch(edit) } } })
}

/// The merge patch of HostConfig that writes `edit` to `plugin`'s global entry.
pub fn host_config_patch(plugin: &str, edit: &EntryEdit) -> Value {
    json!({ "spec": { "plugins": { "defaults": { plugin: entry_patch(edit) } } } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        crate::manifest::parse_str(
            r#"{"id": "echo", "name": "E", "version": "1", "api": "1",
                "capabilities": ["schedule", "secrets.read"],
                "actions": [{"id": "tick", "default_schedule": {"type": "interval", "schedule": "5m"}},
                            {"id": "now"}],
                "settings": {
                  "verbose": {"type": "boolean", "default": false},
                  "count": {"type": "integer", "minimum": 1, "maximum": 10},
                  "token": {"type": "string", "secret": true}
                }}"#,
        )
        .unwrap()
    }

    fn edit(v: Value) -> EntryEdit {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn a_null_unsets_one_name_and_what_is_not_given_stays() {
        let entry: PluginConfig = serde_json::from_value(json!({
            "enabled": true, "settings": {"verbose": true, "count": 3},
            "schedules": {"tick": {"enabled": false}},
        }))
        .unwrap();
        let e = edit(json!({"enabled": null, "settings": {"count": null, "verbose": false}}));
        let out = apply(Some(&entry), &e);
        assert_eq!(out.enabled, None);
        assert_eq!(
            out.settings,
            BTreeMap::from([("verbose".into(), json!(false))])
        );
        assert_eq!(out.schedules, entry.schedules);
        assert_eq!(
            project_patch("echo", &e),
            json!({"spec": {"plugins": {"echo": {"enabled": null, "settings": {"count": null, "verbose": false}}}}})
        );
        assert_eq!(
            host_config_patch("echo", &edit(json!({"schedules": {"tick": null}}))),
            json!({"spec": {"plugins": {"defaults": {"echo": {"schedules": {"tick": null}}}}}})
        );
        assert!(edit(json!({})).is_empty());
        assert!(serde_json::from_value::<EntryEdit>(json!({"enable": true})).is_err());
    }

    #[test]
    fn a_refused_value_names_its_field_and_why() {
        let m = manifest();
        assert!(
            refusals(
                &m,
                ConfigLevel::Project,
                &edit(json!({"settings": {"count": 4}}))
            )
            .is_empty()
        );
        let bad = refusals(
            &m,
            ConfigLevel::Project,
            &edit(json!({"settings": {"count": 40, "nope": 1, "token": "ghp_x"}})),
        );
        assert_eq!(bad.len(), 3, "{bad:?}");
        assert!(
            bad.iter().any(|r| r.starts_with("settings.count:")),
            "{bad:?}"
        );
        assert!(
            bad.iter().any(|r| r.starts_with("settings.nope:")),
            "{bad:?}"
        );
        let secret = bad
            .iter()
            .find(|r| r.starts_with("settings.token:"))
            .unwrap();
        assert!(
            !secret.contains("ghp_x"),
            "a secret's value is never shown: {secret}"
        );
        let schedules = refusals(
            &m,
            ConfigLevel::Global,
            &edit(
                json!({"schedules": {"nope": {}, "tick": {"type": "cron", "schedule": "every day"}}}),
            ),
        );
        assert_eq!(schedules.len(), 2, "{schedules:?}");
        assert!(
            schedules.iter().any(|r| r.starts_with("schedules.tick:")),
            "{schedules:?}"
        );
        assert!(
            refusals(
                &m,
                ConfigLevel::Global,
                &edit(json!({"schedules": {"tick": null}}))
            )
            .is_empty()
        );
    }
}
