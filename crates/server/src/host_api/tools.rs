//! `POST .../plugins/{plugin}/tools/{tool}` → 200: the caller checked (RBAC's `tools`
//! permission on the instance), then the call made the one way tools are called
//! ([`crate::tool_calls`]); a refused call is an error answer, every failure of the call itself
//! an `is_error` result.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};

use super::auth::Permission;
use super::error::HostError;
use super::state::{HostState, json_body};
use crate::tool_calls::{ToolCall, call_tool};

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
    let result = call_tool(&s.calls, &target, &tool, call).await?;
    Ok(Json(result).into_response())
}
