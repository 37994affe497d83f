//! `POST /channel/live/control` and `PUT /channel/live/hold`: the chat's live session.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{check_length, json_body};
use crate::live::{ChatRef, ControlError};
use crate::plugin_api::apply::set_live_hold;
use crate::plugin_api::auth::Caller;
use crate::plugin_api::error::{ApiError, ApiResult, Code};
use crate::plugin_api::state::PluginApiState;
use model::manifest::Capability;
use sdk::api::limits::MAX_SUBTYPE;

#[derive(Deserialize)]
struct ControlRequest {
    subtype: String,
    #[serde(default)]
    request: Option<serde_json::Map<String, Value>>,
}

#[derive(Deserialize)]
struct HoldRequest {
    hold: bool,
}

pub async fn control(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    caller.require(Capability::LiveControl)?;
    let req: ControlRequest = json_body(&body)?;
    check_length("subtype", &req.subtype, MAX_SUBTYPE, true)?;
    sdk::api::limits::check_live_subtype(caller.manifest.live.as_ref(), &req.subtype)
        .map_err(|why| ApiError::new(Code::SubtypeNotDeclared, why))?;
    let chat = ChatRef {
        namespace: caller.namespace.clone(),
        channel: caller.channel_name(),
    };
    let request = Value::Object(req.request.unwrap_or_default());
    let plugin = caller.plugin_id();
    match state
        .live
        .control(&chat, &plugin, &req.subtype, &request)
        .await
    {
        Ok(response) => Ok(Json(
            json!({ "subtype": req.subtype, "response": response }),
        )),
        Err(e) => Err(ApiError::new(
            match e {
                ControlError::NotLive { .. } | ControlError::NotTaken { .. } => Code::NotLive,
                ControlError::Timeout { .. } => Code::Timeout,
                ControlError::Write { .. } => Code::Unavailable,
            },
            e.to_string(),
        )),
    }
}

pub async fn hold(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    caller.require(Capability::LiveControl)?;
    let req: HoldRequest = json_body(&body)?;
    let hold = set_live_hold(&state, &caller, req.hold).await?;
    Ok(Json(json!({ "hold": hold })))
}
