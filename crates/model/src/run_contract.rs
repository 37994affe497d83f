//! The agent runner's contract, as names both sides use: the controller builds each run's Job
//! with them (crates/controller/src/runs/job.rs), `loop-plugins agent` (crates/agent) and any
//! other runner read them. docs/runner.md describes them.
//!
//! An agent run across the roles, in the order a run meets them:
//!
//! | step | role | where |
//! |---|---|---|
//! | a plugin asks for a run (`POST /runs`), counted against `plugins.daily_runs` across the replicas | API server | `crates/server/src/plugin_api/routes/runs.rs`, `quota.rs`, `shared_runs.rs` |
//! | the AgentRun, its phases and its result | the resource | `model::resources` (`AgentRun`) |
//! | a Job, a Secret with the prompt and an MCP token, a time limit; the phase from the Job | controller | `crates/controller/src/runs/` (`plan.rs` decides, `job.rs` builds, `mod.rs` writes) |
//! | the runner named by HostConfig `spec.runner` reads these names, talks to the model | runner | `crates/agent` (`loop-plugins agent`), or any image (docs/runner.md) |
//! | the agent's tools, as MCP (`POST /mcp/namespaces/{ns}/runs/{run}`) | API server | `crates/server/src/mcp/` |
//! | a tool call: checks, breaker, time limits, and a person's approval unless the risk profile pre-approves it | calls | `crates/calls/src/tool_calls/` (`approval.rs`: the `ToolCallApproval` desk) |
//! | a person approves or denies | host API, CLI, console | `crates/server/src/host_api/approvals.rs`, `src/approvals.rs`, `crates/server/src/console/assets/approvals.js` |
//! | the plugin told the run ended (`POST /runs/{id}/done`), once across the replicas | API server's fan-out | `crates/server/src/fanout/runs_done.rs` |
//! | the chat's runs listed for a person | host API, console | `crates/server/src/host_api/runs.rs` |

/// Where the runner finds the run's files (the prompt).
pub const RUN_DIR: &str = "/run/loop-run";
/// The prompt's file in [`RUN_DIR`] (and its key in the run's Secret).
pub const PROMPT_KEY: &str = "prompt";
/// The run's MCP token's file in [`RUN_DIR`] (and its key in the run's Secret): a bearer
/// token good for this run's MCP endpoint only, while the run runs.
pub const MCP_TOKEN_KEY: &str = "mcp-token";

/// The run's id (its AgentRun's name).
pub const RUN_ID: &str = "LOOP_RUN_ID";
/// The agent's id in the plugin's manifest.
pub const AGENT: &str = "LOOP_RUN_AGENT";
/// `true` for a read-only agent.
pub const READ_ONLY: &str = "LOOP_RUN_READ_ONLY";
/// The plugin's id.
pub const PLUGIN: &str = "LOOP_RUN_PLUGIN";
/// The chat.
pub const CHANNEL: &str = "LOOP_RUN_CHANNEL";
/// The hidden thread, `plugin:<id>`.
pub const THREAD: &str = "LOOP_RUN_THREAD";
/// The agent's tools as MCP tool names, comma-separated.
pub const TOOLS: &str = "LOOP_RUN_TOOLS";
/// The file holding the whole prompt.
pub const PROMPT_FILE: &str = "LOOP_RUN_PROMPT_FILE";
/// The run's time limit, in seconds.
pub const TIME_LIMIT: &str = "LOOP_RUN_TIME_LIMIT_SECONDS";
/// The file the runner writes its final message to (the container's
/// `terminationMessagePath`): the run's status and the plugin's `/done` carry it, cut to
/// [`MAX_FINAL_MESSAGE`] characters.
pub const TERMINATION_LOG: &str = "LOOP_RUN_TERMINATION_LOG";

/// The run's MCP endpoint (streamable HTTP, served by the API server): the plugin's tools the
/// manifest gives the agent, as `plugin_<tool>`.
pub const MCP_URL: &str = "LOOP_RUN_MCP_URL";
/// The file holding the bearer token for [`MCP_URL`].
pub const MCP_TOKEN_FILE: &str = "LOOP_RUN_MCP_TOKEN_FILE";

/// Where the chat's working tree is, when the chat has one (`/workspace`): mounted read-only
/// for a read-only agent, writable for the others. Not in [`RUN_ENV`]: a chat without a
/// working tree gives none.
pub const WORKSPACE: &str = "LOOP_RUN_WORKSPACE";

/// The path of run `run`'s MCP endpoint in namespace `namespace`, under the API server's URL.
pub fn mcp_path(namespace: &str, run: &str) -> String {
    format!("/mcp/namespaces/{namespace}/runs/{run}")
}

/// Where the run's container keeps its termination message (Kubernetes' default path).
pub const TERMINATION_LOG_PATH: &str = "/dev/termination-log";
/// The longest final message a run keeps, in characters (Kubernetes keeps 4096 bytes of a
/// termination message).
pub const MAX_FINAL_MESSAGE: usize = 4000;

/// Every variable above, in the order the runner gets them.
pub const RUN_ENV: [&str; 12] = [
    RUN_ID,
    AGENT,
    READ_ONLY,
    PLUGIN,
    CHANNEL,
    THREAD,
    TOOLS,
    PROMPT_FILE,
    TIME_LIMIT,
    TERMINATION_LOG,
    MCP_URL,
    MCP_TOKEN_FILE,
];
