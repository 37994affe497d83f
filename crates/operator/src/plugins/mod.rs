//! The plugin verbs: install, upgrade, remove, stop, list, info, verify, keygen, sign. Each reads
//! what it needs (the image from its registry, HostConfig and Plugins from the cluster),
//! decides with pure code (crates/install: the candidate Plugin, the capability review, the
//! admission stages the controller runs), then writes one object, or prints it.

pub mod cluster;
pub mod error;
pub mod install;
pub mod keys;
pub mod registry;
pub mod remove;
pub mod show;
pub mod stop;
pub mod text;
pub mod verify;

pub use error::PluginError;
// The verbs' signatures take and give these (approvals, capability lines, pulled images).
pub use ::install::{candidate, check};
