//! The config model (the `plugins` part of Loop's global and project configs) and its
//! resolution, as pure functions: which plugins are enabled, the settings a plugin sees, the
//! schedules a project asks for, and the trust that makes a project's values count.

mod model;

pub use model::{PluginConfig, PluginsConfig, ScheduleEntry, ScheduleType};
