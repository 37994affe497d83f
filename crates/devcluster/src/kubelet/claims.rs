//! PersistentVolumeClaims made Bound: no provisioner runs here, so for each pending claim the
//! stand-in creates a PersistentVolume pre-bound to it (a hostPath on the claim's folder), and
//! kube-controller-manager's binder completes the binding as it would for any static volume.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim,
    PersistentVolumeSpec,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use tokio::sync::watch;

use super::volumes::claim_dir;

/// The label on every PersistentVolume the stand-in makes.
pub const PV_LABEL: &str = "loop-plugins.dev/devkubelet-claim";

/// Watches claims: creates a volume for each pending one, deletes it (and its folder) when the
/// claim is gone. While `held` is true, volumes wait: the claims that need one are kept and get
/// it when `held` turns false (a bench holds them so the binding, which a provisioner would do
/// at its own pace, stays out of a measured window). Runs for as long as the task runs.
pub async fn run(client: Client, claims_dir: PathBuf, mut held: watch::Receiver<bool>) {
    let claims: Api<PersistentVolumeClaim> = Api::all(client.clone());
    let volumes: Api<PersistentVolume> = Api::all(client);
    let mut events = watcher(claims, watcher::Config::default())
        .default_backoff()
        .boxed();
    // The volumes held back, by claim uid.
    let mut waiting: BTreeMap<String, PersistentVolume> = BTreeMap::new();
    loop {
        let event = tokio::select! {
            event = events.next() => match event {
                Some(event) => event,
                None => return,
            },
            changed = held.changed() => {
                if changed.is_err() {
                    // The stand-in is gone (it aborts this task as it goes).
                    return;
                }
                if !*held.borrow_and_update() {
                    for (_, pv) in std::mem::take(&mut waiting) {
                        create(&volumes, &pv).await;
                    }
                }
                continue;
            }
        };
        match event {
            Ok(watcher::Event::Apply(claim) | watcher::Event::InitApply(claim)) => {
                if let Some(pv) = volume_for(&claim, &claims_dir) {
                    if *held.borrow() {
                        waiting.insert(claim.uid().unwrap_or_default(), pv);
                    } else {
                        create(&volumes, &pv).await;
                    }
                }
            }
            Ok(watcher::Event::Delete(claim)) => {
                let uid = claim.uid().unwrap_or_default();
                waiting.remove(&uid);
                let name = format!("pvc-{uid}");
                if let Err(e) = volumes.delete(&name, &DeleteParams::default()).await
                    && !matches!(&e, kube::Error::Api(s) if s.is_not_found())
                {
                    tracing::warn!(volume = %name, error = %e, "deleting a claim's volume failed");
                }
                let _ = std::fs::remove_dir_all(claim_dir(&claims_dir, &uid));
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "watching claims"),
        }
    }
}

async fn create(volumes: &Api<PersistentVolume>, pv: &PersistentVolume) {
    match volumes.create(&PostParams::default(), pv).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_already_exists() => {}
        Err(e) => {
            tracing::warn!(volume = %pv.name_any(), error = %e, "creating a claim's volume failed")
        }
    }
}

/// The volume a pending, unbound claim gets, if it needs one. Pure.
pub fn volume_for(claim: &PersistentVolumeClaim, claims_dir: &Path) -> Option<PersistentVolume> {
    let spec = claim.spec.as_ref()?;
    let pending = claim
        .status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_none_or(|p| p == "Pending");
    if !pending || spec.volume_name.as_deref().is_some_and(|v| !v.is_empty()) {
        return None;
    }
    if claim.metadata.deletion_timestamp.is_some() {
        return None;
    }
    let uid = claim.uid()?;
    let storage = spec
        .resources
        .as_ref()
        .and_then(|r| r.requests.as_ref())
        .and_then(|r| r.get("storage").cloned())
        .unwrap_or_else(|| Quantity("1Gi".into()));
    let path = claim_dir(claims_dir, &uid);
    Some(PersistentVolume {
        metadata: ObjectMeta {
            name: Some(format!("pvc-{uid}")),
            labels: Some(BTreeMap::from([(PV_LABEL.to_string(), uid.clone())])),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: Some(BTreeMap::from([("storage".to_string(), storage)])),
            access_modes: spec.access_modes.clone(),
            storage_class_name: Some(spec.storage_class_name.clone().unwrap_or_default()),
            volume_mode: spec.volume_mode.clone(),
            persistent_volume_reclaim_policy: Some("Retain".into()),
            claim_ref: Some(ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("PersistentVolumeClaim".into()),
                namespace: claim.namespace(),
                name: Some(claim.name_any()),
                uid: Some(uid),
                ..Default::default()
            }),
            host_path: Some(HostPathVolumeSource {
                path: path.to_string_lossy().into_owned(),
                type_: Some("DirectoryOrCreate".into()),
            }),
            ..Default::default()
        }),
        ..Default::default()
    })
}
