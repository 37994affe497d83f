//! Tool calls: the one path by which a plugin's tool is called, whoever calls it.
//!
//! - The host API's `POST .../plugins/{plugin}/tools/{tool}` (`crate::host_api::tools`): the
//!   app's agents and workflows;
//! - an agent run's MCP endpoint (`crate::mcp`): `tools/call` of `plugin_<tool>`.
//!
//! Both check their caller their own way, then call [`ToolCalls::call`]: who may call the tool and
//! with what time limit ([`check::check_call`]: a refusal is a [`ToolCallError`], which each
//! API answers in its own terms), the input against the tool's `input_schema`, the call
//! through the one way to call a plugin (`crate::Calls`: scale from zero, breaker, time
//! limit, answer cap), and the answer made the result the caller sees, `structured_content`
//! checked against `output_schema` ([`check::result_of`]). Every way the call itself can fail
//! is an `is_error` result the agent reads, never an error answer.

pub mod approval;
pub mod check;

use approval::{Answer, ApprovalDesk, Asked};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use model::resources::ApprovalVia;

use crate::client::PluginRequest;
use crate::{CallError, CallKind, CallOptions, Calls, Target, failure};
pub use check::{
    CalledBy, INPUT_INVALID, OUTPUT_INVALID, ToolCall, ToolResult, check_call, check_input,
    is_workflow_run_id, plugin_body, result_of,
};

/// A tool call refused before the plugin is called: what the caller asked is not a call the
/// manifest allows.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ToolCallError {
    #[error("plugin {plugin} has no tool {tool:?}")]
    ToolNotFound { plugin: String, tool: String },
    #[error("plugin {plugin} has no agent {agent:?}")]
    AgentNotFound { plugin: String, agent: String },
    #[error(
        "the manifest does not give agent {agent:?} tool {tool:?} (only a workflow may call any tool)"
    )]
    ToolNotGiven { agent: String, tool: String },
    /// The call breaks a rule of its shape (its field named first).
    #[error("{0}")]
    Invalid(String),
}

impl ToolCallError {
    /// The host API's code for it.
    pub fn code(&self) -> &'static str {
        match self {
            ToolCallError::ToolNotFound { .. } => "tool_not_found",
            ToolCallError::AgentNotFound { .. } => "agent_not_found",
            ToolCallError::ToolNotGiven { .. } => "tool_not_given",
            ToolCallError::Invalid(_) => "invalid_body",
        }
    }
}

/// The one path of a tool call: the call's rules, a person's approval when an agent's call
/// needs one ([`approval`]), and the call through the one way to a plugin.
#[derive(Clone)]
pub struct ToolCalls {
    calls: Calls,
    desk: ApprovalDesk,
}

impl ToolCalls {
    pub fn new(calls: Calls, desk: ApprovalDesk) -> Self {
        Self { calls, desk }
    }

    pub fn calls(&self) -> &Calls {
        &self.calls
    }

    pub fn desk(&self) -> &ApprovalDesk {
        &self.desk
    }

    /// Calls `tool` of the target's plugin for `call`: who calls it and with what time limit
    /// checked (a refusal), then the input against `input_schema`; an agent's call then waits
    /// for a person when its risk profile says so (`owner` owns the approval it makes: the
    /// run, else the instance); then the call through the one way to a plugin (starting its
    /// container) with the input as approved, the answer made a result and checked against
    /// `output_schema`. Every way the call does not run or fails is an `is_error` result.
    pub async fn call(
        &self,
        target: &Target,
        tool: &str,
        mut call: ToolCall,
        via: ApprovalVia,
        owner: OwnerReference,
    ) -> Result<ToolResult, ToolCallError> {
        let limits = self.calls.limits();
        let manifest = &target.compiled.manifest;
        let (called_by, limit) = check_call(manifest, tool, &call, limits)?;
        if let Err(refused) = check_input(&target.compiled.inputs[tool], &call.input) {
            return Ok(refused);
        }
        if let CalledBy::Agent(agent) = &called_by {
            let mcp_name = manifest
                .tool(tool)
                .map_or_else(|| format!("plugin_{tool}"), |t| t.mcp_name());
            let plugin = target.plugin_name();
            let asked = Asked {
                namespace: &target.key.namespace,
                chat: &target.chat,
                plugin: &plugin,
                tool: &mcp_name,
                agent,
                run: &call.run_id,
                via,
                input: &call.input,
                owner,
            };
            match self.desk.ask(asked).await {
                Answer::Runs(input) => call.input = input,
                Answer::Refused(result) => return Ok(result),
            }
        }
        let request = PluginRequest::json(
            CallKind::Tool,
            format!("/tools/{tool}"),
            &plugin_body(call),
            limit,
            limits.tool_answer,
        );
        let output_schema = target.compiled.outputs.get(tool);
        Ok(
            match self
                .calls
                .call_target(target, &request, CallOptions::DEMAND)
                .await
            {
                Err(CallError::Start(e)) => {
                    ToolResult::from_failure(&failure::of_start(target, &e))
                }
                Err(CallError::Plugin(failure)) => result_of(tool, Err(failure), output_schema),
                Ok(answer) => result_of(tool, Ok(answer), output_schema),
            },
        )
    }
}

/// The owner of an approval made for a call to `target` when no run owns it: the plugin's
/// instance in the chat, so the approval goes with it.
pub fn instance_owner(target: &Target) -> OwnerReference {
    use kube::Resource;
    target
        .instance
        .controller_owner_ref(&())
        .unwrap_or_default()
}
