//! The `plugins` part of Loop's global and project configs (`plugins.<id>.enabled`,
//! `.settings`, `.schedules`, and our `.secretSettings`), shared by `HostConfig` and `Project`,
//! and the hash that names a config version. What the values mean together is
//! [`crate::resolve`]'s.

mod hash;
mod level;
mod model;

pub use hash::{canonical_json, config_hash, hash_json};
pub use level::ConfigLevel;
pub use model::{PluginConfig, PluginsConfig, ScheduleEntry, SecretKeyRef, SecretSettingSource};
