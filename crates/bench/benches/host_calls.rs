//! `make bench` (the host API's part): what the host API adds to a call, in one run.
//!
//! - p50 and p99 of a tool call through the host API (caller token checked from the cache,
//!   the stores, the breaker, the plugin's secret) against the same call made to the plugin's
//!   container directly and through a bare forwarder (`forwarder`: the floor a proxy costs),
//!   and the CPU each proxy spends per call (this process's CPU time per call on the path,
//!   less the direct path's, which is the loader's);
//! - the time from the plugin's Pod becoming Ready to the call held for it reaching the plugin
//!   (scale-from-zero): the bench watches the Pod itself and compares the moment it saw it
//!   Ready with the arrival time the plugin wrote in its journal (same machine, same clock);
//! - p50, p99 and the slowest of an action call refused by an open breaker (three hung
//!   actions opened it), which never reaches the plugin: "fails at once" in figures, where the
//!   e2e test asserts only that it failed without reaching the plugin.
//!
//! It starts a dev control plane with the kubelet stand-in, the controller (a process) and the
//! host API (in this process, on a loopback port), installs the echo plugin in one chat, and
//! calls it over keep-alive HTTP/1.1 connections, one call at a time. The direct and proxied
//! calls alternate in batches, so drift hits both alike.
//!
//! Knobs (environment): BENCH_CALLS (per path, default 2000), BENCH_COLD_ROUNDS (5),
//! BENCH_REFUSED_CALLS (calls while the breaker is open, 200).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use devcluster::process::{Process, ProcessSpec};
use devcluster::{DevCluster, DevClusterOptions, ImageMap, LocalImage};
use futures::StreamExt;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use loop_plugins_bench::procstat;
use loop_plugins_bench::report::{self, Summary};
use model::config::PluginConfig;
use model::names;
use model::resources::{
    App, Channel, ChannelKind, ChannelSpec, HOST_CONFIG_NAME, HostConfig, HostConfigSpec,
    HostPlugins, InstancePhase, Plugin, PluginInstance, Project, ProjectSpec, ProjectTrust,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use server::host_api::PREFIX;
use server::serve::{Options, Server};
use testkit::images::Images;

mod forwarder;

const NS: &str = "bench";
const PLUGIN: &str = "echo";
const CHAT: &str = "general";
/// Short, so a cold start can be measured again soon.
const IDLE: &str = "4s";
const WAIT: Duration = Duration::from_secs(90);

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() -> anyhow::Result<()> {
    let calls: usize = env_or("BENCH_CALLS", 2000).max(10);
    let rounds: usize = env_or("BENCH_COLD_ROUNDS", 5).max(1);
    let refused: usize = env_or("BENCH_REFUSED_CALLS", 200).max(10);
    let echo = target_dir().join("echo-plugin");
    ensure!(
        echo.exists(),
        "{} is missing: build it with `cargo build --release -p echo-plugin` (make bench does)",
        echo.display()
    );
    // A registry for the echo plugin's image and ours: admission pulls the plugin's by digest.
    let registry = Images::start()?;
    let images = ImageMap::new();
    images.insert(&registry.echo_repository(), LocalImage::new(&echo));
    images.insert(
        &registry.self_repository(),
        LocalImage::new(testkit::binary()),
    );
    let runtime = tokio::runtime::Runtime::new()?;
    let cluster = runtime.block_on(DevCluster::start(DevClusterOptions {
        images,
        ..Default::default()
    }))?;
    let result = runtime.block_on(bench(&cluster, &registry, calls, rounds, refused));
    runtime.block_on(cluster.shutdown());
    result
}

/// The folder our binaries are built into (`target/release`).
fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the bench has a path");
    exe.parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>/deps")
        .to_path_buf()
}

async fn bench(
    cluster: &DevCluster,
    registry: &Images,
    calls: usize,
    rounds: usize,
    refused: usize,
) -> anyhow::Result<()> {
    eprintln!("bench: control plane up; starting the controller and the host API");
    cluster.install_crds().await?;
    let client = cluster.client();
    let _controller = start_controller(cluster, registry).await?;
    world(&client, registry).await?;
    let instance = names::instance_name(PLUGIN, CHAT);
    wait_phase(&client, &instance, InstancePhase::Stopped).await?;

    let server = Server::start(
        client.clone(),
        Options {
            api: Default::default(),
            calls: Default::default(),
            review_ttl: server::host_api::state::REVIEW_TTL,
            ui: Default::default(),
            lease: None,
        },
    )
    .await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!(
        "http://{}{PREFIX}/namespaces/{NS}/channels/{CHAT}/plugins/{PLUGIN}",
        listener.local_addr()?
    );
    let serve = tokio::spawn(async move {
        let _ = axum::serve(listener, server.router.clone()).await;
    });
    let token = caller_token(&client).await?;
    server::calls::client::install_crypto_provider();
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(4)
        .timeout(Duration::from_secs(120))
        .build()?;

    // Scale-from-zero: Pod Ready (as a watch sees it) → the held call at the plugin.
    let mut held = Vec::new();
    let mut cold = Vec::new();
    for round in 0..rounds {
        wait_phase(&client, &instance, InstancePhase::Stopped).await?;
        let ready_at = tokio::spawn(pod_ready_ms(client.clone(), instance.clone()));
        let text = format!("cold-{round}");
        let started = Instant::now();
        let answer = tool_call(&http, &format!("{base}/tools/echo"), Some(&token), &text).await?;
        cold.push(started.elapsed());
        ensure!(
            answer["structured_content"]["echo"] == text.as_str(),
            "{answer}"
        );
        let ready_ms = tokio::time::timeout(WAIT, ready_at).await???;
        let journal = get_json(&http, &format!("{base}/x/journal"), &token).await?;
        let arrived = journal["entries"]
            .as_array()
            .context("a journal")?
            .iter()
            .find(|e| e["route"] == "/tools/echo" && e["body"]["input"]["text"] == text.as_str())
            .and_then(|e| e["at_ms"].as_i64())
            .context("the held call is not in the journal")?;
        held.push(arrived - ready_ms);
        eprintln!(
            "bench: cold start {}/{rounds}: the call took {:.0} ms, {} ms after Pod Ready",
            round + 1,
            cold.last().unwrap().as_secs_f64() * 1000.0,
            arrived - ready_ms
        );
    }

    // Warm: the same tool call directly, through the bare forwarder (the floor) and through
    // the host, alternating in batches, so drift hits the three alike. The bench process's
    // CPU time is read around each batch: the loader's share is the same on every path, so
    // a path's CPU per call less the direct path's is what its proxy costs.
    let proxied_url = format!("{base}/tools/echo");
    tool_call(&http, &proxied_url, Some(&token), "warm").await?;
    let (plugin_base, secret) = direct(&client, &instance).await?;
    let direct_url = format!("{plugin_base}/tools/echo");
    let (forwarder_base, forwarding) = forwarder::start(&plugin_base, &secret).await?;
    let forwarded_url = format!("{forwarder_base}/tools/echo");
    for _ in 0..50 {
        tool_call(&http, &direct_url, Some(&secret), "warmup").await?;
        tool_call(&http, &forwarded_url, None, "warmup").await?;
        tool_call(&http, &proxied_url, Some(&token), "warmup").await?;
    }
    let paths = [
        (direct_url.as_str(), Some(secret.as_str())),
        (forwarded_url.as_str(), None),
        (proxied_url.as_str(), Some(token.as_str())),
    ];
    let mut times: [Vec<Duration>; 3] = Default::default();
    let mut cpu = [0.0f64; 3];
    let me = std::process::id();
    let batch = (calls / 10).max(1);
    while times[0].len() < calls {
        for (i, (url, bearer)) in paths.iter().enumerate() {
            let before = procstat::cpu_seconds(me)?;
            for _ in 0..batch {
                let t = Instant::now();
                tool_call(&http, url, *bearer, "x").await?;
                times[i].push(t.elapsed());
            }
            cpu[i] += procstat::cpu_seconds(me)? - before;
        }
    }
    forwarding.abort();
    let [direct_times, forwarded_times, proxied_times] = times;
    let per_call_us = |i: usize| cpu[i] / direct_times.len() as f64 * 1e6;
    let refused_times = refused_calls(&http, &client, &base, &token, &instance, refused).await?;
    serve.abort();

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let (d50, d99) = (
        percentile(&direct_times, 50.0),
        percentile(&direct_times, 99.0),
    );
    let (f50, f99) = (
        percentile(&forwarded_times, 50.0),
        percentile(&forwarded_times, 99.0),
    );
    let (p50, p99) = (
        percentile(&proxied_times, 50.0),
        percentile(&proxied_times, 99.0),
    );
    held.sort_unstable();
    cold.sort_unstable();
    println!();
    println!(
        "host API: a tool call, {} calls each way, one at a time",
        direct_times.len()
    );
    println!("{:<30}{:>12}{:>12}{:>16}", "", "p50", "p99", "CPU per call");
    for (what, p50, p99, i) in [
        ("to the plugin directly", d50, d99, 0),
        ("through a bare forwarder", f50, f99, 1),
        ("through the host API", p50, p99, 2),
    ] {
        println!(
            "{what:<30}{:>9.3} ms{:>9.3} ms{:>13.0} us",
            ms(p50),
            ms(p99),
            per_call_us(i)
        );
    }
    println!(
        "{:<30}{:>11.2}x{:>11.2}x",
        "ratio (host / direct)",
        ms(p50) / ms(d50),
        ms(p99) / ms(d99)
    );
    println!(
        "{:<30}{:>11.2}x{:>11.2}x",
        "ratio (host / forwarder)",
        ms(p50) / ms(f50),
        ms(p99) / ms(f99)
    );
    println!(
        "{:<30}{:>9.3} ms{:>9.3} ms",
        "added by the host",
        ms(p50) - ms(d50),
        ms(p99) - ms(d99)
    );
    println!(
        "{:<30}{:>9.3} ms{:>9.3} ms",
        "added by the forwarder",
        ms(f50) - ms(d50),
        ms(f99) - ms(d99)
    );
    // The proxies' own CPU: each path's less the direct path's (the loader's).
    let host_cpu = per_call_us(2) - per_call_us(0);
    let forwarder_cpu = per_call_us(1) - per_call_us(0);
    let mut summary = Summary::default();
    summary.ratio("tool_call_p50_ms", ms(p50), ms(f50), 3);
    summary.ratio("tool_call_p99_ms", ms(p99), ms(f99), 3);
    summary.num("tool_call_direct_p50_ms", ms(d50), 3);
    summary.num("tool_call_direct_p99_ms", ms(d99), 3);
    summary.ratio("proxy_cpu_us_per_call", host_cpu, forwarder_cpu, 1);
    summary.num("loader_cpu_us_per_call", per_call_us(0), 1);
    println!();
    println!(
        "scale-from-zero, {rounds} cold starts: Pod Ready → held call at the plugin: median {} ms, max {} ms; whole call: median {:.0} ms",
        held[held.len() / 2],
        held[held.len() - 1],
        ms(cold[cold.len() / 2])
    );
    println!(
        "an action refused by an open breaker, {} calls: p50 {:.3} ms, p99 {:.3} ms, slowest {:.3} ms",
        refused_times.len(),
        ms(percentile(&refused_times, 50.0)),
        ms(percentile(&refused_times, 99.0)),
        ms(percentile(&refused_times, 100.0))
    );
    summary.num("cold_start_held_ms_p50", held[held.len() / 2] as f64, 0);
    summary.num("cold_start_held_ms_max", held[held.len() - 1] as f64, 0);
    summary.num("cold_start_call_ms_p50", ms(cold[cold.len() / 2]), 0);
    summary.num(
        "breaker_refused_p99_ms",
        ms(percentile(&refused_times, 99.0)),
        3,
    );
    summary.put("load1", format!("{:.2}", report::load1()));
    summary.print(
        "host_calls: each figure of the host API with its floor (the bare forwarder) from this run",
    );
    Ok(())
}

/// Opens the container's breaker (three actions that hang past the 10 s limit) and times
/// `count` action calls it refuses. The container is kept wanted meanwhile (its
/// lastActivity, as accepted work would), so the breaker stays the one that opened.
async fn refused_calls(
    http: &reqwest::Client,
    client: &Client,
    base: &str,
    token: &str,
    instance: &str,
    count: usize,
) -> anyhow::Result<Vec<Duration>> {
    let instances: Api<PluginInstance> = Api::namespaced(client.clone(), NS);
    let keep = {
        let (instances, instance) = (instances.clone(), instance.to_string());
        tokio::spawn(async move {
            loop {
                let now = model::time::now_rfc3339();
                let patch = json!({ "status": { "lastActivity": now } });
                let _ = instances
                    .patch_status(&instance, &PatchParams::default(), &Patch::Merge(&patch))
                    .await;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        })
    };
    let action = |http: &reqwest::Client| {
        http.post(format!("{base}/actions/ping"))
            .bearer_auth(token)
            .json(&json!({"trigger": "manual"}))
            .send()
    };
    let hang = http
        .post(format!("{base}/x/hang"))
        .bearer_auth(token)
        .json(&json!({"count": 3, "seconds": 13, "kinds": ["actions"]}))
        .send()
        .await?;
    ensure!(
        hang.status().is_success(),
        "POST /x/hang: {}",
        hang.status()
    );
    for hung in futures::future::join_all((0..3).map(|_| action(http))).await {
        let status = hung?.status();
        ensure!(status.as_u16() == 504, "a hung action answered {status}");
    }
    let mut times = Vec::with_capacity(count);
    for _ in 0..count {
        let t = Instant::now();
        let response = action(http).await?;
        times.push(t.elapsed());
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        ensure!(
            status.as_u16() == 503 && body["error"]["code"] == "breaker_open",
            "a call while the breaker is open: {status} {body}"
        );
    }
    keep.abort();
    Ok(times)
}

fn percentile(samples: &[Duration], p: f64) -> Duration {
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let rank = ((p / 100.0) * (sorted.len() as f64 - 1.0)).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

async fn tool_call(
    http: &reqwest::Client,
    url: &str,
    bearer: Option<&str>,
    text: &str,
) -> anyhow::Result<Value> {
    let mut request = http.post(url).json(&json!({
        "input": {"text": text}, "agent": "say", "thread_id": "t", "run_id": "r"
    }));
    if let Some(b) = bearer {
        request = request.bearer_auth(b);
    }
    let response = request.send().await?;
    let status = response.status();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    ensure!(
        status.is_success() && body["is_error"] == false,
        "{url}: {status} {body}"
    );
    Ok(body)
}

async fn get_json(http: &reqwest::Client, url: &str, token: &str) -> anyhow::Result<Value> {
    let response = http.get(url).bearer_auth(token).send().await?;
    ensure!(
        response.status().is_success(),
        "{url}: {}",
        response.status()
    );
    Ok(response.json().await?)
}

/// Wall-clock milliseconds when a watch first sees the instance's Pod Ready.
async fn pod_ready_ms(client: Client, instance: String) -> anyhow::Result<i64> {
    let api: Api<Pod> = Api::namespaced(client, NS);
    let selector = format!("{}={instance}", names::LABEL_INSTANCE);
    let stream = watcher(api, watcher::Config::default().labels(&selector))
        .default_backoff()
        .applied_objects();
    futures::pin_mut!(stream);
    while let Some(pod) = stream.next().await {
        let pod = pod?;
        let ready = pod.metadata.deletion_timestamp.is_none() && index::pods::pod_ready(&pod);
        if ready {
            let now = SystemTime::now().duration_since(UNIX_EPOCH)?;
            return Ok(now.as_millis() as i64);
        }
    }
    bail!("the Pod watch ended")
}

/// The running container's own URL and its secret.
async fn direct(client: &Client, instance: &str) -> anyhow::Result<(String, String)> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), NS);
    let selector = format!("{}={instance}", names::LABEL_INSTANCE);
    let list = pods
        .list(&kube::api::ListParams::default().labels(&selector))
        .await?;
    let view = index::pods::pod_view(list.items.iter());
    let endpoint = view.ready.context("no Ready Pod")?;
    let secrets: Api<Secret> = Api::namespaced(client.clone(), NS);
    let secret = secrets.get(&names::secret_name(instance)).await?;
    let value = secret
        .data
        .and_then(|d| d.get("secret").cloned())
        .context("the Secret has no secret")?;
    let value = String::from_utf8(value.0)?.trim().to_string();
    Ok((format!("http://{}", endpoint.addr), value))
}

async fn wait_phase(client: &Client, instance: &str, phase: InstancePhase) -> anyhow::Result<()> {
    let api: Api<PluginInstance> = Api::namespaced(client.clone(), NS);
    let cond = move |i: Option<&PluginInstance>| {
        i.and_then(|i| i.status.as_ref())
            .and_then(|s| s.phase)
            .is_some_and(|p| p == phase)
    };
    tokio::time::timeout(
        WAIT,
        kube::runtime::wait::await_condition(api, instance, cond),
    )
    .await
    .with_context(|| format!("waiting for {instance} to be {phase:?}"))??;
    Ok(())
}

async fn start_controller(cluster: &DevCluster, registry: &Images) -> anyhow::Result<Process> {
    let self_image = registry.self_image().await?;
    let log = cluster.run_dir().join("controller.log");
    let mut spec = ProcessSpec::new("controller", testkit::binary(), log);
    spec.env.push((
        "KUBECONFIG".into(),
        cluster.kubeconfig().display().to_string(),
    ));
    spec.env.push(("RUST_LOG".into(), "info,kube=warn".into()));
    let spec = spec.args([
        "controller".to_string(),
        format!("--self-image={self_image}"),
        "--api-url=http://127.0.0.1:9".to_string(),
        "--metrics-addr=127.0.0.1:0".to_string(),
    ]);
    Ok(Process::spawn(&spec).await?)
}

async fn apply<K>(api: &Api<K>, object: &K) -> anyhow::Result<()>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
{
    let name = object.meta().name.clone().unwrap_or_default();
    api.patch(
        &name,
        &PatchParams::apply("bench").force(),
        &Patch::Apply(object),
    )
    .await
    .with_context(|| format!("applying {name}"))?;
    Ok(())
}

/// The HostConfig, the echo plugin, a trusted project enabling it, one chat.
async fn world(client: &Client, registry: &Images) -> anyhow::Result<()> {
    let mut ns = Namespace::default();
    ns.metadata.name = Some(NS.into());
    apply(&Api::<Namespace>::all(client.clone()), &ns).await?;
    let host = HostConfig::new(
        HOST_CONFIG_NAME,
        HostConfigSpec {
            plugins: HostPlugins {
                enabled: true,
                idle_timeout: IDLE.into(),
                ..Default::default()
            },
            ..Default::default()
        },
    );
    apply(&Api::<HostConfig>::all(client.clone()), &host).await?;
    let manifest = include_str!("../../../examples/echo-plugin/plugin.json");
    let mut plugin = Plugin::from_manifest(manifest, "unpublished", vec![], true)?;
    registry.publish(&mut plugin).await?;
    apply(&Api::<Plugin>::all(client.clone()), &plugin).await?;
    let config = BTreeMap::from([(
        PLUGIN.to_string(),
        PluginConfig {
            enabled: Some(true),
            ..Default::default()
        },
    )]);
    let trust = ProjectTrust::of("proj", &config);
    let project = Project::new("proj", ProjectSpec { plugins: config });
    apply(&Api::<Project>::namespaced(client.clone(), NS), &project).await?;
    apply(&Api::<ProjectTrust>::namespaced(client.clone(), NS), &trust).await?;
    let chat = Channel::new(
        CHAT,
        ChannelSpec {
            project: "proj".into(),
            kind: ChannelKind::Channel,
            parent: None,
            app: App::Desktop,
            hidden: false,
            working_tree: None,
        },
    );
    apply(&Api::<Channel>::namespaced(client.clone(), NS), &chat).await?;
    Ok(())
}

/// A ServiceAccount allowed to call tools and `/x`, and a token for it.
async fn caller_token(client: &Client) -> anyhow::Result<String> {
    let name = "bench-app";
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some(name.into());
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), NS);
    apply(&accounts, &sa).await?;
    let mut role = Role {
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["plugins.loop.dev".into()]),
            resources: Some(vec![
                "plugininstances/tools".into(),
                "plugininstances/actions".into(),
                "plugininstances/x".into(),
            ]),
            verbs: vec!["create".into(), "get".into()],
            ..Default::default()
        }]),
        ..Default::default()
    };
    role.metadata.name = Some(name.into());
    apply(&Api::<Role>::namespaced(client.clone(), NS), &role).await?;
    let mut binding = RoleBinding {
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: name.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: name.into(),
            namespace: Some(NS.into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    binding.metadata.name = Some(name.into());
    apply(
        &Api::<RoleBinding>::namespaced(client.clone(), NS),
        &binding,
    )
    .await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await?
        .status
        .and_then(|s| s.token)
        .context("the TokenRequest has no token")
}
