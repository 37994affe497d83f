//! The controller as the chart runs it on an existing cluster: the Pods of its Deployment,
//! one of which holds the Lease and reconciles.

use std::time::Duration;

use anyhow::Context;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, LogParams};
use kube::{Api, Client};

use crate::support::{Existing, wait};

/// How long a new leader may take: the killed holder's Lease runs out (15 s), a replacement
/// Pod starts and takes it.
const TAKEOVER: Duration = Duration::from_secs(120);

/// The release's controller Pods, each with its containers' restart counts, sorted.
pub async fn incarnation(client: Client, existing: &Existing) -> anyhow::Result<String> {
    let pods: Api<Pod> = Api::namespaced(client, &existing.namespace);
    let mut seen: Vec<String> = pods
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .map(|p| {
            let restarts: i32 = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .map(|cs| cs.iter().map(|c| c.restart_count).sum())
                .unwrap_or(0);
            format!("{}:{restarts}", p.metadata.name.unwrap_or_default())
        })
        .collect();
    seen.sort();
    Ok(seen.join(","))
}

/// Waits until a running Pod of the release other than `not` holds the Lease; its name.
pub async fn leader(
    client: Client,
    existing: &Existing,
    not: Option<&str>,
) -> anyhow::Result<String> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), &existing.namespace);
    let pods: Api<Pod> = Api::namespaced(client, &existing.namespace);
    let lease_name = existing.lease();
    let deadline = tokio::time::Instant::now() + TAKEOVER;
    loop {
        let what = match not {
            Some(old) => format!("a controller other than {old} to hold Lease {lease_name}"),
            None => format!("a controller to hold Lease {lease_name}"),
        };
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let lease = wait::matches(&leases, &lease_name, &what, left, |l: &Lease| {
            super::lease_holder(l).is_some_and(|h| Some(h) != not)
        })
        .await?;
        let holder = super::lease_holder(&lease).unwrap_or_default().to_string();
        // The holder must be a Pod that runs (a Lease left by a deleted Pod names a ghost
        // until it runs out).
        if let Some(pod) = pods.get_opt(&holder).await? {
            let ready = pod
                .status
                .as_ref()
                .and_then(|s| s.conditions.as_ref())
                .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready && pod.metadata.deletion_timestamp.is_none() {
                return Ok(holder);
            }
        }
        anyhow::ensure!(
            tokio::time::Instant::now() < deadline,
            "timed out after {TAKEOVER:?} waiting for {what}: {holder} holds it but is not a \
             Ready Pod of {}",
            existing.namespace
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Deletes the leading controller's Pod at once (no grace period: SIGKILL); its name.
/// Its containers' logs so far go to `killed-<pod>.<container>.log` in `logs` first: a failure
/// in another test later may need what that replica did, and the release's logs, gathered
/// after a failure, have only the Pods still there.
pub async fn kill_leader(
    client: Client,
    existing: &Existing,
    logs: &std::path::Path,
) -> anyhow::Result<String> {
    let pod = leader(client.clone(), existing, None).await?;
    let pods: Api<Pod> = Api::namespaced(client, &existing.namespace);
    keep_logs(&pods, &pod, logs).await;
    pods.delete(
        &pod,
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .with_context(|| format!("deleting the leading controller's Pod {pod}"))?;
    Ok(pod)
}

/// Writes each container's log of `pod` to `logs` (best effort: a log that cannot be read is
/// named in the file instead).
async fn keep_logs(pods: &Api<Pod>, pod: &str, logs: &std::path::Path) {
    let containers: Vec<String> = match pods.get(pod).await {
        Ok(p) => p
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .map(|c| c.name.clone())
            .collect(),
        Err(e) => {
            eprintln!("e2e: could not read Pod {pod} to keep its logs: {e}");
            return;
        }
    };
    for container in containers {
        let params = LogParams {
            container: Some(container.clone()),
            timestamps: true,
            ..Default::default()
        };
        let text = match pods.logs(pod, &params).await {
            Ok(text) => text,
            Err(e) => format!("(could not read the log: {e})\n"),
        };
        let path = logs.join(format!("killed-{pod}.{container}.log"));
        if let Err(e) = std::fs::create_dir_all(logs).and_then(|()| std::fs::write(&path, text)) {
            eprintln!("e2e: could not write {}: {e}", path.display());
        }
    }
}

/// What every Ready API Pod of the release serves on `/metrics` (the `api` container's
/// `api-metrics` port), through the API server's Pod proxy, one after the other.
pub async fn api_metrics(client: Client, existing: &Existing) -> anyhow::Result<String> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), &existing.namespace);
    let selector = format!(
        "app.kubernetes.io/name=loop-plugins,app.kubernetes.io/instance={}",
        existing.release
    );
    let listed = pods
        .list(&kube::api::ListParams::default().labels(&selector))
        .await?;
    let mut text = String::new();
    for pod in listed
        .items
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
    {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let port = pod
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .filter(|c| c.name == "api")
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some("api-metrics"))
            .map(|p| p.container_port)
            .with_context(|| format!("Pod {name} has no api-metrics port"))?;
        let ip = pod.status.as_ref().and_then(|s| s.pod_ip.clone());
        let metrics = match ip.and_then(|ip| ip.parse::<std::net::IpAddr>().ok()) {
            // The API server refuses to proxy to loopback addresses, and the kubelet
            // stand-in gives Pods 127.x addresses, which this machine reaches directly.
            Some(ip) if ip.is_loopback() => {
                let url = format!("http://{ip}:{port}/metrics");
                reqwest::Client::builder()
                    .no_proxy()
                    .build()?
                    .get(&url)
                    .send()
                    .await
                    .and_then(|r| r.error_for_status())
                    .with_context(|| format!("GET {url}"))?
                    .text()
                    .await?
            }
            _ => {
                let path = format!(
                    "/api/v1/namespaces/{}/pods/{name}:{port}/proxy/metrics",
                    existing.namespace
                );
                let request = http::Request::get(&path).body(Vec::new())?;
                client
                    .request_text(request)
                    .await
                    .with_context(|| format!("GET {path}"))?
            }
        };
        text.push_str(&metrics);
    }
    Ok(text)
}
