//! The echo plugin: a Loop plugin that serves the whole plugin contract
//! (openapi/plugin-contract-v1.yaml) and journals every request, so tests of the host can
//! see what reached it. See README.md for its environment, routes and test hooks.

pub mod app;
pub mod auth;
pub mod config;
pub mod error;
pub mod hang;
pub mod journal;
pub mod layers;
pub mod loop_api;
pub mod manifest;
pub mod routes;
pub mod settings;
pub mod state;
pub mod switches;

pub use app::{Plugin, PluginOptions};
pub use config::Config;
pub use manifest::Manifest;
pub use state::AppState;
