//! The PluginInstance reconciler: the instance's Secret, its Pod while it is wanted, and the
//! container's observed state in status.
//!
//! A reconcile is a pipeline of named steps; the deciding and building ones are pure
//! (`decide`, `desired`, `status`), the ones in this file read the stores or write:
//!
//! 1. [`gather`]: what the instance depends on, from the stores (its Plugin and manifest,
//!    Channel, Project, HostConfig, its Secrets and Pods, HostConfig's registry credentials,
//!    the NetworkPolicies of its namespace); nothing is written;
//! 2. `decide::decide`: whether it can run (or why not), whether its container is wanted now,
//!    what its Pod takes from the Plugin and HostConfig, the settings that apply, and what its
//!    plugin's egress policy opens here (the `egress` reconciler makes it);
//! 3. `desired::desired`: its children, built: the pull Secret and its Secret (made, kept or
//!    replaced: `decide::secret_step`) in the order they are written, and the Pod (or why none
//!    can run); then `decide::pod_steps`: which live Pods go, and whether the desired one is
//!    made or put right;
//! 4. [`sync`]: the Secrets written in order, then the Pods that go deleted and the one wanted
//!    made or put right, each with its Event, all through the write door;
//! 5. [`write_status`]: the status `status::desired_status` derives from what was applied,
//!    written when it changed.

pub(crate) mod decide;
mod desired;
mod status;

use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use rand::Rng;

use super::context::Context;
use super::error::{GatherError, Result, WriteError};
use super::images;
use super::pod_wanted::Demand;
use super::write::StatusWrite;
use decide::{Facts, PodSteps, Removal, Start};
use desired::{Desired, Fresh, SecretWrite};
use index::compact;
use model::names;
use model::resources::{
    Channel, ConditionStatus, Plugin, PluginInstance, PluginInstanceStatus, Project,
};

pub async fn reconcile(instance: Arc<PluginInstance>, ctx: Arc<Context>) -> Result<Action> {
    let ns = instance
        .namespace()
        .ok_or_else(|| GatherError::NoNamespace(instance.name_any()))?;
    if instance.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let name = instance.name_any();
    let facts = gather(&ctx, &instance, &name, &ns)?;
    let now = jiff::Timestamp::now();
    let decision = decide::decide(&facts, now);
    let fresh = Fresh {
        token: random_token(),
        secret: random_token(),
    };
    let desired = desired::desired(&facts, &decision, &fresh);
    let keep = desired
        .pod
        .as_ref()
        .ok()
        .filter(|_| decision.demand.wanted());
    let steps = decide::pod_steps(keep, &facts.pods);
    let running = sync(&ctx, &instance, &desired, steps, decision.demand).await?;
    let applied = status::Applied {
        pod: running.as_deref(),
        want_pod: keep.is_some(),
        problem: desired.pod.as_ref().err().map(String::as_str),
        settings: decision.settings.as_ref(),
        egress: decision.egress.as_deref(),
        gated: decision.pod.as_ref().ok().map(|(_, p)| p.gate.is_some()),
    };
    let status = status::desired_status(&instance, &applied, &model::time::rfc3339(now));
    write_status(&ctx, &instance, &ns, &status).await?;
    Ok(match decision.demand.recheck_after(now) {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}

/// Reads what the instance's reconcile decides from, from the stores: its Plugin and the
/// manifest parsed from it, its Channel (and a thread's channel, for its working tree), its
/// Project, HostConfig, its Secrets and Pods, HostConfig's registry credentials and the
/// NetworkPolicies of its namespace.
fn gather<'a>(
    ctx: &'a Context,
    instance: &'a PluginInstance,
    name: &'a str,
    ns: &'a str,
) -> Result<Facts<'a>> {
    let stores = &ctx.stores;
    let spec = &instance.spec;
    let plugin = stores
        .plugins
        .get(&ObjectRef::<Plugin>::new(&spec.plugin))
        .map(|plugin| {
            let manifest = ctx.manifests.of(&plugin);
            (plugin, manifest)
        });
    let channel = stores
        .channels
        .get(&ObjectRef::<Channel>::new(&spec.channel).within(ns));
    let parent_channel = channel
        .as_ref()
        .filter(|c| c.spec.working_tree.is_none())
        .and_then(|c| c.spec.parent.as_ref())
        .and_then(|parent| {
            stores
                .channels
                .get(&ObjectRef::<Channel>::new(parent).within(ns))
        });
    let project = stores
        .projects
        .get(&ObjectRef::<Project>::new(&spec.project).within(ns));
    let pods = stores
        .pods
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns) && decide::owned_by(p, instance))
        .collect();
    let policies = stores
        .network_policies
        .state()
        .into_iter()
        .filter(|p| p.metadata.namespace.as_deref() == Some(ns))
        .collect();
    let host = ctx.host();
    let secret = compact::get(&stores.secrets, &names::secret_name(name), ns)?;
    let pull_secret = compact::get(&stores.secrets, &names::pull_secret_name(name), ns)?;
    // Credentials that cannot be read leave the Pod without a pull Secret (the Plugin's Image
    // stage says why).
    let pull_credentials = images::credentials(
        &host.plugins.registry,
        &ctx.options.namespace,
        &stores.registry_secrets,
    )
    .unwrap_or_else(|e| {
        tracing::warn!(instance = name, error = %e, "no pull secret for the plugin's Pod");
        None
    });
    Ok(Facts {
        instance,
        name,
        namespace: ns,
        api_url: ctx.api_url(&host),
        host,
        plugin,
        channel,
        parent_channel,
        project,
        pods,
        policies,
        secret,
        pull_secret,
        pull_credentials,
        self_image: &ctx.options.self_image,
        started: ctx.started,
    })
}

/// Writes the instance's children: its Secrets in order (the pull Secret first: the Pod names
/// it), then `steps` for its Pods. Returns the live Pod that runs on, if one does.
async fn sync(
    ctx: &Context,
    instance: &PluginInstance,
    desired: &Desired<'_>,
    steps: PodSteps<'_>,
    demand: Demand,
) -> Result<Option<Arc<Pod>>> {
    for write in &desired.secrets {
        match write {
            SecretWrite::Put { desired, live } => ctx.writes.apply(desired.as_ref(), *live).await?,
            SecretWrite::Replace(live) => ctx.writes.delete(*live).await?,
        };
    }
    put_pods(ctx, instance, steps, demand).await
}

/// Carries out `steps`: deletes the Pods that go, then makes or puts right the one wanted,
/// each with its Event. Returns the live Pod that runs on, if one does.
async fn put_pods(
    ctx: &Context,
    instance: &PluginInstance,
    steps: PodSteps<'_>,
    demand: Demand,
) -> Result<Option<Arc<Pod>>> {
    let mut stopped = false;
    for removal in steps.removals {
        match removal {
            Removal::Failed { pod, note } => {
                if ctx.writes.delete(pod).await? {
                    ctx.event(instance, true, "PodFailed", "ReplacePod", note)
                        .await;
                }
            }
            Removal::Unwanted(pod) => stopped |= ctx.writes.delete(pod).await?,
        }
    }
    let running = match steps.start {
        Start::Create(pod) => {
            if ctx.writes.create(pod).await? {
                let why = decide::started_because(demand);
                let note = format!("started Pod {}: {why}", pod.name_any());
                ctx.event(instance, false, "Started", "StartPod", note)
                    .await;
            }
            None
        }
        Start::PutRight { desired, live } => {
            put_right(ctx, desired, live).await?;
            Some(live.clone())
        }
        Start::AwaitGone | Start::Nothing => None,
    };
    if stopped {
        let note = format!("stopped the container: {}", decide::stopped_because(demand));
        ctx.event(instance, false, "Stopped", "StopPod", note).await;
    }
    Ok(running)
}

/// Applies the desired Pod over a live one that differs in a field we set (a hand edit): only
/// mutable fields can differ under the same name, as the name carries the spec's hash. Should
/// the API server refuse it anyway, the Pod is replaced.
async fn put_right(ctx: &Context, desired: &Pod, live: &Pod) -> Result<(), WriteError> {
    match ctx.writes.apply(desired, Some(live)).await {
        Err(err) if err.is_permanent() => {
            tracing::warn!(pod = %live.name_any(), error = %err, "replacing a Pod that cannot be put right");
            ctx.writes.delete(live).await.map(|_| ())
        }
        other => other.map(|_| ()),
    }
}

/// Writes `status` unless the part of the live status we own already is it; when the
/// settings left out changed, says so in an Event (a Warning while some are).
async fn write_status(
    ctx: &Context,
    instance: &PluginInstance,
    ns: &str,
    status: &PluginInstanceStatus,
) -> Result<()> {
    let api: Api<PluginInstance> = Api::namespaced(ctx.client.clone(), ns);
    let before = instance
        .status
        .as_ref()
        .map(status::observed_part)
        .unwrap_or_default();
    if ctx
        .writes
        .status(&api, instance, Some(&before), status, StatusWrite::Merge)
        .await?
        && let Some(settings) = status::settings_news(&before, status)
    {
        let warning = settings.status == ConditionStatus::False;
        let note = settings.message.clone();
        ctx.event(instance, warning, &settings.reason, "ResolveSettings", note)
            .await;
    }
    Ok(())
}

/// 32 random bytes, hex-encoded.
pub(crate) fn random_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    hex::encode(bytes)
}
