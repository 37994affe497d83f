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
//!
//! A call to a stopped container records demand on its PluginInstance (`lastActivity`), waits
//! with the other calls for it (at most [`HostSettings::max_waiting`]) until the Pod watch sees
//! it Ready, then goes through. Every request to a plugin carries its secret. Behind each
//! container is a breaker (3 calls in a row unanswered → 30 s of failing at once → one trial).
//! Callers authenticate with their Kubernetes token and RBAC authorizes them (see [`auth`]).
//!
//! The parts, each with one job:
//! - pure rules: [`breaker`], [`tools`] (schemas, results), [`actions`], [`events`] (routing),
//!   [`switches`], [`demand`] (when to write activity), [`pods`] (where a container answers),
//!   [`config_events`] (which config writes send `settings.changed`), [`settings_sent`]
//!   (which replica sends it);
//! - reads: [`target`] (stores → the instance a call goes to);
//! - I/O: [`call`] (HTTP to plugins), [`auth`] (reviews), [`status`] (instance writes),
//!   [`state`] (scale-from-zero and the breaker around each call);
//! - `routes`: the handlers; [`metrics`]; [`trigger`]: the `loop-plugins trigger` CLI.
//!
//! Wiring it into the API server: build the state with [`HostState::new`] (it starts its own
//! watches) and merge [`router`] into the Plugin API's router with `Router::merge`.

pub mod actions;
pub mod auth;
pub mod breaker;
pub mod call;
pub mod config;
pub mod config_events;
pub mod demand;
pub mod error;
pub mod events;
pub mod metrics;
pub mod pods;
mod routes;
pub mod settings_sent;
pub mod state;
pub mod status;
pub mod switches;
pub mod target;
pub mod tools;
pub mod trigger;

#[cfg(test)]
mod tests;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};

pub use config::{CallKind, HostSettings, Limits};
pub use error::{Code, HostError};
pub use routes::{PREFIX, ROUTES, deliver_event};
pub use state::HostState;

/// The host API's routes with their layers (metrics, one error shape). Merge it into the API
/// server's router; it has no fallback of its own, so the merge takes the other's.
pub fn router(state: HostState) -> Router {
    let metrics = state.metrics().clone();
    Router::new()
        .nest(PREFIX, routes::routes(&state))
        .with_state(state)
        .layer(middleware::from_fn(error_shape))
        .layer(middleware::from_fn_with_state(metrics, metrics::track))
}

/// Gives every error answer the one JSON shape, whoever made it (the router's 405, a body
/// limit, an extractor's rejection) — except what a plugin answered through `/x`.
async fn error_shape(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    let passthrough = response.extensions().get::<routes::Passthrough>().is_some();
    if passthrough || !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let message = match text.trim() {
        "" => status.canonical_reason().unwrap_or("error").to_string(),
        t => t.to_string(),
    };
    let shaped = HostError::new(Code::for_status(status), message).into_response();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let (_, body): (_, Body) = shaped.into_parts();
    Response::from_parts(parts, body)
}
