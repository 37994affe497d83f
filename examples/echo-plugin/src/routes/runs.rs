//! `POST /runs/{run_id}/done`: an agent run the plugin started ended. The journal has it;
//! the plugin only checks the body and logs.

use axum::body::Bytes;
use axum::extract::Path;
use axum::http::StatusCode;
use serde::Deserialize;

use crate::error::{ApiError, parse_json};

#[derive(Debug, Deserialize)]
pub struct RunDone {
    pub status: RunStatus,
    #[serde(default)]
    pub result: Option<String>,
    #[serde(default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Done,
    Failed,
}

pub async fn done(Path(run_id): Path<String>, body: Bytes) -> Result<StatusCode, ApiError> {
    let done: RunDone = parse_json(&body)?;
    match done.status {
        RunStatus::Done => tracing::info!(run_id, result = ?done.result, "agent run done"),
        RunStatus::Failed => tracing::warn!(run_id, error = ?done.error, "agent run failed"),
    }
    Ok(StatusCode::NO_CONTENT)
}
