//! Upgrade and remove a plugin from Settings → Plugins (the reference's app), as a person:
//! the capability review first (what the new version asks for that the installed one did
//! not), then the replacement the person approved, or the removal.
//!
//! | method | route | RBAC asked first | what it does |
//! |---|---|---|---|
//! | POST | `/global/plugins/{plugin}/review` `{image?}` | `update plugins` (the plugin) | pulls `image` (default: the installed tag, looked up again) with its signatures and answers the review: each capability with where it stood, what goes, admission's stages as the controller will run them; writes nothing |
//! | PUT | `/global/plugins/{plugin}` `{image, resourceVersion, approve}` | `update plugins` | the review again for the pinned `image`, then the Plugin's spec replaced with the caller's own token at the reviewed `resourceVersion` |
//! | DELETE | `/global/plugins/{plugin}` | `delete plugins` | the Plugin deleted with the caller's own token (its volumes kept unless `purgeOnDelete`) |
//!
//! The review asks for `update plugins` although it writes nothing: it makes this server pull
//! an image, which only someone who may upgrade should cause. Every decision is
//! `install::review`'s, the same as `loop-plugins plugin upgrade`; an upgrade admission would
//! refuse is refused here first (422 `upgrade_refused`, naming the stage).

use std::sync::Arc;

use admission::StageState;
use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use install::review::{self, Upgrade};
use kube::ResourceExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::{Permission, bearer};
use super::config::write_error;
use super::error::{Code, HostError, HostResult};
use super::state::{HostState, json_body};
use crate::person::PersonError;
use model::resources::Plugin;

/// How many capabilities one upgrade may approve at once (more than the reference has).
const MAX_APPROVALS: usize = 64;

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct ReviewBody {
    /// The image to upgrade to; None: the installed tag, looked up again.
    #[serde(default)]
    image: Option<String>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct UpgradeBody {
    /// The pinned image the review answered (`candidate.image`).
    image: String,
    /// The Plugin's resourceVersion the review was made against (`current.resourceVersion`).
    resource_version: String,
    /// Capabilities approved now, beyond those that carry over.
    #[serde(default)]
    approve: Vec<String>,
}

fn installed(s: &HostState, name: &str) -> HostResult<Arc<Plugin>> {
    s.index().plugin(name).ok_or_else(|| {
        HostError::new(
            Code::PluginNotFound,
            format!("no Plugin {name} is installed"),
        )
    })
}

/// Pulls `reference` and makes the review of `current` → it.
async fn reviewed(
    s: &HostState,
    current: &Plugin,
    reference: &str,
    approve: &[String],
) -> HostResult<Upgrade> {
    let images = s.images.clone().ok_or_else(|| {
        HostError::new(
            Code::Unavailable,
            "this server pulls no images (it runs without a cluster)",
        )
    })?;
    let index = s.index();
    let host = index.host_config();
    let pulled = images
        .pull(reference, &host.spec.plugins.registry)
        .await
        .map_err(|e| HostError::new(Code::ImageUnreadable, format!("{reference}: {e}")))?;
    let installed: Vec<Plugin> = index
        .plugins
        .state()
        .iter()
        .map(|p| p.as_ref().clone())
        .collect();
    review::upgrade(&host.spec, current, &pulled, approve, &installed)
        .map_err(|e| HostError::new(Code::UpgradeRefused, e.to_string()))
}

/// The review as the console shows it.
fn review_json(current: &Plugin, upgrade: &Upgrade) -> Value {
    let stopped = upgrade.checked.stopped_at();
    json!({
        "plugin": current.name_any(),
        "current": {
            "image": current.spec.image,
            "version": current.spec.manifest.version,
            "approved": current.spec.approved_capabilities,
            "resourceVersion": current.resource_version(),
        },
        "candidate": {
            "image": upgrade.plugin.spec.image,
            "version": upgrade.manifest.version,
            "signed": upgrade.plugin.spec.signature.is_some(),
            "capabilities": upgrade.capabilities.iter().map(|l| json!({
                "capability": l.line.capability.as_str(),
                "allows": l.line.allows_here(),
                "before": l.before.as_str(),
                "approved": l.line.approved,
            })).collect::<Vec<_>>(),
            "dropped": upgrade.dropped,
            "admission": upgrade.checked.stages.iter().map(|st| json!({
                "stage": st.stage.to_string(),
                "state": format!("{:?}", st.state),
                "reason": st.reason,
                "message": st.message,
            })).collect::<Vec<_>>(),
        },
        "refused": refusal(upgrade),
        "waits": stopped.filter(|st| st.state == StageState::Pending).map(|st| st.message.clone()),
    })
}

/// Why admission would refuse the upgrade (the host switch aside), if it would.
fn refusal(upgrade: &Upgrade) -> Option<String> {
    upgrade
        .checked
        .stopped_at()
        .filter(|st| st.state == StageState::Refused)
        .map(|st| {
            format!(
                "admission would refuse it at the {} stage ({}): {}",
                st.stage, st.reason, st.message
            )
        })
}

/// Who writes the Plugin: the person, with their token.
fn writer(s: &HostState) -> HostResult<crate::person::SharedPerson> {
    s.person.clone().ok_or_else(|| {
        HostError::new(
            Code::Unavailable,
            "this server writes no Plugins (it runs without a cluster)",
        )
    })
}

/// A person's write refused: as Settings' writes are, a missing Plugin named as one.
fn plugin_write_error(e: PersonError) -> HostError {
    match e {
        PersonError::Refused {
            status: 404,
            message,
        } => HostError::new(Code::PluginNotFound, message),
        e => write_error(e),
    }
}

/// `POST /global/plugins/{plugin}/review`.
pub async fn review(
    State(s): State<HostState>,
    Path(plugin): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::plugin("update", &plugin))
        .await?;
    let asked: ReviewBody = if body.is_empty() {
        ReviewBody::default()
    } else {
        json_body(&body)?
    };
    let current = installed(&s, &plugin)?;
    let reference = match asked.image.filter(|i| !i.trim().is_empty()) {
        Some(image) => image.trim().to_string(),
        None => review::looked_up_again(&current.spec.image)
            .map_err(|e| HostError::new(Code::InvalidBody, e.to_string()))?
            .ok_or_else(|| {
                HostError::new(
                    Code::InvalidBody,
                    format!(
                        "image: {} names no tag to look up again; give the image to upgrade to",
                        current.spec.image
                    ),
                )
            })?,
    };
    let upgrade = reviewed(&s, &current, &reference, &[]).await?;
    Ok(Json(review_json(&current, &upgrade)).into_response())
}

/// `PUT /global/plugins/{plugin}`.
pub async fn upgrade(
    State(s): State<HostState>,
    Path(plugin): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::plugin("update", &plugin))
        .await?;
    let asked: UpgradeBody = json_body(&body)?;
    if asked.approve.len() > MAX_APPROVALS {
        return Err(HostError::new(
            Code::InvalidBody,
            format!("approve: at most {MAX_APPROVALS} capabilities"),
        ));
    }
    let pinned = oci::ImageRef::parse(&asked.image)
        .map_err(|e| HostError::new(Code::InvalidBody, format!("image: {e}")))?;
    if pinned.digest().is_none() {
        return Err(HostError::new(
            Code::InvalidBody,
            "image: pinned by digest, as the review's candidate.image gives it",
        ));
    }
    let current = installed(&s, &plugin)?;
    if current.resource_version().as_deref() != Some(asked.resource_version.as_str()) {
        return Err(HostError::new(
            Code::ConfigChanged,
            format!(
                "Plugin {plugin} changed since the review (resourceVersion {} → {}): review again",
                asked.resource_version,
                current.resource_version().unwrap_or_default()
            ),
        ));
    }
    let upgrade = reviewed(&s, &current, &asked.image, &asked.approve).await?;
    if let Some(why) = refusal(&upgrade) {
        return Err(HostError::new(Code::UpgradeRefused, why));
    }
    let person = writer(&s)?;
    let token = bearer(&headers)?;
    person
        .replace_plugin_spec(
            token,
            &plugin,
            &asked.resource_version,
            &upgrade.plugin.spec,
        )
        .await
        .map_err(plugin_write_error)?;
    Ok(Json(json!({
        "plugin": plugin,
        "image": upgrade.plugin.spec.image,
        "version": upgrade.manifest.version,
        "approved": upgrade.plugin.spec.approved_capabilities,
        "note": "the controller admits the new version, then replaces the plugin's containers",
    }))
    .into_response())
}

/// `DELETE /global/plugins/{plugin}`.
pub async fn remove(
    State(s): State<HostState>,
    Path(plugin): Path<String>,
    headers: HeaderMap,
) -> HostResult<Response> {
    s.authorize(&headers, &Permission::plugin("delete", &plugin))
        .await?;
    let current = installed(&s, &plugin)?;
    let person = writer(&s)?;
    let token = bearer(&headers)?;
    person
        .delete_plugin(token, &plugin)
        .await
        .map_err(plugin_write_error)?;
    let kept = if current.spec.purge_on_delete {
        "its volumes are deleted with it (purgeOnDelete)"
    } else {
        "its volumes are kept (purgeOnDelete is off)"
    };
    Ok(Json(json!({ "plugin": plugin, "removed": true, "note": kept })).into_response())
}
