//! The Plugin API server (`loop-plugins api`): what plugin pods call at `$LOOP_API_URL`, under
//! `/api/plugin/v1`, with the bearer token of their instance's Secret. The contract is
//! `openapi/plugin-api-v1.yaml`; its tests check every route against it.
//!
//! | method | route | capability |
//! |---|---|---|
//! | GET | `/channel` | none |
//! | POST | `/runs` | `agent.readonly` (read-only agent) or `agent.write` |
//! | GET | `/runs/{run_id}` | `agent.readonly` or `agent.write` |
//! | PUT, DELETE | `/composer/switches/{id}` | `ui.composer_switch` |
//! | POST | `/cards`, GET `/cards/{id}` | `ui.notification.card` |
//! | POST | `/notifications` | `notifications.send` |
//! | POST | `/channel/live/control`, PUT `/channel/live/hold` | `live.control` |
//! | GET | `/files/{path}` | `files.read` |
//! | GET | `/hotspots`, `/hotspots/page` (the chat's quality scan, `crate::quality`) | `files.read` |
//! | GET, PUT | `/memory/{key}` | `memory.read`, `memory.write` |
//! | GET | `/settings/secrets/{name}` | `secrets.read` |
//!
//! The parts, each with one job:
//! - [`auth`]: the bearer header, who calls (401; tokens are looked up in the index's token
//!   digests), whether the project enables the plugin (409), capabilities (403);
//! - [`crate::own_writes`]: the overlay of this process's own writes over the index;
//! - [`instance_state`], [`quota`], [`files`], [`crate::cards::inbox`], [`memory`]: the pure rules;
//! - [`secrets`]: secret settings' values, read live from their Secrets behind a trait;
//! - [`writes`]: runs and ConfigMaps, behind a trait; status fields go through
//!   [`crate::status`]; [`apply`]: the thin parts that call them;
//! - `routes`: the handlers; [`metrics`]: Prometheus; this module: the router and its layers.
//!
//! Accepted work keeps the plugin's container up: a request that is not a read (`GET`) and is
//! answered 2xx records activity on the caller's instance. A refused request (401, 403, 404,
//! 409, ...) records none, and nor does polling: a plugin that only reads still goes idle.

pub mod apply;
pub mod auth;
pub mod callers;

pub mod error;
pub mod files;
pub mod instance_state;
pub mod memory;
pub mod metrics;
pub mod quota;
mod routes;
pub mod secrets;
pub mod shared_runs;
pub mod state;
pub mod writes;

#[cfg(test)]
pub(crate) mod tests;

use std::sync::Arc;

use axum::Router;
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::http::{Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::Response;
use tower::ServiceBuilder;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;

pub use error::{ApiError, Code};
pub use routes::{PREFIX, ROUTES};
pub use state::{ApiConfig, PluginApiState};

use crate::index::InstanceKey;

/// The Plugin API, with its layers: its errors in the one shape with its codes, the activity of
/// accepted work, a body limit and a time limit (outermost first; the routes that wait for a
/// person's app have a longer one). One stack, added once: each
/// `Router::layer` boxes every route again, and each box is cloned and its future allocated on
/// every request.
pub fn router(state: Arc<PluginApiState>) -> Router {
    let config = state.config.clone();
    let layers = ServiceBuilder::new()
        .layer(middleware::from_fn(crate::http::shape::<Code>))
        .layer(middleware::from_fn_with_state(state.clone(), record_work))
        .layer(RequestBodyLimitLayer::new(config.max_body_bytes));
    let limit = |wait| TimeoutLayer::with_status_code(StatusCode::GATEWAY_TIMEOUT, wait);
    // A UI command waits its own timeout (the handler answers 504 itself), bounded here too.
    let waiting = sdk::api::ui_command::MAX_TIMEOUT + std::time::Duration::from_secs(5);
    routes::routes()
        .layer(limit(config.request_timeout))
        .merge(routes::waiting_routes().layer(limit(waiting)))
        .fallback(|| async { ApiError::new(Code::NotFound, "no such route") })
        .with_state(state)
        .layer(layers)
}

/// Whether a request, answered `status`, is accepted work: not a read, and answered 2xx.
pub fn is_accepted_work(method: &Method, status: StatusCode) -> bool {
    status.is_success() && method != Method::GET && method != Method::HEAD
}

/// Records activity on the caller's instance after accepted work (see the module's docs).
async fn record_work(
    State(state): State<Arc<PluginApiState>>,
    request: Request,
    next: Next,
) -> Response {
    // A read is never accepted work: no token to look at.
    if !is_accepted_work(request.method(), StatusCode::OK) {
        return next.run(request).await;
    }
    let method = request.method().clone();
    let token = request
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| auth::bearer(Some(v.as_bytes())).ok())
        .map(str::to_string);
    let response = next.run(request).await;
    if !is_accepted_work(&method, response.status()) {
        return response;
    }
    let index = &state.index;
    if let Some(owner) = token.and_then(|t| index.tokens.lookup(&t)) {
        let key = InstanceKey::new(&owner.namespace, &owner.instance);
        if let Some(instance) = index.instance(&key) {
            let host = index.host_config();
            let idle = model::schedule::parse_interval(&host.spec.plugins.idle_timeout).ok();
            state.calls.record_activity(&key, &instance, idle);
        }
    }
    response
}
