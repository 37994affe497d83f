//! The custom resources of group `plugins.loop.dev`, version `v1alpha1`.
//!
//! Spec is what people declare; status is what the controller (or the API server) observed.

// kube's `printcolumn(name = .., type_ = ..)` repeats keys across columns by design.
#![allow(clippy::duplicated_attributes)]

mod agent_run;
mod channel;
mod condition;
mod host_config;
mod plugin;
mod plugin_instance;
mod project;
mod project_trust;
mod runner;
mod tool_call_approval;

pub use agent_run::{
    AgentRun, AgentRunPhase, AgentRunSpec, AgentRunStatus, MAX_RECORDED_TOOL_CALLS, RunToolCall,
};
pub use channel::{
    App, AppliedSchedule, Channel, ChannelKind, ChannelSpec, ChannelStatus, WorkingTree,
};
pub use condition::{Condition, ConditionStatus, set_condition};
pub use host_config::{
    AgentGate, ApprovalSettings, GateAudit, Gates, HOST_CONFIG_NAME, HostConfig, HostConfigSpec,
    HostConfigStatus, HostPlugins, RegistryConfig, RegistryMirror, RiskLevel, RiskProfile,
    SignatureMode,
};
pub use plugin::{
    ADMITTED, AdmissionStage, ImageStatus, Plugin, PluginManifestSpec, PluginSignature, PluginSpec,
    PluginStatus, RegisteredTool, RenderError, plugin_yaml,
};
pub use plugin_instance::{
    BreakerState, InstancePhase, PluginInstance, PluginInstanceSpec, PluginInstanceStatus,
    RefusedSetting, SettingSource, SwitchState,
};
pub use project::{Project, ProjectSpec, ProjectStatus};
pub use project_trust::{ProjectTrust, ProjectTrustSpec};
pub use runner::{AgentRunner, DEFAULT_RUN_SECONDS};
pub use tool_call_approval::{
    ApprovalVia, Decision, MAX_APPROVAL_INPUT_BYTES, ToolCallApproval, ToolCallApprovalSpec,
    ToolCallApprovalStatus,
};

/// The API group of every resource here.
pub const GROUP: &str = "plugins.loop.dev";
/// The API version of every resource here.
pub const VERSION: &str = "v1alpha1";
