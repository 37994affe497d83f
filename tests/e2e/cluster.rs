//! The control plane itself: namespaces, ServiceAccount authentication with RBAC, garbage
//! collection, Jobs and CronJobs, PersistentVolumeClaims.

use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{DeleteParams, ListParams, PostParams};
use kube::{Api, Resource, ResourceExt};
use serde_json::json;

use crate::support::{E2eTest, IMAGE_SH, Ns, restricted, restricted_template, test, wait};

/// Why these tests run on the local control plane only: they check it, and the kubelet
/// stand-in plays their images.
const LOCAL: &str = "checks the local control plane itself, with images the stand-in plays";

pub fn tests() -> Vec<E2eTest> {
    let tests = vec![
        test(
            "cluster::namespace_gets_its_service_account_and_root_ca",
            namespace_gets_its_service_account_and_root_ca,
        ),
        test(
            "cluster::service_account_token_is_held_to_rbac",
            service_account_token_is_held_to_rbac,
        ),
        test(
            "cluster::garbage_collector_deletes_owned_objects",
            garbage_collector_deletes_owned_objects,
        ),
        test("cluster::job_completes", job_completes),
        test(
            "cluster::cronjob_runs_a_job_that_completes",
            cronjob_runs_a_job_that_completes,
        )
        .timeout(Duration::from_secs(200)),
        test(
            "cluster::claim_is_bound_and_its_data_outlives_pods",
            claim_is_bound_and_its_data_outlives_pods,
        ),
    ];
    tests.into_iter().map(|t| t.local_only(LOCAL)).collect()
}

const WAIT: Duration = Duration::from_secs(60);

async fn namespace_gets_its_service_account_and_root_ca(ns: Ns) -> anyhow::Result<()> {
    ns.get::<ServiceAccount>("default").await?;
    wait::exists(&ns.api::<ConfigMap>(), "kube-root-ca.crt", WAIT).await?;
    Ok(())
}

async fn service_account_token_is_held_to_rbac(ns: Ns) -> anyhow::Result<()> {
    let accounts = ns.api::<ServiceAccount>();
    accounts
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "reader" } }))?,
        )
        .await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = accounts
        .create_token_request("reader", &PostParams::default(), &request)
        .await?
        .status
        .and_then(|s| s.token)
        .context("the TokenRequest has no token")?;
    let as_reader = ns
        .cluster()
        .dev()?
        .control_plane()
        .client_with_token(&token)?;
    let maps: Api<ConfigMap> = Api::namespaced(as_reader, ns.name());

    match maps.list(&ListParams::default()).await {
        Err(kube::Error::Api(s)) if s.code == 403 => {
            ensure!(
                s.message
                    .contains(&format!("system:serviceaccount:{}:reader", ns.name())),
                "the refusal names someone else: {}",
                s.message
            );
        }
        other => anyhow::bail!(
            "listing ConfigMaps without a RoleBinding should be forbidden, got {other:?}"
        ),
    }

    ns.api::<Role>()
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": { "name": "configmap-reader" },
                "rules": [{ "apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list"] }]
            }))?,
        )
        .await?;
    ns.api::<RoleBinding>()
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": { "name": "reader-reads-configmaps" },
                "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "configmap-reader" },
                "subjects": [{ "kind": "ServiceAccount", "name": "reader", "namespace": ns.name() }]
            }))?,
        )
        .await?;
    // The authorizer learns of the binding through its informer: a moment, not a watch we can see.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        match maps.list(&ListParams::default()).await {
            Ok(_) => break,
            Err(kube::Error::Api(s)) if s.code == 403 && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            Err(e) => return Err(e).context("listing ConfigMaps with a RoleBinding"),
        }
    }
    // Still nothing beyond the Role: Secrets stay forbidden.
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(
        ns.cluster()
            .dev()?
            .control_plane()
            .client_with_token(&token)?,
        ns.name(),
    );
    ensure!(
        matches!(secrets.list(&ListParams::default()).await, Err(kube::Error::Api(s)) if s.code == 403),
        "Secrets should stay forbidden"
    );
    Ok(())
}

async fn garbage_collector_deletes_owned_objects(ns: Ns) -> anyhow::Result<()> {
    let maps = ns.api::<ConfigMap>();
    let owner = maps
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({ "metadata": { "name": "owner" } }))?,
        )
        .await?;
    let owned: ConfigMap = serde_json::from_value(json!({
        "metadata": {
            "name": "owned",
            "ownerReferences": [{
                "apiVersion": "v1", "kind": "ConfigMap", "name": "owner",
                "uid": owner.meta().uid.clone().context("the owner has no uid")?,
            }]
        },
        "data": { "k": "v" }
    }))?;
    maps.create(&PostParams::default(), &owned).await?;
    maps.delete("owner", &DeleteParams::background()).await?;
    wait::deleted(&maps, "owned", WAIT)
        .await
        .context("the garbage collector left the owned ConfigMap")?;
    Ok(())
}

/// A Job whose pod writes to an emptyDir (path rewritten) and reads the downward API.
fn job_template(message: &str) -> serde_json::Value {
    restricted_template(json!({
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "main",
                "image": format!("{IMAGE_SH}:latest"),
                "command": ["sh", "-c", "echo \"$(MESSAGE) from $POD_NAME\" > /work/out/result && cat /work/out/result"],
                "env": [
                    { "name": "MESSAGE", "value": message },
                    { "name": "POD_NAME", "valueFrom": { "fieldRef": { "fieldPath": "metadata.name" } } }
                ],
                "volumeMounts": [{ "name": "out", "mountPath": "/work/out" }]
            }],
            "volumes": [{ "name": "out", "emptyDir": {} }]
        }
    }))
}

async fn job_completes(ns: Ns) -> anyhow::Result<()> {
    let jobs = ns.api::<Job>();
    let job: Job = serde_json::from_value(json!({
        "metadata": { "name": "hello" },
        "spec": { "backoffLimit": 0, "template": job_template("hello") }
    }))?;
    jobs.create(&PostParams::default(), &job).await?;
    wait::matches(&jobs, "hello", "Job hello Complete", WAIT, |j| {
        condition(j, "Complete")
    })
    .await?;

    let pods = ns
        .api::<Pod>()
        .list(&ListParams::default().labels("job-name=hello"))
        .await?;
    let pod = pods.items.first().context("the Job has no pod")?;
    let status = pod.status.clone().unwrap_or_default();
    ensure!(
        status.phase.as_deref() == Some("Succeeded"),
        "pod phase {:?}",
        status.phase
    );
    let log = ns.pod_log(&pod.name_any(), "main").await;
    ensure!(
        log.contains(&format!("hello from {}", pod.name_any())),
        "the pod's log: {log:?}"
    );
    Ok(())
}

async fn cronjob_runs_a_job_that_completes(ns: Ns) -> anyhow::Result<()> {
    let cronjob: CronJob = serde_json::from_value(json!({
        "metadata": { "name": "tick" },
        "spec": {
            "schedule": "* * * * *",
            "concurrencyPolicy": "Forbid",
            "jobTemplate": { "spec": { "backoffLimit": 0, "template": job_template("tick") } }
        }
    }))?;
    let cronjob = ns
        .api::<CronJob>()
        .create(&PostParams::default(), &cronjob)
        .await?;
    let uid = cronjob.uid().context("the CronJob has no uid")?;
    // Wait (by watch) for a Job the CronJob owns to complete.
    let jobs = ns.api::<Job>();
    let stream = kube::runtime::watcher(jobs, Default::default());
    let owned_complete = kube::runtime::WatchStreamExt::applied_objects(stream);
    futures::pin_mut!(owned_complete);
    let found = tokio::time::timeout(Duration::from_secs(150), async {
        use futures::StreamExt;
        while let Some(job) = owned_complete.next().await {
            let Ok(job) = job else { continue };
            let owned = job.owner_references().iter().any(|o| o.uid == uid);
            if owned && condition(&job, "Complete") {
                return Some(job);
            }
        }
        None
    })
    .await;
    let job = found
        .ok()
        .flatten()
        .context("no Job of the CronJob completed within 150s")?;
    let status = ns
        .api::<CronJob>()
        .get_status("tick")
        .await?
        .status
        .unwrap_or_default();
    ensure!(
        status.last_schedule_time.is_some(),
        "the CronJob records no schedule time"
    );
    ensure!(job.name_any().starts_with("tick-"));
    Ok(())
}

async fn claim_is_bound_and_its_data_outlives_pods(ns: Ns) -> anyhow::Result<()> {
    let claims = ns.api::<PersistentVolumeClaim>();
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": { "name": "data" },
        "spec": { "accessModes": ["ReadWriteOnce"], "resources": { "requests": { "storage": "1Gi" } } }
    }))?;
    claims.create(&PostParams::default(), &claim).await?;
    let bound = wait::matches(&claims, "data", "claim data Bound", WAIT, |c| {
        c.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
    })
    .await?;
    ensure!(
        bound
            .spec
            .and_then(|s| s.volume_name)
            .is_some_and(|v| v.starts_with("pvc-"))
    );

    let pods = ns.api::<Pod>();
    for (name, script) in [
        ("writer", "echo kept > /data/file"),
        ("reader", "cat /data/file"),
    ] {
        let pod: Pod = serde_json::from_value(json!({
            "metadata": { "name": name },
            "spec": {
                "restartPolicy": "Never",
                "containers": [{
                    "name": "main", "image": IMAGE_SH, "command": ["sh", "-c", script],
                    "volumeMounts": [{ "name": "data", "mountPath": "/data" }]
                }],
                "volumes": [{ "name": "data", "persistentVolumeClaim": { "claimName": "data" } }]
            }
        }))?;
        let pod = restricted(pod);
        pods.create(&PostParams::default(), &pod).await?;
        let what = format!("pod {name} Succeeded");
        wait::matches(&pods, name, &what, WAIT, |p| phase(p) == Some("Succeeded")).await?;
        pods.delete(name, &DeleteParams::default()).await?;
        wait::deleted(&pods, name, WAIT).await?;
    }
    let log = ns.pod_log("reader", "main").await;
    ensure!(log.trim() == "kept", "the reader saw {log:?}");
    Ok(())
}

fn condition(job: &Job, type_: &str) -> bool {
    job.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == type_ && c.status == "True"))
}

pub fn phase(pod: &Pod) -> Option<&str> {
    pod.status.as_ref().and_then(|s| s.phase.as_deref())
}
