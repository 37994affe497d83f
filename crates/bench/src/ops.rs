//! Small operations on the cluster that both benches need: starting it with the images the
//! stand-in plays, an instance's token and secret, its Pod's address, the HostConfig patched,
//! waiting for the cluster's own volume binding, and calls through the host API.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use devcluster::{DevCluster, DevClusterOptions, ImageMap, LocalImage};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value;

use model::names;
use model::resources::{ConditionStatus, HOST_CONFIG_NAME, HostConfig, Plugin};

use super::world;
use testkit::images::Images;

/// The folder the running bench and our binaries were built into (`target/release`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the bench has a path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps")
        .to_path_buf()
}

/// Starts a registry for the run's images and a dev cluster whose stand-in plays them: the
/// echo plugin's images with the echo binary, our own with ours.
pub async fn start_cluster() -> anyhow::Result<(DevCluster, Images)> {
    let echo = target_dir().join("echo-plugin");
    ensure!(
        echo.exists(),
        "{} is missing: build it with `cargo build --release --workspace --bins`",
        echo.display()
    );
    let registry = tokio::task::spawn_blocking(Images::start).await??;
    let images = ImageMap::new();
    images.insert(
        &registry.echo_repository(),
        LocalImage::new(&echo).in_image_at(testkit::images::ECHO_ENTRYPOINT),
    );
    images.insert(
        &registry.self_repository(),
        LocalImage::new(testkit::binary()),
    );
    let cluster = DevCluster::start(DevClusterOptions {
        images,
        ..Default::default()
    })
    .await?;
    cluster.install_crds().await?;
    Ok((cluster, registry))
}

/// An instance's Plugin API token and the secret calls to it carry, from its Secret.
pub async fn instance_secret(
    admin: &Client,
    ns: &str,
    instance: &str,
) -> anyhow::Result<(String, String)> {
    let secret = Api::<Secret>::namespaced(admin.clone(), ns)
        .get(&names::secret_name(instance))
        .await?;
    let data = secret.data.context("the Secret has no data")?;
    let get = |key: &str| -> anyhow::Result<String> {
        let value = data
            .get(key)
            .with_context(|| format!("the Secret of {instance} has no {key}"))?;
        Ok(String::from_utf8(value.0.clone())?.trim().to_string())
    };
    Ok((
        get(model::contract::TOKEN_KEY)?,
        get(model::contract::SECRET_KEY)?,
    ))
}

/// Where the instance's Ready Pod answers.
pub async fn pod_address(admin: &Client, ns: &str, instance: &str) -> anyhow::Result<SocketAddr> {
    let selector = format!("{}={instance}", names::LABEL_INSTANCE);
    let pods = Api::<Pod>::namespaced(admin.clone(), ns)
        .list(&ListParams::default().labels(&selector))
        .await?;
    let view = index::pods::pod_view(pods.items.iter());
    Ok(view.ready.context("no Ready Pod for the instance")?.addr)
}

/// Plugin Pods in `namespaces`.
pub async fn pods_in(admin: &Client, namespaces: &[String]) -> anyhow::Result<usize> {
    let mut n = 0;
    for ns in namespaces {
        n += Api::<Pod>::namespaced(admin.clone(), ns)
            .list_metadata(&ListParams::default())
            .await?
            .items
            .len();
    }
    Ok(n)
}

/// Merge-patches the HostConfig.
pub async fn patch_host(admin: &Client, patch: Value) -> anyhow::Result<()> {
    Api::<HostConfig>::all(admin.clone())
        .patch(
            HOST_CONFIG_NAME,
            &PatchParams::default(),
            &Patch::Merge(&patch),
        )
        .await?;
    Ok(())
}

/// How many claims of the cluster are Bound.
pub async fn bound_claims(admin: &Client) -> anyhow::Result<usize> {
    let api: Api<PersistentVolumeClaim> = Api::all(admin.clone());
    let listed = api.list(&ListParams::default()).await?.items;
    Ok(listed.iter().filter(|c| is_bound(c)).count())
}

fn is_bound(claim: &PersistentVolumeClaim) -> bool {
    claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound")
}

/// Waits until every claim of the cluster is Bound (the stand-in makes a volume for each, the
/// controller manager binds it): the cluster's own work, which must not spill into the next
/// measurement.
pub async fn settle_claims(admin: &Client, what: &str) -> anyhow::Result<()> {
    let api: Api<PersistentVolumeClaim> = Api::all(admin.clone());
    let started = Instant::now();
    loop {
        // Claims have no field selector on their phase: it is read from the list.
        let listed = api.list(&ListParams::default()).await?.items;
        let claims = listed.len();
        let bound = listed.iter().filter(|c| is_bound(c)).count();
        if bound >= claims {
            eprintln!(
                "    {what}: {bound} bound after {:.0} s",
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        let limit = Duration::from_secs(120 + claims as u64 / 20);
        if started.elapsed() > limit {
            bail!(
                "{what}: {bound} of {claims} bound after {} s",
                limit.as_secs()
            );
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
}

/// The host API path of a plugin in a chat.
pub fn host_path(chat: &world::Chat, plugin: &str, rest: &str) -> String {
    format!(
        "{}/namespaces/{}/channels/{}/plugins/{plugin}{rest}",
        server::host_api::PREFIX,
        chat.namespace,
        chat.name
    )
}

/// An echo tool call's answer.
pub fn is_echo(body: &[u8]) -> bool {
    let text = String::from_utf8_lossy(body);
    text.contains("\"is_error\":false") && text.contains("\"echo\"")
}

/// The requests the plugin in `chat` journaled on `route`, read through the host API's `/x`.
pub async fn journal(
    http: &reqwest::Client,
    api: SocketAddr,
    caller_token: &str,
    chat: &world::Chat,
    plugin: &str,
) -> anyhow::Result<Vec<Value>> {
    let url = format!("http://{api}{}", host_path(chat, plugin, "/x/journal"));
    let answer = http.get(&url).bearer_auth(caller_token).send().await?;
    let status = answer.status();
    let body: Value = answer.json().await.unwrap_or(Value::Null);
    ensure!(
        status.is_success(),
        "reading the journal at {url}: {status} {body}"
    );
    Ok(body["entries"]
        .as_array()
        .context("a journal")?
        .iter()
        .filter(|e| e["kind"] == "request")
        .cloned()
        .collect())
}

/// Fails unless every plugin of the world is admitted, naming the stage that stopped each one
/// that is not and why (the world's plugins must all run, or the counts measure nothing).
pub async fn ensure_admitted(admin: &Client, ids: &[String]) -> anyhow::Result<()> {
    let api: Api<Plugin> = Api::all(admin.clone());
    let mut refused = Vec::new();
    for id in ids {
        let plugin = api.get(id).await?;
        let status = plugin.status.unwrap_or_default();
        let admitted = status.conditions.iter().find(|c| c.r#type == "Admitted");
        if admitted.is_none_or(|c| c.status != ConditionStatus::True) {
            refused.push(format!(
                "{id}: stage {}: {}",
                status.stage.as_deref().unwrap_or("none yet"),
                admitted
                    .map(|c| c.message.as_str())
                    .unwrap_or("no Admitted condition")
            ));
        }
    }
    ensure!(
        refused.is_empty(),
        "plugins of the world not admitted: {}",
        refused.join("; ")
    );
    Ok(())
}
