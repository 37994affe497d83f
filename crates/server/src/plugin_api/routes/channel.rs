//! `GET /channel`: the chat, its project and the plugin's resolved settings there.

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;

use crate::plugin_api::auth::Caller;
use crate::plugin_api::state::PluginApiState;
use model::resources::{App, ChannelKind};

/// The answer, written from the chat and the settings as the index keeps them. Its fields are
/// in the order of their names, as a JSON object's keys were written before.
#[derive(Serialize)]
struct ChannelAnswer<'a> {
    app: &'a App,
    id: &'a str,
    kind: &'a ChannelKind,
    #[serde(skip_serializing_if = "Option::is_none")]
    parent: Option<&'a str>,
    project: &'a str,
    settings: &'a BTreeMap<String, Value>,
}

pub async fn get(State(state): State<Arc<PluginApiState>>, caller: Caller) -> Response {
    // A project's settings apply without trust: they only tune the plugin.
    let settings = state.index.settings.of(
        &caller.manifest,
        &caller.plugin,
        Some(&caller.project),
        &caller.host,
    );
    let spec = &caller.channel.spec;
    Json(ChannelAnswer {
        app: &spec.app,
        id: caller.channel.metadata.name.as_deref().unwrap_or_default(),
        kind: &spec.kind,
        parent: spec.parent.as_deref(),
        project: &spec.project,
        settings: &settings.values,
    })
    .into_response()
}
