//! `spec.runner` of HostConfig: the agent runner contract, what runs each AgentRun.
//!
//! The controller runs each run as a Job of this image in the run's namespace (docs/runner.md
//! is the contract for the runner's side: the environment it gets, what its exit means). The
//! credentials the runner needs (a model provider's key) are a Secret in the run's namespace,
//! its keys given to the runner as environment variables; nothing of it reaches the plugin.

use k8s_openapi::api::core::v1::ResourceRequirements;
use kube::KubeSchema;
use serde::{Deserialize, Serialize};

/// The default time limit of a run, in seconds.
pub const DEFAULT_RUN_SECONDS: u32 = 600;

/// The image, command and limits every agent run runs with.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AgentRunner {
    /// The runner's image (`loop-plugins agent` is in the loop-plugins image).
    #[schemars(length(min = 1, max = 512))]
    pub image: String,
    /// The command it runs, replacing the image's entrypoint; empty keeps the entrypoint.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    pub command: Vec<String>,
    /// The runner container's requests and limits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// The ServiceAccount the runner's Pod runs as, in the run's namespace; none: the
    /// namespace's default, its token not mounted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub service_account: Option<String>,
    /// A Secret in the run's namespace whose keys the runner gets as environment variables
    /// (a model endpoint's key); optional, so a run still starts where it is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253))]
    pub credentials_secret: Option<String>,
    /// The longest a run may take, in seconds; past it the run fails.
    #[serde(default = "default_run_seconds")]
    #[schemars(range(min = 1, max = 86400))]
    pub time_limit_seconds: u32,
}

fn default_run_seconds() -> u32 {
    DEFAULT_RUN_SECONDS
}
