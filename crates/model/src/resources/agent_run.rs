//! `AgentRun`: an agent run a plugin asked for with POST /runs.

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

/// How the run went, written by whoever runs agents; the host records /done delivery.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentRunStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<AgentRunPhase>,
    /// The run's final answer or error, as the agent runner reports it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
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
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
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
