//! Settings → Plugins (the reference's app): each installed plugin's entry in the global config
//! and in a project's, as a person reads and edits them.
//!
//! | method | route | RBAC asked first | the write, made with the caller's own token |
//! |---|---|---|---|
//! | GET | `/namespaces/{ns}/projects/{project}/plugins` | `get projects` (the project) | none: every installed plugin, its settings' schemas and actions, its global, project and approved entries, and whether it runs there |
//! | PATCH | `/namespaces/{ns}/projects/{project}/plugins/{plugin}` `EntryEdit` | `patch projects` | a merge patch of the Project's entry |
//! | PATCH | `/global/plugins/{plugin}` `EntryEdit` | `patch hostconfigs` (`default`) | a merge patch of HostConfig's `defaults` entry |
//! | POST | `/namespaces/{ns}/projects/{project}/trust` `{hash}` | `patch projecttrusts` (the project) | the project's `ProjectTrust` of that config (`crate::person::trust`) |
//!
//! An edit (`model::resolve::edit`) is checked against the manifest first (400 naming each field
//! it refuses, a secret's value never quoted); the write is the caller's own (`crate::person`),
//! so Kubernetes decides, and its refusal (naming the right missing) is the answer. A project's
//! `enabled` and `schedules` count once its owner trusts the config; the answer says so.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::{Permission, bearer};
use super::error::{Code, HostError, HostResult};
use super::state::{HostState, json_body};
use crate::person::{PersonError, SharedPerson};
use model::config::ConfigLevel;
use model::resolve::edit::{self, EntryEdit};
use model::resolve::{ProjectView, approved_plugins, plugin_enabled};
use model::resources::{HOST_CONFIG_NAME, Project};

fn writes(s: &HostState) -> HostResult<SharedPerson> {
    s.person.clone().ok_or_else(|| {
        HostError::new(
            Code::Unavailable,
            "this server writes no configs (it runs without a cluster)",
        )
    })
}

pub(super) fn write_error(e: PersonError) -> HostError {
    match e {
        PersonError::Refused { status, message } => {
            let code = match status {
                401 => Code::InvalidToken,
                403 => Code::Forbidden,
                404 => Code::ProjectNotFound,
                409 => Code::ConfigChanged,
                _ => Code::InvalidBody,
            };
            HostError::new(code, message)
        }
        PersonError::Trust(e) => {
            let code = match &e {
                crate::person::trust::TrustError::ConfigChanged { .. } => Code::ConfigChanged,
                _ => Code::Unavailable,
            };
            HostError::new(code, e.to_string())
        }
        PersonError::Failed(why) => HostError::new(Code::Unavailable, why),
    }
}

fn project(s: &HostState, ns: &str, name: &str) -> HostResult<std::sync::Arc<Project>> {
    s.index().project(ns, name).ok_or_else(|| {
        HostError::new(
            Code::ProjectNotFound,
            format!("no Project {name} in namespace {ns}"),
        )
    })
}

/// `GET .../projects/{project}/plugins`.
pub async fn view(
    State(s): State<HostState>,
    Path((ns, name)): Path<(String, String)>,
    headers: HeaderMap,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::project("get", &ns, &name))
        .await?;
    let index = s.index();
    let project = project(&s, &ns, &name)?;
    let trust = index.project_trust(&ns, &name);
    let view = ProjectView::new(&project, trust.as_deref());
    let approved = approved_plugins(view);
    let host = index.host_config();
    let mut plugins: Vec<Value> = Vec::new();
    let mut installed = index.plugins.state();
    installed.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    for plugin in installed {
        if plugin.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let id = plugin.metadata.name.clone().unwrap_or_default();
        let enabled = plugin_enabled(&host.spec.plugins, &id, view);
        let mut entry = json!({
            "plugin": id,
            "global": host.spec.plugins.defaults.get(&id),
            "project": project.spec.plugins.get(&id),
            "approved": approved.plugin(&id),
            "enabled": enabled.is_enabled(),
            "awaitingTrust": enabled.awaiting_trust,
        });
        match index.manifests.get(&plugin) {
            Ok(compiled) => {
                let m = &compiled.manifest;
                let settings = index.settings.of(m, &plugin, Some(&project), &host);
                entry["name"] = json!(m.name);
                entry["version"] = json!(m.version);
                entry["settings"] = json!(m.settings);
                entry["secretSettings"] = json!(
                    m.setting_schemas()
                        .filter(|(n, _)| m.is_secret_setting(n))
                        .map(|(n, _)| n)
                        .collect::<Vec<_>>()
                );
                entry["actions"] = json!(
                    m.actions
                        .iter()
                        .map(|a| json!({ "id": a.id, "default_schedule": a.default_schedule }))
                        .collect::<Vec<_>>()
                );
                entry["effective"] = json!(settings.values);
                entry["leftOut"] = json!(
                    settings
                        .left_out
                        .iter()
                        .map(|l| l.to_string())
                        .collect::<Vec<_>>()
                );
            }
            Err(why) => entry["notAdmitted"] = json!(why.to_string()),
        }
        plugins.push(entry);
    }
    Ok(Json(json!({
        "project": {
            "name": name,
            "namespace": ns,
            "hash": approved.current_hash,
            "trust": approved.state.reason(),
            "trustedHash": trust.as_ref().map(|t| t.spec.hash.clone()),
        },
        "plugins": plugins,
    }))
    .into_response())
}

/// The edit in `body`, checked against `plugin`'s manifest at `level` (404, 409, 400).
fn checked_edit(
    s: &HostState,
    plugin: &str,
    level: ConfigLevel,
    body: &Bytes,
) -> HostResult<EntryEdit> {
    let edit: EntryEdit = json_body(body)?;
    if edit.is_empty() {
        return Err(HostError::new(
            Code::InvalidBody,
            "the edit changes nothing: give enabled, settings, schedules or secretSettings",
        ));
    }
    let index = s.index();
    let found = index
        .plugin(plugin)
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .ok_or_else(|| {
            HostError::new(
                Code::PluginNotFound,
                format!("no plugin {plugin} is installed"),
            )
        })?;
    let compiled = index.manifests.get(&found).map_err(|why| {
        HostError::new(
            Code::PluginNotAdmitted,
            format!("plugin {plugin} is not admitted, so its settings are not known: {why}"),
        )
    })?;
    let refused = edit::refusals(&compiled.manifest, level, &edit);
    if !refused.is_empty() {
        return Err(HostError::new(Code::InvalidBody, refused.join("; ")));
    }
    Ok(edit)
}

/// `PATCH .../projects/{project}/plugins/{plugin}`.
pub async fn edit_project(
    State(s): State<HostState>,
    Path((ns, name, plugin)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::project("patch", &ns, &name))
        .await?;
    let writes = writes(&s)?;
    project(&s, &ns, &name)?;
    let edit = checked_edit(&s, &plugin, ConfigLevel::Project, &body)?;
    let token = bearer(&headers)?;
    writes
        .patch_project(token, &ns, &name, edit::project_patch(&plugin, &edit))
        .await
        .map_err(write_error)?;
    Ok(Json(json!({
        "project": name,
        "plugin": plugin,
        "written": edit::entry_patch(&edit),
        "note": "enabled and schedules count once the project's owner trusts the config; settings count now",
    }))
    .into_response())
}

/// `PATCH /global/plugins/{plugin}`.
pub async fn edit_global(
    State(s): State<HostState>,
    Path(plugin): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::host_config("patch"))
        .await?;
    let writes = writes(&s)?;
    let edit = checked_edit(&s, &plugin, ConfigLevel::Global, &body)?;
    let token = bearer(&headers)?;
    writes
        .patch_host_config(token, edit::host_config_patch(&plugin, &edit))
        .await
        .map_err(write_error)?;
    Ok(Json(json!({
        "hostConfig": HOST_CONFIG_NAME,
        "plugin": plugin,
        "written": edit::entry_patch(&edit),
    }))
    .into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct TrustBody {
    /// The config version the person reviewed (`project.hash` of the view).
    hash: String,
}

/// `POST .../projects/{project}/trust`.
pub async fn trust(
    State(s): State<HostState>,
    Path((ns, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::project_trust(&ns, &name))
        .await?;
    let writes = writes(&s)?;
    let asked: TrustBody = json_body(&body)?;
    if !asked.hash.starts_with("sha256:") || asked.hash.len() != 71 {
        return Err(HostError::new(
            Code::InvalidBody,
            "hash: the config's sha256:<64 hex>, as the view's project.hash gives it",
        ));
    }
    let token = bearer(&headers)?;
    let hash = writes
        .trust(token, &ns, &name, &asked.hash)
        .await
        .map_err(write_error)?;
    Ok(Json(json!({ "project": name, "trusted": hash })).into_response())
}
