//! `GET` and `PUT /memory/{key}`: the plugin's memory in the chat's project, see `api::memory`.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use kube::Resource;
use serde_json::{Value, json};

use super::json_body;
use crate::plugin_api::apply::{config_map, merge_config_map};
use crate::plugin_api::auth::Caller;
use crate::plugin_api::error::{ApiError, ApiResult, Code};
use crate::plugin_api::memory::{MAX_KEYS, MAX_VALUE_BYTES, check_key, memory_name, template};
use crate::plugin_api::state::PluginApiState;
use model::manifest::Capability;

pub async fn get(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    Path(key): Path<String>,
) -> ApiResult<Json<Value>> {
    caller.require(Capability::MemoryRead)?;
    check_key(&key)?;
    let name = memory_name(&caller.plugin_id(), caller.project_name());
    let value = config_map(&state, &caller.namespace, &name)
        .and_then(|m| m.data.as_ref()?.get(&key).cloned())
        .and_then(|text| serde_json::from_str::<Value>(&text).ok())
        .ok_or_else(|| {
            ApiError::new(Code::MemoryNotFound, format!("memory has no key \"{key}\""))
        })?;
    Ok(Json(json!({ "key": key, "value": value })))
}

pub async fn put(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    Path(key): Path<String>,
    body: Bytes,
) -> ApiResult<Json<Value>> {
    caller.require(Capability::MemoryWrite)?;
    check_key(&key)?;
    let mut req: serde_json::Map<String, Value> = json_body(&body)?;
    let value = req.remove("value").ok_or_else(|| {
        ApiError::new(
            Code::InvalidBody,
            "the body must have a \"value\" (any JSON value)",
        )
    })?;
    let text = value.to_string();
    if text.len() > MAX_VALUE_BYTES {
        return Err(ApiError::new(
            Code::BodyTooLarge,
            format!(
                "the value is {} bytes as JSON; at most {MAX_VALUE_BYTES} are allowed",
                text.len()
            ),
        ));
    }
    let plugin = caller.plugin_id();
    let name = memory_name(&plugin, caller.project_name());
    let _guard = state
        .locks
        .lock(&format!("configmap/{}/{name}", caller.namespace))
        .await;
    let keys = config_map(&state, &caller.namespace, &name)
        .and_then(|m| m.data.clone())
        .unwrap_or_default();
    if !keys.contains_key(&key) && keys.len() >= MAX_KEYS {
        return Err(ApiError::new(
            Code::MemoryFull,
            format!("memory holds {MAX_KEYS} keys already; overwrite one instead"),
        ));
    }
    let template = template(
        &caller.namespace,
        &plugin,
        caller.project_name(),
        caller.project.owner_ref(&()),
    );
    let patch = [(key.clone(), Some(text))].into_iter().collect();
    merge_config_map(&state, &template, &patch).await?;
    Ok(Json(json!({ "key": key, "value": value })))
}
