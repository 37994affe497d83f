//! The Plugin API's routes, one module per resource, and the table that mounts them under
//! `/api/plugin/v1`. Each handler takes the [`Caller`](super::auth::Caller) first (401 and
//! 409 come before anything else), checks its capability (403), then reads its body (400).

mod cards;
mod channel;
mod files;
mod hotspots;
mod live;
mod memory;
mod notifications;
mod runs;
mod secrets;
mod switches;
mod ui_commands;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::routing::{get, post, put};
use serde::de::DeserializeOwned;

use axum::extract::FromRequestParts;
use axum::http::header::AUTHORIZATION;
use axum::http::request::Parts;

use super::auth::{Caller, bearer};
use super::error::{ApiError, ApiResult, Code};
use super::state::PluginApiState;

/// The caller of each route: the bearer token, and who it speaks for (`auth`, `callers`).
impl FromRequestParts<Arc<PluginApiState>> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &Arc<PluginApiState>,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(parts.headers.get(AUTHORIZATION).map(|v| v.as_bytes()))?;
        state.callers.of(&state.index, token)
    }
}

/// Where the routes live.
pub const PREFIX: &str = "/api/plugin/v1";

/// Every (method, path) served under [`PREFIX`], as the spec lists them.
pub const ROUTES: [(&str, &str); 17] = [
    ("GET", "/channel"),
    ("POST", "/runs"),
    ("GET", "/runs/{run_id}"),
    ("PUT", "/composer/switches/{id}"),
    ("DELETE", "/composer/switches/{id}"),
    ("POST", "/cards"),
    ("GET", "/cards/{id}"),
    ("POST", "/notifications"),
    ("POST", "/channel/live/control"),
    ("PUT", "/channel/live/hold"),
    ("GET", "/files/{path}"),
    ("GET", "/hotspots"),
    ("GET", "/hotspots/page"),
    ("GET", "/memory/{key}"),
    ("PUT", "/memory/{key}"),
    ("GET", "/settings/secrets/{name}"),
    ("POST", "/ui/commands"),
];

/// The routes at their full paths under [`PREFIX`] (a nested router would rewrite each
/// request's URI and route it twice).
pub fn routes() -> Router<Arc<PluginApiState>> {
    let at = |path: &str| format!("{PREFIX}{path}");
    Router::new()
        .route(&at("/channel"), get(channel::get))
        .route(&at("/runs"), post(runs::create))
        .route(&at("/runs/{run_id}"), get(runs::get))
        .route(
            &at("/composer/switches/{id}"),
            put(switches::put).delete(switches::delete),
        )
        .route(&at("/cards"), post(cards::create))
        .route(&at("/cards/{id}"), get(cards::get))
        .route(&at("/notifications"), post(notifications::create))
        .route(&at("/channel/live/control"), post(live::control))
        .route(&at("/channel/live/hold"), put(live::hold))
        .route(&at("/files/{*path}"), get(files::get))
        .route(&at("/hotspots"), get(hotspots::worst))
        .route(&at("/hotspots/page"), get(hotspots::page))
        .route(&at("/memory/{key}"), get(memory::get).put(memory::put))
        .route(&at("/settings/secrets/{name}"), get(secrets::get))
}

/// The routes that wait for a person's app past the usual time limit, up to the longest a
/// UI command may name (`sdk::api::ui_command::MAX_TIMEOUT`).
pub fn waiting_routes() -> Router<Arc<PluginApiState>> {
    Router::new().route(&format!("{PREFIX}/ui/commands"), post(ui_commands::run))
}

/// The body as `T`, or 400 `invalid_body` naming what is wrong.
pub(crate) fn json_body<T: DeserializeOwned>(body: &Bytes) -> ApiResult<T> {
    crate::http::json_object(body).map_err(|message| ApiError::new(Code::InvalidBody, message))
}

/// 400 unless `value` has at most `max` characters (and at least one when `non_empty`).
pub(crate) fn check_length(field: &str, value: &str, max: usize, non_empty: bool) -> ApiResult<()> {
    sdk::api::limits::check_length(field, value, max, non_empty)
        .map_err(|why| ApiError::new(Code::InvalidBody, why))
}
