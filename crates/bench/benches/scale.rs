//! `make bench-scale`: the controller and the API at a team's size, on the local control plane,
//! each figure against a baseline measured in the same run (release builds).
//!
//! 1. Convergence from cold: 1,000 chats (500 desktop channels, each with a thread, in 50
//!    projects) with 3 plugins enabled each, i.e. 3,000 PluginInstances with their /data
//!    claims and Secrets and the channels' 1,500 CronJobs, from the controller's start until
//!    every status says converged; against a bare client writing the same objects (and
//!    statuses) with the same number of requests in flight, on the same API server. The
//!    figure issue 31 sets a goal for is the Kubernetes API server's CPU seconds in each window
//!    (`convergence_apiserver_cpu_seconds`). Both windows hold the claims' volumes back (the
//!    stand-in makes them after the window, and the bench waits for every claim to be Bound
//!    before it goes on): the binding, three writes of kube-controller-manager's and one of the
//!    stand-in's per claim at the binder's own pace, would otherwise fall mostly after the
//!    bare client's last write and within the controller's window.
//! 2. Steady state: 5 minutes with no change: writes by the controller's and the API server's
//!    identities (audit log) and their CPU seconds (/proc).
//! 3. Memory: peak and steady RSS of both processes at 3,000 instances, and what their watches
//!    hold, kind by kind.
//! 4. Fan-out: HostConfig's apiUrl changed (every CronJob carries it, every chat and instance
//!    is reconciled) and the gate turned on (no Pod runs: only each instance's Gated condition
//!    changes): time to converge and writes, against the objects that had to change.
//! 5. API: GET /channel requests per second on one core against /healthz of the same server;
//!    a tool call through the host API against the plugin directly, p50 and p99, under 200
//!    concurrent callers.
//!
//! It prints progress with the load average per phase, then one `name=value` summary block.
//! `SCALE_QUICK=1` runs a tenth of the world; the knobs are in `loop_plugins_bench::knobs`.

use std::time::{Duration, Instant};

use anyhow::ensure;
use devcluster::DevCluster;
use kube::Client;
use loop_plugins_bench::audit::{self, Tally};
use loop_plugins_bench::baseline::{self, Mode};
use loop_plugins_bench::converge::Tracker;
use loop_plugins_bench::identity::{self, Identities, Role};
use loop_plugins_bench::knobs::{BenchKnobs, Sizes};
use loop_plugins_bench::load::{self, Conn};
use loop_plugins_bench::procs::{self, Role as Proc};
use loop_plugins_bench::report::{Phases, Summary, load1};
use loop_plugins_bench::{footprint, ops, ownership, procstat, world};
use model::names;
use serde_json::json;
use testkit::images::Images;

fn main() -> anyhow::Result<()> {
    // reqwest's TLS provider (it is built without one): ring's, before any client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sizes = Sizes::from_env();
    let knobs = BenchKnobs::from_env(&sizes);
    let runtime = tokio::runtime::Runtime::new()?;
    let mut phases = Phases::new();
    phases.next("control plane");
    let (mut cluster, images) = runtime.block_on(ops::start_cluster())?;
    let result = runtime.block_on(bench(&cluster, &images, &sizes, &knobs, &mut phases));
    if result.is_err() || std::env::var_os("SCALE_KEEP").is_some() {
        cluster.keep_run_dir();
        eprintln!(
            "the run's folder (logs of the control plane, the stand-in, the controller and the API server) is kept: {}",
            cluster.run_dir().display()
        );
    }
    phases.next("shutdown");
    runtime.block_on(cluster.shutdown());
    phases.end();
    result
}

/// Ends a window whose volumes were held since `before` claims were Bound: fails unless no
/// claim was bound in it, then releases the volumes and waits until every claim is Bound, so
/// the binding stays out of the window and out of the next one.
async fn release_volumes_after(
    cluster: &DevCluster,
    admin: &Client,
    before: usize,
    window: &str,
) -> anyhow::Result<()> {
    let now = ops::bound_claims(admin).await?;
    ensure!(
        now == before,
        "{} claims were bound in {window}, whose volumes were held",
        now.saturating_sub(before)
    );
    cluster.kubelet().release_volumes();
    ops::settle_claims(admin, &format!("{window}'s claims bound")).await
}

/// A phase's CPU seconds by process (`CpuMeter::spent`), with their sum against what the
/// machine's cores had in `elapsed`.
fn cpu_line(spent: &[(String, f64)], elapsed: Duration) -> String {
    let (by_process, total) = procstat::line(spent);
    let cores = procstat::online_cpus().len();
    format!(
        "{by_process} (sum {total:.1} of {:.1} on {cores} cores)",
        elapsed.as_secs_f64() * cores as f64
    )
}

async fn bench(
    cluster: &DevCluster,
    images: &Images,
    sizes: &Sizes,
    knobs: &BenchKnobs,
    phases: &mut Phases,
) -> anyhow::Result<()> {
    let mut summary = Summary::default();
    summary.put("mode", if sizes.quick { "quick" } else { "full" });
    summary.put("chats", sizes.chats());
    summary.put("instances", sizes.instances());
    summary.put("objects", sizes.children());
    let admin = cluster.client();
    let ids = identity::set_up(cluster).await?;
    let run_dir = cluster.run_dir().to_path_buf();

    phases.next("API server");
    let mut api = procs::start_api(&ids.api, &run_dir, "api-0").await?;
    let api_url = format!("http://{}", api.listen);
    let api_empty_rss = procstat::rss_mib(api.pid())?;

    phases.next("the declared world: HostConfig, plugins, projects, chats");
    let chats = world::declare(&admin, images, sizes, &api_url, 50).await?;
    let self_image = images.self_image().await?;
    let namespaces = world::namespaces(sizes);
    summary.put("load_declare", format!("{:.2}", load1()));

    // The baselines first: the controller has not started, so nothing of theirs reaches it.
    // The issue's baseline is the bare client's creates; the server-side apply one
    // (`SCALE_BASELINES=create,apply`) takes 80 s more and keeps a clean clone's whole run
    // (builds included) inside 20 minutes only without it.
    let modes: Vec<Mode> = std::env::var("SCALE_BASELINES")
        .unwrap_or_else(|_| "create".into())
        .split(',')
        .filter_map(|m| match m.trim() {
            "create" => Some(Mode::Create),
            "apply" => Some(Mode::Apply),
            _ => None,
        })
        .collect();
    ensure!(!modes.is_empty(), "SCALE_BASELINES names no baseline");
    let mut baselines = Vec::new();
    for mode in modes {
        phases.next(&format!(
            "baseline: a bare client ({}), {} requests in flight",
            mode.name(),
            knobs.concurrency
        ));
        let load_before = load1();
        let bound_before = ops::bound_claims(&admin).await?;
        cluster.kubelet().hold_volumes();
        let outcome = baseline::run(
            &admin,
            &ids.bare,
            sizes,
            mode,
            knobs.concurrency,
            &api_url,
            &self_image,
            &cluster.control_plane().pids(),
        )
        .await?;
        eprintln!(
            "    {} objects ({} writes) in {:.1} s: {:.0} objects/s, {:.0} writes/s",
            outcome.objects,
            outcome.writes,
            outcome.elapsed.as_secs_f64(),
            outcome.objects_per_second(),
            outcome.writes_per_second()
        );
        summary.put(
            &format!("load_baseline_{}", mode.name()),
            format!("{load_before:.2}..{:.2}", load1()),
        );
        summary.put(
            &format!("cpu_seconds_baseline_{}", mode.name()),
            cpu_line(&outcome.cpu, outcome.elapsed),
        );
        release_volumes_after(cluster, &admin, bound_before, "the baseline").await?;
        baselines.push(outcome);
    }

    phases.next("convergence from cold: the controller starts");
    let tracker = Tracker::start(&admin, &namespaces).await?;
    let window = audit::Window::open(cluster.control_plane().audit_log())?;
    let load_before = load1();
    let bound_before = ops::bound_claims(&admin).await?;
    cluster.kubelet().hold_volumes();
    let started = Instant::now();
    let started_at = jiff::Timestamp::now();
    let mut controller = procs::start_controller(
        &ids.controller,
        &run_dir,
        "controller-0",
        &self_image,
        &api_url,
        false,
        &controller_args(knobs),
    )
    .await?;
    let cpu = procstat::CpuMeter::start(cluster.control_plane().pids().into_iter().chain([
        ("controller", controller.pid()),
        // This bench: its tracker watches every object the controller writes.
        ("bench", std::process::id()),
    ]));
    let took = tracker
        .wait_converged("convergence", knobs.converge_limit, Duration::from_secs(10))
        .await?;
    let converged = started.elapsed();
    let cpu_converged = cpu.spent();
    summary.put(
        "cpu_seconds_convergence",
        cpu_line(&cpu_converged, converged),
    );
    release_volumes_after(cluster, &admin, bound_before, "the convergence").await?;
    controller.check_running()?;
    summary.put(
        "convergence_reconciles",
        reconciles_by_controller(&controller).await?,
    );
    let load_after = load1();
    let writes = window.writes()?;
    let by_controller = Tally::of(&writes, &Role::Controller.user());
    let first_write = first_write_after(&writes, &Role::Controller.user(), started_at);
    eprintln!(
        "    converged in {:.1} s ({:.1} s of it watched); the controller wrote {} times: {}",
        converged.as_secs_f64(),
        took.as_secs_f64(),
        by_controller.writes,
        by_controller.breakdown()
    );
    let rate = sizes.children() as f64 / converged.as_secs_f64();
    let bare = &baselines[0];
    summary.put(
        "load_convergence",
        format!("{load_before:.2}..{load_after:.2}"),
    );
    summary.num("convergence_seconds", converged.as_secs_f64(), 1);
    summary.ratio(
        "convergence_objects_per_second",
        rate,
        bare.objects_per_second(),
        1,
    );
    // Issue 31's figure: what converging costs the Kubernetes API server against what the
    // bare client's writes cost it.
    summary.ratio(
        "convergence_apiserver_cpu_seconds",
        procstat::of(&cpu_converged, "kube-apiserver"),
        procstat::of(&bare.cpu, "kube-apiserver"),
        1,
    );
    summary.put("convergence_baseline_mode", bare.mode.name());
    summary.num(
        "convergence_baseline_seconds",
        bare.elapsed.as_secs_f64(),
        1,
    );
    for other in &baselines[1..] {
        summary.num(
            &format!(
                "convergence_objects_per_second_vs_{}_baseline",
                other.mode.name()
            ),
            other.objects_per_second(),
            1,
        );
        summary.num(
            &format!(
                "convergence_objects_per_second_vs_{}_ratio",
                other.mode.name()
            ),
            rate / other.objects_per_second(),
            3,
        );
    }
    summary.put("convergence_controller_writes", by_controller.writes);
    summary.put("convergence_controller_writes_baseline", bare.writes);
    summary.put(
        "convergence_controller_writes_by_kind",
        by_controller.breakdown(),
    );
    if let Some(first) = first_write {
        summary.put(
            "convergence_first_write_after_start_seconds",
            format!("{first:.1}"),
        );
    }
    ops::ensure_admitted(&admin, &world::plugin_ids(sizes)).await?;
    let pods = ops::pods_in(&admin, &namespaces).await?;
    ensure!(
        pods == 0,
        "{pods} plugin Pods run after convergence: instances must stay Stopped until a call needs them"
    );
    summary.put("convergence_pods_started", pods);
    let found = ownership::check(&admin, &namespaces, &tracker.wants()).await?;
    ensure!(
        found.problems.is_empty(),
        "after convergence: {:?}",
        found.problems
    );
    for (kind, want) in [
        ("PluginInstance", sizes.instances()),
        ("PersistentVolumeClaim", sizes.instances()),
        ("Secret", sizes.instances()),
        ("CronJob", sizes.cronjobs()),
    ] {
        let have = found.counts.get(kind).copied().unwrap_or_default();
        ensure!(have == want, "{have} {kind}s after convergence, not {want}");
    }
    let controller_peak = procstat::peak_rss_mib(controller.pid())?;
    let api_peak = procstat::peak_rss_mib(api.pid())?;

    phases.next(&format!("steady state for {} s", knobs.steady.as_secs()));
    tokio::time::sleep(Duration::from_secs(5)).await;
    let window = audit::Window::open(cluster.control_plane().audit_log())?;
    let load_before = load1();
    let (controller_cpu, api_cpu) = (
        procstat::cpu_seconds(controller.pid())?,
        procstat::cpu_seconds(api.pid())?,
    );
    tokio::time::sleep(knobs.steady).await;
    let (controller_cpu, api_cpu) = (
        procstat::cpu_seconds(controller.pid())? - controller_cpu,
        procstat::cpu_seconds(api.pid())? - api_cpu,
    );
    controller.check_running()?;
    api.check_running()?;
    let writes = window.writes()?;
    ensure!(
        !writes.is_empty(),
        "the audit log recorded no write in the steady state; is it on?"
    );
    let steady_controller = Tally::of(&writes, &Role::Controller.user());
    let steady_api = Tally::of(&writes, &Role::Api.user());
    summary.put("load_steady", format!("{load_before:.2}..{:.2}", load1()));
    summary.put("steady_seconds", knobs.steady.as_secs());
    summary.put("steady_controller_writes", steady_controller.writes);
    summary.put("steady_controller_writes_goal", 0);
    summary.put(
        "steady_controller_writes_by_kind",
        steady_controller.breakdown(),
    );
    summary.put("steady_controller_lease_writes", steady_controller.leases);
    summary.put("steady_api_writes", steady_api.writes);
    summary.put("steady_api_writes_goal", 0);
    summary.put("steady_api_writes_by_kind", steady_api.breakdown());
    summary.put("steady_api_lease_writes", steady_api.leases);
    summary.num("steady_controller_cpu_seconds", controller_cpu, 2);
    summary.num("steady_api_cpu_seconds", api_cpu, 2);

    phases.next("memory");
    let controller_steady = procstat::rss_mib(controller.pid())?;
    let api_steady = procstat::rss_mib(api.pid())?;
    let (controller_anon, controller_file) = procstat::rss_parts_mib(controller.pid())?;
    let (api_anon, api_file) = procstat::rss_parts_mib(api.pid())?;
    let controller_held = footprint::controller(&admin).await?;
    let api_held = footprint::api(&admin).await?;
    eprintln!(
        "  what the controller's watches hold:\n{}",
        footprint::table(&controller_held)
    );
    eprintln!(
        "  what the API server's index holds:\n{}",
        footprint::table(&api_held)
    );
    let (c_bytes, c_compact) = footprint::totals(&controller_held);
    let (a_bytes, a_compact) = footprint::totals(&api_held);
    summary.num("memory_controller_peak_rss_mib", controller_peak, 1);
    summary.num("memory_controller_steady_rss_mib", controller_steady, 1);
    summary.num("memory_controller_steady_anon_mib", controller_anon, 1);
    summary.num("memory_controller_steady_file_mib", controller_file, 1);
    summary.num("memory_controller_goal_mib", 64.0, 0);
    summary.num(
        "memory_controller_peak_ratio_to_goal",
        controller_peak / 64.0,
        3,
    );
    summary.num(
        "memory_controller_watched_json_mib",
        footprint::mib(c_bytes),
        1,
    );
    summary.num(
        "memory_controller_watched_json_without_managed_fields_mib",
        footprint::mib(c_compact),
        1,
    );
    summary.put(
        "memory_controller_watched_by_kind",
        by_kind(&controller_held),
    );
    summary.num("memory_api_peak_rss_mib", api_peak, 1);
    summary.num("memory_api_steady_rss_mib", api_steady, 1);
    summary.num("memory_api_steady_anon_mib", api_anon, 1);
    summary.num("memory_api_steady_file_mib", api_file, 1);
    summary.num("memory_api_rss_before_the_world_mib", api_empty_rss, 1);
    summary.num("memory_api_goal_mib", 64.0, 0);
    summary.num("memory_api_peak_ratio_to_goal", api_peak / 64.0, 3);
    summary.num("memory_api_watched_json_mib", footprint::mib(a_bytes), 1);
    summary.num(
        "memory_api_watched_json_without_managed_fields_mib",
        footprint::mib(a_compact),
        1,
    );
    summary.put("memory_api_watched_by_kind", by_kind(&api_held));
    // One process or two (issue 26): what one index serving both roles would hold once.
    summary.num(
        "memory_held_by_both_processes_mib",
        footprint::mib(footprint::held_by_both(&controller_held, &api_held)),
        1,
    );
    summary.num(
        "memory_held_by_both_ratio_to_both_steady_rss",
        footprint::mib(footprint::held_by_both(&controller_held, &api_held))
            / (controller_steady + api_steady),
        3,
    );

    phases.next("fan-out: HostConfig apiUrl changed");
    let new_url = format!("http://localhost:{}", api.listen.port());
    let load_before = load1();
    let (took, written) = fan_out(
        cluster,
        &admin,
        &tracker,
        &controller,
        sizes,
        json!({ "spec": { "apiUrl": new_url } }),
        |cronjobs| {
            cronjobs.iter().all(|c| {
                c.spec
                    .job_template
                    .spec
                    .as_ref()
                    .and_then(|j| j.template.spec.as_ref())
                    .and_then(|p| p.containers.first())
                    .and_then(|c| c.args.as_ref())
                    .is_some_and(|a| a.iter().any(|a| a.ends_with(&new_url)))
            })
        },
    )
    .await?;
    summary.put("load_fanout", format!("{load_before:.2}..{:.2}", load1()));
    summary.num("fanout_api_url_seconds", took.as_secs_f64(), 1);
    summary.put("fanout_api_url_writes", written.writes);
    summary.put("fanout_api_url_writes_baseline", sizes.cronjobs());
    summary.num(
        "fanout_api_url_writes_ratio",
        written.writes as f64 / sizes.cronjobs() as f64,
        3,
    );
    summary.put("fanout_api_url_writes_by_kind", written.breakdown());

    phases.next(
        "fan-out: the gate turned on (no Pod runs: only the instances' Gated condition changes)",
    );
    let (took, written) = fan_out(
        cluster,
        &admin,
        &tracker,
        &controller,
        sizes,
        json!({ "spec": { "gates": { "agentgate": { "enabled": true } } } }),
        |_| true,
    )
    .await?;
    summary.num("fanout_gate_seconds", took.as_secs_f64(), 1);
    summary.put("fanout_gate_writes", written.writes);
    // Each instance's status reports the gate (its Gated condition): one write per instance.
    summary.put("fanout_gate_writes_baseline", sizes.instances());
    summary.num(
        "fanout_gate_writes_ratio",
        written.writes as f64 / sizes.instances() as f64,
        3,
    );
    summary.put("fanout_gate_writes_by_kind", written.breakdown());
    // Back off (and wait for it), so the tool calls below run the plugin without the gate.
    fan_out(
        cluster,
        &admin,
        &tracker,
        &controller,
        sizes,
        json!({ "spec": { "gates": { "agentgate": { "enabled": false } } } }),
        |_| true,
    )
    .await?;

    phases.next("API: GET /channel against /healthz on one core");
    channel_rate(&admin, &mut api, &chats, knobs, &mut summary).await?;

    phases.next(&format!(
        "API: a tool call through the host API against the plugin directly, {} callers",
        knobs.callers
    ));
    tool_calls(&admin, &api, &ids, &chats, knobs, &mut summary).await?;

    controller.check_running()?;
    api.check_running()?;
    phases.end();
    summary.num("run_seconds", phases.total(), 0);
    summary.print("make bench-scale: name=value, each figure with its baseline and ratio");
    Ok(())
}

/// The controller's flags: its write limit is the baselines' requests in flight (the same
/// concurrency limit), then SCALE_CONTROLLER_ARGS (space-separated; it may set another).
fn controller_args(knobs: &BenchKnobs) -> Vec<String> {
    let extra = std::env::var("SCALE_CONTROLLER_ARGS").unwrap_or_default();
    let mut args: Vec<String> = extra.split_whitespace().map(String::from).collect();
    if !args.iter().any(|a| a.starts_with("--writes-in-flight")) {
        args.extend(["--writes-in-flight".into(), knobs.concurrency.to_string()]);
    }
    args
}

fn by_kind(held: &[footprint::Held]) -> String {
    held.iter()
        .map(|h| format!("{}:{}:{:.2}MiB", h.kind, h.objects, footprint::mib(h.bytes)))
        .collect::<Vec<_>>()
        .join(",")
}

/// Seconds from `start` to `user`'s first write.
fn first_write_after(writes: &[audit::Write], user: &str, start: jiff::Timestamp) -> Option<f64> {
    let first = writes.iter().find(|w| w.user == user)?;
    let at: jiff::Timestamp = first.received.parse().ok()?;
    Some((at - start).as_secs_f64())
}

/// The controller's reconciles so far by the reconciler `which` (chat, instance, ...).
async fn reconciles(controller: &Proc, which: &str) -> anyhow::Result<f64> {
    let labels = format!("controller=\"{which}\"");
    procs::counter(
        controller.metrics,
        "loop_plugins_controller_reconciles_total",
        &labels,
    )
    .await
}

/// The controller's reconciles so far, by reconciler: `chat=N instance=N project=N plugin=N`.
/// Against the chats and instances there are, they say how often a reconcile ran for nothing.
async fn reconciles_by_controller(controller: &Proc) -> anyhow::Result<String> {
    let mut counts = Vec::new();
    for which in ["chat", "instance", "project", "plugin"] {
        counts.push(format!("{which}={}", reconciles(controller, which).await?));
    }
    Ok(counts.join(" "))
}

/// Applies `patch` to the HostConfig and waits until `done` holds for the CronJobs, every
/// instance and chat was reconciled again, the world is converged and the controller's writes
/// stopped; returns how long until the last write, and the controller's writes.
async fn fan_out(
    cluster: &DevCluster,
    admin: &Client,
    tracker: &Tracker,
    controller: &Proc,
    sizes: &Sizes,
    patch: serde_json::Value,
    done: impl Fn(&[std::sync::Arc<k8s_openapi::api::batch::v1::CronJob>]) -> bool,
) -> anyhow::Result<(Duration, Tally)> {
    let count = |which: &'static str| reconciles(controller, which);
    let (instances_before, chats_before) = (count("instance").await?, count("chat").await?);
    let window = audit::Window::open(cluster.control_plane().audit_log())?;
    let started = Instant::now();
    ops::patch_host(admin, patch).await?;
    loop {
        let instances = count("instance").await? - instances_before;
        let chats = count("chat").await? - chats_before;
        if instances >= sizes.instances() as f64
            && chats >= sizes.chats() as f64
            && done(&tracker.cronjobs.state())
            && tracker.progress().converged()
        {
            break;
        }
        ensure!(
            started.elapsed() < Duration::from_secs(600),
            "the fan-out did not converge in 600 s: {instances} instance and {chats} chat reconciles, {}",
            tracker.progress()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let reconciled = started.elapsed();
    // Until the controller's writes stop (5 s without one): at 3,000 instances statuses were
    // still being written after every reconcile had been counted.
    let user = Role::Controller.user();
    let count = || -> anyhow::Result<usize> {
        Ok(window
            .writes()?
            .iter()
            .filter(|w| w.user == user && w.resource != "leases")
            .count())
    };
    let mut last = count()?;
    let quiet_since = Instant::now();
    let mut quiet_from = quiet_since;
    while quiet_from.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = count()?;
        if now != last {
            last = now;
            quiet_from = Instant::now();
        }
        ensure!(
            quiet_since.elapsed() < Duration::from_secs(300),
            "the controller kept writing for 300 s after the fan-out converged"
        );
    }
    let writes = window.writes()?;
    let tally = Tally::of(&writes, &user);
    let last = writes
        .iter()
        .filter(|w| w.user == user && w.resource != "leases")
        .filter_map(|w| w.received.parse::<jiff::Timestamp>().ok())
        .max();
    let first = writes
        .iter()
        .filter_map(|w| w.received.parse::<jiff::Timestamp>().ok())
        .min();
    // From the HostConfig patch (the window's first write) to the controller's last; with
    // no write, until every instance and chat was reconciled.
    let took = match (first, last) {
        (Some(first), Some(last)) => Duration::from_secs_f64((last - first).as_secs_f64().max(0.0)),
        _ => reconciled,
    };
    eprintln!(
        "    reconciled in {:.1} s, last write {:.1} s after the change; {} writes: {}",
        reconciled.as_secs_f64(),
        took.as_secs_f64(),
        tally.writes,
        tally.breakdown()
    );
    Ok((took, tally))
}

fn ok_json(body: &[u8]) -> bool {
    body.first() == Some(&b'{')
}

/// GET /channel and /healthz, the server pinned to one CPU and the loader to another,
/// alternating rounds; medians.
async fn channel_rate(
    admin: &Client,
    api: &mut Proc,
    chats: &[world::Chat],
    knobs: &BenchKnobs,
    summary: &mut Summary,
) -> anyhow::Result<()> {
    let chat = &chats[0];
    let plugin = world::plugin_id(0);
    let instance = names::instance_name(&plugin, &chat.name);
    let (token, _) = ops::instance_secret(admin, &chat.namespace, &instance).await?;
    let addr = api.listen;
    let channel = load::request(addr, "GET", "/api/plugin/v1/channel", Some(&token), None);
    let healthz = load::request(addr, "GET", "/healthz", None, None);
    let mut conn = Conn::connect(addr).await?;
    let (status, body) = conn.exchange(&channel).await?;
    ensure!(
        status == 200,
        "GET /channel answered {status}: {}",
        String::from_utf8_lossy(&body)
    );
    let cpus = procstat::online_cpus();
    let pinned = cpus.len() >= 2;
    if pinned {
        procstat::pin(api.pid(), &cpus[..1])?;
    }
    let loader = pinned.then(|| cpus[1]);
    let load_before = load1();
    let (mut base, mut route) = (Vec::new(), Vec::new());
    for round in 1..=knobs.rps_rounds {
        for (name, request, check, into) in [
            (
                "/healthz",
                &healthz,
                load::any as fn(&[u8]) -> bool,
                &mut base,
            ),
            ("GET /channel", &channel, ok_json, &mut route),
        ] {
            let pid = api.pid();
            let request = request.clone();
            let connections = knobs.rps_connections;
            let seconds = knobs.rps_seconds;
            let measured = tokio::task::spawn_blocking(move || {
                load::rate(
                    pid,
                    addr,
                    request,
                    connections,
                    seconds,
                    u64::MAX,
                    loader,
                    check,
                )
            })
            .await??;
            eprintln!(
                "    round {round}: {name:<13} {:>8.0} req/s, server CPU {:>3.0}%, p50 {:.2} ms, p99 {:.2} ms",
                measured.per_second,
                measured.server_cpu * 100.0,
                measured.p50_ms,
                measured.p99_ms
            );
            into.push(measured);
        }
    }
    if pinned {
        procstat::pin(api.pid(), &cpus)?;
    }
    let median = |all: &mut Vec<load::Rate>| {
        all.sort_by(|a, b| a.per_second.total_cmp(&b.per_second));
        all[all.len() / 2].clone()
    };
    let (base, route) = (median(&mut base), median(&mut route));
    summary.put(
        "load_api_channel",
        format!("{load_before:.2}..{:.2}", load1()),
    );
    summary.put(
        "api_channel_pinned",
        if pinned {
            "server CPU 0, loader CPU 1"
        } else {
            "no"
        },
    );
    summary.ratio("api_channel_rps", route.per_second, base.per_second, 0);
    let per_cpu = |r: &load::Rate| r.per_second / r.server_cpu.max(0.01);
    summary.ratio(
        "api_channel_rps_per_cpu_second",
        per_cpu(&route),
        per_cpu(&base),
        0,
    );
    summary.num("api_channel_server_cpu", route.server_cpu, 2);
    summary.num("api_channel_healthz_server_cpu", base.server_cpu, 2);
    summary.ratio("api_channel_p50_ms", route.p50_ms, base.p50_ms, 3);
    summary.ratio("api_channel_p99_ms", route.p99_ms, base.p99_ms, 3);
    Ok(())
}

/// A tool call through the host API against the same call to the plugin directly, `callers`
/// at once, alternating batches so drift hits both alike.
async fn tool_calls(
    admin: &Client,
    api: &Proc,
    ids: &Identities,
    chats: &[world::Chat],
    knobs: &BenchKnobs,
    summary: &mut Summary,
) -> anyhow::Result<()> {
    let chat = &chats[0];
    let plugin = world::plugin_id(0);
    let instance = names::instance_name(&plugin, &chat.name);
    let path = ops::host_path(chat, &plugin, "/tools/echo");
    let body = json!({"input": {"text": "x"}, "agent": "say", "thread_id": "t", "run_id": "r"})
        .to_string();
    let proxied = load::request(
        api.listen,
        "POST",
        &path,
        Some(&ids.caller_token),
        Some(&body),
    );
    // The first call starts the stopped instance and is held until its Pod is Ready.
    let cold = Instant::now();
    let mut conn = Conn::connect(api.listen).await?;
    let (status, answer) = conn.exchange(&proxied).await?;
    ensure!(
        status == 200 && ops::is_echo(&answer),
        "the first tool call answered {status}: {}",
        String::from_utf8_lossy(&answer)
    );
    summary.num(
        "api_tool_cold_call_ms",
        cold.elapsed().as_secs_f64() * 1000.0,
        0,
    );
    let direct_addr = ops::pod_address(admin, &chat.namespace, &instance).await?;
    let (_, secret) = ops::instance_secret(admin, &chat.namespace, &instance).await?;
    let direct = load::request(
        direct_addr,
        "POST",
        "/tools/echo",
        Some(&secret),
        Some(&body),
    );
    let load_before = load1();
    let (mut d, mut p) = (Vec::new(), Vec::new());
    let batches = 10;
    let per_batch = (knobs.calls / batches).max(knobs.callers);
    for _ in 0..batches {
        d.extend(
            load::drive(
                direct_addr,
                &direct,
                knobs.callers,
                Duration::from_secs(600),
                per_batch as u64,
                ops::is_echo,
            )
            .await?,
        );
        p.extend(
            load::drive(
                api.listen,
                &proxied,
                knobs.callers,
                Duration::from_secs(600),
                per_batch as u64,
                ops::is_echo,
            )
            .await?,
        );
    }
    summary.put(
        "load_api_tools",
        format!("{load_before:.2}..{:.2}", load1()),
    );
    summary.put("api_tool_callers", knobs.callers);
    summary.put("api_tool_calls_each_way", d.len().min(p.len()));
    for q in [50.0, 99.0] {
        summary.ratio(
            &format!("api_tool_p{q:.0}_ms"),
            load::percentile_ms(&p, q),
            load::percentile_ms(&d, q),
            3,
        );
    }
    Ok(())
}
