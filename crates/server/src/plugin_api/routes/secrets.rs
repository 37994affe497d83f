//! `GET /settings/secrets/{name}`: a secret setting's value, read from its Secret now, and the
//! revision read (see [`crate::plugin_api::secrets`]).

use std::sync::Arc;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::header::CACHE_CONTROL;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::plugin_api::auth::Caller;
use crate::plugin_api::error::{ApiError, ApiResult, Code};
use crate::plugin_api::secrets::{SecretAt, value_of};
use crate::plugin_api::state::PluginApiState;
use model::config::ConfigLevel;
use model::manifest::Capability;
use model::resolve::{NoSecretSource, ProjectView, approved_plugins, secret_source};

pub async fn get(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    caller.require(Capability::SecretsRead)?;
    let plugin = caller.plugin_id();
    let global = caller.host.spec.plugins.defaults.get(&plugin);
    // A reference hands the plugin a Secret, so the project's counts once its owner trusts it.
    let trust = state
        .index
        .project_trust(&caller.namespace, caller.project_name());
    let approved = approved_plugins(ProjectView::new(&caller.project, trust.as_deref()));
    let source =
        secret_source(&caller.manifest, &name, global, approved.plugin(&plugin)).map_err(|e| {
            let code = match e {
                NoSecretSource::Undeclared(_) | NoSecretSource::NotSecret(_) => {
                    Code::SettingNotFound
                }
                NoSecretSource::NotSet(_) => Code::SecretNotSet,
            };
            ApiError::new(code, e.to_string())
        })?;
    let at = SecretAt {
        namespace: match source.level {
            ConfigLevel::Project => caller.namespace.clone(),
            ConfigLevel::Global => state.secrets.release_namespace.clone(),
        },
        secret: source.secret,
    };
    let secret = state
        .secrets
        .reader
        .read(&at.namespace, &at.secret.name)
        .await
        .map_err(|e| {
            tracing::warn!(plugin, setting = %name, error = %e, "a secret setting's Secret could not be read");
            ApiError::new(Code::Unavailable, e.to_string())
        })?;
    let schema = caller
        .manifest
        .setting_validator(&name)
        .and_then(|compiled| compiled.as_ref().ok());
    let read = value_of(secret.as_ref(), &at, schema)
        .map_err(|e| ApiError::new(Code::SecretUnavailable, e.to_string()))?;
    let answer = json!({ "name": name, "value": read.value, "revision": read.revision });
    // Nothing between the plugin and us may keep it.
    Ok(([(CACHE_CONTROL, "no-store")], Json(answer)).into_response())
}
