//! The config model (the `plugins` part of Loop's global and project configs) and its
//! resolution, as pure functions: which plugins are enabled, the settings a plugin sees, the
//! schedules a project asks for, and the trust that makes a project's values count.
//!
//! - [`trust`]: config hashes and which project config is approved;
//! - [`enabled`]: whether a plugin runs in a project;
//! - [`settings`]: the settings a plugin sees, and the values left out;
//! - [`schedules`]: the scheduled tasks asked for, and the entries that yield none.

pub mod enabled;
#[cfg(test)]
pub(crate) mod fixtures;
mod level;
mod model;
pub mod schedules;
pub mod settings;
pub mod trust;

pub use enabled::{Enabled, EnabledReason, plugin_enabled};
pub use level::ConfigLevel;
pub use model::{PluginConfig, PluginsConfig, ScheduleEntry, ScheduleType};
pub use schedules::{
    ResolvedSchedule, ResolvedSchedules, ScheduleProblem, ScheduleProblemKind, resolve_schedules,
};
pub use settings::{LeftOut, LeftOutReason, ResolvedSettings, resolve_settings};
pub use trust::{ApprovedConfig, TrustState, approved_plugins, canonical_json, config_hash};
