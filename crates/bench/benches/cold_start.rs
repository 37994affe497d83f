//! `make bench-kind`: cold starts in real containers (issue 31), on the kind cluster that
//! `hack/kind-e2e.sh --bench` makes (the chart installed with two replicas, the echo plugin's
//! image in the local registry). The echo plugin is installed and enabled in one chat; then
//! BENCH_COLD_CALLS (20) cold calls in each of two series: the plugin's image already on the
//! nodes, and removed from every node first (`crictl rmi` in each node's container).
//!
//! A cold call: the instance stopped with `loop-plugins plugin stop` (the operator's verb) and
//! its Pod gone, then one tool call through the host API (the chart's Service, as an app makes
//! it), timed from when it is sent to its answer. Meanwhile the bench's own watch of the
//! instance's Pods timestamps each phase as it sees it: the Pod made, scheduled to a node, its
//! container running, Ready. The baseline, from the same run: the same call to the running
//! instance (warm), as many times.
//!
//! Figures (`name=value`): p50 and max of call → answer in each series, with the warm p50 as
//! their baseline; each phase's p50 and max (call → Pod made, made → scheduled, scheduled →
//! container running: the image's pull when it is not on the node, running → Ready, Ready →
//! answer); how many held calls were answered. Ready → answer bounds Ready → the call at the
//! plugin from above: it also holds the plugin's answer and its way back.
//!
//! Environment (hack/kind-e2e.sh --bench sets the first six): KUBECONFIG,
//! LOOP_PLUGINS_E2E_API_URL (the API as this machine reaches it), LOOP_PLUGINS_E2E_ECHO_IMAGE
//! (the echo plugin's image, pinned), LOOP_PLUGINS_E2E_REGISTRY_MIRROR (`<registry>=<address>`:
//! how the controller reaches it), LOOP_PLUGINS_E2E_RELEASE_NAMESPACE, KIND_CLUSTER (whose
//! nodes' containers hold the images), LOOP_PLUGINS_BIN (the `loop-plugins` CLI), DOCKER;
//! BENCH_COLD_CALLS.

use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod};
use kube::runtime::wait::await_condition;
use kube::runtime::watcher;
use kube::{Api, Client};
use loop_plugins_bench::echo::{caller_token, enabled_in_chat, percentile, tool_call, wait_phase};
use loop_plugins_bench::knobs::env_or;
use loop_plugins_bench::report::{Phases, Summary};
use loop_plugins_bench::world::apply;
use model::names;
use model::resources::{
    HOST_CONFIG_NAME, HostConfig, HostConfigSpec, HostPlugins, InstancePhase, Plugin,
    PluginInstance, RegistryConfig, RegistryMirror,
};
use server::host_api::PREFIX;

const NS: &str = "bench-cold";
const PLUGIN: &str = "echo";
const CHAT: &str = "general";
/// A cold start pulls the image at worst; an admission reads it first.
const WAIT: Duration = Duration::from_secs(180);

/// Where the cluster is and what to run, from the environment.
struct Setup {
    api_url: String,
    echo_image: String,
    mirror: Option<RegistryMirror>,
    kind_cluster: String,
    cli: String,
    docker: String,
    calls: usize,
}

impl Setup {
    fn from_env() -> anyhow::Result<Setup> {
        let var = |name: &str| {
            std::env::var(name)
                .ok()
                .filter(|v| !v.is_empty())
                .with_context(|| format!("{name} is not set: run `make bench-kind`"))
        };
        let mirror = std::env::var("LOOP_PLUGINS_E2E_REGISTRY_MIRROR")
            .ok()
            .and_then(|m| {
                let (registry, address) = m.split_once('=')?;
                Some(RegistryMirror {
                    registry: registry.into(),
                    address: address.into(),
                    plain_http: true,
                })
            });
        var("KUBECONFIG")?;
        Ok(Setup {
            api_url: var("LOOP_PLUGINS_E2E_API_URL")?
                .trim_end_matches('/')
                .to_string(),
            echo_image: var("LOOP_PLUGINS_E2E_ECHO_IMAGE")?,
            mirror,
            kind_cluster: var("KIND_CLUSTER")?,
            cli: var("LOOP_PLUGINS_BIN")?,
            docker: std::env::var("DOCKER").unwrap_or_else(|_| "docker".into()),
            calls: env_or("BENCH_COLD_CALLS", 20).max(1),
        })
    }
}

fn main() -> anyhow::Result<()> {
    // reqwest's TLS provider (it is built without one): ring's, before any client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let setup = Setup::from_env()?;
    tokio::runtime::Runtime::new()?.block_on(bench(&setup))
}

async fn bench(setup: &Setup) -> anyhow::Result<()> {
    let mut phases = Phases::new();
    phases.next("the echo plugin installed and enabled in one chat");
    let client = Client::try_default().await?;
    world(&client, setup).await?;
    let instance = names::instance_name(PLUGIN, CHAT);
    // Made by the controller once the plugin is admitted: Stopped, or still Running when an
    // earlier run left it (make bench-kind keeps nothing, a kept cluster does).
    let instances: Api<PluginInstance> = Api::namespaced(client.clone(), NS);
    let has_phase = |i: Option<&PluginInstance>| i.and_then(|i| i.status.as_ref()?.phase).is_some();
    tokio::time::timeout(WAIT, await_condition(instances, &instance, has_phase))
        .await
        .with_context(|| format!("waiting for the controller to make {NS}/{instance}"))??;
    let token = caller_token(&client, NS).await?;
    let url = format!(
        "{}{PREFIX}/namespaces/{NS}/channels/{CHAT}/plugins/{PLUGIN}/tools/echo",
        setup.api_url
    );
    let http = reqwest::Client::builder()
        .no_proxy()
        .timeout(WAIT)
        .build()?;

    phases.next("a first call (the image pulled to a node)");
    // The token is seen by the API replicas' stores a moment after it is made.
    let deadline = Instant::now() + Duration::from_secs(60);
    while let Err(e) = tool_call(&http, &url, Some(&token), "first").await {
        ensure!(Instant::now() < deadline, "the first call: {e:#}");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    phases.next("warm calls (the baseline)");
    let mut warm = Vec::new();
    for i in 0..setup.calls {
        let started = Instant::now();
        tool_call(&http, &url, Some(&token), &format!("warm-{i}")).await?;
        warm.push(started.elapsed());
    }

    let mut series = Vec::new();
    for (name, remove_image) in [("on_node", false), ("pulled", true)] {
        phases.next(&format!(
            "cold calls, the image {}",
            if remove_image {
                "removed from every node first"
            } else {
                "on the node"
            }
        ));
        let mut cold = Vec::new();
        for i in 0..setup.calls {
            stop(setup, &client, &instance).await?;
            if remove_image {
                remove_image_from_nodes(setup).await?;
            }
            let text = format!("{name}-{i}");
            let call = cold_call(&client, &http, &url, &token, &instance, &text).await?;
            eprintln!(
                "bench: {name} {}/{}: {}",
                i + 1,
                setup.calls,
                call.describe()
            );
            cold.push(call);
        }
        series.push((name, cold));
    }
    phases.end();

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let warm_p50 = ms(percentile(&warm, 50.0));
    let mut summary = Summary::default();
    summary.num("cold_calls_per_series", setup.calls as f64, 0);
    summary.num("warm_call_p99_ms", ms(percentile(&warm, 99.0)), 1);
    for (name, cold) in &series {
        let totals: Vec<Duration> = cold.iter().map(|c| c.answered).collect();
        summary.ratio(
            &format!("cold_{name}_call_p50_ms"),
            ms(percentile(&totals, 50.0)),
            warm_p50,
            1,
        );
        summary.ratio(
            &format!("cold_{name}_call_max_ms"),
            ms(percentile(&totals, 100.0)),
            warm_p50,
            1,
        );
        for (phase, of) in ColdCall::PHASES {
            let spans: Vec<Duration> = cold.iter().map(of).collect();
            summary.num(
                &format!("cold_{name}_{phase}_p50_ms"),
                ms(percentile(&spans, 50.0)),
                1,
            );
            summary.num(
                &format!("cold_{name}_{phase}_max_ms"),
                ms(percentile(&spans, 100.0)),
                1,
            );
        }
        summary.put(
            &format!("cold_{name}_held_calls_answered"),
            format!("{}/{}", cold.len(), setup.calls),
        );
    }
    summary.num("bench_seconds", phases.total(), 0);
    summary.print("cold starts on kind (real containers): call → answer, and its phases");
    Ok(())
}

/// One cold call: each moment from when the call was sent.
struct ColdCall {
    made: Duration,
    scheduled: Duration,
    running: Duration,
    ready: Duration,
    answered: Duration,
}

type Span = fn(&ColdCall) -> Duration;

impl ColdCall {
    /// Each phase's name and its length.
    const PHASES: [(&'static str, Span); 5] = [
        ("call_to_pod_made", |c| c.made),
        ("made_to_scheduled", |c| c.scheduled.saturating_sub(c.made)),
        ("scheduled_to_running", |c| {
            c.running.saturating_sub(c.scheduled)
        }),
        ("running_to_ready", |c| c.ready.saturating_sub(c.running)),
        ("ready_to_answer", |c| c.answered.saturating_sub(c.ready)),
    ];

    fn describe(&self) -> String {
        let ms = |d: Duration| d.as_millis();
        format!(
            "answered in {} ms (Pod made at {}, scheduled {}, running {}, Ready {})",
            ms(self.answered),
            ms(self.made),
            ms(self.scheduled),
            ms(self.running),
            ms(self.ready)
        )
    }
}

/// What the Pod watch saw, each the first time, as moments.
#[derive(Default)]
struct Seen {
    made: Option<Instant>,
    scheduled: Option<Instant>,
    running: Option<Instant>,
    ready: Option<Instant>,
}

/// Calls the stopped instance once with the Pod watch on; its phases.
async fn cold_call(
    client: &Client,
    http: &reqwest::Client,
    url: &str,
    token: &str,
    instance: &str,
    text: &str,
) -> anyhow::Result<ColdCall> {
    let (listening, listened) = tokio::sync::oneshot::channel();
    let watch = tokio::spawn(watch_pod(client.clone(), instance.to_string(), listening));
    listened
        .await
        .context("the Pod watch ended before it listed")?;
    let sent = Instant::now();
    let answer = tool_call(http, url, Some(token), text).await?;
    let answered = sent.elapsed();
    ensure!(
        answer["structured_content"]["echo"] == text,
        "the held call came back as {answer}"
    );
    let seen = tokio::time::timeout(WAIT, watch)
        .await
        .context("the Pod watch never saw the Pod Ready")???;
    let from = |at: Option<Instant>, what: &str| {
        at.map(|at| at.saturating_duration_since(sent))
            .with_context(|| format!("the watch never saw the Pod {what}"))
    };
    Ok(ColdCall {
        made: from(seen.made, "made")?,
        scheduled: from(seen.scheduled, "scheduled")?,
        running: from(seen.running, "running")?,
        ready: from(seen.ready, "Ready")?,
        answered,
    })
}

/// Watches the instance's Pods, says when its first list is in, and answers once one is Ready.
async fn watch_pod(
    client: Client,
    instance: String,
    listening: tokio::sync::oneshot::Sender<()>,
) -> anyhow::Result<Seen> {
    let api: Api<Pod> = Api::namespaced(client, NS);
    let selector = format!("{}={instance}", names::LABEL_INSTANCE);
    let stream = watcher(api, watcher::Config::default().labels(&selector));
    futures::pin_mut!(stream);
    let mut listening = Some(listening);
    let mut seen = Seen::default();
    while let Some(event) = stream.next().await {
        let pod = match event? {
            watcher::Event::InitDone => {
                if let Some(l) = listening.take() {
                    let _ = l.send(());
                }
                continue;
            }
            watcher::Event::Apply(pod) | watcher::Event::InitApply(pod) => pod,
            watcher::Event::Init | watcher::Event::Delete(_) => continue,
        };
        if pod.metadata.deletion_timestamp.is_some() {
            continue;
        }
        let now = Instant::now();
        seen.made.get_or_insert(now);
        if pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_ref())
            .is_some()
        {
            seen.scheduled.get_or_insert(now);
        }
        let running = pod
            .status
            .as_ref()
            .and_then(|s| s.container_statuses.as_ref())
            .is_some_and(|cs| {
                cs.iter()
                    .any(|c| c.state.as_ref().is_some_and(|s| s.running.is_some()))
            });
        if running {
            seen.running.get_or_insert(now);
        }
        if index::pods::pod_ready(&pod) {
            seen.ready.get_or_insert(now);
            return Ok(seen);
        }
    }
    bail!("the Pod watch ended")
}

/// `loop-plugins plugin stop` for the instance's chat, then waits until no Pod of it is left
/// and the instance says Stopped, and a second more: the stop's time is recorded to the second
/// (rounded), and a call's activity counts only after it.
async fn stop(setup: &Setup, client: &Client, instance: &str) -> anyhow::Result<()> {
    let chat = format!("{NS}/{CHAT}");
    let output = Command::new(&setup.cli)
        .args(["plugin", "stop", PLUGIN, "--chat", &chat])
        .output()
        .with_context(|| format!("running {} plugin stop", setup.cli))?;
    ensure!(
        output.status.success(),
        "loop-plugins plugin stop {PLUGIN} --chat {chat}: {}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let selector = format!("{}={instance}", names::LABEL_INSTANCE);
    let deadline = Instant::now() + WAIT;
    while !pods
        .list(&kube::api::ListParams::default().labels(&selector))
        .await?
        .items
        .is_empty()
    {
        ensure!(
            Instant::now() < deadline,
            "the Pod of {instance} is still there {WAIT:?} after the stop"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    wait_phase(client, NS, instance, InstancePhase::Stopped, WAIT).await?;
    tokio::time::sleep(Duration::from_secs(1)).await;
    Ok(())
}

/// Removes the echo plugin's image from every node of the kind cluster (`crictl rmi` in each
/// node's container), failing if a node still has it after 30 s of trying (the stopped
/// container that used it may take a moment to be removed).
async fn remove_image_from_nodes(setup: &Setup) -> anyhow::Result<()> {
    let listed = Command::new(&setup.docker)
        .args([
            "ps",
            "--filter",
            &format!("label=io.x-k8s.kind.cluster={}", setup.kind_cluster),
            "--format",
            "{{.Names}}",
        ])
        .output()
        .context("listing the kind nodes' containers")?;
    ensure!(listed.status.success(), "docker ps: {}", listed.status);
    let nodes: Vec<String> = String::from_utf8(listed.stdout)?
        .lines()
        .map(str::to_string)
        .filter(|n| !n.is_empty())
        .collect();
    ensure!(
        !nodes.is_empty(),
        "no node of kind cluster {}",
        setup.kind_cluster
    );
    for node in &nodes {
        let crictl = |args: &[&str]| {
            Command::new(&setup.docker)
                .args(["exec", node, "crictl"])
                .args(args)
                .output()
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            // Gone already on a node that never ran it.
            let removed = crictl(&["rmi", &setup.echo_image])?;
            if !crictl(&["inspecti", &setup.echo_image])?.status.success() {
                break;
            }
            ensure!(
                Instant::now() < deadline,
                "node {node} still has {} after crictl rmi: {}",
                setup.echo_image,
                String::from_utf8_lossy(&removed.stderr).trim()
            );
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
    Ok(())
}

/// The HostConfig (plugins on, the registry as the controller reaches it, an idle timeout
/// longer than the bench), the echo plugin from its image, a trusted project enabling it, and
/// one chat.
async fn world(client: &Client, setup: &Setup) -> anyhow::Result<()> {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NS.into());
    apply(&Api::<Namespace>::all(client.clone()), &ns).await?;
    let host = HostConfig::new(
        HOST_CONFIG_NAME,
        HostConfigSpec {
            plugins: HostPlugins {
                enabled: true,
                idle_timeout: "1h".into(),
                registry: RegistryConfig {
                    mirrors: setup.mirror.clone().into_iter().collect(),
                    ..Default::default()
                },
                ..Default::default()
            },
            ..Default::default()
        },
    );
    apply(&Api::<HostConfig>::all(client.clone()), &host).await?;
    let manifest = include_str!("../../../examples/echo-plugin/plugin.json");
    let plugin = Plugin::from_manifest(manifest, &setup.echo_image, vec![], true)?;
    apply(&Api::<Plugin>::all(client.clone()), &plugin).await?;
    enabled_in_chat(client, NS, PLUGIN, CHAT).await
}
