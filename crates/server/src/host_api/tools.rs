//! `POST .../plugins/{plugin}/tools/{tool}` → 200: the caller checked (RBAC's `tools`
//! permission on the instance), then the call made the one way tools are called
//! ([`crate::tool_calls`]: an agent's call, `agent` set, waits for a person when its risk
//! profile says so, its approval owned by the plugin's instance in the chat); a refused call
//! is an error answer, every failure of the call itself, a denial included, an `is_error`
//! result. A workflow's call that failed is told in the chat's drawer
//! (`crate::cards::host_notes`).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::auth::Permission;
use super::error::HostError;
use super::state::{HostState, json_body};
use crate::cards::host_notes::{self, About};
use crate::tool_calls::{ToolCall, instance_owner, is_workflow_run_id};
use model::resources::ApprovalVia;

pub async fn post(
    State(s): State<HostState>,
    Path((ns, chat, plugin, tool)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HostError> {
    let target = s
        .authorized_target(&headers, (&ns, &chat, &plugin), Permission::tool)
        .await?;
    let call: ToolCall = json_body(&body)?;
    let owner = instance_owner(&target);
    let workflow = is_workflow_run_id(&call.run_id).then(|| call.run_id.clone());
    let result = s
        .tools
        .call(&target, &tool, call, ApprovalVia::HostApi, owner)
        .await?;
    // A workflow's call that failed is the host's to tell the chat too (an agent's failed call
    // is its run's to handle).
    if let Some(run_id) = workflow
        && result.is_error
        && let Some(chat) = s.index().channel(&ns, &chat)
    {
        let why: Vec<&str> = result
            .content
            .iter()
            .filter_map(|c| c.get("text").and_then(serde_json::Value::as_str))
            .collect();
        let what = format!("tool {tool}");
        let about = About::FailedWorkflowCall {
            plugin: &plugin,
            what: &what,
            run_id: &run_id,
            why: &why.join("\n"),
        };
        let now = crate::clock::rfc3339(jiff::Timestamp::now());
        host_notes::tell(s.marks.as_ref(), s.index(), &chat, &about, &now).await;
    }
    Ok(Json(result).into_response())
}
