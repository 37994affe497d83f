//! The plugin's own routes under `/x`: the test hooks and an echo of anything else.
//!
//! - `GET /x/journal`: `{"entries": [...]}`, every journal line (see [`crate::journal`]).
//! - `DELETE /x/journal`: empties it (204).
//! - `POST /x/hang`: `{"count", "seconds", "kinds"}` arms the hang hook (see
//!   [`crate::hang`]) and answers what is armed.
//! - any other method and path: 200 with the request's body and `Content-Type`, plus
//!   `x-echo-method` and `x-echo-path` headers.

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};

use crate::error::{ApiError, parse_json};
use crate::hang::{Armed, HangRequest};
use crate::state::AppState;

pub async fn journal(State(state): State<AppState>) -> Result<Json<Value>, ApiError> {
    let entries = state.journal.entries().map_err(ApiError::internal)?;
    Ok(Json(json!({ "entries": entries })))
}

pub async fn clear_journal(State(state): State<AppState>) -> Result<StatusCode, ApiError> {
    state.journal.clear().map_err(ApiError::internal)?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn hang(State(state): State<AppState>, body: Bytes) -> Result<Json<Armed>, ApiError> {
    let body: &[u8] = if body.is_empty() { b"{}" } else { &body };
    let req: HangRequest = parse_json(body)?;
    let armed = state.hang.arm(&req).map_err(ApiError::bad_request)?;
    tracing::info!(?armed, "hang armed");
    Ok(Json(armed))
}

pub async fn echo(method: Method, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let mut res = Response::new(Body::from(body));
    let h = res.headers_mut();
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        h.insert(header::CONTENT_TYPE, ct.clone());
    }
    if let Ok(v) = HeaderValue::from_str(method.as_str()) {
        h.insert("x-echo-method", v);
    }
    if let Ok(v) = HeaderValue::from_str(uri.path()) {
        h.insert("x-echo-path", v);
    }
    res.into_response()
}
