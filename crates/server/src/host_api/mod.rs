//! The host API: how the app, workflows and CronJobs reach plugins (the Loop → plugin
//! direction), under `/api/host/v1`, beside the Plugin API on the same server. The contract is
//! `openapi/host-api-v1.yaml`; a test checks it against [`ROUTES`].
//!
//! | method | route (under `/api/host/v1/namespaces/{ns}/channels/{channel}`) | plugin route | limit |
//! |---|---|---|---|
//! | POST | `/plugins/{plugin}/actions/{action}` → 202 | `POST /actions/{action}` | 10 s |
//! | POST | `/plugins/{plugin}/tools/{tool}` → 200 tool result | `POST /tools/{tool}` | 60 s (a workflow may ask for more), answer ≤ 1 MB |
//! | GET | `/plugins/{plugin}/switches` | — | |
//! | POST | `/plugins/{plugin}/switches/{switch}` | `POST /switches/{switch}` | 10 s |
//! | any | `/plugins/{plugin}/x/{path}` | the same `/x/{path}` | 30 s, bodies ≤ 8 MB |
//! | POST | `/events` | `POST /events` on each container the rules name | 10 s each |
//! | GET | `/plugins/{plugin}/panels` | — | |
//! | GET | `/cards` (the chat's card drawer) | — | |
//! | POST | `/cards/read` | — | |
//! | GET | `/notifications` (the chat's notifications, in the drawer beside the cards) | — | |
//! | POST | `/notifications/read` | — | |
//! | PUT, GET | `/quality` (the chat's quality scan, which plugins read as hotspots) | — | |
//! | GET | `/api/host/v1/namespaces/{ns}/cards/unread` (each chat's unread cards and notifications) | — | |
//! | GET | `/api/host/v1/namespaces/{ns}/chats` (the chats, their instances, unread cards) | — | |
//! | GET | `/api/host/v1/namespaces/{ns}/plugins/changes` (`plugins.changed`, a stream) | — | |
//! | GET | `/runs` (the chat's agent runs) | — | |
//! | GET | `/runs/{run}` (one run with its prompt and transcript: the agent view) | — | |
//! | GET | `/plugins/{plugin}/settings` (effective settings: a pane's `settings.get`) | — | |
//! | POST | `/plugins/{plugin}/stop` (the Stop button) | — | |
//!
//! A call to a stopped container records demand on its PluginInstance (`lastActivity`), waits
//! with the other calls for it (at most `crate::calls::CallSettings::max_waiting`) until the Pod watch sees
//! it Ready, then goes through. Every request to a plugin carries its secret. Behind each
//! container is a breaker (3 calls in a row unanswered → 30 s of failing at once → one trial).
//! Callers authenticate with their Kubernetes token and RBAC authorizes them (see [`auth`]).
//!
//! The parts, each with one job:
//! - `routes`: the route table;
//! - the routes, each a module with its handler beside its pure rules: [`actions`], [`tools`]
//!   (the call is `crate::tool_calls`', which MCP uses too), [`switches`], [`proxy`] (`/x`),
//!   [`events`] (the answer; which containers get an event and the sending are
//!   `crate::delivery`'s, which the fan-out uses too), [`panels`], [`cards`] and
//!   [`notifications`] (the drawer: `crate::cards`), [`quality`] (the chat's quality scan:
//!   `crate::quality`); for the console: [`chats`] (the sidebar), [`runs`], [`settings`],
//!   [`stop`], [`changes`] (`plugins.changed` to clients, decided by `crate::delivery::changes`);
//! - [`state`]: what the handlers share (the caller checked, the instance found through
//!   `crate::delivery::target`, the body read, the plugin called through `crate::calls`, the
//!   one way; a failed call told by `crate::calls::failure`);
//! - I/O: [`auth`] (reviews); [`error`] (the codes); [`metrics`].
//!
//! `loop-plugins trigger`, what a schedule's CronJob runs, calls the actions route; it is the
//! binary's (`src/trigger.rs`).

pub mod actions;
pub mod approvals;
mod ask_stream;
pub mod auth;
pub mod cards;
pub mod changes;
pub mod chats;
pub mod config;
pub mod cronjobs;
pub mod error;
pub mod events;
pub mod live;
pub mod metrics;
pub mod notifications;
pub mod panels;
pub mod proxy;
pub mod quality;
mod routes;
pub mod runs;
pub mod settings;
pub mod state;
pub mod stop;
pub mod switches;
pub mod tasks;
pub mod tools;
pub mod ui_commands;
pub mod upgrade;

#[cfg(test)]
mod tests;

use axum::Router;

pub use error::{Code, HostError};
pub use routes::ROUTES;
pub use state::HostState;

/// Where the routes live.
pub const PREFIX: &str = "/api/host/v1";

/// The host API's routes, their errors in the one shape with the host API's codes. Merge it
/// into the server's router; it has no fallback of its own, so the merge takes the other's.
pub fn router(state: HostState) -> Router {
    let routes = Router::new()
        .nest(PREFIX, routes::routes(&state))
        .with_state(state);
    crate::http::shape_errors::<Code, ()>(routes)
}
