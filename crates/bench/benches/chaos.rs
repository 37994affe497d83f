//! `make chaos`: SIGKILLs at random moments, then checks that nothing doubled, leaked or was
//! lost. On the local control plane, release builds, the world of `make bench-scale`.
//!
//! With one controller replica, then again on a fresh cluster with two (leader election on,
//! the Lease holder killed):
//! 1. the 3,000-instance convergence from cold, the controller killed at random moments and
//!    started again at once;
//! 2. a burst of config changes (projects enabling and disabling plugins, turning schedules
//!    off, removing them, untrusted edits, the HostConfig's apiUrl), likewise: for
//!    CHAOS_BURST_SECONDS, and on until every kill is made (two replicas' handovers);
//! 3. after each: every instance and chat converged (the controller's own plan of every chat),
//!    every Pod, /data claim, Secret and CronJob with exactly one live owner that wants it, and
//!    no write in a quiet window after.
//!
//! With one replica, the API server is then killed at random moments during a burst of tool
//! calls through the host API and of `POST /runs` with instance tokens, while the runs end (as
//! the agent runner would); afterwards every run's `/runs/{id}/done` reached its plugin exactly
//! once (the echo plugin's journal, read through the host API), except a second delivery after
//! a kill that caught the first in flight, which no sender can rule out and which is counted
//! apart (see `scale::deliveries`); and no plugin started more runs than `plugins.daily_runs`
//! nor was refused while under it.
//!
//! Each restart's time to work and to convergence is printed, and a `name=value` summary at the
//! end. Knobs: SCALE_QUICK=1 (a tenth of the world), CHAOS_KILLS_CONVERGE (10),
//! CHAOS_KILLS_BURST (10), CHAOS_KILLS_API (5), CHAOS_BURST_SECONDS (60),
//! CHAOS_API_SECONDS (70), CHAOS_DAILY_RUNS (100), CHAOS_REPLICAS ("1,2"), CHAOS_SEED.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use loop_plugins_bench::audit::{self, Tally};
use loop_plugins_bench::burst::{self, ProjectState};
use loop_plugins_bench::converge::Tracker;
use loop_plugins_bench::deliveries::{self, Deliveries};
use loop_plugins_bench::identity::{self, Identities, Role};
use loop_plugins_bench::knobs::{Sizes, env_or};
use loop_plugins_bench::load::{self, Conn};
use loop_plugins_bench::procs::{self, Role as Proc};
use loop_plugins_bench::report::{Phases, Summary, load1};
use loop_plugins_bench::{ops, ownership, world};
use model::names;
use model::resources::{AgentRun, AgentRunPhase};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::json;
use testkit::images::Images;
use tokio::sync::Mutex;

struct Knobs {
    kills_converge: usize,
    kills_burst: usize,
    kills_api: usize,
    burst: Duration,
    api_burst: Duration,
    daily_runs: u32,
    replicas: Vec<usize>,
    seed: u64,
}

impl Knobs {
    fn from_env() -> Self {
        Self {
            kills_converge: env_or("CHAOS_KILLS_CONVERGE", 10),
            kills_burst: env_or("CHAOS_KILLS_BURST", 10),
            kills_api: env_or("CHAOS_KILLS_API", 5),
            burst: Duration::from_secs(env_or("CHAOS_BURST_SECONDS", 60)),
            api_burst: Duration::from_secs(env_or("CHAOS_API_SECONDS", 70)),
            daily_runs: env_or("CHAOS_DAILY_RUNS", 100),
            replicas: std::env::var("CHAOS_REPLICAS")
                .unwrap_or_else(|_| "1,2".into())
                .split(',')
                .filter_map(|r| r.trim().parse().ok())
                .collect(),
            seed: env_or("CHAOS_SEED", rand::random()),
        }
    }
}

fn main() -> anyhow::Result<()> {
    // reqwest's TLS provider (it is built without one): ring's, before any client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sizes = Sizes::from_env();
    let knobs = Knobs::from_env();
    let runtime = tokio::runtime::Runtime::new()?;
    let mut phases = Phases::new();
    let mut summary = Summary::default();
    summary.put("mode", if sizes.quick { "quick" } else { "full" });
    summary.put("instances", sizes.instances());
    summary.put("seed", knobs.seed);
    let mut rng = StdRng::seed_from_u64(knobs.seed);
    let mut failures = Vec::new();
    for &replicas in &knobs.replicas {
        phases.next(&format!(
            "control plane for {replicas} controller replica(s)"
        ));
        let (mut cluster, images) = runtime.block_on(ops::start_cluster())?;
        let result = runtime.block_on(chaos(
            &cluster,
            &images,
            &sizes,
            &knobs,
            replicas,
            &mut rng,
            &mut phases,
            &mut summary,
        ));
        if result.is_err() {
            cluster.keep_run_dir();
            eprintln!(
                "the run's folder (logs of the control plane, the stand-in, the controllers and the API server) is kept: {}",
                cluster.run_dir().display()
            );
        }
        phases.next("shutdown");
        runtime.block_on(cluster.shutdown());
        if let Err(e) = result {
            eprintln!("chaos with {replicas} replica(s) failed: {e:#}");
            failures.push(format!("{replicas} replica(s): {e:#}"));
        }
    }
    phases.end();
    summary.num("run_seconds", phases.total(), 0);
    summary.put("failures", failures.len());
    summary.print("make chaos: name=value");
    ensure!(failures.is_empty(), "chaos found: {failures:#?}");
    Ok(())
}

/// The controller replicas of a run.
struct Controllers {
    procs: Vec<Proc>,
    leader: bool,
}

impl Controllers {
    async fn start(
        n: usize,
        ids: &Identities,
        run_dir: &std::path::Path,
        self_image: &str,
        api_url: &str,
    ) -> anyhow::Result<Self> {
        let mut procs = Vec::new();
        for i in 0..n {
            procs.push(
                procs::start_controller(
                    &ids.controller,
                    run_dir,
                    &format!("controller-{i}"),
                    self_image,
                    api_url,
                    n > 1,
                    &[],
                )
                .await?,
            );
        }
        Ok(Self {
            procs,
            leader: n > 1,
        })
    }

    /// Writes made so far by every replica that runs (a restarted one counts from 0).
    async fn writes(&self) -> f64 {
        let mut sum = 0.0;
        for p in &self.procs {
            sum += procs::counter(p.metrics, "loop_plugins_controller_writes_total", "")
                .await
                .unwrap_or(0.0);
        }
        sum
    }

    /// The replica that holds the Lease (the one replica without leader election), once one
    /// does.
    async fn holder(&mut self, admin: &Client) -> anyhow::Result<usize> {
        if !self.leader {
            return Ok(0);
        }
        let leases: Api<Lease> = Api::namespaced(admin.clone(), world::SYSTEM_NAMESPACE);
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Some(lease) = leases.get_opt(world::CONTROLLER_LEASE).await?
                && let Some(holder) = lease.spec.and_then(|s| s.holder_identity)
                && let Some(i) = self.procs.iter().position(|p| p.identity == holder)
            {
                return Ok(i);
            }
            ensure!(
                Instant::now() < deadline,
                "no replica took the Lease in 120 s"
            );
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    fn check_running(&mut self) -> anyhow::Result<()> {
        for p in &mut self.procs {
            p.check_running()?;
        }
        Ok(())
    }
}

/// What one kill came to.
#[derive(Clone, Debug)]
struct Kill {
    /// Seconds into the phase.
    at: f64,
    who: String,
    /// Restart (process answering /healthz) → the controller writing again.
    to_working: Option<f64>,
    /// Restart → every status converged, when that came before the next kill.
    to_converged: Option<f64>,
    /// Kill → another holder of the Lease (two replicas).
    handover: Option<f64>,
}

/// Kills the holder at random moments, `kills` times, `gap` seconds apart (uniform), starting
/// it again at once; stops early once `done` says the phase's work is over and all converged.
/// Says so in `kills_over` once the kills are made, then waits until converged. Returns the
/// kills and the last restart's time to convergence.
async fn kill_during(
    what: &str,
    controllers: &mut Controllers,
    admin: &Client,
    tracker: &Tracker,
    (kills, gap): (usize, (f64, f64)),
    rng: &mut StdRng,
    (done, kills_over): (&AtomicBool, &AtomicBool),
) -> anyhow::Result<(Vec<Kill>, f64)> {
    let started = Instant::now();
    let mut records: Vec<Kill> = Vec::new();
    let mut restarted = Instant::now();
    for k in 0..kills {
        let wait = Duration::from_secs_f64(rng.random_range(gap.0..gap.1));
        let until = Instant::now() + wait;
        let base = controllers.writes().await;
        while Instant::now() < until {
            if let Some(last) = records.last_mut() {
                if last.to_working.is_none() && controllers.writes().await > base {
                    last.to_working = Some(restarted.elapsed().as_secs_f64());
                }
                if last.to_converged.is_none() && tracker.progress().converged() {
                    last.to_converged = Some(restarted.elapsed().as_secs_f64());
                }
            }
            if done.load(Ordering::SeqCst) && tracker.progress().converged() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        if done.load(Ordering::SeqCst) && tracker.progress().converged() {
            eprintln!("  {what}: converged before kill {}; no more kills", k + 1);
            break;
        }
        let i = controllers.holder(admin).await?;
        let progress = tracker.progress();
        let killed = Instant::now();
        let who = controllers.procs[i].identity.clone();
        controllers.procs[i].kill().await;
        let handover = if controllers.leader {
            // Another replica (or this one, started again) takes the Lease once the killed
            // holder's runs out: a renewal after the kill.
            let killed_ms = jiff::Timestamp::now().as_millisecond();
            controllers.procs[i].restart_as_new_replica().await?;
            let leases: Api<Lease> = Api::namespaced(admin.clone(), world::SYSTEM_NAMESPACE);
            let deadline = Instant::now() + Duration::from_secs(90);
            loop {
                let spec = leases
                    .get(world::CONTROLLER_LEASE)
                    .await?
                    .spec
                    .unwrap_or_default();
                let acquired_ms = spec
                    .acquire_time
                    .as_ref()
                    .map(|t| t.0.as_millisecond())
                    .unwrap_or_default();
                if acquired_ms > killed_ms {
                    break Some(killed.elapsed().as_secs_f64());
                }
                ensure!(Instant::now() < deadline, "no replica took over in 90 s");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        } else {
            controllers.procs[i].restart().await?;
            None
        };
        restarted = Instant::now();
        eprintln!(
            "  {what}: kill {}/{kills} of {who} at {:.1} s ({progress}){}",
            k + 1,
            started.elapsed().as_secs_f64(),
            handover
                .map(|h| format!("; another holder after {h:.1} s"))
                .unwrap_or_default()
        );
        records.push(Kill {
            at: killed.duration_since(started).as_secs_f64(),
            who,
            to_working: None,
            to_converged: None,
            handover,
        });
    }
    // The last restart: until converged (and the phase's work is over, which may have waited
    // for the kills).
    kills_over.store(true, Ordering::SeqCst);
    let base = controllers.writes().await;
    let deadline = Instant::now() + Duration::from_secs(900);
    loop {
        if let Some(last) = records.last_mut()
            && last.to_working.is_none()
            && controllers.writes().await > base
        {
            last.to_working = Some(restarted.elapsed().as_secs_f64());
        }
        if done.load(Ordering::SeqCst) && tracker.progress().converged() {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "{what}: not converged 900 s after the last kill: {}",
            tracker.progress()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let last = restarted.elapsed().as_secs_f64();
    if let Some(record) = records.last_mut() {
        record.to_converged.get_or_insert(last);
    }
    controllers.check_running()?;
    Ok((records, last))
}

/// After a phase: ownership (giving garbage collection time), and a quiet window with no
/// write by the controller.
async fn after_phase(
    prefix: &str,
    cluster: &devcluster::DevCluster,
    admin: &Client,
    tracker: &Tracker,
    namespaces: &[String],
    summary: &mut Summary,
) -> anyhow::Result<Vec<String>> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let found = loop {
        let found = ownership::check(admin, namespaces, &tracker.wants()).await?;
        if (found.problems.is_empty() && found.terminating.is_empty()) || Instant::now() > deadline
        {
            break found;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
    };
    for problem in found.problems.iter().take(20) {
        eprintln!("  problem: {problem}");
    }
    summary.put(&format!("{prefix}_problems"), found.problems.len());
    summary.put(
        &format!("{prefix}_objects"),
        found
            .counts
            .iter()
            .map(|(k, n)| format!("{k}:{n}"))
            .collect::<Vec<_>>()
            .join(","),
    );
    let window = audit::Window::open(cluster.control_plane().audit_log())?;
    tokio::time::sleep(Duration::from_secs(20)).await;
    let quiet = Tally::of(&window.writes()?, &Role::Controller.user());
    summary.put(
        &format!("{prefix}_quiet_20s_controller_writes"),
        quiet.writes,
    );
    summary.put(
        &format!("{prefix}_quiet_20s_controller_writes_by_kind"),
        quiet.breakdown(),
    );
    let mut problems = found.problems;
    if quiet.writes > 0 {
        problems.push(format!(
            "{prefix}: the controller wrote {} times in 20 s after converging: {}",
            quiet.writes,
            quiet.breakdown()
        ));
    }
    Ok(problems)
}

fn put_kills(summary: &mut Summary, prefix: &str, kills: &[Kill], last: f64) {
    let list = |f: &dyn Fn(&Kill) -> Option<f64>| {
        kills
            .iter()
            .map(|k| {
                f(k).map(|v| format!("{v:.1}"))
                    .unwrap_or_else(|| "-".into())
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    summary.put(&format!("{prefix}_kills"), kills.len());
    summary.put(&format!("{prefix}_kill_at_seconds"), list(&|k| Some(k.at)));
    summary.put(
        &format!("{prefix}_killed"),
        kills
            .iter()
            .map(|k| k.who.as_str())
            .collect::<Vec<_>>()
            .join(","),
    );
    summary.put(
        &format!("{prefix}_restart_to_working_seconds"),
        list(&|k| k.to_working),
    );
    summary.put(
        &format!("{prefix}_restart_to_converged_seconds"),
        list(&|k| k.to_converged),
    );
    if kills.iter().any(|k| k.handover.is_some()) {
        summary.put(&format!("{prefix}_handover_seconds"), list(&|k| k.handover));
    }
    summary.num(
        &format!("{prefix}_last_restart_to_converged_seconds"),
        last,
        1,
    );
}

#[allow(clippy::too_many_arguments)]
async fn chaos(
    cluster: &devcluster::DevCluster,
    images: &Images,
    sizes: &Sizes,
    knobs: &Knobs,
    replicas: usize,
    rng: &mut StdRng,
    phases: &mut Phases,
    summary: &mut Summary,
) -> anyhow::Result<()> {
    let prefix = format!("r{replicas}");
    let admin = cluster.client();
    let ids = identity::set_up(cluster).await?;
    let run_dir = cluster.run_dir().to_path_buf();
    let mut api = procs::start_api(&ids.api, &run_dir, "api-0").await?;
    let api_url = format!("http://{}", api.listen);
    let chats = world::declare(&admin, images, sizes, &api_url, knobs.daily_runs).await?;
    let self_image = images.self_image().await?;
    let namespaces = world::namespaces(sizes);
    let tracker = Tracker::start(&admin, &namespaces).await?;
    let mut problems = Vec::new();

    phases.next(&format!(
        "{prefix}: convergence from cold, {} kills",
        knobs.kills_converge
    ));
    let load_before = load1();
    let started = Instant::now();
    let mut controllers =
        Controllers::start(replicas, &ids, &run_dir, &self_image, &api_url).await?;
    let done = AtomicBool::new(true);
    // Convergence from cold takes tens of seconds (`make bench-scale`): kills 1 to 5 s apart
    // land inside it, each restart listing everything again.
    let gap = (1.0, 5.0);
    let (kills, last) = kill_during(
        "convergence",
        &mut controllers,
        &admin,
        &tracker,
        (knobs.kills_converge, gap),
        rng,
        (&done, &AtomicBool::new(false)),
    )
    .await?;
    summary.put(
        &format!("{prefix}_load_converge"),
        format!("{load_before:.2}..{:.2}", load1()),
    );
    summary.num(
        &format!("{prefix}_converge_seconds"),
        started.elapsed().as_secs_f64(),
        1,
    );
    put_kills(summary, &format!("{prefix}_converge"), &kills, last);
    problems.extend(
        after_phase(
            &format!("{prefix}_converge"),
            cluster,
            &admin,
            &tracker,
            &namespaces,
            summary,
        )
        .await?,
    );

    phases.next(&format!(
        "{prefix}: a burst of config changes for {} s, {} kills",
        knobs.burst.as_secs(),
        knobs.kills_burst
    ));
    let load_before = load1();
    let done = Arc::new(AtomicBool::new(false));
    // The first two projects stay as declared: the API phase calls their chats.
    let burst_namespaces: Vec<String> = namespaces.iter().skip(2).cloned().collect();
    let changes = Arc::new(AtomicUsize::new(0));
    // The burst lasts its length, and on until every kill is made: with two replicas each
    // kill waits out a handover (the Lease running out, 12 to 14 s), so ten of them take
    // longer than the burst's minute.
    let kills_over = Arc::new(AtomicBool::new(false));
    // A change the API server refuses tests nothing: counted, and a problem of the run.
    let refused = Arc::new(AtomicUsize::new(0));
    let burst = tokio::spawn({
        let admin = admin.clone();
        let done = done.clone();
        let kills_over = kills_over.clone();
        let changes = changes.clone();
        let refused = refused.clone();
        let plugins = world::plugin_ids(sizes);
        let urls = vec![
            api_url.clone(),
            format!("http://localhost:{}", api.listen.port()),
        ];
        let length = knobs.burst;
        let mut rng = StdRng::seed_from_u64(rng.random());
        async move {
            let mut states: BTreeMap<String, ProjectState> = BTreeMap::new();
            let started = Instant::now();
            while started.elapsed() < length || !kills_over.load(Ordering::SeqCst) {
                let change = burst::next(&mut rng, &states, &burst_namespaces, &plugins, &urls);
                burst::apply_to(&mut states, &plugins, &change);
                if let Err(e) = burst::write(&admin, &states, &change).await {
                    eprintln!("  burst: {change:?}: {e:#}");
                    refused.fetch_add(1, Ordering::SeqCst);
                }
                changes.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(rng.random_range(200..1500))).await;
            }
            done.store(true, Ordering::SeqCst);
        }
    });
    let spacing = knobs.burst.as_secs_f64() / knobs.kills_burst.max(1) as f64;
    let gap = (spacing * 0.3, spacing * 1.3);
    let started = Instant::now();
    let kills = kill_during(
        "burst",
        &mut controllers,
        &admin,
        &tracker,
        (knobs.kills_burst, gap),
        rng,
        (&done, &kills_over),
    )
    .await;
    // Also when the kills failed, so the burst ends.
    kills_over.store(true, Ordering::SeqCst);
    let (kills, last) = kills?;
    burst.await?;
    summary.put(
        &format!("{prefix}_load_burst"),
        format!("{load_before:.2}..{:.2}", load1()),
    );
    summary.put(
        &format!("{prefix}_burst_changes"),
        changes.load(Ordering::SeqCst),
    );
    let refused = refused.load(Ordering::SeqCst);
    summary.put(&format!("{prefix}_burst_changes_refused"), refused);
    if refused > 0 {
        problems.push(format!(
            "{prefix}: {refused} burst changes were refused by the API server"
        ));
    }
    summary.num(
        &format!("{prefix}_burst_seconds"),
        started.elapsed().as_secs_f64(),
        1,
    );
    summary.put(&format!("{prefix}_burst_final"), tracker.progress());
    put_kills(summary, &format!("{prefix}_burst"), &kills, last);
    problems.extend(
        after_phase(
            &format!("{prefix}_burst"),
            cluster,
            &admin,
            &tracker,
            &namespaces,
            summary,
        )
        .await?,
    );

    if replicas == 1 || env_or("CHAOS_API_EVERY", 0u8) != 0 {
        phases.next(&format!(
            "{prefix}: tool calls and runs for {} s, {} API server kills",
            knobs.api_burst.as_secs(),
            knobs.kills_api
        ));
        problems.extend(
            api_chaos(
                &prefix, &admin, &mut api, &ids, &chats, sizes, knobs, rng, summary,
            )
            .await?,
        );
        problems.extend(
            after_phase(
                &format!("{prefix}_api"),
                cluster,
                &admin,
                &tracker,
                &namespaces,
                summary,
            )
            .await?,
        );
    }
    controllers.check_running()?;
    api.check_running()?;
    summary.put(&format!("{prefix}_problems_total"), problems.len());
    ensure!(
        problems.is_empty(),
        "{} problems: {problems:#?}",
        problems.len()
    );
    Ok(())
}

/// The outcomes of the API phase's callers.
#[derive(Default)]
struct Outcomes {
    tool_ok: usize,
    tool_failed: usize,
    runs_created: BTreeMap<String, Vec<String>>,
    runs_refused: BTreeMap<String, usize>,
    runs_unknown: usize,
    runs_other: BTreeMap<u16, usize>,
}

#[allow(clippy::too_many_arguments)]
async fn api_chaos(
    prefix: &str,
    admin: &Client,
    api: &mut Proc,
    ids: &Identities,
    chats: &[world::Chat],
    sizes: &Sizes,
    knobs: &Knobs,
    rng: &mut StdRng,
    summary: &mut Summary,
) -> anyhow::Result<Vec<String>> {
    let plugins = world::plugin_ids(sizes);
    let first_ns = world::namespace(0);
    // Runs in the first project's first channel and its thread; tool calls in the second's.
    let run_chats: Vec<&world::Chat> = chats
        .iter()
        .filter(|c| {
            c.namespace == first_ns
                && (c.name == world::channel_name(0) || c.name == world::thread_name(0))
        })
        .collect();
    let tool_chat = chats
        .iter()
        .find(|c| c.namespace == world::namespace(1) && c.name == world::channel_name(0))
        .context("the second project's first channel")?;
    let mut run_targets = Vec::new();
    for chat in &run_chats {
        for plugin in &plugins {
            let instance = names::instance_name(plugin, &chat.name);
            let (token, _) = ops::instance_secret(admin, &chat.namespace, &instance).await?;
            run_targets.push(((*chat).clone(), plugin.clone(), token));
        }
    }
    // A restarted server listens where it did.
    let listen = api.listen;
    let stop = Arc::new(AtomicBool::new(false));
    let outcomes = Arc::new(Mutex::new(Outcomes::default()));
    let mut tasks = Vec::new();

    // Plugins asking for runs, one a second per chat.
    for (chat, plugin, token) in run_targets.clone() {
        let (stop, outcomes) = (stop.clone(), outcomes.clone());
        tasks.push(tokio::spawn(async move {
            let http = load::http_client().expect("a client");
            let url = format!("http://{listen}/api/plugin/v1/runs");
            let mut n = 0;
            while !stop.load(Ordering::SeqCst) {
                n += 1;
                let answer = http
                    .post(&url)
                    .bearer_auth(&token)
                    .json(
                        &json!({"agent": "say", "prompt": format!("{} {} {n}", chat.name, plugin)}),
                    )
                    .send()
                    .await;
                let mut o = outcomes.lock().await;
                match answer {
                    Ok(a) if a.status().as_u16() == 202 => {
                        let body: serde_json::Value = a.json().await.unwrap_or_default();
                        let id = body["id"].as_str().unwrap_or_default().to_string();
                        o.runs_created.entry(plugin.clone()).or_default().push(id);
                    }
                    Ok(a) if a.status().as_u16() == 429 => {
                        *o.runs_refused.entry(plugin.clone()).or_default() += 1;
                    }
                    Ok(a) => *o.runs_other.entry(a.status().as_u16()).or_default() += 1,
                    // The server died with the request in flight: the run may or may not exist.
                    Err(_) => o.runs_unknown += 1,
                }
                drop(o);
                tokio::time::sleep(Duration::from_millis(1000)).await;
            }
        }));
    }
    // The agent runner: every run ends, half of them well, a moment after it was made.
    {
        let (stop, admin) = (stop.clone(), admin.clone());
        let ns = first_ns.clone();
        tasks.push(tokio::spawn(async move {
            let runs: Api<AgentRun> = Api::namespaced(admin, &ns);
            let mut ended = BTreeSet::new();
            let mut n = 0u64;
            // Keeps ending runs until stopped and nothing is left to end.
            loop {
                let list = runs.list(&ListParams::default()).await;
                let mut open = 0;
                if let Ok(list) = list {
                    for run in list.items {
                        let name = run.name_any();
                        let final_ = run
                            .status
                            .as_ref()
                            .and_then(|s| s.phase)
                            .is_some_and(AgentRunPhase::is_final);
                        if final_ || ended.contains(&name) {
                            continue;
                        }
                        open += 1;
                        n += 1;
                        let phase = if n.is_multiple_of(2) {
                            "Succeeded"
                        } else {
                            "Failed"
                        };
                        let patch =
                            json!({"status": {"phase": phase, "result": format!("r-{name}")}});
                        if runs
                            .patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch))
                            .await
                            .is_ok()
                        {
                            ended.insert(name);
                        }
                    }
                }
                if stop.load(Ordering::SeqCst) && open == 0 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }));
    }
    // Tool calls, 16 callers.
    for c in 0..16 {
        let (stop, outcomes) = (stop.clone(), outcomes.clone());
        let plugin = plugins[c % plugins.len()].clone();
        let path = ops::host_path(tool_chat, &plugin, "/tools/echo");
        let token = ids.caller_token.clone();
        tasks.push(tokio::spawn(async move {
            let body =
                json!({"input": {"text": "x"}, "agent": "say", "thread_id": "t", "run_id": "r"})
                    .to_string();
            let mut conn: Option<Conn> = None;
            let request = load::request(listen, "POST", &path, Some(&token), Some(&body));
            while !stop.load(Ordering::SeqCst) {
                if conn.is_none() {
                    conn = Conn::connect(listen).await.ok();
                }
                let answer = match conn.as_mut() {
                    Some(c) => c.exchange(&request).await.ok(),
                    None => None,
                };
                let ok = answer
                    .as_ref()
                    .is_some_and(|(s, b)| *s == 200 && ops::is_echo(b));
                let mut o = outcomes.lock().await;
                if ok {
                    o.tool_ok += 1;
                } else {
                    o.tool_failed += 1;
                    conn = None;
                }
                drop(o);
                if !ok {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }));
    }

    // The kills.
    let started = Instant::now();
    let spacing = knobs.api_burst.as_secs_f64() / (knobs.kills_api + 1) as f64;
    let mut restarts = Vec::new();
    // When each kill came, on the clock the plugins' journals use.
    let mut kills_ms = Vec::new();
    for _ in 0..knobs.kills_api {
        tokio::time::sleep(Duration::from_secs_f64(
            rng.random_range(spacing * 0.5..spacing * 1.5),
        ))
        .await;
        let killed = Instant::now();
        kills_ms.push(epoch_ms());
        api.kill().await;
        api.restart().await?;
        let up = killed.elapsed().as_secs_f64();
        // Until a tool call through it answers again.
        let ok_before = outcomes.lock().await.tool_ok;
        let serving = loop {
            if outcomes.lock().await.tool_ok > ok_before {
                break killed.elapsed().as_secs_f64();
            }
            if killed.elapsed() > Duration::from_secs(60) {
                break f64::NAN;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        eprintln!(
            "  API server killed at {:.1} s: /healthz after {up:.1} s, tool calls answered after {serving:.1} s",
            killed.duration_since(started).as_secs_f64()
        );
        restarts.push((up, serving));
    }
    let left = knobs.api_burst.saturating_sub(started.elapsed());
    tokio::time::sleep(left).await;
    stop.store(true, Ordering::SeqCst);
    for task in tasks {
        task.await?;
    }

    // Every ended run's /done delivered, or given up on.
    let runs: Api<AgentRun> = Api::namespaced(admin.clone(), &first_ns);
    let deadline = Instant::now() + Duration::from_secs(240);
    let all = loop {
        let all = runs.list(&ListParams::default()).await?.items;
        let waiting = all
            .iter()
            .filter(|r| {
                let s = r.status.clone().unwrap_or_default();
                !s.done_delivered && s.done_attempts < server::fanout::runs_done::DONE_ATTEMPTS
            })
            .count();
        if waiting == 0 || Instant::now() > deadline {
            if waiting > 0 {
                eprintln!("  {waiting} runs still wait for /done after 240 s");
            }
            break all;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    };
    let http = load::http_client()?;
    // When each run's /done reached the plugin.
    let mut received: BTreeMap<String, Vec<u128>> = BTreeMap::new();
    for (chat, plugin, _) in &run_targets {
        for entry in ops::journal(&http, api.listen, &ids.caller_token, chat, plugin).await? {
            if let Some(run) = entry["route"]
                .as_str()
                .and_then(|r| r.strip_prefix("/runs/"))
                .and_then(|r| r.strip_suffix("/done"))
            {
                let at = entry["at_ms"].as_u64().unwrap_or_default();
                received
                    .entry(run.to_string())
                    .or_default()
                    .push(u128::from(at));
            }
        }
    }
    let done_limit = server::calls::Limits::default().run_done;
    let mut problems = Vec::new();
    let (mut lost, mut twice, mut again_after_kill, mut delivered, mut gave_up) = (0, 0, 0, 0, 0);
    for run in &all {
        let name = run.name_any();
        let status = run.status.clone().unwrap_or_default();
        if status.done_delivered {
            delivered += 1;
        } else {
            gave_up += 1;
        }
        let at = received.get(&name).map(Vec::as_slice).unwrap_or_default();
        match deliveries::judge(at, &kills_ms, done_limit) {
            Deliveries::Lost => {
                lost += 1;
                problems.push(format!(
                    "run {name}: /done never reached the plugin (attempts {}, error {:?})",
                    status.done_attempts, status.done_error
                ));
            }
            Deliveries::Once => {}
            Deliveries::AgainAfterKill => {
                again_after_kill += 1;
                eprintln!(
                    "  run {name}: /done reached the plugin again after a kill caught it in flight (at {at:?} ms; kills at {kills_ms:?})"
                );
            }
            Deliveries::Repeated(n) => {
                twice += 1;
                problems.push(format!(
                    "run {name}: /done reached the plugin {n} times (at {at:?} ms; kills at {kills_ms:?})"
                ));
            }
        }
    }

    // The quota: never more runs than daily_runs, and no 429 while under it.
    let o = outcomes.lock().await;
    let mut over = Vec::new();
    let mut records = Vec::new();
    let config_maps: Api<ConfigMap> = Api::namespaced(admin.clone(), world::SYSTEM_NAMESPACE);
    for plugin in &plugins {
        let made = all.iter().filter(|r| &r.spec.plugin == plugin).count();
        let refused = o.runs_refused.get(plugin).copied().unwrap_or_default();
        let recorded = config_maps
            .get_opt(&format!("loop-plugins-runs-{plugin}"))
            .await?
            .and_then(|c| c.data)
            .and_then(|d| d.get("started").cloned())
            .and_then(|t| serde_json::from_str::<Vec<serde_json::Value>>(&t).ok())
            .map(|v| v.len())
            .unwrap_or_default();
        records.push(format!("{plugin}:{made}/{recorded}"));
        if made > knobs.daily_runs as usize {
            problems.push(format!(
                "plugin {plugin} started {made} runs; daily_runs is {}",
                knobs.daily_runs
            ));
            over.push(plugin.clone());
        }
        if refused > 0 && made < knobs.daily_runs as usize {
            problems.push(format!(
                "plugin {plugin} was refused {refused} times with {made} runs of {} (over-count: the record holds {recorded})",
                knobs.daily_runs
            ));
            over.push(plugin.clone());
        }
    }
    let list = |f: &dyn Fn(&(f64, f64)) -> f64| {
        restarts
            .iter()
            .map(|r| format!("{:.1}", f(r)))
            .collect::<Vec<_>>()
            .join(",")
    };
    summary.put(&format!("{prefix}_api_kills"), restarts.len());
    summary.put(
        &format!("{prefix}_api_kill_to_healthz_seconds"),
        list(&|r| r.0),
    );
    summary.put(
        &format!("{prefix}_api_kill_to_tool_calls_answered_seconds"),
        list(&|r| r.1),
    );
    summary.put(&format!("{prefix}_api_tool_calls_ok"), o.tool_ok);
    summary.put(&format!("{prefix}_api_tool_calls_failed"), o.tool_failed);
    summary.put(
        &format!("{prefix}_api_runs_created"),
        o.runs_created.values().map(Vec::len).sum::<usize>(),
    );
    summary.put(&format!("{prefix}_api_runs_in_cluster"), all.len());
    summary.put(
        &format!("{prefix}_api_runs_refused_429"),
        o.runs_refused.values().sum::<usize>(),
    );
    summary.put(
        &format!("{prefix}_api_runs_unknown_outcome"),
        o.runs_unknown,
    );
    summary.put(
        &format!("{prefix}_api_runs_other_answers"),
        format!("{:?}", o.runs_other),
    );
    summary.put(&format!("{prefix}_api_done_delivered"), delivered);
    summary.put(&format!("{prefix}_api_done_given_up"), gave_up);
    summary.put(&format!("{prefix}_api_done_lost"), lost);
    summary.put(&format!("{prefix}_api_done_twice"), twice);
    summary.put(
        &format!("{prefix}_api_done_again_after_a_kill_in_flight"),
        again_after_kill,
    );
    summary.put(&format!("{prefix}_api_quota_daily_runs"), knobs.daily_runs);
    summary.put(
        &format!("{prefix}_api_quota_runs_made_over_recorded"),
        records.join(","),
    );
    summary.put(&format!("{prefix}_api_quota_over_count"), over.len());
    Ok(problems)
}

/// Milliseconds since the Unix epoch: the clock of the plugins' journals.
fn epoch_ms() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or_default()
}
