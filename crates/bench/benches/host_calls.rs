//! `make bench` (the host API's part): what the host API adds to a call, in one run, each
//! figure beside its floor: a bare forwarder (`forwarder`: hyper's keep-alive pool and nothing
//! else) between the same loader and the same echo plugin (issue 31).
//!
//! - p50 and p99 of a tool call through the host API (`loop-plugins api`, the binary as
//!   shipped, a process of its own: caller token checked from the cache, the stores, the
//!   breaker, the plugin's secret) against the same call made to the plugin's container
//!   directly and through the forwarder, one call at a time (closed loop);
//! - on one core: the API server and the forwarder each pinned to CPU 0, the loader and the
//!   plugin to CPU 1; the same number of calls through each over keep-alive connections as
//!   fast as they answer: calls per second, the proxy's core busy, and its CPU-µs per call
//!   from /proc;
//! - at a fixed rate of half the forwarder's saturation (open loop: calls sent on schedule
//!   whatever the answers, each timed from when it was due, so queueing does not hide cost):
//!   p50 and p99 directly, through the forwarder and through the host API, and what the host
//!   API adds to p99;
//! - the time from the plugin's Pod becoming Ready to the call held for it reaching the plugin
//!   (scale-from-zero): the bench watches the Pod itself and compares the moment it saw it
//!   Ready with the arrival time the plugin wrote in its journal (same machine, same clock);
//! - p50, p99 and the slowest of an action call refused by an open breaker (three hung
//!   actions opened it), which never reaches the plugin: "fails at once" in figures, where the
//!   e2e test asserts only that it failed without reaching the plugin.
//!
//! It starts a dev control plane with the kubelet stand-in, the controller and the API server
//! (processes, the binary at LOOP_PLUGINS_BIN), installs the echo plugin in one chat, and calls
//! it over keep-alive HTTP/1.1 connections. Paths are measured in alternation (batches,
//! rounds), so drift hits them alike; the instance is kept wanted throughout (its
//! lastActivity, as accepted work would), so the calls that skip the host do not let it stop.
//!
//! Knobs (environment): BENCH_CALLS (one at a time, per path, default 2000),
//! BENCH_SATURATION_CALLS (per proxy and round, 20000), BENCH_CONNECTIONS (for saturation,
//! 16), BENCH_OPEN_SECONDS (per path and round, 5), BENCH_OPEN_CONNECTIONS (32), BENCH_ROUNDS
//! (3), BENCH_COLD_ROUNDS (5), BENCH_REFUSED_CALLS (calls while the breaker is open, 200);
//! BENCH_PERF_OUT=FILE records the API server with `perf record` (CPU-clock samples, DWARF
//! call stacks) during its first saturation round.

use std::net::SocketAddr;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, bail, ensure};
use devcluster::{DevCluster, DevClusterOptions, ImageMap, LocalImage};
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::api::{Patch, PatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use loop_plugins_bench::echo::{caller_token, enabled_in_chat, percentile, tool_call, wait_phase};
use loop_plugins_bench::knobs::env_or;
use loop_plugins_bench::ops::target_dir;
use loop_plugins_bench::report::{self, Summary};
use loop_plugins_bench::world::apply;
use loop_plugins_bench::{load, ops, procs, procstat};
use model::names;
use model::resources::{
    HOST_CONFIG_NAME, HostConfig, HostConfigSpec, HostPlugins, InstancePhase, Plugin,
    PluginInstance,
};
use serde_json::{Value, json};
use server::host_api::PREFIX;
use testkit::images::Images;

mod forwarder;

const NS: &str = "bench";
const PLUGIN: &str = "echo";
const CHAT: &str = "general";
/// Short, so a cold start can be measured again soon.
const IDLE: &str = "4s";
const WAIT: Duration = Duration::from_secs(90);

struct Knobs {
    calls: usize,
    saturation_calls: u64,
    connections: usize,
    open_seconds: f64,
    open_connections: usize,
    rounds: usize,
    cold_rounds: usize,
    refused: usize,
}

fn main() -> anyhow::Result<()> {
    // reqwest's TLS provider (it is built without one): ring's, before any client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    if let Some(served) = forwarder::serve_if_asked() {
        return served;
    }
    let knobs = Knobs {
        calls: env_or("BENCH_CALLS", 2000).max(10),
        saturation_calls: env_or("BENCH_SATURATION_CALLS", 20_000).max(100),
        connections: env_or("BENCH_CONNECTIONS", 16).max(1),
        open_seconds: env_or("BENCH_OPEN_SECONDS", 5.0f64).max(0.5),
        open_connections: env_or("BENCH_OPEN_CONNECTIONS", 32).max(1),
        rounds: env_or("BENCH_ROUNDS", 3).max(1),
        cold_rounds: env_or("BENCH_COLD_ROUNDS", 5).max(1),
        refused: env_or("BENCH_REFUSED_CALLS", 200).max(10),
    };
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
    let result = runtime.block_on(bench(&cluster, &registry, &knobs));
    runtime.block_on(cluster.shutdown());
    result
}

/// A hop a tool call takes: its name, the process that answers it (for its CPU time), and
/// the request's bytes.
struct Hop {
    name: &'static str,
    pid: u32,
    addr: SocketAddr,
    request: Vec<u8>,
}

async fn bench(cluster: &DevCluster, registry: &Images, knobs: &Knobs) -> anyhow::Result<()> {
    eprintln!("bench: control plane up; starting the controller and the API server");
    cluster.install_crds().await?;
    let client = cluster.client();
    let self_image = registry.self_image().await?;
    let (kubeconfig, run_dir) = (cluster.kubeconfig(), cluster.run_dir());
    let _controller = procs::start_controller(
        kubeconfig,
        run_dir,
        "controller",
        &self_image,
        "http://127.0.0.1:9",
        false,
        &[],
    )
    .await?;
    world(&client, registry).await?;
    let instance = names::instance_name(PLUGIN, CHAT);
    wait_phase(&client, NS, &instance, InstancePhase::Stopped, WAIT).await?;

    let mut api = procs::start_single_api(kubeconfig, run_dir, "api").await?;
    let host_path = format!("{PREFIX}/namespaces/{NS}/channels/{CHAT}/plugins/{PLUGIN}");
    let base = format!("http://{}{host_path}", api.listen);
    let token = caller_token(&client, NS).await?;
    let http = reqwest::Client::builder()
        .no_proxy()
        .pool_max_idle_per_host(4)
        .timeout(Duration::from_secs(120))
        .build()?;

    // Scale-from-zero: Pod Ready (as a watch sees it) → the held call at the plugin.
    let (mut held, mut cold) = (Vec::new(), Vec::new());
    for round in 0..knobs.cold_rounds {
        wait_phase(&client, NS, &instance, InstancePhase::Stopped, WAIT).await?;
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
            "bench: cold start {}/{}: the call took {:.0} ms, {} ms after Pod Ready",
            round + 1,
            knobs.cold_rounds,
            cold.last().unwrap().as_secs_f64() * 1000.0,
            arrived - ready_ms
        );
    }

    // Warm: the instance is kept wanted from here on, whichever path the calls take.
    let keep = keep_wanted(&client, &instance);
    let proxied_url = format!("{base}/tools/echo");
    tool_call(&http, &proxied_url, Some(&token), "warm").await?;
    let (plugin_base, secret) = direct(&client, &instance).await?;
    let plugin_addr: SocketAddr = plugin_base.trim_start_matches("http://").parse()?;
    let direct_url = format!("{plugin_base}/tools/echo");
    let forwarder = forwarder::Forwarder::spawn(&plugin_base, &secret).await?;
    let forwarded_url = format!("http://{}/tools/echo", forwarder.addr);

    // One core each: the proxies on the first CPU, the loader and the plugin on the second.
    let cpus = procstat::online_cpus();
    let plugin_pid = procstat::listener_pid(plugin_addr)?;
    let me = std::process::id();
    eprintln!(
        "bench: the plugin answers at {plugin_addr}: process {plugin_pid} ({})",
        std::fs::read_link(format!("/proc/{plugin_pid}/exe"))
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    let loader = (cpus.len() >= 2).then(|| cpus[1]);
    if let Some(other) = loader {
        procstat::pin(api.pid(), &cpus[..1])?;
        procstat::pin(forwarder.pid(), &cpus[..1])?;
        procstat::pin(plugin_pid, &[other])?;
        procstat::pin(me, &[other])?;
    }

    // One call at a time, directly, through the forwarder and through the host API,
    // alternating in batches.
    for _ in 0..50 {
        tool_call(&http, &direct_url, Some(&secret), "warmup").await?;
        tool_call(&http, &forwarded_url, None, "warmup").await?;
        tool_call(&http, &proxied_url, Some(&token), "warmup").await?;
    }
    let one_at_a_time = [
        (direct_url.as_str(), Some(secret.as_str())),
        (forwarded_url.as_str(), None),
        (proxied_url.as_str(), Some(token.as_str())),
    ];
    let mut times: [Vec<Duration>; 3] = Default::default();
    let batch = (knobs.calls / 10).max(1);
    while times[0].len() < knobs.calls {
        for (i, (url, bearer)) in one_at_a_time.iter().enumerate() {
            for _ in 0..batch {
                let t = Instant::now();
                tool_call(&http, url, *bearer, "x").await?;
                times[i].push(t.elapsed());
            }
        }
    }

    // Saturation on one core, then the open loop at half the forwarder's rate.
    let body = json!({"input": {"text": "x"}, "agent": "say", "thread_id": "t", "run_id": "r"})
        .to_string();
    let direct_hop = Hop {
        name: "direct",
        pid: plugin_pid,
        addr: plugin_addr,
        request: load::request(
            plugin_addr,
            "POST",
            "/tools/echo",
            Some(&secret),
            Some(&body),
        ),
    };
    let forwarder_hop = Hop {
        name: "forwarder",
        pid: forwarder.pid(),
        addr: forwarder.addr,
        request: load::request(forwarder.addr, "POST", "/tools/echo", None, Some(&body)),
    };
    let host_hop = Hop {
        name: "host API",
        pid: api.pid(),
        addr: api.listen,
        request: load::request(
            api.listen,
            "POST",
            &format!("{host_path}/tools/echo"),
            Some(&token),
            Some(&body),
        ),
    };
    let (fwd_rate, host_rate) = saturate(&forwarder_hop, &host_hop, loader, knobs).await?;
    let per_second = fwd_rate.per_second / 2.0;
    let open = open_loops(
        &[&direct_hop, &forwarder_hop, &host_hop],
        per_second,
        loader,
        knobs,
    )
    .await?;
    if let Some(status) = api.process.try_wait() {
        bail!("the API server exited with {status}");
    }
    procstat::pin(api.pid(), &cpus)?;
    procstat::pin(me, &cpus)?;
    drop(forwarder);
    keep.abort();
    let refused_times =
        refused_calls(&http, &client, &base, &token, &instance, knobs.refused).await?;

    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let [direct_times, forwarded_times, proxied_times] = times;
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
    println!("{:<30}{:>12}{:>12}", "", "p50", "p99");
    for (what, p50, p99) in [
        ("to the plugin directly", d50, d99),
        ("through a bare forwarder", f50, f99),
        ("through the host API", p50, p99),
    ] {
        println!("{what:<30}{:>9.3} ms{:>9.3} ms", ms(p50), ms(p99));
    }
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
    let pinning = match loader {
        Some(cpu) => format!("proxy on CPU {}, loader and plugin on CPU {cpu}", cpus[0]),
        None => "not pinned (one CPU)".to_string(),
    };
    println!();
    println!(
        "on one core ({pinning}): {} calls through each, {} connections, median of {} rounds",
        knobs.saturation_calls, knobs.connections, knobs.rounds
    );
    println!(
        "{:<30}{:>12}{:>12}{:>16}{:>14}",
        "", "calls/s", "core busy", "CPU per call", "calls/CPU-s"
    );
    for (what, r) in [("bare forwarder", &fwd_rate), ("host API", &host_rate)] {
        println!(
            "{what:<30}{:>12.0}{:>11.0}%{:>13.1} us{:>14.0}",
            r.per_second,
            r.server_cpu * 100.0,
            r.cpu_us_per_request(),
            r.per_cpu_second()
        );
    }
    for (what, r) in [("the forwarder", &fwd_rate), ("the host API", &host_rate)] {
        if r.server_cpu < 0.9 {
            println!(
                "  note: {what}'s core was {:.0}% busy: the loader's and plugin's core limited it; calls/CPU-s is what one full core would answer",
                r.server_cpu * 100.0
            );
        }
    }
    println!();
    println!(
        "open loop at {per_second:.0} calls/s (half the forwarder's saturation), {} s per path and round, {} rounds",
        knobs.open_seconds, knobs.rounds
    );
    println!("{:<30}{:>12}{:>12}{:>16}", "", "p50", "p99", "CPU per call");
    for (what, o) in [
        ("to the plugin directly", &open[0]),
        ("through a bare forwarder", &open[1]),
        ("through the host API", &open[2]),
    ] {
        println!(
            "{what:<30}{:>9.3} ms{:>9.3} ms{:>13.1} us",
            load::percentile_ms(&o.latencies, 50.0),
            load::percentile_ms(&o.latencies, 99.0),
            o.server_cpu_us_per_request
        );
    }
    let open_p = |i: usize, q: f64| load::percentile_ms(&open[i].latencies, q);

    let mut summary = Summary::default();
    summary.put("pinned", &pinning);
    summary.ratio("tool_call_p50_ms", ms(p50), ms(f50), 3);
    summary.ratio("tool_call_p99_ms", ms(p99), ms(f99), 3);
    summary.num("tool_call_direct_p50_ms", ms(d50), 3);
    summary.num("tool_call_direct_p99_ms", ms(d99), 3);
    summary.put(
        "proxy_calls_each",
        fwd_rate.requests.min(host_rate.requests),
    );
    summary.ratio(
        "proxy_cpu_us_per_call",
        host_rate.cpu_us_per_request(),
        fwd_rate.cpu_us_per_request(),
        1,
    );
    summary.ratio(
        "one_core_calls_per_s",
        host_rate.per_second,
        fwd_rate.per_second,
        0,
    );
    summary.num("one_core_busy", host_rate.server_cpu, 2);
    summary.num("one_core_busy_baseline", fwd_rate.server_cpu, 2);
    summary.ratio(
        "one_core_calls_per_cpu_second",
        host_rate.per_cpu_second(),
        fwd_rate.per_cpu_second(),
        0,
    );
    summary.num("open_loop_calls_per_s", per_second, 0);
    summary.put("open_loop_calls_each", open[2].latencies.len());
    summary.ratio("open_loop_p50_ms", open_p(2, 50.0), open_p(1, 50.0), 3);
    summary.ratio("open_loop_p99_ms", open_p(2, 99.0), open_p(1, 99.0), 3);
    summary.num("open_loop_direct_p50_ms", open_p(0, 50.0), 3);
    summary.num("open_loop_direct_p99_ms", open_p(0, 99.0), 3);
    summary.num(
        "open_loop_added_p99_ms",
        open_p(2, 99.0) - open_p(1, 99.0),
        3,
    );
    summary.num(
        "open_loop_added_p99_vs_direct_ms",
        open_p(2, 99.0) - open_p(0, 99.0),
        3,
    );
    summary.ratio(
        "open_loop_cpu_us_per_call",
        open[2].server_cpu_us_per_request,
        open[1].server_cpu_us_per_request,
        1,
    );
    println!();
    println!(
        "scale-from-zero, {} cold starts: Pod Ready → held call at the plugin: median {} ms, max {} ms; whole call: median {:.0} ms",
        knobs.cold_rounds,
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

/// The forwarder and the host API each driven to saturation on its core, the same number of
/// calls through each, alternating over the rounds; the median round of each by calls/s.
async fn saturate(
    forwarder: &Hop,
    host: &Hop,
    loader: Option<usize>,
    knobs: &Knobs,
) -> anyhow::Result<(load::Rate, load::Rate)> {
    let mut rates: [Vec<load::Rate>; 2] = Default::default();
    for round in 1..=knobs.rounds {
        for (i, path) in [forwarder, host].into_iter().enumerate() {
            let (pid, addr, request) = (path.pid, path.addr, path.request.clone());
            let (connections, calls) = (knobs.connections, knobs.saturation_calls);
            let profile = (round == 1 && i == 1)
                .then(|| std::env::var("BENCH_PERF_OUT").ok())
                .flatten()
                .map(|out| perf_record(pid, &out))
                .transpose()?;
            let rate = tokio::task::spawn_blocking(move || {
                load::rate(
                    pid,
                    addr,
                    request,
                    connections,
                    600,
                    calls,
                    loader,
                    ops::is_echo,
                )
            })
            .await??;
            if let Some(perf) = profile {
                perf.stop().await?;
            }
            eprintln!(
                "bench: saturation round {round}/{}: {:<10} {:>7.0} calls/s, core {:>3.0}% busy, {:.1} CPU-us per call, p99 {:.2} ms",
                knobs.rounds,
                path.name,
                rate.per_second,
                rate.server_cpu * 100.0,
                rate.cpu_us_per_request(),
                rate.p99_ms
            );
            rates[i].push(rate);
        }
    }
    let [mut fwd, mut host] = rates;
    let median = |all: &mut Vec<load::Rate>| {
        all.sort_by(|a, b| a.per_second.total_cmp(&b.per_second));
        all[all.len() / 2].clone()
    };
    Ok((median(&mut fwd), median(&mut host)))
}

/// `perf record` of a process (CPU-clock samples with DWARF call stacks), for the profile of
/// the host API's hop (BENCH_PERF_OUT: the first saturation round through the host API).
struct PerfRecord(tokio::process::Child);

fn perf_record(pid: u32, out: &str) -> anyhow::Result<PerfRecord> {
    let child = tokio::process::Command::new("perf")
        .args([
            "record",
            "-e",
            "cpu-clock",
            "-F",
            "499",
            "--call-graph",
            "dwarf",
        ])
        .args(["-p", &pid.to_string(), "-o", out])
        .kill_on_drop(true)
        .spawn()
        .context("starting perf record (BENCH_PERF_OUT)")?;
    eprintln!("bench: perf record of process {pid} into {out}");
    Ok(PerfRecord(child))
}

impl PerfRecord {
    /// Stops the recording (SIGINT, as Ctrl-C would) and waits for perf to write it out.
    async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(pid) = self.0.id() {
            // SAFETY: kill only sends a signal to the child we started.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGINT) };
        }
        // perf exits by the signal once it has written the file.
        tokio::time::timeout(Duration::from_secs(120), self.0.wait()).await??;
        Ok(())
    }
}

/// Each path at `per_second` calls per second (open loop), alternating over the rounds; each
/// path's latencies from all rounds together, and its CPU per call over all of them.
async fn open_loops(
    paths: &[&Hop],
    per_second: f64,
    loader: Option<usize>,
    knobs: &Knobs,
) -> anyhow::Result<Vec<load::OpenLoop>> {
    let schedule = load::Schedule {
        per_second,
        seconds: knobs.open_seconds,
        warmup_seconds: 0.5,
        connections: knobs.open_connections,
    };
    let mut all: Vec<load::OpenLoop> = paths
        .iter()
        .map(|_| load::OpenLoop {
            latencies: Vec::new(),
            sent: 0,
            server_cpu_us_per_request: 0.0,
        })
        .collect();
    for round in 1..=knobs.rounds {
        for (path, into) in paths.iter().zip(all.iter_mut()) {
            let (pid, addr, request) = (path.pid, path.addr, path.request.clone());
            let run = tokio::task::spawn_blocking(move || {
                load::open_loop(pid, addr, request, schedule, loader, ops::is_echo)
            })
            .await??;
            eprintln!(
                "bench: open loop round {round}/{} at {per_second:.0}/s: {:<10} p50 {:.3} ms, p99 {:.3} ms, {:.1} CPU-us per call",
                knobs.rounds,
                path.name,
                load::percentile_ms(&run.latencies, 50.0),
                load::percentile_ms(&run.latencies, 99.0),
                run.server_cpu_us_per_request
            );
            let sent = into.sent + run.sent;
            into.server_cpu_us_per_request = (into.server_cpu_us_per_request * into.sent as f64
                + run.server_cpu_us_per_request * run.sent as f64)
                / sent as f64;
            into.sent = sent;
            into.latencies.extend(run.latencies);
        }
    }
    Ok(all)
}

/// Marks the instance active every second (its lastActivity, as accepted work would), so it
/// is not stopped as idle while calls go around the host API.
fn keep_wanted(client: &Client, instance: &str) -> tokio::task::JoinHandle<()> {
    let instances: Api<PluginInstance> = Api::namespaced(client.clone(), NS);
    let instance = instance.to_string();
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
    let keep = keep_wanted(client, instance);
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
    enabled_in_chat(client, NS, PLUGIN, CHAT).await
}
