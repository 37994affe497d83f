//! The host's own notifications in a chat's drawer, beside its plugins' (the reference puts
//! Loop's own there: "scheduled runs, failed runs and scheduled scripts and plugin actions that
//! failed, workflows"). This host tells those about its plugins: a scheduled action that
//! failed (the host API's action route, called by a schedule's CronJob, got an error:
//! `crate::host_api::actions`), an agent run that failed (the fan-out, once the run ended
//! Failed: `crate::fanout::failed_runs`), and a workflow's call of a plugin's action or tool
//! that failed (`crate::host_api::{actions, tools}`, the call's `run_id` naming the workflow
//! run and node). Scheduled runs and scripts are Loop's own (prompts and scripts on a
//! schedule): this host runs none, so it has none to tell.
//!
//! They are kept in one inbox ConfigMap per chat, `<chat>-host-inbox`, owned by the Channel
//! (they go with the chat), labelled like the plugins' inboxes but with an empty
//! `plugins.loop.dev/plugin`; each entry is a notification whose `data` names the plugin it is
//! about. Its key is a hash of what it tells, so telling one failure twice (two replicas, a
//! retry) writes the same key, and the newest 100 are kept as a plugin's are.

use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::inbox::{self, Entry, Kind, Level};
use crate::config_map::DataPatch;
use model::names;
use model::resources::{AgentRun, Channel};

/// The host inbox ConfigMap of a chat.
pub fn inbox_name(chat: &str) -> String {
    names::join_name(&[chat, "host-inbox"])
}

/// Whether `map` is a chat's host inbox (its plugin label empty).
pub fn is_host_inbox(map: &ConfigMap) -> bool {
    inbox::plugin_of(map).is_empty()
}

/// The host inbox of `chat` as created when it does not exist yet, owned by the Channel.
pub fn template(chat: &Channel) -> ConfigMap {
    let name = chat.name_any();
    let labels = names::labels("", &chat.spec.project, &name, "inbox");
    crate::config_map::empty(
        inbox_name(&name),
        &chat.namespace().unwrap_or_default(),
        labels,
        chat.owner_ref(&()),
    )
}

/// What a host notification tells.
#[derive(Clone, Debug)]
pub enum About<'a> {
    /// A schedule's call of an action failed.
    FailedAction {
        plugin: &'a str,
        action: &'a str,
        task: &'a str,
        why: &'a str,
    },
    /// An agent run ended Failed.
    FailedRun { run: &'a AgentRun },
    /// A workflow's call (`run_id` `workflow:<run id>:<node id>`) of a plugin's action or tool
    /// (`what`: `action sync`, `tool grade`) failed.
    FailedWorkflowCall {
        plugin: &'a str,
        what: &'a str,
        run_id: &'a str,
        why: &'a str,
    },
}

/// The notification, posted at `created` (RFC 3339).
pub fn entry(about: &About, created: &str) -> Entry {
    let (key, title, body, data) = match about {
        About::FailedAction {
            plugin,
            action,
            task,
            why,
        } => (
            format!("action/{plugin}/{action}/{task}/{created}"),
            format!("Scheduled action {action} of {plugin} failed"),
            why.to_string(),
            json!({ "plugin": plugin, "action": action, "task": task }),
        ),
        About::FailedWorkflowCall {
            plugin,
            what,
            run_id,
            why,
        } => {
            let (run, node) = run_id
                .strip_prefix("workflow:")
                .and_then(|r| r.split_once(':'))
                .unwrap_or((run_id, ""));
            (
                format!("workflow/{plugin}/{run_id}/{what}"),
                format!("Workflow {run}, node {node}: {what} of {plugin} failed"),
                why.to_string(),
                json!({ "plugin": plugin, "workflow_run": run, "node": node, "call": what }),
            )
        }
        About::FailedRun { run } => {
            let status = run.status.clone().unwrap_or_default();
            let reason = status.reason.unwrap_or_else(|| "Failed".into());
            let why = status.result.unwrap_or_default();
            (
                format!("run/{}", run.uid().unwrap_or_else(|| run.name_any())),
                format!(
                    "Agent run of {} ({}) failed: {reason}",
                    run.spec.plugin, run.spec.agent
                ),
                if why.is_empty() { reason } else { why },
                json!({ "plugin": run.spec.plugin, "run": run.name_any(), "agent": run.spec.agent }),
            )
        }
    };
    Entry {
        id: format!("host-{}", names::short_hash(key.as_bytes())),
        kind: Kind::Notification,
        card: None,
        title: truncate(&title, inbox::MAX_TITLE),
        data: Some(data),
        body: Some(truncate(&body, inbox::MAX_BODY)),
        level: Some(Level::Error),
        created: created.into(),
    }
}

/// What to merge into the host inbox holding `existing` for `entry`: nothing when it holds it
/// already, else the entry and the oldest to drop.
pub fn patch(existing: &[Entry], entry: &Entry) -> Option<DataPatch> {
    if existing.iter().any(|e| e.id == entry.id) {
        return None;
    }
    let mut patch: DataPatch = inbox::to_drop(existing, entry)
        .into_iter()
        .map(|k| (k, None))
        .collect();
    let text = serde_json::to_string(entry).expect("entries serialize");
    patch.insert(entry.id.clone(), Some(text));
    Some(patch)
}

/// Tells `about` in `chat`'s drawer at `now` (RFC 3339), unless its host inbox (as the index
/// holds it) has it already; answers whether the drawer has it now. Best effort: a failed write
/// is logged.
pub async fn tell(
    writer: &dyn super::marks::MarkWriter,
    index: &crate::index::Index,
    chat: &Channel,
    about: &About<'_>,
    now: &str,
) -> bool {
    let entry = entry(about, now);
    let name = inbox_name(&chat.name_any());
    let namespace = chat.namespace().unwrap_or_default();
    let existing = index
        .config_maps
        .get(&kube::runtime::reflector::ObjectRef::new(&name).within(&namespace))
        .map(|m| inbox::entries(&m))
        .unwrap_or_default();
    let Some(patch) = patch(&existing, &entry) else {
        return true;
    };
    match writer.post(&template(chat), &patch).await {
        Ok(()) => {
            tracing::info!(chat = %chat.name_any(), title = %entry.title, "told the chat");
            true
        }
        Err(e) => {
            tracing::warn!(chat = %chat.name_any(), error = %e, "could not tell the chat");
            false
        }
    }
}

/// `text` cut to at most `max` characters (the last an ellipsis when cut).
fn truncate(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resources::{AgentRunPhase, AgentRunSpec, AgentRunStatus, ChannelKind, ChannelSpec};

    fn run() -> AgentRun {
        let mut run = AgentRun::new(
            "quiz-run-1",
            AgentRunSpec {
                plugin: "quiz".into(),
                channel: "general".into(),
                thread: "plugin:quiz".into(),
                agent: "tutor".into(),
                read_only: true,
                tools: vec![],
                prompt: "p".into(),
            },
        );
        run.metadata.uid = Some("uid-1".into());
        run.status = Some(AgentRunStatus {
            phase: Some(AgentRunPhase::Failed),
            reason: Some("DeadlineExceeded".into()),
            ..Default::default()
        });
        run
    }

    #[test]
    fn a_failure_told_twice_is_one_entry() {
        let first = entry(&About::FailedRun { run: &run() }, "2026-12-05T09:00:00Z");
        let again = entry(&About::FailedRun { run: &run() }, "2026-12-05T09:00:05Z");
        assert_eq!(first.id, again.id);
        assert!(first.id.starts_with("host-") && read_marks_key_fits(&first.id));
        assert_eq!(
            first.title,
            "Agent run of quiz (tutor) failed: DeadlineExceeded"
        );
        assert_eq!(first.body.as_deref(), Some("DeadlineExceeded"));
        assert_eq!(first.data.as_ref().unwrap()["plugin"], "quiz");
        assert!(patch(&[], &first).is_some());
        assert_eq!(patch(std::slice::from_ref(&first), &again), None);
    }

    fn read_marks_key_fits(id: &str) -> bool {
        super::super::read_marks::mark_key(id).is_some()
    }

    #[test]
    fn a_failed_workflow_call_names_the_run_and_node_once() {
        let about = About::FailedWorkflowCall {
            plugin: "quiz",
            what: "tool grade",
            run_id: "workflow:r-17:n3",
            why: "the tool answered an error",
        };
        let first = entry(&about, "2026-12-05T09:00:00Z");
        let again = entry(&about, "2026-12-05T09:00:09Z");
        assert_eq!(first.id, again.id, "a retried node is told once");
        assert_eq!(
            first.title,
            "Workflow r-17, node n3: tool grade of quiz failed"
        );
        assert_eq!(first.data.as_ref().unwrap()["node"], "n3");
        assert_eq!(first.level, Some(Level::Error));
    }

    #[test]
    fn a_failed_action_says_why_within_the_bounds() {
        let why = "é".repeat(5000);
        let e = entry(
            &About::FailedAction {
                plugin: "echo",
                action: "tick",
                task: "echo-general-tick",
                why: &why,
            },
            "2026-12-05T09:00:00Z",
        );
        assert_eq!(e.title, "Scheduled action tick of echo failed");
        assert!(e.body.as_ref().unwrap().chars().count() <= inbox::MAX_BODY);
        assert_eq!(e.data.as_ref().unwrap()["task"], "echo-general-tick");
    }

    #[test]
    fn the_host_inbox_is_the_chats_and_goes_with_it() {
        let mut chat = Channel::new(
            "general",
            ChannelSpec {
                project: "proj".into(),
                kind: ChannelKind::Channel,
                parent: None,
                app: model::resources::App::Desktop,
                hidden: false,
                working_tree: None,
            },
        );
        chat.metadata.namespace = Some("team".into());
        chat.metadata.uid = Some("uid-chat".into());
        let map = template(&chat);
        assert_eq!(map.name_any(), "general-host-inbox");
        assert!(is_host_inbox(&map));
        assert_eq!(map.owner_references()[0].kind, "Channel");
        assert_eq!(map.labels()[names::LABEL_CHANNEL], "general");
    }
}
