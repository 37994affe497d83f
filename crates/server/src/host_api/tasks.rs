//! `GET .../channels/{channel}/tasks`: the chat's scheduled tasks (the reference's Tasks panel):
//! each CronJob the controller made for a plugin's action in the chat, with its schedule, its
//! next and last run and how the last one ended, and which config's entry makes it (a task a
//! project's own entry makes can be deleted by removing that entry; a global entry's comes back
//! only when the entry changes). The caller needs `get channels/tasks` on the chat; the API
//! server then lists the chat's CronJobs itself (a live list: its index holds none). Making,
//! editing, turning off and deleting a task are edits of the project's entry
//! (`PATCH .../projects/{project}/plugins/{plugin}`, `crate::host_api::config`).
//!
//! `PUT .../channels/{channel}/tasks/{task}/options`: the task's own options (Worktree, Update
//! before run, Auto-delete: `model::task`), which are the task's and not the entry's. The host
//! API acts with the caller's identity: RBAC's `update channels/tasks` on the chat decides, then
//! the API server writes the options' annotation, and nothing else, on the task's CronJob
//! (a person given `patch cronjobs` could rewrite what the trigger's Pod runs, with its
//! ServiceAccount's rights; this grant lets them change the options alone). The controller then
//! gives the task's trigger what they need.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use jiff::Timestamp;
use k8s_openapi::api::batch::v1::CronJob;
use serde::Serialize;
use serde_json::json;

use std::sync::Arc;

use super::auth::Permission;
use super::cronjobs::TaskStore;
use super::error::{Code, HostError, HostResult};
use super::state::{HostState, json_body};
use model::config::ConfigLevel;
use model::names::{
    LABEL_ACTION, LABEL_CHANNEL, LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_PLUGIN, MANAGED_BY,
};
use model::resolve::schedules::resolve_schedules;
use model::resolve::{ProjectView, approved_plugins};
use model::schedule::{Schedule, format_interval, next_run, parse_cron};
use model::task::{ANNOTATION_TASK_OPTIONS, TaskOptions};

/// One task as the Tasks panel shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskView {
    /// The CronJob's name: the task's id.
    pub name: String,
    pub plugin: String,
    pub action: String,
    /// The CronJob's cron expression.
    pub cron: String,
    /// The entry's schedule as written (`interval 5m`, `cron 0 9 * * *`), when the config
    /// still asks for the task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule: Option<String>,
    /// Not suspended.
    pub enabled: bool,
    /// Which config's entry makes it: `global` or `project`; none when no entry asks for it
    /// any more (the controller deletes it soon).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub source: Option<&'static str>,
    /// Whether deleting it is removing the project's own entry.
    pub deletable: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_run: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_run: Option<String>,
    /// `running`, `succeeded` or `failed`, for the last run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_outcome: Option<&'static str>,
    /// The task's own options (all off when none were set).
    pub options: TaskOptions,
    /// Why the options written on its CronJob are not read (it runs as a plain task).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub options_problem: Option<String>,
}

/// Which config's entry asks for a plugin's action, and its schedule as written.
pub type EntryOf<'a> = dyn Fn(&str, &str) -> Option<(ConfigLevel, String)> + 'a;

/// A CronJob as the panel shows it, `entries` saying which config asks for which plugin's
/// action and with what schedule; None for one that is not a task of ours.
pub fn task_view(cronjob: &CronJob, entries: &EntryOf, now: Timestamp) -> Option<TaskView> {
    let labels = cronjob.metadata.labels.as_ref()?;
    let plugin = labels.get(LABEL_PLUGIN)?.clone();
    let action = labels.get(LABEL_ACTION)?.clone();
    let spec = &cronjob.spec;
    let enabled = spec.suspend != Some(true);
    let status = cronjob.status.clone().unwrap_or_default();
    let last_scheduled = status.last_schedule_time.map(|t| t.0);
    let last_success = status.last_successful_time.map(|t| t.0);
    let running = status.active.as_ref().is_some_and(|a| !a.is_empty());
    let last_outcome = match (last_scheduled, last_success) {
        _ if running => Some("running"),
        (Some(s), Some(ok)) if ok >= s => Some("succeeded"),
        (Some(_), _) => Some("failed"),
        (None, _) => None,
    };
    let next = enabled
        .then(|| parse_cron(&spec.schedule).ok())
        .flatten()
        .and_then(|cron| next_run(&cron, now));
    let entry = entries(&plugin, &action);
    let written_options = cronjob
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_TASK_OPTIONS));
    let (options, options_problem) = match written_options.map(|v| TaskOptions::from_json(v)) {
        None => (TaskOptions::default(), None),
        Some(Ok(options)) => (options, None),
        Some(Err(e)) => (TaskOptions::default(), Some(e.to_string())),
    };
    let source = entry.as_ref().map(|(level, _)| match level {
        ConfigLevel::Global => "global",
        ConfigLevel::Project => "project",
    });
    Some(TaskView {
        name: cronjob.metadata.name.clone().unwrap_or_default(),
        deletable: source == Some("project"),
        schedule: entry.map(|(_, s)| s),
        plugin,
        action,
        cron: spec.schedule.clone(),
        enabled,
        source,
        next_run: next.map(|t| t.to_string()),
        last_run: last_scheduled.map(|t| t.to_string()),
        last_outcome,
        options,
        options_problem,
    })
}

/// A schedule as an entry writes it: `cron 0 9 * * 1-5`, `interval 30m`.
fn written(schedule: &Schedule) -> String {
    match schedule {
        Schedule::Cron(c) => format!("cron {}", c.as_str()),
        Schedule::Interval(d) => format!("interval {}", format_interval(*d)),
    }
}

/// `GET .../channels/{channel}/tasks`.
pub async fn list(
    State(s): State<HostState>,
    Path((ns, chat)): Path<(String, String)>,
    headers: HeaderMap,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::tasks(&ns, &chat))
        .await?;
    let index = s.index();
    let channel = crate::delivery::target::chat(index, &ns, &chat)?;
    let cronjobs = cronjobs_of(&*task_store(&s, "lists")?, &ns, &chat).await?;
    // Which config asks for each task: the global entries, each replaced by the project's
    // approved one, as the controller resolves them.
    let host = index.host_config();
    let project = index.project(&ns, &channel.spec.project);
    let trust = index.project_trust(&ns, &channel.spec.project);
    let approved = project
        .as_deref()
        .map(|p| approved_plugins(ProjectView::new(p, trust.as_deref())));
    let entries = |plugin: &str, action: &str| {
        let found = index.plugin(plugin)?;
        let compiled = index.manifests.get(&found).ok()?;
        let global = host.spec.plugins.defaults.get(plugin);
        let own = approved.as_ref().and_then(|a| a.plugin(plugin));
        let resolved = resolve_schedules(&compiled.manifest, global, own);
        resolved
            .schedules
            .into_iter()
            .find(|r| r.action == action)
            .map(|r| (r.source, written(&r.schedule)))
    };
    let now = Timestamp::now();
    let mut tasks: Vec<TaskView> = cronjobs
        .iter()
        .filter_map(|c| task_view(c, &entries, now))
        .collect();
    tasks.sort_by(|a, b| (&a.plugin, &a.action).cmp(&(&b.plugin, &b.action)));
    Ok(Json(json!({
        "chat": chat,
        "project": channel.spec.project,
        "tasks": tasks,
    }))
    .into_response())
}

/// Where the tasks are read and written; none when the server runs without a cluster.
fn task_store(s: &HostState, does: &str) -> HostResult<Arc<dyn TaskStore>> {
    s.tasks.clone().ok_or_else(|| {
        HostError::new(
            Code::Unavailable,
            format!("this server {does} no tasks (it runs without a cluster)"),
        )
    })
}

/// The chat's tasks' CronJobs, listed live by the API server.
async fn cronjobs_of(reader: &dyn TaskStore, ns: &str, chat: &str) -> HostResult<Vec<CronJob>> {
    let selector = format!(
        "{LABEL_MANAGED_BY}={MANAGED_BY},{LABEL_COMPONENT}=schedule,{LABEL_CHANNEL}={chat}"
    );
    reader
        .cronjobs(ns, &selector)
        .await
        .map_err(|why| HostError::new(Code::Unavailable, why))
}

/// The merge patch that writes `options` on a task's CronJob: all off removes the annotation.
pub fn options_patch(options: &TaskOptions) -> serde_json::Value {
    let value = (!options.is_plain()).then(|| options.to_json());
    json!({"metadata": {"annotations": {ANNOTATION_TASK_OPTIONS: value}}})
}

/// `PUT .../channels/{channel}/tasks/{task}/options`.
pub async fn set_options(
    State(s): State<HostState>,
    Path((ns, chat, task)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> HostResult<Response> {
    let user = s
        .authorized_user(&headers, &Permission::task_options(&ns, &chat))
        .await?;
    let options: TaskOptions = json_body(&body)?;
    options
        .check()
        .map_err(|e| HostError::new(Code::InvalidBody, e.to_string()))?;
    crate::delivery::target::chat(s.index(), &ns, &chat)?;
    // Read first, so a server without a cluster says it lists none, as before it writes.
    let store = task_store(&s, "lists")?;
    let cronjobs = cronjobs_of(&*store, &ns, &chat).await?;
    if !cronjobs
        .iter()
        .any(|c| c.metadata.name.as_deref() == Some(task.as_str()))
    {
        return Err(HostError::new(
            Code::NotFound,
            format!("chat {chat} has no task {task}"),
        ));
    }
    store
        .patch_options(&ns, &task, options_patch(&options))
        .await
        .map_err(|why| HostError::new(Code::Unavailable, why))?;
    tracing::info!(user = %user.username, namespace = %ns, %task, options = %options.to_json(), "a task's options set");
    Ok(Json(json!({"task": task, "options": options})).into_response())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::{CronJobSpec, CronJobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

    use super::*;

    fn cronjob(suspend: bool, status: CronJobStatus) -> CronJob {
        let mut c = CronJob {
            spec: CronJobSpec {
                schedule: "*/5 * * * *".into(),
                suspend: Some(suspend),
                ..Default::default()
            },
            status: Some(status),
            ..Default::default()
        };
        c.metadata.name = Some("echo-general-tick".into());
        c.metadata.labels = Some(
            [
                (LABEL_PLUGIN.to_string(), "echo".to_string()),
                (LABEL_ACTION.to_string(), "tick".to_string()),
            ]
            .into(),
        );
        c
    }

    fn at(t: &str) -> Time {
        Time(t.parse().unwrap())
    }

    #[test]
    fn a_task_shows_its_next_and_last_run_and_whose_entry_it_is() {
        let now: Timestamp = "2026-12-07T05:31:20Z".parse().unwrap();
        let project = |_: &str, _: &str| Some((ConfigLevel::Project, "interval 5m".to_string()));
        let failed = CronJobStatus {
            last_schedule_time: Some(at("2026-12-07T05:30:00Z")),
            last_successful_time: Some(at("2026-12-07T05:25:00Z")),
            ..Default::default()
        };
        let t = task_view(&cronjob(false, failed), &project, now).unwrap();
        assert_eq!(t.next_run.as_deref(), Some("2026-12-07T05:35:00Z"));
        assert_eq!(t.last_run.as_deref(), Some("2026-12-07T05:30:00Z"));
        assert_eq!(t.last_outcome, Some("failed"));
        assert!(t.deletable && t.enabled);
        assert_eq!(t.schedule.as_deref(), Some("interval 5m"));

        let global = |_: &str, _: &str| Some((ConfigLevel::Global, "interval 5m".to_string()));
        let ok = CronJobStatus {
            last_schedule_time: Some(at("2026-12-07T05:30:00Z")),
            last_successful_time: Some(at("2026-12-07T05:30:04Z")),
            ..Default::default()
        };
        let t = task_view(&cronjob(true, ok), &global, now).unwrap();
        assert_eq!(t.last_outcome, Some("succeeded"));
        assert!(!t.deletable && !t.enabled);
        assert_eq!(t.next_run, None, "a task turned off does not run");
        let none = |_: &str, _: &str| None;
        let t = task_view(&cronjob(false, Default::default()), &none, now).unwrap();
        assert_eq!((t.source, t.last_outcome), (None, None));
        assert!(task_view(&CronJob::default(), &none, now).is_none());
    }
}
