//! Which config a value came from.

use std::fmt;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The global config (`HostConfig`) or a project's own (`Project`).
#[derive(
    Serialize, Deserialize, JsonSchema, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash,
)]
#[serde(rename_all = "lowercase")]
pub enum ConfigLevel {
    Global,
    Project,
}

impl fmt::Display for ConfigLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ConfigLevel::Global => "global",
            ConfigLevel::Project => "project",
        })
    }
}
