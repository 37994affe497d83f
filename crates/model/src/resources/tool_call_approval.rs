//! `ToolCallApproval`: an agent's call of a plugin tool, waiting for a person (zeroclaw's third
//! operator decision: "A plugin tool call needs operator approval like any other tool that is
//! not pre-approved ... Without an approver the call is denied and does not run").
//!
//! The API server makes one in the chat's namespace when an agent calls a tool its risk
//! profile does not pre-approve (`crate::resolve::approval`), and holds the call until a
//! person decides through the host API (the `approve` verb on `toolcallapprovals`, checked by
//! SubjectAccessReview, as Kubernetes checks `approve` for a CertificateSigningRequest) or the
//! deadline passes. Its spec is the call exactly as the tool would get it, and never changes
//! (a validation rule refuses any edit): what a person approved is what runs. Its status is
//! the decision, who made it, and when; the API server writes it.

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

/// The most bytes of a tool's input (as JSON) an approval shows: a larger input cannot be
/// shown to a person, so its call is denied saying so.
pub const MAX_APPROVAL_INPUT_BYTES: usize = 64 * 1024;

/// An agent's tool call waiting for a person's decision.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "plugins.loop.dev",
    version = "v1alpha1",
    kind = "ToolCallApproval",
    namespaced,
    status = "ToolCallApprovalStatus",
    shortname = "approval",
    category = "loop-plugins",
    doc = "An agent's plugin tool call waiting for a person to approve or deny it",
    printcolumn(name = "Chat", type_ = "string", json_path = ".spec.chat"),
    printcolumn(name = "Plugin", type_ = "string", json_path = ".spec.plugin"),
    printcolumn(name = "Tool", type_ = "string", json_path = ".spec.tool"),
    printcolumn(name = "Agent", type_ = "string", json_path = ".spec.agent"),
    printcolumn(name = "Decision", type_ = "string", json_path = ".status.decision"),
    printcolumn(name = "By", type_ = "string", json_path = ".status.decidedBy"),
    printcolumn(name = "Until", type_ = "string", json_path = ".spec.deadline"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("self == oldSelf").message("an approval's call does not change: decide it or let it expire"))]
#[serde(rename_all = "camelCase")]
pub struct ToolCallApprovalSpec {
    /// The chat the call is in (a channel, thread or worktree thread).
    pub chat: String,
    pub plugin: String,
    /// The tool as the agent calls it (`plugin_<tool>`).
    pub tool: String,
    /// The manifest's agent that calls it.
    pub agent: String,
    /// The agent run (an AgentRun's name, or a host API call's `run_id`).
    pub run: String,
    /// Where the call came from.
    pub via: ApprovalVia,
    /// The risk profile that asked for a person (`HostConfig.spec.riskProfiles`).
    pub profile: String,
    /// The tool's input exactly as the tool gets it once approved (at most
    /// [`MAX_APPROVAL_INPUT_BYTES`] as JSON).
    #[schemars(schema_with = "crate::schema::any_json_map")]
    pub input: serde_json::Value,
    /// When the agent asked (RFC 3339, to the millisecond: calls made within one second are
    /// told apart and listed in order).
    pub requested_at: String,
    /// Until when it waits; past it, the call is denied (RFC 3339).
    pub deadline: String,
}

/// The way an agent's tool call reached the host.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum ApprovalVia {
    /// An agent run's MCP endpoint (`tools/call`).
    Mcp,
    /// The host API's `POST .../tools/{tool}` with an agent.
    HostApi,
}

/// What was decided.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallApprovalStatus {
    /// `Pending` until someone decides or the deadline passes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decision: Option<Decision>,
    /// Who decided (the reviewed user's name), or `loop-plugins` when it expired.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    /// When (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    /// Why, as the person (or the host) said it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// A person's answer, or the host's when nobody answered.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, schemars::JsonSchema)]
pub enum Decision {
    /// Waiting for a person.
    Pending,
    /// Approved, this call only.
    Approved,
    /// Approved, and the tool pre-approved for the rest of the run (or, for a host API call,
    /// the agent's turn), unless its profile always asks for it.
    ApprovedAlways,
    /// Denied by a person: the call does not run.
    Denied,
    /// Nobody decided before the deadline: the call was denied and did not run.
    Expired,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Pending => "Pending",
            Decision::Approved => "Approved",
            Decision::ApprovedAlways => "ApprovedAlways",
            Decision::Denied => "Denied",
            Decision::Expired => "Expired",
        }
    }

    /// Whether the call runs.
    pub fn runs(self) -> bool {
        matches!(self, Decision::Approved | Decision::ApprovedAlways)
    }

    /// Whether it is final (no longer waiting).
    pub fn is_final(self) -> bool {
        self != Decision::Pending
    }
}

impl ToolCallApproval {
    /// The decision, `Pending` until one is written.
    pub fn decision(&self) -> Decision {
        self.status
            .as_ref()
            .and_then(|s| s.decision)
            .unwrap_or(Decision::Pending)
    }
}
