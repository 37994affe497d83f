//! The tool calls a run made, on its status: `toolCallCount` and the latest
//! [`MAX_RECORDED_TOOL_CALLS`] calls, server-side applied under a field manager of their own
//! (so neither the controller's fields nor `/done`'s are touched).
//!
//! One process serves a run's calls in the order they end and keeps the list it last wrote
//! (or tried to: a failed write's call goes with the next), seeded from the run's status the
//! first time; two replicas serving one run's calls at once could each miss the other's latest
//! call in the list (the count then says less than was called, and the two may number a call
//! of the transcript alike, one entry then taking the other's key). A runner keeps one
//! connection, so its calls land on one replica.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use crate::status::status_body;
use model::names::FIELD_MANAGER_RUN_TOOLS;
use model::resources::{AgentRun, MAX_RECORDED_TOOL_CALLS, RunToolCall};

/// The tool-call fields of a run's status.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Calls {
    pub count: u32,
    pub latest: Vec<RunToolCall>,
}

impl Calls {
    /// What the run's status says.
    pub fn of(run: &AgentRun) -> Self {
        let status = run.status.clone().unwrap_or_default();
        Self {
            count: status.tool_call_count,
            latest: status.tool_calls,
        }
    }

    /// With `call` added: counted, and the list cut to its latest.
    pub fn with(mut self, call: RunToolCall) -> Self {
        self.count = self.count.saturating_add(1);
        self.latest.push(call);
        let over = self.latest.len().saturating_sub(MAX_RECORDED_TOOL_CALLS);
        self.latest.drain(..over);
        self
    }
}

/// Writes a run's tool-call fields.
pub trait Recorder: Send + Sync {
    fn write<'a>(
        &'a self,
        run: &'a AgentRun,
        calls: &'a Calls,
    ) -> BoxFuture<'a, Result<(), String>>;
}

/// Through the Kubernetes API.
pub struct KubeRecorder {
    client: Client,
}

impl KubeRecorder {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl Recorder for KubeRecorder {
    fn write<'a>(
        &'a self,
        run: &'a AgentRun,
        calls: &'a Calls,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let api: Api<AgentRun> =
                Api::namespaced(self.client.clone(), &run.namespace().unwrap_or_default());
            let status = json!({ "toolCallCount": calls.count, "toolCalls": calls.latest });
            api.patch_status(
                &run.name_any(),
                &PatchParams::apply(FIELD_MANAGER_RUN_TOOLS).force(),
                &Patch::Apply(&status_body::<AgentRun>(status, None)),
            )
            .await
            .map(|_| ())
            .map_err(|e| format!("recording a tool call on AgentRun {}: {e}", run.name_any()))
        })
    }
}

/// The runs' tool calls this process wrote, by run uid: one write at a time per run.
pub struct ToolCallLog {
    recorder: Box<dyn Recorder>,
    runs: Mutex<HashMap<String, Arc<tokio::sync::Mutex<Option<Calls>>>>>,
}

/// How many runs the ledger remembers before it starts again (the runs that ended are no
/// longer called; a run it forgot is seeded from its status again).
const REMEMBERED: usize = 4096;

impl ToolCallLog {
    pub fn new(recorder: Box<dyn Recorder>) -> Self {
        Self {
            recorder,
            runs: Mutex::new(HashMap::new()),
        }
    }

    /// Records that `run` called `tool`, answered as an error or not; answers the call's
    /// number in the run (from 1: the count with it), which numbers it in the run's
    /// transcript too. A failed write is logged: the call itself was answered, and the next
    /// write carries it.
    pub async fn record(&self, run: &AgentRun, tool: &str, is_error: bool) -> u32 {
        let uid = run.uid().unwrap_or_else(|| run.name_any());
        let slot = {
            let mut runs = self.runs.lock().expect("the ledger's lock");
            if runs.len() >= REMEMBERED && !runs.contains_key(&uid) {
                runs.clear();
            }
            runs.entry(uid).or_default().clone()
        };
        let mut mine = slot.lock().await;
        let seen = Calls::of(run);
        let before = match mine.as_ref() {
            Some(written) if written.count >= seen.count => written.clone(),
            _ => seen,
        };
        let calls = before.with(RunToolCall {
            tool: tool.into(),
            is_error,
            at: Time(k8s_openapi::jiff::Timestamp::now()),
        });
        if let Err(e) = self.recorder.write(run, &calls).await {
            tracing::warn!(run = %run.name_any(), error = %e, "tool call not recorded");
        }
        let number = calls.count;
        *mine = Some(calls);
        number
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: &str) -> RunToolCall {
        RunToolCall {
            tool: tool.into(),
            is_error: false,
            at: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        }
    }

    #[test]
    fn every_call_is_counted_and_the_latest_are_listed() {
        let mut calls = Calls::default();
        for i in 0..MAX_RECORDED_TOOL_CALLS + 3 {
            calls = calls.with(call(&format!("t{i}")));
        }
        assert_eq!(calls.count as usize, MAX_RECORDED_TOOL_CALLS + 3);
        assert_eq!(calls.latest.len(), MAX_RECORDED_TOOL_CALLS);
        assert_eq!(calls.latest[0].tool, "t3");
        assert_eq!(
            calls.latest.last().unwrap().tool,
            format!("t{}", MAX_RECORDED_TOOL_CALLS + 2)
        );
    }
}
