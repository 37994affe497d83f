//! The scheduled tasks a project asks for: the global config's entries, each replaced action by
//! action by the project's own (from its approved config only). `type` and `schedule` default to
//! the action's `default_schedule`, which an action without one must set; `enabled` defaults to
//! true. A bad entry is reported, never dropped silently: it yields a problem and no schedule,
//! so a caller that keeps a task while its entry is broken can tell the two apart.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::json;

use crate::config::ConfigLevel;
use crate::config::hash_json;
use crate::config::{PluginConfig, ScheduleEntry};
use crate::manifest::Manifest;
use crate::schedule::{self, Cadence, Schedule, ScheduleError};

/// One action's task, as the config asks for it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedSchedule {
    pub action: String,
    /// `false` keeps the task but turned off.
    pub enabled: bool,
    pub schedule: Schedule,
    /// How a CronJob runs it.
    pub cadence: Cadence,
    /// The config whose entry it is.
    pub source: ConfigLevel,
    /// `sha256:<hex>` of the entry as written, where it came from and the action's default it
    /// used: it changes exactly when the entry (or the default it relies on) changes, so the
    /// task is applied once per change.
    pub entry_hash: String,
}

/// An entry that yields no task.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScheduleProblem {
    pub level: ConfigLevel,
    pub action: String,
    pub kind: ScheduleProblemKind,
}

/// What is wrong with the entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScheduleProblemKind {
    /// The manifest has no such action.
    UnknownAction,
    /// The action has no default_schedule and the entry leaves these unset.
    NoDefault { missing: &'static str },
    /// The expression is not a valid schedule.
    Invalid(ScheduleError),
}

impl fmt::Display for ScheduleProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "the {} schedule entry \"{}\": ", self.level, self.action)?;
        match &self.kind {
            ScheduleProblemKind::UnknownAction => f.write_str("the plugin has no such action"),
            ScheduleProblemKind::NoDefault { missing } => write!(
                f,
                "the action has no default_schedule, so the entry must set {missing}"
            ),
            ScheduleProblemKind::Invalid(e) => write!(f, "{e}"),
        }
    }
}

/// The tasks and the entries that yield none, by action id.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolvedSchedules {
    pub schedules: Vec<ResolvedSchedule>,
    pub problems: Vec<ScheduleProblem>,
}

/// Resolves the global entries and the project's approved entries against the manifest.
pub fn resolve_schedules(
    manifest: &Manifest,
    global: Option<&PluginConfig>,
    project_approved: Option<&PluginConfig>,
) -> ResolvedSchedules {
    let mut out = ResolvedSchedules::default();
    let mut chosen: BTreeMap<&str, (ConfigLevel, &ScheduleEntry)> = BTreeMap::new();
    for (level, config) in [
        (ConfigLevel::Global, global),
        (ConfigLevel::Project, project_approved),
    ] {
        for (action, entry) in config.into_iter().flat_map(|c| &c.schedules) {
            if manifest.action(action).is_none() {
                out.problems.push(ScheduleProblem {
                    level,
                    action: action.clone(),
                    kind: ScheduleProblemKind::UnknownAction,
                });
                continue;
            }
            chosen.insert(action, (level, entry));
        }
    }
    for (action, (level, entry)) in chosen {
        match resolve_one(manifest, action, level, entry) {
            Ok(s) => out.schedules.push(s),
            Err(kind) => out.problems.push(ScheduleProblem {
                level,
                action: action.to_string(),
                kind,
            }),
        }
    }
    out
}

fn resolve_one(
    manifest: &Manifest,
    action: &str,
    level: ConfigLevel,
    entry: &ScheduleEntry,
) -> Result<ResolvedSchedule, ScheduleProblemKind> {
    let default = manifest
        .action(action)
        .and_then(|a| a.default_schedule.as_ref());
    let kind = entry.kind.or(default.map(|d| d.kind));
    let expr = entry
        .schedule
        .as_deref()
        .or(default.map(|d| d.schedule.as_str()));
    let (kind, expr) = match (kind, expr) {
        (Some(k), Some(e)) => (k, e),
        (None, None) => {
            return Err(ScheduleProblemKind::NoDefault {
                missing: "type and schedule",
            });
        }
        (None, _) => return Err(ScheduleProblemKind::NoDefault { missing: "type" }),
        (_, None) => {
            return Err(ScheduleProblemKind::NoDefault {
                missing: "schedule",
            });
        }
    };
    let schedule = schedule::parse(kind, expr).map_err(ScheduleProblemKind::Invalid)?;
    let entry_hash = hash_json(&json!({
        "action": action,
        "source": level,
        "entry": entry,
        "default": default,
    }));
    Ok(ResolvedSchedule {
        action: action.to_string(),
        enabled: entry.enabled.unwrap_or(true),
        cadence: schedule.cadence(),
        schedule,
        source: level,
        entry_hash,
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::{Value, json};

    use super::*;
    use crate::resolve::fixtures::{entry, manifest};
    use crate::schedule::ScheduleType;

    fn schedules(v: Value) -> PluginConfig {
        entry(json!({ "schedules": v }))
    }

    fn every_tick(cron: &str) -> Cadence {
        Cadence::EveryTick(cron.into())
    }

    fn only(r: &ResolvedSchedules) -> &ResolvedSchedule {
        assert!(r.problems.is_empty(), "{:?}", r.problems);
        assert_eq!(r.schedules.len(), 1, "{:?}", r.schedules);
        &r.schedules[0]
    }

    #[test]
    fn an_empty_entry_takes_the_actions_default() {
        let r = resolve_schedules(&manifest(), None, Some(&schedules(json!({ "daily": {} }))));
        let s = only(&r);
        assert_eq!(s.action, "daily");
        assert!(s.enabled);
        assert_eq!(s.cadence, every_tick("0 9 * * *"));
        assert_eq!(s.source, ConfigLevel::Project);
        assert!(s.entry_hash.starts_with("sha256:"));
    }

    #[test]
    fn an_entry_sets_its_own_type_and_schedule() {
        let r = resolve_schedules(
            &manifest(),
            None,
            Some(&schedules(
                json!({ "daily": { "type": "interval", "schedule": "30m" } }),
            )),
        );
        let s = only(&r);
        assert_eq!(s.schedule, Schedule::Interval(Duration::from_secs(1800)));
        assert_eq!(s.cadence, every_tick("*/30 * * * *"));
        // Only the schedule: the type is the default's.
        let r = resolve_schedules(
            &manifest(),
            None,
            Some(&schedules(json!({ "poll": { "schedule": "1h" } }))),
        );
        assert_eq!(only(&r).schedule.kind(), ScheduleType::Interval);
        assert_eq!(only(&r).cadence, every_tick("0 * * * *"));
    }

    #[test]
    fn enabled_defaults_to_true_and_false_keeps_the_task_off() {
        let r = resolve_schedules(
            &manifest(),
            Some(&schedules(json!({ "daily": { "enabled": false } }))),
            None,
        );
        let s = only(&r);
        assert!(!s.enabled);
        assert_eq!(s.source, ConfigLevel::Global);
    }

    #[test]
    fn an_action_without_a_default_must_be_set() {
        let r = resolve_schedules(&manifest(), None, Some(&schedules(json!({ "ping": {} }))));
        assert!(r.schedules.is_empty());
        assert_eq!(
            r.problems[0].kind,
            ScheduleProblemKind::NoDefault {
                missing: "type and schedule"
            }
        );
        let r = resolve_schedules(
            &manifest(),
            None,
            Some(&schedules(json!({ "ping": { "schedule": "5m" } }))),
        );
        assert_eq!(
            r.problems[0].kind,
            ScheduleProblemKind::NoDefault { missing: "type" }
        );
        let r = resolve_schedules(
            &manifest(),
            None,
            Some(&schedules(
                json!({ "ping": { "type": "interval", "schedule": "5m" } }),
            )),
        );
        assert_eq!(only(&r).cadence, every_tick("*/5 * * * *"));
    }

    #[test]
    fn the_project_entry_replaces_the_global_one_action_by_action() {
        let global = schedules(json!({ "daily": {}, "poll": {} }));
        let project = schedules(json!({ "daily": { "schedule": "0 18 * * *" } }));
        let r = resolve_schedules(&manifest(), Some(&global), Some(&project));
        assert!(r.problems.is_empty());
        let by: BTreeMap<_, _> = r.schedules.iter().map(|s| (s.action.as_str(), s)).collect();
        assert_eq!(by["daily"].source, ConfigLevel::Project);
        assert_eq!(by["daily"].cadence, every_tick("0 18 * * *"));
        assert_eq!(by["poll"].source, ConfigLevel::Global);
        assert_eq!(by["poll"].cadence, every_tick("*/15 * * * *"));
    }

    #[test]
    fn an_unknown_action_is_a_problem() {
        let r = resolve_schedules(&manifest(), Some(&schedules(json!({ "weekly": {} }))), None);
        assert!(r.schedules.is_empty());
        assert_eq!(r.problems[0].kind, ScheduleProblemKind::UnknownAction);
        assert_eq!(r.problems[0].level, ConfigLevel::Global);
        assert!(r.problems[0].to_string().contains("no such action"));
    }

    #[test]
    fn a_bad_expression_is_reported_not_dropped() {
        let project = schedules(json!({ "daily": { "schedule": "0 9 * *" } }));
        let global = schedules(json!({ "daily": {} }));
        let r = resolve_schedules(&manifest(), Some(&global), Some(&project));
        assert!(r.schedules.is_empty());
        assert_eq!(r.problems.len(), 1);
        assert_eq!(r.problems[0].level, ConfigLevel::Project);
        assert!(matches!(
            r.problems[0].kind,
            ScheduleProblemKind::Invalid(ScheduleError::CronFieldCount { .. })
        ));
        // An interval under a minute, as the entry wrote it.
        let r = resolve_schedules(
            &manifest(),
            None,
            Some(&schedules(json!({ "poll": { "schedule": "45s" } }))),
        );
        assert!(matches!(
            &r.problems[0].kind,
            ScheduleProblemKind::Invalid(ScheduleError::Interval { expr, .. }) if expr == "45s"
        ));
    }

    /// The reference's intervals are durations: every one of a minute or more makes a task.
    #[test]
    fn any_interval_of_a_minute_or_more_makes_a_task() {
        for (expr, secs) in [("7m", 420), ("90m", 5400), ("2h30m", 9000), ("90s", 90)] {
            let r = resolve_schedules(
                &manifest(),
                None,
                Some(&schedules(json!({ "poll": { "schedule": expr } }))),
            );
            assert_eq!(
                only(&r).cadence,
                Cadence::Interval(Duration::from_secs(secs)),
                "{expr}"
            );
        }
    }

    #[test]
    fn the_entry_hash_changes_exactly_when_the_entry_does() {
        let hash = |g: Option<Value>, p: Option<Value>| {
            let g = g.map(schedules);
            let p = p.map(schedules);
            let r = resolve_schedules(&manifest(), g.as_ref(), p.as_ref());
            only(&r).entry_hash.clone()
        };
        let base = hash(None, Some(json!({ "daily": {} })));
        assert_eq!(base, hash(None, Some(json!({ "daily": {} }))));
        assert_ne!(
            base,
            hash(None, Some(json!({ "daily": { "enabled": false } })))
        );
        assert_ne!(
            base,
            hash(None, Some(json!({ "daily": { "schedule": "0 9 * * *" } })))
        );
        assert_ne!(base, hash(Some(json!({ "daily": {} })), None));
    }
}
