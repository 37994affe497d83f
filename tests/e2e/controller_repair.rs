//! The controller undoes what happens to its children behind its back: a hand edit of a Pod,
//! CronJob, Secret or data claim is applied away (though the edit leaves every annotation as
//! it was), and a Pod the node evicted is replaced.

use std::time::Duration;

use anyhow::ensure;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::api::{Patch, PatchParams};
use kube::{Api, ResourceExt};
use model::resources::{Channel, InstancePhase, PluginInstance};
use model::schedule::ScheduleType;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::controller::{cron_entry, cronjob, instance_name, instances_of, pods_of, world};
use crate::controller_support::*;
use crate::support::{E2eTest, Ns, test, wait};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test("controller::a_hand_edit_of_a_child_is_undone", hand_edits),
        test("controller::an_evicted_pod_is_replaced", eviction),
    ]
}

/// A merge patch as `kubectl edit` or `kubectl label --overwrite` would make it.
async fn edit<K>(api: &Api<K>, name: &str, patch: serde_json::Value) -> anyhow::Result<()>
where
    K: kube::Resource + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    Ok(())
}

fn label<K: kube::Resource>(object: &K, key: &str) -> Option<String> {
    object.meta().labels.as_ref()?.get(key).cloned()
}

async fn hand_edits(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let id = world(
        &ns,
        "he",
        &[("tick", cron_entry(None, ScheduleType::Cron, "0 9 * * *"))],
    )
    .await?;
    let instance = instance_name(&id, "general");
    instances_of(&ns, &id, 1).await?;
    record_demand(&ns, &instance).await?;
    let pod = pods_of(&ns, &instance, 1, true).await?[0].name_any();
    let tick = format!("{id}-general-tick");
    cronjob(&ns, &tick, "tick exists", |_| true).await?;
    let claim = format!("data-{id}-general");
    let secret = format!("{instance}-token");
    wait::matches(
        &ns.api::<Channel>(),
        "general",
        "tick recorded as applied",
        WAIT,
        |c: &Channel| {
            c.status
                .as_ref()
                .is_some_and(|s| s.applied_schedules.iter().any(|a| a.action == "tick"))
        },
    )
    .await?;

    // Edited by hand, annotations untouched.
    edit(
        &ns.api::<CronJob>(),
        &tick,
        json!({ "spec": { "schedule": "0 3 * * *", "suspend": true } }),
    )
    .await?;
    let component = "app.kubernetes.io/component";
    let edited = json!({ "metadata": { "labels": { component: "edited" } } });
    edit(&ns.api::<Secret>(), &secret, edited.clone()).await?;
    edit(&ns.api::<PersistentVolumeClaim>(), &claim, edited.clone()).await?;
    edit(&ns.api::<Pod>(), &pod, edited).await?;

    cronjob(&ns, &tick, "tick back at 9, running", |c| {
        c.spec.schedule == "0 9 * * *" && c.spec.suspend == Some(false)
    })
    .await?;
    wait::matches(
        &ns.api::<Secret>(),
        &secret,
        "the Secret's label back",
        WAIT,
        |s: &Secret| label(s, component).as_deref() == Some("token"),
    )
    .await?;
    wait::matches(
        &ns.api::<PersistentVolumeClaim>(),
        &claim,
        "the claim's label back",
        WAIT,
        |c: &PersistentVolumeClaim| label(c, component).as_deref() == Some("data"),
    )
    .await?;
    let back = wait::matches(
        &ns.api::<Pod>(),
        &pod,
        "the Pod's label back",
        WAIT,
        |p: &Pod| label(p, component).as_deref() == Some("plugin"),
    )
    .await?;
    ensure!(
        back.metadata.deletion_timestamp.is_none(),
        "the Pod was put right, not replaced"
    );
    Ok(())
}

async fn eviction(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let id = world(&ns, "ev", &[]).await?;
    let instance = instance_name(&id, "general");
    instances_of(&ns, &id, 1).await?;
    record_demand(&ns, &instance).await?;
    let first = pods_of(&ns, &instance, 1, true).await?.remove(0);
    // What the kubelet writes when it evicts a Pod under node pressure.
    let evicted = json!({ "status": {
        "phase": "Failed",
        "reason": "Evicted",
        "message": "The node was low on resource: memory.",
    } });
    ns.api::<Pod>()
        .patch_status(
            &first.name_any(),
            &PatchParams::default(),
            &Patch::Merge(&evicted),
        )
        .await?;
    record_demand(&ns, &instance).await?;
    let label = format!("plugins.loop.dev/instance={instance}");
    let replaced = list_until(
        &ns.api::<Pod>(),
        Some(&label),
        "a new Ready Pod in place of the evicted one",
        WAIT,
        |all| {
            all.len() == 1
                && all[0].uid() != first.uid()
                && all[0].metadata.deletion_timestamp.is_none()
                && all[0]
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        },
    )
    .await?;
    wait::matches(
        &ns.api::<PluginInstance>(),
        &instance,
        "phase Running on the new Pod",
        WAIT,
        |i: &PluginInstance| {
            i.status.as_ref().is_some_and(|s| {
                s.phase == Some(InstancePhase::Running) && s.pod == Some(replaced[0].name_any())
            })
        },
    )
    .await?;
    tokio::time::sleep(Duration::ZERO).await;
    Ok(())
}
