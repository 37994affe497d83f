//! `POST /actions/{action}`: checks the call, answers 202 and runs the action in the
//! background. `ping` reads the channel from the Plugin API (when `LOOP_API_URL` and
//! `LOOP_PLUGIN_TOKEN_FILE` are set) and journals the answer as a `loop_api` entry; `tick`,
//! the scheduled one, only logs (the journal already has the call).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{ApiError, parse_json};
use crate::journal::{Entry, recorded_body};
use crate::state::AppState;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    Manual,
    Schedule,
    Workflow,
}

#[derive(Debug, Deserialize)]
pub struct ActionRequest {
    pub trigger: Trigger,
    #[serde(default)]
    pub task_id: Option<String>,
    #[serde(default)]
    pub run_id: Option<String>,
    #[serde(default)]
    pub input: Option<Value>,
    #[serde(default)]
    pub thread_id: Option<String>,
}

impl ActionRequest {
    /// The contract's rules: a scheduled call names its task, a workflow's call its run and
    /// node.
    pub fn check(&self) -> Result<(), String> {
        match self.trigger {
            Trigger::Schedule if self.task_id.as_deref().unwrap_or("").is_empty() => {
                Err("task_id: trigger schedule needs a task_id".into())
            }
            Trigger::Workflow => {
                let run_id = self.run_id.as_deref().unwrap_or("");
                if is_workflow_run_id(run_id) {
                    Ok(())
                } else {
                    Err(format!(
                        "run_id: trigger workflow needs workflow:<run id>:<node id>, got {run_id:?}"
                    ))
                }
            }
            _ => Ok(()),
        }
    }
}

/// `workflow:<run id>:<node id>`, both parts non-empty.
pub fn is_workflow_run_id(s: &str) -> bool {
    s.strip_prefix("workflow:")
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(run, node)| !run.is_empty() && !node.is_empty())
}

pub async fn run(
    State(state): State<AppState>,
    Path(action): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if state.manifest.action(&action).is_none() {
        return Err(ApiError::not_found(format!("no such action: {action}")));
    }
    let req: ActionRequest = parse_json(&body)?;
    req.check().map_err(ApiError::bad_request)?;
    tracing::info!(action, trigger = ?req.trigger, task_id = ?req.task_id, run_id = ?req.run_id, "action accepted");
    let bg = state.clone();
    state.background.spawn(async move {
        tokio::select! {
            () = work(&bg, &action) => {}
            () = bg.shutdown.cancelled() => tracing::warn!(action, "action cut short by shutdown"),
        }
    });
    Ok((StatusCode::ACCEPTED, Json(json!({ "accepted": true }))))
}

/// An action's background work.
async fn work(state: &AppState, action: &str) {
    match action {
        "ping" => ping(state).await,
        "tick" => tracing::info!("tick"),
        other => tracing::info!(action = other, "nothing to do"),
    }
}

async fn ping(state: &AppState) {
    let Some(api) = &state.loop_api else {
        tracing::debug!("no Plugin API configured; ping does nothing more");
        return;
    };
    let mut entry = Entry {
        kind: "loop_api",
        method: "GET".into(),
        route: "/api/plugin/v1/channel".into(),
        query: None,
        body: Value::Null,
        body_size: 0,
        status: None,
        error: None,
    };
    match api.channel().await {
        Ok(answer) => {
            if (200..300).contains(&answer.status) {
                state.settings.update(&answer.body["settings"]);
            }
            let text = serde_json::to_vec(&answer.body).unwrap_or_default();
            entry.body = recorded_body(&text);
            entry.body_size = text.len();
            entry.status = Some(answer.status);
        }
        Err(e) => entry.error = Some(format!("{e:#}")),
    }
    if let Err(e) = state.journal.append(&entry) {
        tracing::error!(error = %e, "writing the journal");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(body: &str) -> ActionRequest {
        serde_json::from_str(body).unwrap()
    }

    #[test]
    fn workflow_run_ids() {
        assert!(is_workflow_run_id("workflow:r1:n1"));
        assert!(is_workflow_run_id("workflow:r1:n:1"));
        assert!(!is_workflow_run_id("workflow:r1:"));
        assert!(!is_workflow_run_id("workflow::n1"));
        assert!(!is_workflow_run_id("workflow:r1"));
        assert!(!is_workflow_run_id("run:r1:n1"));
    }

    #[test]
    fn trigger_rules() {
        assert!(req(r#"{"trigger":"manual"}"#).check().is_ok());
        assert!(
            req(r#"{"trigger":"schedule","task_id":"t1"}"#)
                .check()
                .is_ok()
        );
        assert!(
            req(r#"{"trigger":"schedule"}"#)
                .check()
                .unwrap_err()
                .contains("task_id")
        );
        assert!(
            req(r#"{"trigger":"workflow","run_id":"workflow:r:n","input":{}}"#)
                .check()
                .is_ok()
        );
        assert!(
            req(r#"{"trigger":"workflow","run_id":"r"}"#)
                .check()
                .unwrap_err()
                .contains("run_id")
        );
        assert!(serde_json::from_str::<ActionRequest>(r#"{"trigger":"cron"}"#).is_err());
    }
}
