//! `GET /healthz`: up, with the manifest's version.

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use crate::state::AppState;

pub async fn health(State(state): State<AppState>) -> Json<Value> {
    Json(json!({ "status": "ok", "id": state.manifest.id, "version": state.manifest.version }))
}
