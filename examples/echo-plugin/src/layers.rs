//! The middleware around every route: a hang armed for the call (see `crate::hang`), and the
//! journal of what reached the plugin (see `crate::journal`).

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;
use crate::hang::Kind;
use crate::journal::{Entry, MAX_BODY};
use crate::state::AppState;

/// Middleware: sleeps when a hang is armed for this call, then handles it as usual. The
/// sleep ends early when the plugin shuts down.
pub async fn delay(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if let Some(kind) = Kind::of(req.uri().path())
        && let Some(sleep) = state.hang.take(kind)
    {
        tracing::info!(route = req.uri().path(), ?sleep, "hanging as asked");
        tokio::select! {
            () = tokio::time::sleep(sleep) => {}
            () = state.shutdown.cancelled() => {}
        }
    }
    next.run(req).await
}

/// Middleware: reads the body (up to [`MAX_BODY`], 413 past it), records the request, and
/// hands it on with the same body. Reading the journal itself isn't recorded.
pub async fn record(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let bytes: Bytes = match axum::body::to_bytes(body, MAX_BODY).await {
        Ok(b) => b,
        Err(_) => {
            return ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "body: over 8 MB").into_response();
        }
    };
    let route = parts.uri.path();
    let reading_journal = parts.method == axum::http::Method::GET && route == "/x/journal";
    if !reading_journal {
        let entry = Entry::request(parts.method.as_str(), route, parts.uri.query(), &bytes);
        if state.settings.verbose() {
            tracing::info!(method = %entry.method, route, size = bytes.len(), "request");
        }
        if let Err(e) = state.journal.append(&entry) {
            tracing::error!(error = %e, "writing the journal");
            return ApiError::internal(format!("writing the journal: {e}")).into_response();
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}
