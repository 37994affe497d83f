//! The plugin verbs: install, upgrade, remove, stop, list, info, verify, keygen, sign. Each reads
//! what it needs (the image from its registry, HostConfig and Plugins from the cluster),
//! decides with pure code (`candidate`, and the admission stages the controller runs, in
//! `check`), then writes one object, or prints it.

pub mod candidate;
pub mod check;
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
