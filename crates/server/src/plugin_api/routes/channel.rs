//! `GET /channel`: the chat, its project and the plugin's resolved settings there.

use axum::Json;
use kube::ResourceExt;
use serde_json::{Value, json};

use crate::plugin_api::auth::Caller;
use crate::plugin_api::error::ApiResult;
use model::resolve::resolve_settings;

pub async fn get(caller: Caller) -> ApiResult<Json<Value>> {
    let plugin = caller.plugin_id();
    let global = caller.host.spec.plugins.defaults.get(&plugin);
    // A project's settings apply without trust: they only tune the plugin.
    let project = caller.project.spec.plugins.get(&plugin);
    let settings = resolve_settings(&caller.manifest, global, project);
    let spec = &caller.channel.spec;
    let mut answer = json!({
        "id": caller.channel.name_any(),
        "kind": spec.kind,
        "project": spec.project,
        "app": spec.app,
        "settings": settings.values,
    });
    if let Some(parent) = &spec.parent {
        answer["parent"] = json!(parent);
    }
    Ok(Json(answer))
}
