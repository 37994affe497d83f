//! The model of loop-plugins: what the reference documents say, as types and pure functions.
//! Nothing here talks to a cluster or the network.
//!
//! Layered from the bottom up; a module imports only those above it in this list:
//! - [`time`]: timestamps as conditions and statuses record them;
//! - [`names`]: names, labels and field managers of everything we make;
//! - [`contract`]: the plugin container's port, paths and Secret keys;
//! - [`schema`]: JSON schema helpers for the CRDs;
//! - [`schedule`]: cron and interval schedules, and how a CronJob runs each;
//! - [`config`]: the `plugins` part of a global or project config, and its hash;
//! - [`manifest`]: `plugin.json` and every rule of it;
//! - [`resources`]: the custom resources;
//! - [`resolve`]: config resolution (enabled, settings, schedules, trust) and whether a chat
//!   runs plugins;
//! - [`crdgen`]: the CRDs as YAML.

pub mod config;
pub mod contract;
pub mod crdgen;
pub mod manifest;
pub mod names;
pub mod resolve;
pub mod resources;
pub mod schedule;
pub mod schema;
pub mod time;
