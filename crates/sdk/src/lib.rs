//! The Loop plugin SDK for Rust: what a plugin needs to serve the host → plugin contract
//! (`openapi/plugin-contract-v1.yaml`), so an author writes handlers, not HTTP.
//!
//! - [`env`](mod@env): the environment the host starts a plugin with (port, secret and token files,
//!   the Plugin API's URL, `/data`, the manifest);
//! - [`wire`]: the contract's request and answer bodies, hand-written with serde and held to
//!   the spec by a drift test (`tests/wire_drift.rs`): a handful of small types read better
//!   written out than generated, and the test fails when a property is added, renamed or
//!   removed on either side;
//! - [`server`]: [`Plugin`], a builder of handlers for the manifest's actions, tools,
//!   switches, events and run ends, and the author's own `/x` router; it serves them behind
//!   the secret (401 on every route), answers 202 for an action and runs it in the
//!   background, turns a tool's error into an `is_error` result, answers 404/422 for what the
//!   manifest does not declare, runs the author's middleware around every route once the
//!   secret is checked, and shuts down gracefully (requests in flight finish, background
//!   actions are cancelled and waited for).
//!
//! The manifest is `loop-plugins-manifest`'s [`Manifest`](manifest::Manifest): the same
//! parser and rules as the controller's admission, re-exported here as [`manifest`].
//!
//! - [`api`]: the Plugin API (plugin → host): [`api::Client`], its wire types and limits;
//! - [`testing`]: for the plugin's own tests, [`testing::FakeHost`], the Plugin API served
//!   from memory and held to the manifest as the host holds it, recording what the plugin did.

pub mod api;
pub mod env;
pub mod server;
pub mod testing;
pub mod wire;

pub use env::Env;
pub use manifest;
pub use server::{
    ActionContext, Background, BuildError, Plugin, Server, ToolError, shutdown_signal,
};
pub use wire::{
    ActionRequest, ContentBlock, Event, RunDone, RunStatus, SwitchRequest, SwitchState,
    ToolRequest, ToolResult, Trigger,
};
