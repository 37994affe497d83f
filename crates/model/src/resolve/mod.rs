//! Config resolution, as pure functions of the declared resources: whether a chat runs
//! plugins at all, whether a project enables a plugin, the settings a plugin sees (and the
//! values refused), the schedules a project asks for, and the trust that makes a project's
//! values count.
//!
//! - [`chat`]: whether a chat runs plugins (one rule, used by the controller and the servers);
//! - [`capabilities`]: the capabilities that count for an installed plugin;
//! - [`trust`]: which project config is approved (from the Project and its ProjectTrust);
//! - [`enabled`]: whether a plugin runs in a project;
//! - [`settings`]: the settings a plugin sees, the values left out, and where each secret
//!   setting's value is (a Secret reference);
//! - [`schedules`]: the scheduled tasks asked for, and the entries that yield none;
//! - [`approval`]: which of an agent's tool calls wait for a person (risk profiles).

pub mod approval;
pub mod capabilities;
pub mod chat;
pub mod edit;
pub mod enabled;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod schedules;
pub mod settings;
pub mod trust;

pub use capabilities::approved_capabilities;
pub use chat::{gets_schedules, runs_plugins};
pub use enabled::{Enabled, EnabledReason, plugin_enabled};
pub use schedules::{
    ResolvedSchedule, ResolvedSchedules, ScheduleProblem, ScheduleProblemKind, resolve_schedules,
};
pub use settings::{
    ConfigField, LeftOut, LeftOutReason, NoSecretSource, ResolvedSettings, SecretSource,
    resolve_settings, secret_source, secret_sources,
};
pub use trust::{ApprovedConfig, ProjectView, TrustState, approved_plugins};
