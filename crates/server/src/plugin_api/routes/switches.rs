//! `PUT` and `DELETE /composer/switches/{id}`: the pill's state in this chat, for a switch the
//! manifest declares.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::{check_length, json_body};
use crate::plugin_api::apply::edit_switches;
use crate::plugin_api::auth::Caller;
use crate::plugin_api::error::{ApiError, ApiResult, Code};
use crate::plugin_api::instance_state::MAX_SWITCH_TITLE;
use crate::plugin_api::state::PluginApiState;
use crate::status::SwitchChange;
use model::manifest::{Capability, ComposerSwitch};
use model::resources::SwitchState;

#[derive(Deserialize)]
struct SwitchRequest {
    on: bool,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    error: bool,
    #[serde(default)]
    busy: bool,
}

fn declared<'a>(caller: &'a Caller, id: &str) -> ApiResult<&'a ComposerSwitch> {
    caller.require(Capability::UiComposerSwitch)?;
    caller.manifest.composer_switch(id).ok_or_else(|| {
        ApiError::new(
            Code::SwitchNotFound,
            format!("the manifest declares no composer switch \"{id}\""),
        )
    })
}

pub async fn put(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    Path(id): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    let declared = declared(&caller, &id)?.clone();
    let req: SwitchRequest = json_body(&body)?;
    if let Some(title) = &req.title {
        check_length("title", title, MAX_SWITCH_TITLE, false)?;
    }
    let state_now = SwitchState {
        id: id.clone(),
        on: req.on,
        title: req.title,
        error: req.error,
        busy: req.busy,
    };
    let switches = edit_switches(&state, &caller, SwitchChange::Set(state_now)).await?;
    Ok(Json(view(&declared, &switches)))
}

pub async fn delete(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Value>> {
    let declared = declared(&caller, &id)?.clone();
    let switches = edit_switches(&state, &caller, SwitchChange::Reset(id)).await?;
    Ok(Json(view(&declared, &switches)))
}

/// The pill as the chat shows it: the plugin's state, or off with the manifest's title.
pub fn view(declared: &ComposerSwitch, switches: &[SwitchState]) -> Value {
    let set = switches.iter().find(|s| s.id == declared.id);
    let title = set
        .and_then(|s| s.title.clone())
        .or_else(|| declared.title.clone());
    json!({
        "id": declared.id,
        "on": set.is_some_and(|s| s.on),
        "title": title,
        "error": set.is_some_and(|s| s.error),
        "busy": set.is_some_and(|s| s.busy),
    })
}
