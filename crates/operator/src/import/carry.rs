//! What of a desktop config's `plugins` object carries over, decided by the rules the
//! controller applies to it once imported (`model::resolve`): a setting value the manifest
//! doesn't declare or its schema refuses, and a schedule entry that yields no task, would be
//! left out by the controller, so they are left behind here and listed, with the same words
//! the controller's status would use. So is an entry for a plugin not installed on the
//! cluster (its manifest decides nothing yet) and anything that is not a plugin's entry.
//!
//! | found in `plugins`                       | carried | listed as                 |
//! |------------------------------------------|---------|---------------------------|
//! | `<id>` of an installed plugin            | yes     |                           |
//! | `<id>` of a plugin not installed         | no      | `NotInstalled`            |
//! | a key whose value is not an object       | no      | `NotAnEntry` (host switch)|
//! | an entry that does not read as one       | no      | `Malformed`               |
//! | a key of an entry other than the three   | no      | `UnknownField`            |
//! | a setting left out by `resolve_settings` | no      | `Setting`                 |
//! | a schedule with a `resolve_schedules` problem | no | `Schedule`                |
//! | a `null` setting (the desktop's "unset") | no      | (nothing: it is unset)    |

use std::collections::BTreeMap;
use std::fmt;

use model::config::{ConfigLevel, PluginConfig, PluginsConfig};
use model::manifest::Manifest;
use model::resolve::{resolve_schedules, resolve_settings};
use serde_json::{Map, Value};

/// The fields a plugin's entry has (`plugins.<id>.*`).
const ENTRY_FIELDS: [&str; 3] = ["enabled", "settings", "schedules"];

/// What carries over, and what is left behind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Carried {
    pub plugins: PluginsConfig,
    pub not_carried: Vec<NotCarried>,
}

/// A part of the config that is not carried over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotCarried {
    /// Where it is in the file: `plugins.<id>`, `plugins.<id>.settings.<name>`, ...
    pub path: String,
    pub reason: NotCarriedReason,
}

/// Why it is not carried over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NotCarriedReason {
    NotInstalled,
    NotAnEntry,
    Malformed(String),
    UnknownField,
    /// Why the controller would leave the setting's value out.
    Setting(String),
    /// Why the schedule entry would yield no task.
    Schedule(String),
}

impl fmt::Display for NotCarried {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.path)?;
        match &self.reason {
            NotCarriedReason::NotInstalled => {
                f.write_str("no such plugin is installed on the cluster; install it and import again")
            }
            NotCarriedReason::NotAnEntry => f.write_str(
                "not a plugin's entry (a host setting such as plugins.enabled belongs on HostConfig)",
            ),
            NotCarriedReason::Malformed(why) => write!(f, "not a plugin entry: {why}"),
            NotCarriedReason::UnknownField => {
                f.write_str("a plugin's entry has only enabled, settings and schedules")
            }
            NotCarriedReason::Setting(why) | NotCarriedReason::Schedule(why) => f.write_str(why),
        }
    }
}

/// Decides what of `plugins` carries over to a config at `level`, given the manifests of the
/// installed plugins by id.
pub fn carry_over(
    plugins: &Map<String, Value>,
    installed: &BTreeMap<String, Manifest>,
    level: ConfigLevel,
) -> Carried {
    let mut out = Carried::default();
    for (id, value) in plugins {
        let path = format!("plugins.{id}");
        let mut left = |path: String, reason| out.not_carried.push(NotCarried { path, reason });
        let Value::Object(fields) = value else {
            left(path, NotCarriedReason::NotAnEntry);
            continue;
        };
        let Some(manifest) = installed.get(id) else {
            left(path, NotCarriedReason::NotInstalled);
            continue;
        };
        for field in fields
            .keys()
            .filter(|k| !ENTRY_FIELDS.contains(&k.as_str()))
        {
            left(format!("{path}.{field}"), NotCarriedReason::UnknownField);
        }
        let known: Map<String, Value> = fields
            .iter()
            .filter(|(k, _)| ENTRY_FIELDS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let mut entry: PluginConfig = match serde_json::from_value(Value::Object(known)) {
            Ok(entry) => entry,
            Err(e) => {
                left(path, NotCarriedReason::Malformed(e.to_string()));
                continue;
            }
        };
        entry.settings.retain(|_, v| !v.is_null());
        let (global, project) = at_level(&entry, level);
        for left_out in resolve_settings(manifest, global, project).left_out {
            entry.settings.remove(&left_out.setting);
            left(
                format!("{path}.settings.{}", left_out.setting),
                NotCarriedReason::Setting(left_out.to_string()),
            );
        }
        let (global, project) = at_level(&entry, level);
        for problem in resolve_schedules(manifest, global, project).problems {
            entry.schedules.remove(&problem.action);
            left(
                format!("{path}.schedules.{}", problem.action),
                NotCarriedReason::Schedule(problem.to_string()),
            );
        }
        out.plugins.insert(id.clone(), entry);
    }
    out
}

/// The entry as the global or the project config, for the resolvers' (global, project) pair.
fn at_level(
    entry: &PluginConfig,
    level: ConfigLevel,
) -> (Option<&PluginConfig>, Option<&PluginConfig>) {
    match level {
        ConfigLevel::Global => (Some(entry), None),
        ConfigLevel::Project => (None, Some(entry)),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn installed() -> BTreeMap<String, Manifest> {
        let manifest = model::manifest::parse_str(include_str!(
            "../../../../examples/echo-plugin/plugin.json"
        ))
        .expect("the echo manifest");
        [("echo".to_string(), manifest)].into()
    }

    fn plugins(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    fn paths(c: &Carried) -> Vec<&str> {
        c.not_carried.iter().map(|n| n.path.as_str()).collect()
    }

    #[test]
    fn an_installed_plugins_valid_entry_carries_over_whole() {
        let entry = json!({
            "enabled": true,
            "settings": { "verbose": true },
            "schedules": { "tick": { "enabled": false }, "ping": { "type": "interval", "schedule": "1h" } },
        });
        let c = carry_over(
            &plugins(json!({ "echo": entry.clone() })),
            &installed(),
            ConfigLevel::Project,
        );
        assert_eq!(c.not_carried, vec![]);
        assert_eq!(
            c.plugins["echo"],
            serde_json::from_value::<PluginConfig>(entry).unwrap()
        );
    }

    #[test]
    fn what_the_controller_would_leave_out_is_left_behind_and_listed() {
        let c = carry_over(
            &plugins(json!({
                "enabled": true,
                "cogtest": { "enabled": true },
                "echo": {
                    "enabled": true,
                    "color": "red",
                    "settings": { "verbose": "yes", "loud": true, "gone": null },
                    "schedules": { "tick": {}, "nope": {}, "ping": {}, "bad": 3 },
                },
            })),
            &installed(),
            ConfigLevel::Project,
        );
        let mut found: Vec<(&str, &NotCarriedReason)> = c
            .not_carried
            .iter()
            .map(|n| (n.path.as_str(), &n.reason))
            .collect();
        found.sort_by_key(|(path, _)| *path);
        assert!(
            matches!(
                found[..],
                [
                    ("plugins.cogtest", NotCarriedReason::NotInstalled),
                    ("plugins.echo", NotCarriedReason::Malformed(_)),
                    ("plugins.echo.color", NotCarriedReason::UnknownField),
                    ("plugins.enabled", NotCarriedReason::NotAnEntry),
                ]
            ),
            "{found:?}"
        );
        assert!(c.plugins.is_empty());

        let c = carry_over(
            &plugins(json!({ "echo": {
                "enabled": true,
                "color": "red",
                "settings": { "verbose": "yes", "loud": true, "gone": null },
                "schedules": { "tick": {}, "nope": {}, "ping": {} },
            }})),
            &installed(),
            ConfigLevel::Project,
        );
        assert_eq!(
            paths(&c),
            vec![
                "plugins.echo.color",
                "plugins.echo.settings.loud",
                "plugins.echo.settings.verbose",
                "plugins.echo.schedules.nope",
                "plugins.echo.schedules.ping",
            ]
        );
        let echo = &c.plugins["echo"];
        assert_eq!(echo.enabled, Some(true));
        assert!(echo.settings.is_empty(), "{:?}", echo.settings);
        assert_eq!(echo.schedules.keys().collect::<Vec<_>>(), vec!["tick"]);
        let words: Vec<String> = c.not_carried.iter().map(|n| n.to_string()).collect();
        assert!(words[1].contains("declares no such setting"), "{words:?}");
        assert!(words[2].contains("its schema refuses it"), "{words:?}");
        assert!(words[3].contains("no such action"), "{words:?}");
        assert!(words[4].contains("no default_schedule"), "{words:?}");
    }

    #[test]
    fn the_global_configs_values_are_judged_as_global_ones() {
        let c = carry_over(
            &plugins(json!({ "echo": { "settings": { "loud": true } } })),
            &installed(),
            ConfigLevel::Global,
        );
        assert!(
            c.not_carried[0].to_string().contains("the global value"),
            "{c:?}"
        );
    }
}
