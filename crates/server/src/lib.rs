//! The API server (`loop-plugins api`): the Plugin API that plugin pods call, and the host API
//! through which the app, workflows and CronJobs call plugins, as one server over one index.
//!
//! Layered from the bottom up; a module imports only those above it here:
//! - [`index`]: the one set of reflector stores of the process (and the token, Pod and
//!   manifest indexes fed by them);
//! - [`status`]: the API server's writes of PluginInstance status, a field manager per field;
//! - [`http`]: the one error body and the middleware stack;
//! - [`calls`]: the one way to call a plugin (scale-from-zero, breaker, time limits, metrics);
//! - [`delivery`]: the instance a call goes to, and events routed and sent to the containers
//!   the rules name: what the host API and the fan-out both need, below both;
//! - [`ui`]: what plugins show a person: their bundles' files from signed links, under the
//!   reference's content security policy (the host API lists the links);
//! - [`own_writes`]: what this process just wrote, over the index until its watch shows it;
//! - [`live`]: chats' live sessions, kept in the cluster so any replica serves them;
//! - [`quality`]: chats' quality scans, which the app posts and plugins read as hotspots, kept
//!   in the cluster so any replica serves them;
//! - [`transcript`]: each agent run's tool calls, recorded by [`mcp`] and read by
//!   [`host_api`], below both;
//! - [`plugin_api`], [`host_api`]: the two APIs' routes;
//! - [`mcp`]: each agent run's MCP endpoint, the plugin's tools through the host API's one
//!   way to call a tool;
//! - [`console`]: the console page (static files, its own policy), the host end of the
//!   bridge; it calls the host API from the browser, so it imports only [`ui`]'s path;
//! - [`fanout`]: what must happen once across replicas, on the fan-out Lease's holder;
//! - [`gauges`]: what the index holds, counted at each scrape (instances by phase, quota used);
//! - [`serve`]: the wiring; `records`: the replicas' shared ConfigMap records.

/// The unit tests count what each thread allocates, for the memory bound of the hostile-input
/// targets (`plugin_api::tests::hostile`).
#[cfg(test)]
#[global_allocator]
static ALLOC: hostile::Counting = hostile::Counting;

pub use ::calls::{self, delivery, status, tool_calls};
pub mod asks;
pub mod cards;
pub mod clock;
pub mod config_map;
pub mod console;
pub mod fanout;
pub mod gauges;
pub mod host_api;
pub mod http;
pub mod index;
pub mod live;
pub mod mcp;
#[cfg(test)]
mod openapi_spec;
pub mod own_writes;
pub mod person;
pub mod plugin_api;
pub mod quality;
pub mod records;
pub mod serve;
pub mod transcript;
pub mod ui;
pub mod ui_commands;
