//! The model of loop-plugins: what the reference documents say, as types and pure functions.
//! Nothing here talks to a cluster or the network.
//!
//! `plugin.json` and every rule of it ([`manifest`]), the schedules it names ([`schedule`])
//! and timestamps ([`time`]) are the manifest crate's (crates/manifest), re-exported here under
//! those names. Layered from the bottom up; a module imports only those above it in this list:
//! - [`names`]: names, labels and field managers of everything we make;
//! - [`contract`]: the plugin container's port, paths and Secret keys, and who it runs as;
//! - [`security`]: the security settings of every Pod and container we make;
//! - [`run_contract`]: the agent runner's environment and files;
//! - [`schema`]: JSON schema helpers for the CRDs;
//! - [`config`]: the `plugins` part of a global or project config, and its hash;
//! - [`resources`]: the custom resources;
//! - [`resolve`]: config resolution (enabled, settings, schedules, trust) and whether a chat
//!   runs plugins;
//! - [`crdgen`]: the CRDs as YAML.

pub mod config;
pub mod contract;
pub mod crdgen;
pub mod names;
pub mod resolve;
pub mod resources;
pub mod run_contract;
pub mod schema;
pub mod security;
pub mod task;

pub use manifest::{self, schedule, time};
