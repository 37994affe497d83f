//! `POST .../plugins/{plugin}/tools/{tool}` → 200: the caller checked (RBAC's `tools`
//! permission on the instance), then the call made the one way tools are called
//! ([`crate::tool_calls`]: an agent's call, `agent` set, waits for a person when its risk
//! profile says so, its approval owned by the plugin's instance in the chat); a refused call
//! is an error answer, every failure of the call itself, a denial included, an `is_error`
//! result.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::auth::Permission;
use super::error::HostError;
use super::state::{HostState, json_body};
use crate::tool_calls::{ToolCall, instance_owner};
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
    let result = s
        .tools
        .call(&target, &tool, call, ApprovalVia::HostApi, owner)
        .await?;
    Ok(Json(result).into_response())
}
