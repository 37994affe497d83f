//! `AgentRun`: an agent run a plugin asked for with POST /runs.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;

/// A run of one of a plugin's agents in the chat's hidden plugin:<id> thread.
#[derive(CustomResource, JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "plugins.loop.dev",
    version = "v1alpha1",
    kind = "AgentRun",
    namespaced,
    status = "AgentRunStatus",
    shortname = "run",
    category = "loop-plugins",
    doc = "An agent run a plugin started with POST /runs",
    printcolumn(name = "Plugin", type_ = "string", json_path = ".spec.plugin"),
    printcolumn(name = "Chat", type_ = "string", json_path = ".spec.channel"),
    printcolumn(name = "Agent", type_ = "string", json_path = ".spec.agent"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.reason"),
    printcolumn(name = "Started", type_ = "date", json_path = ".status.startTime"),
    printcolumn(name = "Tools", type_ = "integer", json_path = ".status.toolCallCount"),
    printcolumn(
        name = "Done Sent",
        type_ = "boolean",
        json_path = ".status.doneDelivered"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct AgentRunSpec {
    pub plugin: String,
    /// The chat the plugin's token is held to.
    pub channel: String,
    /// The hidden thread the run goes in: plugin:<id>.
    pub thread: String,
    /// The agent's id in the manifest.
    pub agent: String,
    /// A read-only agent runs read-only.
    #[serde(default)]
    pub read_only: bool,
    /// The tools the agent gets, as MCP tools named plugin_<tool>.
    #[serde(default)]
    pub tools: Vec<String>,
    /// The whole prompt, from the plugin.
    pub prompt: String,
}

/// How the run went: phase, result, reason and times written by the controller (which runs
/// it, crates/controller/src/runs), /done delivery by the API server.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentRunStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AgentRunPhase>,
    /// The run's final answer or error, as the agent runner reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Why a failed run failed, one word (`Failed`, `DeadlineExceeded`, `RunnerLost`), written
    /// by the controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When the controller started the run's Job.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<Time>,
    /// When the run ended, as the controller saw it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end_time: Option<Time>,
    /// POST /runs/{run_id}/done reached the plugin (written by the API server).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub done_delivered: bool,
    /// How often /done was tried without the plugin taking it (written by the API server,
    /// which gives up after a few).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub done_attempts: u32,
    /// Why the last try of /done failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub done_error: Option<String>,
    /// The SHA-256 (hex) of the run's MCP token, written by the controller as it starts the
    /// run (the token itself is only in the run's Secret): the API server's MCP endpoint
    /// knows the run's caller by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_token_sha256: Option<String>,
    /// How many tool calls the run made through its MCP endpoint (written by the API server).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_call_count: u32,
    /// The run's latest tool calls, oldest first, at most [`MAX_RECORDED_TOOL_CALLS`]
    /// (written by the API server).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<RunToolCall>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The most tool calls a run's status lists (the count goes on).
pub const MAX_RECORDED_TOOL_CALLS: usize = 32;

/// One tool call a run made.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct RunToolCall {
    /// The tool, as the manifest names it (without `plugin_`).
    pub tool: String,
    /// The result was an error (the host's or the tool's own).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub is_error: bool,
    /// When the call was answered.
    pub at: Time,
}

/// Where a run is.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgentRunPhase {
    Queued,
    Running,
    Succeeded,
    Failed,
}

impl AgentRunPhase {
    /// Whether the run has ended, so /done is owed.
    pub fn is_final(self) -> bool {
        matches!(self, Self::Succeeded | Self::Failed)
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}
