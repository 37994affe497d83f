//! `POST /ui/commands`: the plugin's steps carried out in the app showing its chat
//! (`crate::ui_commands`), answered once the app said what became of each.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;

use super::json_body;
use crate::plugin_api::auth::Caller;
use crate::plugin_api::error::{ApiError, ApiResult, Code};
use crate::plugin_api::state::PluginApiState;
use crate::ui_commands::CommandError;
use model::manifest::Capability;
use sdk::api::ui_command::{self, UiCommandAnswer, UiCommandRequest};

pub async fn run(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    body: Bytes,
) -> ApiResult<Json<UiCommandAnswer>> {
    caller.require(Capability::UiCommand)?;
    let command: UiCommandRequest = json_body(&body)?;
    let approved: Vec<Capability> = caller.approved().iter().copied().collect();
    let wait = ui_command::check(&command, &caller.manifest, &approved)
        .map_err(|r| ApiError::new(r.code(), r.message()))?;
    let Some(commands) = &state.ui_commands else {
        return Err(ApiError::new(
            Code::Unavailable,
            "this server carries no UI commands (it runs without a cluster)",
        ));
    };
    commands
        .send(
            &caller.namespace,
            &caller.channel_name(),
            &caller.plugin_id(),
            command.steps,
            wait,
        )
        .await
        .map(Json)
        .map_err(|e| {
            let code = match e {
                CommandError::Timeout { .. } => Code::Timeout,
                CommandError::NoChat { .. } | CommandError::Write { .. } => Code::Unavailable,
            };
            ApiError::new(code, e.to_string())
        })
}
