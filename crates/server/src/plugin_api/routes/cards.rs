//! `POST /cards` and `GET /cards/{id}`: cards in the chat's notification drawer, stored in
//! the (plugin, chat)'s inbox ConfigMap (see `api::inbox`).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::Value;

use super::{PREFIX, check_length, json_body};
use crate::cards::inbox::{self, Entry, Kind, MAX_TITLE};
use crate::plugin_api::apply::config_map;
use crate::plugin_api::auth::Caller;
use crate::plugin_api::error::{ApiError, ApiResult, Code};
use crate::plugin_api::state::PluginApiState;
use model::manifest::Capability;

#[derive(Deserialize)]
struct CardRequest {
    card: String,
    title: String,
    #[serde(default)]
    data: Option<Value>,
}

pub async fn create(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    body: Bytes,
) -> ApiResult<Response> {
    caller.require(Capability::UiNotificationCard)?;
    let req: CardRequest = json_body(&body)?;
    check_length("title", &req.title, MAX_TITLE, true)?;
    if caller.manifest.card(&req.card).is_none() {
        return Err(ApiError::new(
            Code::UnknownCard,
            format!(
                "card \"{}\" is not one of the manifest's ui.cards",
                req.card
            ),
        ));
    }
    let entry = Entry {
        id: String::new(),
        kind: Kind::Card,
        card: Some(req.card),
        title: req.title,
        data: Some(req.data.unwrap_or(Value::Object(Default::default()))),
        body: None,
        level: None,
        created: String::new(),
    };
    let entry = post(&state, &caller, entry).await?;
    Ok(created(entry, "cards"))
}

pub async fn get(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    Path(id): Path<String>,
) -> ApiResult<Json<Entry>> {
    caller.require(Capability::UiNotificationCard)?;
    config_map(
        &state,
        &caller.namespace,
        &inbox::inbox_name(&caller.instance_name()),
    )
    .and_then(|map| inbox::entry(&map, &id))
    .filter(|e| e.kind == Kind::Card)
    .map(Json)
    .ok_or_else(|| {
        ApiError::new(
            Code::CardNotFound,
            format!("this chat has no card {id} of this plugin"),
        )
    })
}

/// 201 with the entry and where to read it.
pub(super) fn created(entry: Entry, collection: &str) -> Response {
    let location = HeaderValue::from_str(&format!("{PREFIX}/{collection}/{}", entry.id)).ok();
    let mut response = (StatusCode::CREATED, Json(entry)).into_response();
    if let Some(location) = location {
        response.headers_mut().insert(header::LOCATION, location);
    }
    response
}

/// Stores an entry in the caller's inbox, giving it an id and a time, and dropping the oldest
/// entries beyond the inbox's size.
pub(super) async fn post(
    state: &PluginApiState,
    caller: &Caller,
    mut entry: Entry,
) -> ApiResult<Entry> {
    use kube::Resource;
    use rand::Rng;

    let now = state.clock.now();
    let prefix = match entry.kind {
        Kind::Card => "card",
        Kind::Notification => "note",
    };
    let bytes: [u8; 8] = rand::rng().random();
    entry.id = format!("{prefix}-{}", hex::encode(bytes));
    entry.created = crate::clock::rfc3339_millis(now);
    let text = serde_json::to_string(&entry).expect("entries serialize");
    if text.len() > inbox::MAX_ENTRY_BYTES {
        return Err(ApiError::new(
            Code::BodyTooLarge,
            format!(
                "the {prefix} is {} bytes as stored; at most {} are allowed",
                text.len(),
                inbox::MAX_ENTRY_BYTES
            ),
        ));
    }
    let instance = caller.instance_name();
    let template = inbox::template(
        &caller.namespace,
        &instance,
        &caller.plugin_id(),
        caller.project_name(),
        &caller.channel_name(),
        caller.instance.owner_ref(&()),
    );
    let name = inbox::inbox_name(&instance);
    let _guard = state
        .locks
        .lock(&format!("configmap/{}/{name}", caller.namespace))
        .await;
    let existing = config_map(state, &caller.namespace, &name)
        .map(|m| inbox::entries(&m))
        .unwrap_or_default();
    let mut patch: crate::plugin_api::writes::DataPatch = inbox::to_drop(&existing, &entry)
        .into_iter()
        .map(|k| (k, None))
        .collect();
    patch.insert(entry.id.clone(), Some(text));
    crate::plugin_api::apply::merge_config_map(state, &template, &patch).await?;
    Ok(entry)
}
