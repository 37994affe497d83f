//! The thin part that writes, with one field manager: objects by server-side apply, skipped
//! when every field we would apply already has its value in the live object (see `drift`), so
//! a steady state makes no write and a hand edit of a field we set is undone; absent objects by
//! a create; statuses by a merge patch of what changed in the part we own (see `merge_patch`).
//! Each write is skipped when the same write went over the version the cache still shows (see
//! `recent_writes`), and a create when the object was made and the cache does not show it yet
//! (see `index::awaited`).

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::Context;
use super::drift;
use super::error::{Error, Result};
use super::merge_patch;
use super::recent_writes::{Target, content_hash, status_hash};
use model::names::FIELD_MANAGER;

/// The first field we set whose live value differs; `None` when `live` already is what
/// `desired` would make it.
pub fn difference<K: Serialize>(desired: &K, live: &K) -> Option<String> {
    let json = |k: &K| serde_json::to_value(k).expect("objects serialize");
    drift::difference(&json(desired), &json(live))
}

/// Makes `desired` when the cache shows no such object, else applies it unless `live` already
/// matches it. Returns whether it wrote.
///
/// An absent object is made with a create, not an apply: a create costs the API server less
/// CPU than an apply making the same object (14.0 against 19.3 CPU-seconds for 5,250 objects
/// in one run of `make bench-scale`'s two baselines), and a cold start is all creates. The create records the fields
/// under our field manager; an apply afterwards owns the fields it sets. So a builder sets the
/// same fields every time (their values vary, the set does not): a field the create set and
/// a later apply left out would stay, owned by the create.
pub async fn apply<K>(ctx: &Context, desired: &K, live: Option<&K>) -> Result<bool>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug,
{
    let Some(live) = live else {
        return create(ctx, desired).await;
    };
    let Some(field) = difference(desired, live) else {
        return Ok(false);
    };
    let name = desired.name_any();
    let ns = desired
        .namespace()
        .ok_or_else(|| Error::NoNamespace(name.clone()))?;
    let target = Target {
        kind: kind::<K>(),
        part: "",
        namespace: &ns,
        name: &name,
    };
    let version = live.resource_version();
    let content = content_hash(desired);
    if ctx
        .recent_writes
        .on_its_way(target, version.as_deref(), content)
    {
        tracing::debug!(kind = kind::<K>(), %name, %field, "our write is on its way to the cache");
        return Ok(false);
    }
    tracing::info!(kind = kind::<K>(), %name, %field, "applying again: a field we set differs");
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    ctx.metrics.write(kind::<K>(), "apply");
    let _turn = ctx.write_permit().await;
    api.patch(
        &name,
        &PatchParams::apply(FIELD_MANAGER).force(),
        &Patch::Apply(desired),
    )
    .await
    .map_err(|source| Error::Apply {
        kind: kind::<K>(),
        name: name.clone(),
        source,
    })?;
    ctx.recent_writes
        .record(target, version.as_deref(), content);
    Ok(true)
}

/// Creates `object`, which the cache does not show; one that exists already (a cache behind
/// the server, or one still going away under the same name) counts as made. Returns whether it
/// made it.
///
/// One this controller is making, or made and the cache does not show yet, is not made again
/// (`index::awaited`): a reconcile woken again before its cache caught up would otherwise send
/// the same create for the API server to refuse.
pub async fn create<K>(ctx: &Context, object: &K) -> Result<bool>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + Debug,
{
    let name = object.name_any();
    let ns = object
        .namespace()
        .ok_or_else(|| Error::NoNamespace(name.clone()))?;
    let kind = kind::<K>();
    let now = std::time::Instant::now();
    if ctx.awaited.awaited(kind, Some(&ns), &name, now) {
        tracing::debug!(%kind, %name, "made already; the cache does not show it yet");
        return Ok(false);
    }
    // Before it is sent, so the watch event it brings always finds it.
    ctx.awaited.made(kind, Some(&ns), &name, now);
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    ctx.metrics.write(kind, "create");
    let _turn = ctx.write_permit().await;
    match api
        .create(
            &PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            },
            object,
        )
        .await
    {
        Ok(_) => Ok(true),
        // It exists: awaited too, until the cache shows it.
        Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(false),
        Err(source) => {
            ctx.awaited.forget(kind, Some(&ns), &name);
            Err(Error::Create { kind, name, source })
        }
    }
}

/// Deletes an object we made; one already gone (or going) is fine. Dependents go in the
/// background. Returns whether it asked for a deletion.
pub async fn delete<K>(ctx: &Context, object: &K) -> Result<bool>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
{
    if object.meta().deletion_timestamp.is_some() {
        return Ok(false);
    }
    let name = object.name_any();
    let ns = object
        .namespace()
        .ok_or_else(|| Error::NoNamespace(name.clone()))?;
    let api: Api<K> = Api::namespaced(ctx.client.clone(), &ns);
    ctx.metrics.write(kind::<K>(), "delete");
    let _turn = ctx.write_permit().await;
    let params = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Background),
        preconditions: object.uid().map(|uid| kube::api::Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..Default::default()
    };
    match api.delete(&name, &params).await {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(status)) if status.is_not_found() || status.is_conflict() => Ok(false),
        Err(source) => Err(Error::Delete {
            kind: kind::<K>(),
            name,
            source,
        }),
    }
}

/// Writes `status` on `object` through `api`, unless it is already what we'd write
/// (`current`: the part of the live status we own), or we wrote it over the version the cache
/// still shows. The write is a merge patch of what differs from `current` (see `merge_patch`),
/// so fields others own in the same status are left as they are.
pub async fn status<K, S>(
    ctx: &Context,
    api: &Api<K>,
    object: &K,
    current: Option<&S>,
    status: &S,
) -> Result<bool>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize + PartialEq,
{
    write_status(ctx, api, object, current, status, Precondition::None).await
}

/// [`status`] for a status others write too, where a write decided on an old version must not
/// land over a newer one (an AgentRun's phase: the controller's `Queued` decided on a run the
/// API server or a test has since ended). The patch carries the resourceVersion the decision
/// read; a conflict writes nothing and answers `false`, and the newer version's event
/// reconciles again.
pub async fn status_at_version<K, S>(
    ctx: &Context,
    api: &Api<K>,
    object: &K,
    current: Option<&S>,
    status: &S,
) -> Result<bool>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize + PartialEq,
{
    write_status(
        ctx,
        api,
        object,
        current,
        status,
        Precondition::ResourceVersion,
    )
    .await
}

/// Whether a status write is refused when the object moved on since it was read.
#[derive(Clone, Copy, PartialEq)]
enum Precondition {
    None,
    ResourceVersion,
}

async fn write_status<K, S>(
    ctx: &Context,
    api: &Api<K>,
    object: &K,
    current: Option<&S>,
    status: &S,
    precondition: Precondition,
) -> Result<bool>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
    S: Serialize + PartialEq,
{
    if current == Some(status) {
        return Ok(false);
    }
    let (ns, name) = (object.namespace().unwrap_or_default(), object.name_any());
    let target = status_target::<K>(&ns, &name);
    let version = object.resource_version();
    let content = status_hash(status);
    if ctx
        .recent_writes
        .on_its_way(target, version.as_deref(), content)
    {
        return Ok(false);
    }
    let json = |s: &S| serde_json::to_value(s).expect("statuses serialize");
    let from = current.map(json).unwrap_or_else(|| serde_json::json!({}));
    let Some(changes) = merge_patch::between(&from, &json(status)) else {
        // Unequal as values, equal as JSON: nothing to write.
        return Ok(false);
    };
    tracing::debug!(kind = kind::<K>(), %name, %changes, "writing the status");
    let mut patch = serde_json::json!({ "status": changes });
    if precondition == Precondition::ResourceVersion {
        patch["metadata"] = serde_json::json!({ "resourceVersion": version });
    }
    ctx.metrics.write(kind::<K>(), "status");
    let _turn = ctx.write_permit().await;
    let written = match api
        .patch_status(
            &name,
            &PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            },
            &Patch::Merge(&patch),
        )
        .await
    {
        Ok(written) => written,
        Err(kube::Error::Api(refused))
            if precondition == Precondition::ResourceVersion && refused.is_conflict() =>
        {
            tracing::debug!(kind = kind::<K>(), %name, "the object moved on; not writing");
            return Ok(false);
        }
        Err(source) => {
            return Err(Error::Status {
                kind: kind::<K>(),
                name: name.clone(),
                source,
            });
        }
    };
    ctx.recent_writes
        .record(target, version.as_deref(), content);
    ctx.recent_writes
        .produced(target, written.resource_version().as_deref());
    Ok(true)
}

/// Whether `object`, as a watch event shows it, is the echo of our own last status write to
/// it (see `recent_writes`): the reconciler that wrote it has nothing to do on it.
pub fn is_status_echo<K: Resource<DynamicType = ()>>(ctx: &Context, object: &K) -> bool {
    // Every instance event passes here: borrow the names rather than copy them.
    let meta = object.meta();
    let (ns, name) = (meta.namespace.as_deref(), meta.name.as_deref());
    ctx.recent_writes.is_echo(
        status_target::<K>(ns.unwrap_or_default(), name.unwrap_or_default()),
        meta.resource_version.as_deref(),
    )
}

/// The status of the `K` named `namespace/name`, for `recent_writes`.
fn status_target<'a, K: Resource<DynamicType = ()>>(
    namespace: &'a str,
    name: &'a str,
) -> Target<'a> {
    Target {
        kind: kind::<K>(),
        part: "status",
        namespace,
        name,
    }
}

fn kind<K: Resource<DynamicType = ()>>() -> &'static str {
    // Kinds are static strings for every type we write.
    match K::kind(&()).as_ref() {
        "Pod" => "Pod",
        "Secret" => "Secret",
        "PersistentVolumeClaim" => "PersistentVolumeClaim",
        "CronJob" => "CronJob",
        "PluginInstance" => "PluginInstance",
        "Plugin" => "Plugin",
        "Channel" => "Channel",
        "Project" => "Project",
        "AgentRun" => "AgentRun",
        "HostConfig" => "HostConfig",
        _ => "Other",
    }
}
