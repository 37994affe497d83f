//! What a chat should have: the plugins that run in it (one PluginInstance each) and, for a
//! desktop channel, the CronJobs of its scheduled actions. Pure: it reads values, never a client.
//!
//! The schedule rules of the reference, in one place:
//! - global entries apply to every project; a project's entry replaces the global one, action
//!   by action, once the owner trusts its config (see `resolve::resolve_schedules`);
//! - `enabled: false` keeps the CronJob, suspended; removing the entry deletes it;
//! - a project that stops enabling the plugin suspends its CronJobs, and enabling it again
//!   resumes them, except those the owner turned off;
//! - an entry is applied once per change: a CronJob deleted by hand comes back only when its
//!   entry changes;
//! - a refused entry (an expression no schedule can mean, an action the manifest lacks) and a
//!   manifest that does not parse change no task: the task keeps its last valid schedule, the
//!   one its CronJob holds, and that entry's own on or off (see [`KeptTask`]). It runs on it
//!   until the entry is fixed or removed, as Loop applies an entry once per change to it and a
//!   change it cannot apply is not applied; stopping it would turn off, for a typo, a task its
//!   owner never turned off. Pause and resume act on it as on any task: it pauses while the
//!   project does not enable the plugin and resumes when it does again, unless its last valid
//!   entry turned it off. So what the task does depends only on its last valid entry and on
//!   whether the plugin is enabled, never on the order of the changes in between. The chat's
//!   `SchedulesValid` condition names each refused entry and what its task does meanwhile;
//!   a refused entry with no task yet makes none;
//! - only desktop channels get them: threads run their channel's, Slack and Discord none;
//! - only a plugin whose `schedule` capability is approved (and declared) gets them: without
//!   it, its entries make no task and its tasks go, and the status says why;
//! - a chat whose project enables a plugin that admission has not judged yet (just installed,
//!   or a new image) waits for the verdict before anything of it is written.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;

use jiff::Timestamp;

use index::manifests::Manifests;
use model::manifest::{Capability, Manifest};
use model::resolve;
use model::resources::{AppliedSchedule, ChannelSpec, HostConfigSpec, Plugin};
use model::schedule::Timing;
use model::task::TaskOptions;

/// An installed plugin, as the plan sees it.
#[derive(Clone, Copy, Debug)]
pub struct PluginView<'a> {
    pub name: &'a str,
    /// The manifest, when it parses.
    pub manifest: Option<&'a Manifest>,
    /// Whether it passed admission.
    pub admitted: bool,
    /// Whether its `schedule` capability is approved (and declared): only then does it get
    /// scheduled tasks.
    pub may_schedule: bool,
    /// Whether admission has not judged its current spec yet (see
    /// `Plugin::awaits_admission`).
    pub awaiting_admission: bool,
}

/// What the plan needs to know of an installed plugin, read from it once: the owned half of a
/// [`PluginView`].
#[derive(Clone, Debug)]
pub struct PluginFacts {
    pub name: String,
    pub manifest: Option<Arc<Manifest>>,
    pub admitted: bool,
    pub may_schedule: bool,
    pub awaiting_admission: bool,
}

impl PluginFacts {
    /// Reads `plugin` under `host`: its manifest (when it parses, from `manifests`), whether it
    /// is admitted now, and whether its `schedule` capability is approved.
    pub fn of(host: &HostConfigSpec, plugin: &Plugin, manifests: &Manifests) -> Self {
        let parsed = manifests.of(plugin);
        let manifest = parsed.as_ref().ok().cloned();
        let may_schedule = manifest.as_ref().is_some_and(|m| {
            resolve::approved_capabilities(plugin, m).contains(&Capability::Schedule)
        });
        Self {
            name: kube::ResourceExt::name_any(plugin),
            admitted: admission::admit(host, plugin, &parsed).is_ok(),
            awaiting_admission: host.plugins.enabled && plugin.awaits_admission(),
            may_schedule,
            manifest,
        }
    }

    /// The facts of every installed plugin; one being deleted counts as removed.
    pub fn installed<'a>(
        host: &HostConfigSpec,
        plugins: impl IntoIterator<Item = &'a Plugin>,
        manifests: &Manifests,
    ) -> Vec<Self> {
        plugins
            .into_iter()
            .filter(|p| p.metadata.deletion_timestamp.is_none())
            .map(|p| Self::of(host, p, manifests))
            .collect()
    }

    pub fn view(&self) -> PluginView<'_> {
        PluginView {
            name: &self.name,
            manifest: self.manifest.as_deref(),
            admitted: self.admitted,
            may_schedule: self.may_schedule,
            awaiting_admission: self.awaiting_admission,
        }
    }
}

/// Everything the plan of one chat depends on.
#[derive(Clone, Copy, Debug)]
pub struct ChatInputs<'a> {
    pub channel: &'a ChannelSpec,
    /// The chat's project: its config and its trust.
    pub project: Option<resolve::ProjectView<'a>>,
    pub host: &'a HostConfigSpec,
    pub plugins: &'a [PluginView<'a>],
    /// The CronJobs this chat has now, by (plugin, action).
    pub existing_cronjobs: &'a BTreeMap<(String, String), ExistingTask>,
    /// The entries applied so far (the chat's status).
    pub applied: &'a [AppliedSchedule],
    /// The time now: an interval's anchor when its entry is applied anew.
    pub now: Timestamp,
}

/// A CronJob the chat has now, as the plan needs to know it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExistingTask {
    /// What it runs on: its cron expression, or the interval and the anchor it counts from.
    pub timing: Timing,
    /// The hash of the entry it was made from.
    pub entry_hash: String,
    /// Whether that entry left it on (`enabled` not false): what a resume returns it to.
    pub entry_enabled: bool,
    pub suspended: bool,
    /// The task's own options, as a person set them (its annotation).
    pub options: TaskOptions,
    /// The options its Job template runs with now (read back from the trigger's args).
    pub runs: TaskOptions,
}

/// A CronJob to apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchedulePlan {
    pub plugin: String,
    pub action: String,
    pub timing: Timing,
    pub suspend: bool,
    pub entry_hash: String,
    /// Whether its entry leaves it on: recorded on the CronJob, for when a later entry is
    /// refused (see [`ExistingTask::entry_enabled`]).
    pub entry_enabled: bool,
    /// The task's own options, kept from the CronJob it replaces (none for a new task).
    pub options: TaskOptions,
}

/// What the chat should have.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ChatPlan {
    /// Plugins enabled here: each gets a PluginInstance.
    pub enabled: Vec<String>,
    /// CronJobs to apply.
    pub schedules: Vec<SchedulePlan>,
    /// (plugin, action) of CronJobs to keep; every other CronJob of the chat is deleted.
    pub keep: BTreeSet<(String, String)>,
    /// The entries applied, to record in the chat's status.
    pub applied: Vec<AppliedSchedule>,
    /// Problems to report: bad schedule entries, entries of a plugin that may not schedule.
    pub problems: Vec<String>,
    /// Plugins the project enables here that admission has not judged yet: until it has, the
    /// chat is left as it is (see [`ChatPlan::waits`]).
    pub awaiting: Vec<String>,
}

impl ChatPlan {
    /// Whether the chat waits for admission's verdict on a plugin it would run. Acting on the
    /// plan now would write a state that the verdict, a moment later, undoes: at a cold start
    /// every chat would be written once per plugin admitted, and an upgrade's new image would
    /// take the chat's instances (and their tokens) down until it is admitted. The verdict
    /// changes the Plugin, which brings every chat back.
    pub fn waits(&self) -> bool {
        !self.awaiting.is_empty()
    }
}

/// Plans one chat.
pub fn plan_chat(input: &ChatInputs) -> ChatPlan {
    let mut plan = ChatPlan::default();
    let runs_plugins = resolve::runs_plugins(input.channel);
    let gets_schedules = resolve::gets_schedules(input.channel);
    for view in input.plugins {
        let wanted = runs_plugins
            && input.project.is_some_and(|p| {
                resolve::plugin_enabled(&input.host.plugins, view.name, p).is_enabled()
            });
        if wanted && view.awaiting_admission {
            plan.awaiting.push(view.name.to_string());
        }
        let enabled = wanted && view.admitted;
        if enabled {
            plan.enabled.push(view.name.to_string());
        }
        if gets_schedules {
            plan_schedules(input, view, enabled, &mut plan);
        }
    }
    plan.applied.sort();
    plan
}

fn plan_schedules(input: &ChatInputs, view: &PluginView, enabled: bool, plan: &mut ChatPlan) {
    let Some(manifest) = view.manifest else {
        // A manifest that does not parse tells nothing: leave its CronJobs as they are.
        for key in input
            .existing_cronjobs
            .keys()
            .filter(|(p, _)| p == view.name)
        {
            keep_as_is(input, key, enabled, plan);
        }
        return;
    };
    let global = input.host.plugins.defaults.get(view.name);
    let approved = input.project.map(resolve::approved_plugins);
    let project_entry = approved.as_ref().and_then(|a| a.plugins().get(view.name));
    if !view.may_schedule {
        // No task, and none kept: every CronJob of the plugin goes.
        let entries = [global, project_entry]
            .into_iter()
            .flatten()
            .any(|c| !c.schedules.is_empty());
        if entries {
            plan.problems.push(format!(
                "plugin {}: its schedule entries make no task: the schedule capability is not approved",
                view.name
            ));
        }
        return;
    }
    let resolved = resolve::resolve_schedules(manifest, global, project_entry);
    let mut kept = BTreeMap::new();
    for problem in &resolved.problems {
        // An action named at both levels is reported twice, and kept once.
        let task = kept.entry(problem.action.clone()).or_insert_with(|| {
            keep_as_is(
                input,
                &(view.name.to_string(), problem.action.clone()),
                enabled,
                plan,
            )
        });
        plan.problems
            .push(format!("plugin {}: {problem}; {task}", view.name));
    }
    for schedule in resolved.schedules {
        let key = (view.name.to_string(), schedule.action.clone());
        plan.keep.insert(key.clone());
        let record = AppliedSchedule {
            plugin: view.name.to_string(),
            action: schedule.action.clone(),
            entry_hash: schedule.entry_hash.clone(),
            source: Some(schedule.source),
        };
        let existing = input.existing_cronjobs.get(&key);
        let applied_before = input.applied.iter().any(|a| a.same_entry(&record));
        if existing.is_some() || (enabled && !applied_before) {
            // An interval counts from its task's anchor while the entry stays the same (a
            // pause, a restart), and from now once it changes.
            let anchor = existing
                .filter(|task| task.entry_hash == schedule.entry_hash)
                .and_then(|task| task.timing.interval())
                .map(|interval| interval.anchor);
            plan.schedules.push(SchedulePlan {
                plugin: record.plugin.clone(),
                action: record.action.clone(),
                timing: schedule.cadence.timing(anchor, input.now),
                suspend: suspends(enabled, schedule.enabled),
                entry_hash: record.entry_hash.clone(),
                entry_enabled: schedule.enabled,
                options: existing.map(|t| t.options.clone()).unwrap_or_default(),
            });
            plan.applied.push(record);
        } else if applied_before {
            // Applied once already and deleted since: it comes back only when the entry changes.
            plan.applied.push(record);
        }
    }
}

/// Whether a task is suspended: while the project does not enable the plugin here, or when
/// its entry turned it off. One rule for every task, whether its current entry is valid or
/// refused (then its last valid entry's on or off counts).
fn suspends(plugin_enabled: bool, entry_enabled: bool) -> bool {
    !plugin_enabled || !entry_enabled
}

/// What the task of a refused entry does meanwhile, as the chat's status says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeptTask {
    /// There is none: the entry makes none until it is fixed.
    None,
    /// It runs on its last valid schedule.
    Runs(Timing),
    /// Its last valid entry turned it off.
    Off(Timing),
    /// It pauses while the project does not enable the plugin.
    Paused(Timing),
}

impl fmt::Display for KeptTask {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeptTask::None => f.write_str("no task runs until the entry is fixed"),
            KeptTask::Runs(t) => write!(
                f,
                "its task keeps running on its last valid schedule, {t}, until the entry is fixed"
            ),
            KeptTask::Off(t) => write!(
                f,
                "its task keeps its last valid schedule, {t}, turned off as that entry says"
            ),
            KeptTask::Paused(t) => write!(
                f,
                "its task, on its last valid schedule, {t}, is paused while the project does not enable the plugin"
            ),
        }
    }
}

/// A task whose entry tells nothing usable (refused, or a manifest that does not parse): it
/// keeps its last valid schedule, record and on or off, and pauses and resumes with the plugin
/// by the one rule every task follows ([`suspends`]).
fn keep_as_is(
    input: &ChatInputs,
    key: &(String, String),
    enabled: bool,
    plan: &mut ChatPlan,
) -> KeptTask {
    let (plugin, action) = key;
    plan.applied.extend(
        input
            .applied
            .iter()
            .filter(|r| &r.plugin == plugin && &r.action == action)
            .cloned(),
    );
    let Some(task) = input.existing_cronjobs.get(key) else {
        return KeptTask::None;
    };
    plan.keep.insert(key.clone());
    let suspend = suspends(enabled, task.entry_enabled);
    // Applied again when its on or off changes, or when a person changed its options.
    if suspend != task.suspended || task.options != task.runs {
        plan.schedules.push(SchedulePlan {
            plugin: plugin.clone(),
            action: action.clone(),
            timing: task.timing.clone(),
            suspend,
            entry_hash: task.entry_hash.clone(),
            entry_enabled: task.entry_enabled,
            options: task.options.clone(),
        });
    }
    let timing = task.timing.clone();
    match (enabled, task.entry_enabled) {
        (false, _) => KeptTask::Paused(timing),
        (true, false) => KeptTask::Off(timing),
        (true, true) => KeptTask::Runs(timing),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::json;

    use super::*;
    use model::config::{ConfigLevel, PluginConfig, PluginsConfig, ScheduleEntry};
    use model::resources::{App, ChannelKind, HostPlugins, ProjectTrust};
    use model::schedule::ScheduleType;

    fn manifest() -> Manifest {
        model::manifest::from_value(&json!({
            "id": "echo", "name": "Echo", "version": "0.1.0", "api": "1",
            "capabilities": ["schedule"],
            "actions": [
                { "id": "ping" },
                { "id": "tick", "default_schedule": { "type": "cron", "schedule": "*/5 * * * *" } },
            ],
        }))
        .unwrap()
    }

    fn channel(kind: ChannelKind, app: App) -> ChannelSpec {
        ChannelSpec {
            project: "proj".into(),
            kind,
            parent: (kind != ChannelKind::Channel).then(|| "general".into()),
            app,
            hidden: false,
            working_tree: None,
        }
    }

    fn host(enabled: bool, defaults: BTreeMap<String, PluginConfig>) -> HostConfigSpec {
        HostConfigSpec {
            plugins: HostPlugins {
                enabled,
                defaults,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn entry(enabled: Option<bool>, schedule: Option<&str>) -> ScheduleEntry {
        ScheduleEntry {
            enabled,
            kind: schedule.map(|_| ScheduleType::Cron),
            schedule: schedule.map(Into::into),
        }
    }

    /// A project's current config and its owner's trust.
    #[derive(Clone)]
    struct TrustedProject {
        plugins: PluginsConfig,
        trust: ProjectTrust,
    }

    /// A project whose config (trusted) enables echo with these schedule entries.
    fn project(enabled: bool, schedules: &[(&str, ScheduleEntry)]) -> TrustedProject {
        let plugins = BTreeMap::from([(
            "echo".to_string(),
            PluginConfig {
                enabled: Some(enabled),
                settings: BTreeMap::new(),
                secret_settings: BTreeMap::new(),
                risk_profile: None,
                schedules: schedules
                    .iter()
                    .map(|(a, e)| (a.to_string(), e.clone()))
                    .collect(),
            },
        )]);
        TrustedProject {
            trust: ProjectTrust::of("proj", &plugins),
            plugins,
        }
    }

    struct Case {
        channel: ChannelSpec,
        project: TrustedProject,
        host: HostConfigSpec,
        existing: BTreeMap<(String, String), ExistingTask>,
        applied: Vec<AppliedSchedule>,
        admitted: bool,
        may_schedule: bool,
        awaiting_admission: bool,
        now: Timestamp,
    }

    impl Case {
        fn new(project: TrustedProject) -> Self {
            Case {
                channel: channel(ChannelKind::Channel, App::Desktop),
                project,
                host: host(true, BTreeMap::new()),
                existing: BTreeMap::new(),
                applied: vec![],
                admitted: true,
                may_schedule: true,
                awaiting_admission: false,
                now: at("2026-12-01T10:47:13Z"),
            }
        }

        fn plan(&self) -> ChatPlan {
            let manifest = manifest();
            let views = [PluginView {
                name: "echo",
                manifest: Some(&manifest),
                admitted: self.admitted,
                may_schedule: self.may_schedule,
                awaiting_admission: self.awaiting_admission,
            }];
            plan_chat(&ChatInputs {
                channel: &self.channel,
                project: Some(resolve::ProjectView {
                    plugins: &self.project.plugins,
                    uid: None,
                    trust: Some(&self.project.trust),
                    known_hash: None,
                }),
                host: &self.host,
                plugins: &views,
                existing_cronjobs: &self.existing,
                applied: &self.applied,
                now: self.now,
            })
        }

        /// The plan after its CronJobs were made and its entries recorded.
        fn converge(mut self) -> Self {
            let plan = self.plan();
            for s in &plan.schedules {
                self.existing.insert(
                    (s.plugin.clone(), s.action.clone()),
                    ExistingTask {
                        timing: s.timing.clone(),
                        entry_hash: s.entry_hash.clone(),
                        entry_enabled: s.entry_enabled,
                        suspended: s.suspend,
                        options: s.options.clone(),
                        runs: s.options.clone(),
                    },
                );
            }
            self.existing.retain(|key, _| plan.keep.contains(key));
            self.applied = plan.applied;
            self
        }
    }

    fn key(action: &str) -> (String, String) {
        ("echo".into(), action.into())
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    fn interval(enabled: Option<bool>, every: &str) -> ScheduleEntry {
        ScheduleEntry {
            enabled,
            kind: Some(ScheduleType::Interval),
            schedule: Some(every.into()),
        }
    }

    /// The one task the plan applies for `action`.
    fn planned<'a>(plan: &'a ChatPlan, action: &str) -> &'a SchedulePlan {
        let found: Vec<_> = plan
            .schedules
            .iter()
            .filter(|s| s.action == action)
            .collect();
        assert_eq!(found.len(), 1, "{plan:?}");
        found[0]
    }

    #[test]
    fn an_enabled_plugin_gets_an_instance_in_every_desktop_chat() {
        let mut case = Case::new(project(true, &[]));
        assert_eq!(case.plan().enabled, ["echo"]);
        case.channel = channel(ChannelKind::Thread, App::Desktop);
        assert_eq!(case.plan().enabled, ["echo"]);
        case.channel = channel(ChannelKind::Channel, App::Slack);
        assert!(case.plan().enabled.is_empty());
        case.channel.app = App::Desktop;
        case.channel.hidden = true;
        assert!(case.plan().enabled.is_empty());
    }

    #[test]
    fn nothing_runs_unless_admitted_and_enabled() {
        let mut case = Case::new(project(false, &[]));
        assert!(case.plan().enabled.is_empty());
        case.project = project(true, &[]);
        case.admitted = false;
        assert!(case.plan().enabled.is_empty());
    }

    #[test]
    fn a_chat_waits_for_the_verdict_on_a_plugin_it_would_run() {
        let mut case = Case::new(project(true, &[("tick", entry(None, None))]));
        case.admitted = false;
        case.awaiting_admission = true;
        let plan = case.plan();
        assert!(plan.waits());
        assert_eq!(plan.awaiting, ["echo"]);
        // Not enabled here: nothing to wait for.
        case.project = project(false, &[]);
        assert!(!case.plan().waits());
        // A thread of another app runs no plugin either.
        case.project = project(true, &[]);
        case.channel = channel(ChannelKind::Channel, App::Slack);
        assert!(!case.plan().waits());
    }

    #[test]
    fn a_project_entry_makes_a_cronjob_with_the_default_schedule() {
        let plan = Case::new(project(true, &[("tick", entry(None, None))])).plan();
        assert_eq!(plan.schedules.len(), 1);
        assert_eq!(plan.schedules[0].timing.cron(), "*/5 * * * *");
        assert!(!plan.schedules[0].suspend);
        assert!(plan.problems.is_empty());
    }

    #[test]
    fn a_global_entry_applies_to_every_project_and_a_project_entry_replaces_it() {
        let global = BTreeMap::from([(
            "echo".to_string(),
            PluginConfig {
                schedules: BTreeMap::from([("tick".into(), entry(None, Some("0 9 * * *")))]),
                ..Default::default()
            },
        )]);
        let mut case = Case::new(project(true, &[]));
        case.host = host(true, global);
        assert_eq!(case.plan().schedules[0].timing.cron(), "0 9 * * *");
        case.project = project(true, &[("tick", entry(None, Some("0 10 * * *")))]);
        assert_eq!(case.plan().schedules[0].timing.cron(), "0 10 * * *");
    }

    #[test]
    fn enabled_false_keeps_the_cronjob_suspended() {
        let plan = Case::new(project(true, &[("tick", entry(Some(false), None))])).plan();
        assert_eq!(plan.schedules.len(), 1);
        assert!(plan.schedules[0].suspend);
    }

    #[test]
    fn removing_the_entry_deletes_the_cronjob() {
        let mut case = Case::new(project(true, &[("tick", entry(None, None))])).converge();
        assert!(case.plan().keep.contains(&key("tick")));
        case.project = project(true, &[]);
        let plan = case.plan();
        assert!(!plan.keep.contains(&key("tick")));
        assert!(plan.applied.is_empty());
    }

    #[test]
    fn a_project_that_stops_enabling_suspends_and_resumes_except_those_turned_off() {
        let entries = [
            ("tick", entry(None, None)),
            ("ping", entry(Some(false), Some("0 * * * *"))),
        ];
        let mut case = Case::new(project(true, &entries)).converge();
        case.project = project(false, &entries);
        let paused = case.plan();
        assert!(paused.schedules.iter().all(|s| s.suspend), "{paused:?}");
        case.project = project(true, &entries);
        let resumed = case.plan();
        let suspend = |a: &str| {
            resumed
                .schedules
                .iter()
                .find(|s| s.action == a)
                .unwrap()
                .suspend
        };
        assert!(!suspend("tick"));
        assert!(suspend("ping"));
    }

    /// A task's own options (a person's, on its CronJob) stay with it when its entry is
    /// applied again, and a change of them alone is applied, a refused entry's task too.
    #[test]
    fn a_tasks_own_options_are_kept_and_a_change_of_them_applied() {
        let mut case = Case::new(project(true, &[("tick", entry(None, None))])).converge();
        let options = TaskOptions {
            worktree: true,
            ..Default::default()
        };
        case.existing.get_mut(&key("tick")).unwrap().options = options.clone();
        assert_eq!(planned(&case.plan(), "tick").options, options);
        case = case.converge();
        case.project = project(true, &[("tick", entry(None, Some("61 25 * * *")))]);
        assert!(case.plan().schedules.iter().all(|s| s.action != "tick"));
        case.existing.get_mut(&key("tick")).unwrap().options = TaskOptions::default();
        let plan = case.plan();
        let tick = planned(&plan, "tick");
        assert!(tick.options.is_plain() && !tick.suspend, "{tick:?}");
    }

    #[test]
    fn a_project_that_never_enabled_the_plugin_gets_no_cronjob() {
        let plan = Case::new(project(false, &[("tick", entry(None, None))])).plan();
        assert!(plan.schedules.is_empty());
    }

    #[test]
    fn a_cronjob_deleted_by_hand_comes_back_only_when_its_entry_changes() {
        let mut case = Case::new(project(true, &[("tick", entry(None, None))])).converge();
        case.existing.clear(); // deleted by hand
        let plan = case.plan();
        assert!(plan.schedules.is_empty(), "{plan:?}");
        assert_eq!(
            plan.applied, case.applied,
            "the applied entry is remembered"
        );
        assert_eq!(plan.applied[0].source, Some(ConfigLevel::Project));
        case.project = project(true, &[("tick", entry(None, Some("0 9 * * *")))]);
        assert_eq!(case.plan().schedules.len(), 1);
    }

    #[test]
    fn an_entry_recorded_without_its_source_is_the_same_entry() {
        // A chat status written before the source was kept: not applied again for it.
        let mut case = Case::new(project(true, &[("tick", entry(None, None))])).converge();
        for a in &mut case.applied {
            a.source = None;
        }
        case.existing.clear(); // deleted by hand
        let plan = case.plan();
        assert!(plan.schedules.is_empty(), "{plan:?}");
    }

    #[test]
    fn every_interval_runs_and_one_under_a_minute_is_refused_and_reported() {
        // The reference's intervals run as written: 2h30m ticks every 30 minutes, counted
        // from the half hour at or before now.
        let plan = Case::new(project(true, &[("tick", interval(None, "2h30m"))])).plan();
        assert!(plan.problems.is_empty(), "{:?}", plan.problems);
        let tick = planned(&plan, "tick");
        assert_eq!(tick.timing.cron(), "*/30 * * * *");
        assert_eq!(
            tick.timing.interval().map(|i| i.anchor),
            Some(at("2026-12-01T10:30:00Z"))
        );
        assert!(!tick.suspend);
        assert_eq!(
            Case::new(project(true, &[("tick", interval(None, "15m"))]))
                .plan()
                .schedules[0]
                .timing,
            Timing::EveryTick("*/15 * * * *".into())
        );
        let plan = Case::new(project(true, &[("tick", interval(None, "30s"))])).plan();
        assert!(plan.schedules.is_empty());
        assert_eq!(plan.problems.len(), 1);
        assert!(
            plan.problems[0].contains("\"30s\"") && plan.problems[0].contains("at least a minute"),
            "the interval as written, and why: {:?}",
            plan.problems
        );
    }

    /// The anchor is set once per change to the entry: a pause and resume, or a restart that
    /// reads the CronJob back, keep it; a new entry counts from its own time.
    #[test]
    fn an_interval_keeps_its_anchor_until_its_entry_changes() {
        let entries = |every: &str| [("tick", interval(None, every))];
        let mut case = Case::new(project(true, &entries("90m"))).converge();
        let anchor = |case: &Case| {
            case.existing[&key("tick")]
                .timing
                .interval()
                .map(|i| i.anchor)
        };
        assert_eq!(anchor(&case), Some(at("2026-12-01T10:30:00Z")));
        // Hours later: paused, resumed, planned again after a restart: the same anchor.
        case.now = at("2026-12-01T15:10:00Z");
        case.project = project(false, &entries("90m"));
        case = case.converge();
        assert!(case.existing[&key("tick")].suspended);
        case.project = project(true, &entries("90m"));
        case = case.converge();
        assert!(!case.existing[&key("tick")].suspended);
        assert_eq!(anchor(&case), Some(at("2026-12-01T10:30:00Z")));
        assert_eq!(
            planned(&case.plan(), "tick").timing,
            case.existing[&key("tick")].timing
        );
        // The entry changes: it counts from the tick at or before now.
        case.project = project(true, &entries("2h30m"));
        case = case.converge();
        assert_eq!(anchor(&case), Some(at("2026-12-01T15:00:00Z")));
    }

    /// Issue 32: a task whose entry is refused runs on its last valid schedule, pauses with
    /// the plugin and resumes with it, whatever happened in between.
    #[test]
    fn a_refused_entry_keeps_its_task_on_its_last_valid_schedule_through_a_pause_and_resume() {
        let refused = entry(None, Some("61 25 * * *"));
        let entries =
            |tick: ScheduleEntry| [("tick", tick), ("ping", entry(None, Some("0 * * * *")))];
        let mut case = Case::new(project(true, &entries(entry(None, None)))).converge();
        let applied = case.applied.clone();
        // tick's entry is refused: its task stays as it was, untouched, running and recorded
        // as before, and the status says so.
        case.project = project(true, &entries(refused.clone()));
        let plan = case.plan();
        assert!(plan.keep.contains(&key("tick")) && plan.keep.contains(&key("ping")));
        assert!(
            plan.schedules.iter().all(|s| s.action != "tick"),
            "{plan:?}"
        );
        assert_eq!(plan.applied, applied);
        assert_eq!(
            plan.problems,
            [
                "plugin echo: the project schedule entry \"tick\": cron \"61 25 * * *\": minute field \"61\": 61 is out of range; minute takes 0 to 59; its task keeps running on its last valid schedule, cron */5 * * * *, until the entry is fixed"
            ]
        );
        case = case.converge();
        assert!(!case.existing[&key("tick")].suspended);
        // The project stops enabling the plugin: every task pauses, the refused one too, at
        // the schedule it had.
        case.project = project(false, &entries(refused.clone()));
        let paused = case.plan();
        let tick = planned(&paused, "tick");
        assert_eq!(
            (tick.timing.cron(), tick.suspend),
            ("*/5 * * * *".to_string(), true)
        );
        assert!(paused.schedules.iter().all(|s| s.suspend), "{paused:?}");
        assert!(
            paused.problems[0].ends_with("is paused while the project does not enable the plugin"),
            "{:?}",
            paused.problems
        );
        case = case.converge();
        // Paused already: nothing more to write for it.
        assert!(case.plan().schedules.iter().all(|s| s.action != "tick"));
        // Enabled again while still refused: resumed on its last valid schedule, as before.
        case.project = project(true, &entries(refused));
        let resumed = case.plan();
        let tick = planned(&resumed, "tick");
        assert_eq!(
            (tick.timing.cron(), tick.suspend),
            ("*/5 * * * *".to_string(), false)
        );
        assert!(resumed.keep.contains(&key("tick")));
        case = case.converge();
        assert!(!case.existing[&key("tick")].suspended);
        assert!(case.plan().schedules.iter().all(|s| s.action != "tick"));
    }

    /// The rule is the same for a task its last valid entry turned off: it stays off through
    /// a pause and resume; and a refused entry with no task makes none, and says so.
    #[test]
    fn a_refused_entry_keeps_its_tasks_last_valid_on_or_off() {
        let refused = interval(Some(true), "30s");
        let mut case = Case::new(project(true, &[("tick", entry(Some(false), None))])).converge();
        assert!(case.existing[&key("tick")].suspended);
        assert!(!case.existing[&key("tick")].entry_enabled);
        case.project = project(true, &[("tick", refused.clone())]);
        let plan = case.plan();
        assert!(plan.schedules.is_empty(), "{plan:?}");
        assert!(
            plan.problems[0].ends_with(
                "its task keeps its last valid schedule, cron */5 * * * *, turned off as that entry says"
            ),
            "{:?}",
            plan.problems
        );
        for enabled in [false, true, false, true] {
            case.project = project(enabled, &[("tick", refused.clone())]);
            case = case.converge();
            assert!(case.existing[&key("tick")].suspended, "enabled: {enabled}");
        }
        // No task yet.
        let plan = Case::new(project(true, &[("tick", refused)])).plan();
        assert!(plan.schedules.is_empty() && plan.keep.is_empty());
        assert!(
            plan.problems[0].ends_with("; no task runs until the entry is fixed"),
            "{:?}",
            plan.problems
        );
    }

    #[test]
    fn an_action_named_at_both_levels_is_kept_once() {
        let unknown = BTreeMap::from([(
            "echo".to_string(),
            PluginConfig {
                schedules: BTreeMap::from([("gone".into(), entry(None, Some("0 9 * * *")))]),
                ..Default::default()
            },
        )]);
        let mut case = Case::new(project(true, &[("gone", entry(None, Some("0 9 * * *")))]));
        case.host = host(true, unknown);
        case.applied = vec![AppliedSchedule {
            plugin: "echo".into(),
            action: "gone".into(),
            entry_hash: "sha256:old".into(),
            source: Some(ConfigLevel::Project),
        }];
        let plan = case.plan();
        assert_eq!(plan.problems.len(), 2, "{:?}", plan.problems);
        assert_eq!(plan.applied, case.applied);
    }

    #[test]
    fn no_task_without_the_schedule_capability_approved() {
        let mut case = Case::new(project(true, &[("tick", entry(None, None))])).converge();
        assert!(case.existing.contains_key(&key("tick")));
        // The owner withdraws the approval (or never gave it): the task goes, and why shows.
        case.may_schedule = false;
        let plan = case.plan();
        assert_eq!(plan.enabled, ["echo"], "the plugin still runs");
        assert!(plan.schedules.is_empty() && plan.keep.is_empty() && plan.applied.is_empty());
        assert_eq!(
            plan.problems,
            [
                "plugin echo: its schedule entries make no task: the schedule capability is not approved"
            ]
        );
        // Without entries there is nothing to say.
        case.project = project(true, &[]);
        assert!(case.plan().problems.is_empty());
    }

    #[test]
    fn threads_and_other_apps_get_no_cronjobs() {
        let mut case = Case::new(project(true, &[("tick", entry(None, None))]));
        case.channel = channel(ChannelKind::Worktree, App::Desktop);
        assert!(case.plan().schedules.is_empty());
        case.channel = channel(ChannelKind::Channel, App::Discord);
        assert!(case.plan().schedules.is_empty());
    }

    #[test]
    fn an_untrusted_config_uses_the_last_approved_schedules() {
        let mut spec = project(true, &[("tick", entry(None, None))]);
        spec.plugins.get_mut("echo").unwrap().schedules.clear(); // edited, not trusted yet
        assert_eq!(Case::new(spec).plan().schedules.len(), 1);
    }
}
