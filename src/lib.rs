//! loop-plugins: runs Loop-style plugins as pods on Kubernetes.
//!
//! The pure parts (manifest rules, config resolution, desired objects) live in modules that
//! never touch a `Client`; the thin parts that talk to the cluster or the network wrap them.

pub mod api;
pub mod config;
pub mod controller;
pub mod crdgen;
pub mod devcluster;
pub mod gate;
pub mod host;
pub mod leader;
pub mod manifest;
pub mod metrics;
#[cfg(test)]
mod openapi_spec;
pub mod operator;
pub mod records;
pub mod resources;
pub mod schedule;
