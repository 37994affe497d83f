//! The contract's routes (openapi/plugin-contract-v1.yaml), one module each, behind the
//! secret check, the journal and the hang hook.

pub mod actions;
pub mod events;
pub mod health;
pub mod runs;
pub mod switches;
pub mod tools;
pub mod x;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{Method, Uri};
use axum::middleware::from_fn_with_state;
use axum::routing::{any, get, post};

use crate::auth::{Secret, require_secret};
use crate::error::ApiError;
use crate::journal::MAX_BODY;
use crate::state::AppState;

/// The router. Layers, outermost first: the secret (401), the journal (records what got
/// past it), the hang hook (sleeps when armed), then the route.
pub fn router(state: AppState, secret: Secret) -> Router {
    Router::new()
        .route("/healthz", get(health::health))
        .route("/actions/{action}", post(actions::run))
        .route("/tools/{tool}", post(tools::call))
        .route("/runs/{run_id}/done", post(runs::done))
        .route("/events", post(events::take))
        .route("/switches/{switch}", post(switches::set))
        .route("/x/journal", get(x::journal).delete(x::clear_journal))
        .route("/x/hang", post(x::hang))
        .route("/x/{*path}", any(x::echo))
        .fallback(no_route)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(from_fn_with_state(state.clone(), crate::layers::delay))
        .layer(from_fn_with_state(state.clone(), crate::layers::record))
        .layer(from_fn_with_state(secret, require_secret))
        .with_state(state)
}

async fn no_route(method: Method, uri: Uri) -> ApiError {
    ApiError::not_found(format!("no such route: {method} {}", uri.path()))
}
