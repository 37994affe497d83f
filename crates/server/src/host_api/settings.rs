//! `GET .../plugins/{plugin}/settings`: the plugin's effective settings in a chat, what a pane's
//! `settings.get` answers (docs/bridge.md): the manifest's defaults, then the global config's
//! values, then the project's, refused values left out and secret settings never shown. The
//! same resolution as the plugin's own `GET /channel` (`model::resolve::resolve_settings`),
//! over the same configs.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::auth::Permission;
use super::error::HostError;
use super::state::HostState;
use crate::delivery::target::{self, Disabled, TargetError};

/// `GET .../plugins/{plugin}/settings`.
pub async fn get(
    State(s): State<HostState>,
    Path((ns, chat, plugin)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    let target = s
        .authorized_target(&headers, (&ns, &chat, &plugin), |ns, i| {
            Permission::settings(ns, i)
        })
        .await?;
    let index = s.index();
    let channel = target::chat(index, &ns, &chat)?;
    // resolve() found the project; it may have gone since.
    let project = index.project(&ns, &channel.spec.project).ok_or_else(|| {
        TargetError::from(Disabled::NoProject {
            chat: chat.clone(),
            project: channel.spec.project.clone(),
        })
    })?;
    // A project's settings apply without trust: they only tune the plugin.
    let settings = index.settings.of(
        &target.compiled.manifest,
        &target.plugin,
        Some(&project),
        &index.host_config(),
    );
    Ok(Json(json!({ "settings": &settings.values })).into_response())
}
