//! `GET .../channels/{channel}/runs`: the agent runs plugins started in a chat (`POST /runs`
//! of the Plugin API), newest first, as the console lists them. Read from the index, never
//! the cluster; each run's view is the pure [`RunView::of`].
//!
//! `GET .../channels/{channel}/runs/{run}`: one run as the console's agent view shows it
//! ([`RunDetail`]): its view, prompt and transcript, the tool calls in order
//! (`crate::transcript`). The run comes from the index; its transcript is read from the
//! cluster at each request (one GET of one ConfigMap), so no replica holds every run's
//! transcript in memory for the few that are looked at.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use serde::Serialize;
use serde_json::json;

use super::auth::Permission;
use super::error::{Code, HostError};
use super::state::HostState;
use crate::clock;
use crate::delivery::target;
use crate::transcript::entry::{Entry, Transcript};
use model::resources::{AgentRun, AgentRunPhase};

/// One run as the list answers it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunView {
    /// The AgentRun's name: the run id the plugin got.
    pub id: String,
    pub plugin: String,
    pub agent: String,
    /// The hidden thread it runs in.
    pub thread: String,
    /// `Queued` until the controller started it.
    pub phase: AgentRunPhase,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    pub tool_calls: u32,
}

impl RunView {
    pub fn of(run: &AgentRun) -> Self {
        let status = run.status.clone().unwrap_or_default();
        let time = |t: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Time>| {
            t.and_then(clock::from_kube).map(clock::rfc3339)
        };
        Self {
            id: run.name_any(),
            plugin: run.spec.plugin.clone(),
            agent: run.spec.agent.clone(),
            thread: run.spec.thread.clone(),
            phase: status.phase.unwrap_or(AgentRunPhase::Queued),
            reason: status.reason,
            result: status.result,
            created: time(run.metadata.creation_timestamp.as_ref()),
            started: time(status.start_time.as_ref()),
            ended: time(status.end_time.as_ref()),
            tool_calls: status.tool_call_count,
        }
    }
}

/// One run as its route answers it: the list's view, with the prompt and the calls.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDetail {
    #[serde(flatten)]
    pub view: RunView,
    pub prompt: String,
    /// The tool calls the transcript keeps, in the order they came.
    pub calls: Vec<Entry>,
    /// How many earlier calls the transcript dropped.
    pub dropped: u32,
}

impl RunDetail {
    pub fn of(run: &AgentRun, transcript: Transcript) -> Self {
        Self {
            view: RunView::of(run),
            prompt: run.spec.prompt.clone(),
            calls: transcript.calls,
            dropped: transcript.dropped,
        }
    }
}

/// The runs of `chat` among `runs`, newest first (by creation, then name).
pub fn chat_runs<'a>(runs: impl IntoIterator<Item = &'a AgentRun>, chat: &str) -> Vec<RunView> {
    let mut views: Vec<RunView> = runs
        .into_iter()
        .filter(|r| r.spec.channel == chat)
        .map(RunView::of)
        .collect();
    views.sort_by(|a, b| b.created.cmp(&a.created).then_with(|| b.id.cmp(&a.id)));
    views
}

/// `GET .../channels/{channel}/runs`.
pub async fn list(
    State(s): State<HostState>,
    Path((ns, chat)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    s.authorize(&headers, &Permission::list_runs(&ns)).await?;
    target::chat(s.index(), &ns, &chat)?;
    let runs: Vec<Arc<AgentRun>> = s
        .index()
        .runs
        .state()
        .into_iter()
        .filter(|r| r.namespace().as_deref() == Some(ns.as_str()))
        .collect();
    let views = chat_runs(runs.iter().map(Arc::as_ref), &chat);
    Ok(Json(json!({ "runs": views })).into_response())
}

/// `GET .../channels/{channel}/runs/{run}`: 404 `run_not_found` unless the run is the chat's.
pub async fn get(
    State(s): State<HostState>,
    Path((ns, chat, run)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    s.authorize(&headers, &Permission::get_run(&ns, &run))
        .await?;
    target::chat(s.index(), &ns, &chat)?;
    let found = s
        .index()
        .runs
        .get(&ObjectRef::new(&run).within(&ns))
        .filter(|r| r.spec.channel == chat)
        .ok_or_else(|| {
            HostError::new(
                Code::RunNotFound,
                format!("chat {chat} has no agent run {run}"),
            )
        })?;
    let transcript = match &s.transcripts {
        None => Transcript::default(),
        Some(store) => crate::transcript::read(store.as_ref(), &found)
            .await
            .map_err(|e| {
                HostError::new(Code::Unavailable, format!("the run's transcript: {e}"))
                    .retry_after(1)
            })?,
    };
    Ok(Json(RunDetail::of(&found, transcript)).into_response())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use model::resources::{AgentRunSpec, AgentRunStatus};

    use super::*;

    fn run(id: &str, chat: &str, created: &str, phase: Option<AgentRunPhase>) -> AgentRun {
        let mut r = AgentRun::new(
            id,
            AgentRunSpec {
                plugin: "quiz".into(),
                channel: chat.into(),
                thread: format!("{chat}-plugin-quiz"),
                agent: "grade".into(),
                read_only: true,
                tools: vec![],
                prompt: "p".into(),
            },
        );
        r.metadata.creation_timestamp = Some(Time(created.parse().unwrap()));
        r.status = phase.map(|phase| AgentRunStatus {
            phase: Some(phase),
            tool_call_count: 2,
            ..Default::default()
        });
        r
    }

    #[test]
    fn a_chats_runs_newest_first_queued_until_started() {
        let runs = [
            run(
                "run-a",
                "general",
                "2026-12-05T09:00:00Z",
                Some(AgentRunPhase::Succeeded),
            ),
            run("run-b", "general", "2026-12-05T10:00:00Z", None),
            run("run-c", "random", "2026-12-05T11:00:00Z", None),
        ];
        let views = chat_runs(&runs, "general");
        let ids: Vec<(&str, AgentRunPhase)> =
            views.iter().map(|v| (v.id.as_str(), v.phase)).collect();
        assert_eq!(
            ids,
            [
                ("run-b", AgentRunPhase::Queued),
                ("run-a", AgentRunPhase::Succeeded)
            ]
        );
        assert_eq!(views[1].tool_calls, 2);
        assert_eq!(views[1].created.as_deref(), Some("2026-12-05T09:00:00Z"));
    }
}
