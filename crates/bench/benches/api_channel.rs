//! `make bench`: how many `GET /api/plugin/v1/channel` requests per second the Plugin API server
//! answers on one core, against a baseline measured in the same run: `/healthz` of the same
//! server (no auth, no layers, a constant answer), so the ratio is what the route itself costs.
//!
//! It starts a dev control plane (etcd, kube-apiserver; no controller), writes what a token
//! needs by hand (HostConfig, a Plugin with the full manifest, a trusted Project, a Channel, the
//! PluginInstance and its token Secret), starts `loop-plugins api` (release build) pinned to
//! CPU 0 with `taskset`, and drives it from a loader thread pinned to CPU 1: keep-alive HTTP/1.1
//! connections on loopback, each sending the next request when the last answer is in. Every
//! measurement is bounded in time and count; the numbers are medians over the rounds.
//!
//! Knobs (environment): BENCH_SECONDS (per measurement, default 4), BENCH_ROUNDS (3),
//! BENCH_CONNECTIONS (32), BENCH_MAX_REQUESTS (per measurement, 2000000).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use devcluster::process::{Process, ProcessSpec, tail};
use devcluster::{DevCluster, DevClusterOptions};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource};
use model::config::PluginConfig;
use model::names;
use model::resources::{
    App, Channel, ChannelKind, ChannelSpec, HOST_CONFIG_NAME, HostConfig, HostConfigSpec,
    HostPlugins, Plugin, PluginInstance, PluginInstanceSpec, Project, ProjectSpec, ProjectTrust,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const NS: &str = "bench";
const PLUGIN: &str = "cogtest";
const PROJECT: &str = "shop";
const CHAT: &str = "general";
const TOKEN: &str = "bench-token-0123456789abcdef0123456789abcdef0123456789abcdef01234567";
const FULL: &str = include_str!("../../../examples/manifests/full.json");

fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

struct Knobs {
    seconds: u64,
    rounds: usize,
    connections: usize,
    max_requests: u64,
}

fn main() -> anyhow::Result<()> {
    // reqwest's TLS provider (it is built without one): ring's, before any client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let knobs = Knobs {
        seconds: env_or("BENCH_SECONDS", 4),
        rounds: env_or("BENCH_ROUNDS", 3).max(1),
        connections: env_or("BENCH_CONNECTIONS", 32).max(1),
        max_requests: env_or("BENCH_MAX_REQUESTS", 2_000_000),
    };
    let runtime = tokio::runtime::Runtime::new()?;
    let cluster = runtime.block_on(DevCluster::start(DevClusterOptions::default()))?;
    let result = runtime.block_on(bench(&cluster, &knobs));
    runtime.block_on(cluster.shutdown());
    result
}

async fn bench(cluster: &DevCluster, knobs: &Knobs) -> anyhow::Result<()> {
    eprintln!("bench: control plane up; writing the objects a token needs");
    cluster.install_crds().await?;
    let client = cluster.client();
    world(&client).await?;

    let cpus = online_cpus();
    let taskset = which("taskset");
    let pinned = cpus.len() >= 2 && taskset.is_some();
    let mut server = start_api(
        cluster.kubeconfig(),
        cluster.run_dir(),
        taskset.as_deref(),
        pinned,
    )
    .await?;
    let addr = server.addr;
    let channel = format!(
        "GET /api/plugin/v1/channel HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
    );
    let healthz = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");

    // The answer is what a plugin gets.
    let (status, body) = one(addr, &channel).await?;
    ensure!(
        status == 200,
        "GET /channel answered {status}: {}",
        String::from_utf8_lossy(&body)
    );
    eprintln!(
        "bench: GET /channel answers {}",
        String::from_utf8_lossy(&body)
    );

    let loader_cpu = if pinned { Some(cpus[1]) } else { None };
    let mut results: BTreeMap<&str, Vec<Measured>> = BTreeMap::new();
    for round in 1..=knobs.rounds {
        for (name, request) in [("/healthz", &healthz), ("GET /channel", &channel)] {
            let measured = measure(server.pid, addr, request, knobs, loader_cpu)?;
            eprintln!(
                "bench: round {round}/{} {name:<13} {:>9.0} req/s, server CPU {:>3.0}%, loader CPU {:>3.0}%, p50 {:.2} ms, p99 {:.2} ms ({} requests)",
                knobs.rounds,
                measured.rps,
                measured.server_cpu * 100.0,
                measured.loader_cpu * 100.0,
                measured.p50_ms,
                measured.p99_ms,
                measured.requests
            );
            results.entry(name).or_default().push(measured);
        }
    }
    if let Some(status) = server.process.try_wait() {
        bail!(
            "the API server exited with {status}:\n{}",
            tail(server.process.log(), 20)
        );
    }
    server.process.stop(Duration::from_secs(5)).await;

    let median = |name: &str| {
        let mut all = results[name].clone();
        all.sort_by(|a, b| a.rps.total_cmp(&b.rps));
        all[all.len() / 2].clone()
    };
    let base = median("/healthz");
    let route = median("GET /channel");
    println!();
    println!("Plugin API: GET /api/plugin/v1/channel on one core");
    match loader_cpu {
        Some(cpu) => println!(
            "  server pinned to CPU {} (taskset -c {0}), loader on CPU {cpu}; {} keep-alive connections on loopback",
            cpus[0], knobs.connections
        ),
        None => println!(
            "  NOT pinned ({}); {} keep-alive connections on loopback",
            if taskset.is_none() {
                "taskset not found"
            } else {
                "fewer than 2 CPUs"
            },
            knobs.connections
        ),
    }
    println!(
        "  median of {} rounds of up to {} s or {} requests each, release build",
        knobs.rounds, knobs.seconds, knobs.max_requests
    );
    println!();
    println!(
        "  {:<22} {:>10} {:>11} {:>11} {:>15} {:>8} {:>8}",
        "", "req/s", "server CPU", "loader CPU", "req/CPU-second", "p50 ms", "p99 ms"
    );
    let per_cpu = |m: &Measured| m.rps / m.server_cpu.max(0.01);
    for (name, m) in [("/healthz (baseline)", &base), ("GET /channel", &route)] {
        println!(
            "  {:<22} {:>10.0} {:>10.0}% {:>10.0}% {:>15.0} {:>8.2} {:>8.2}",
            name,
            m.rps,
            m.server_cpu * 100.0,
            m.loader_cpu * 100.0,
            per_cpu(m),
            m.p50_ms,
            m.p99_ms
        );
    }
    println!();
    println!(
        "  GET /channel on one core: {:.0} requests per second measured; {:.0} per CPU-second (one core fully busy)",
        route.rps,
        per_cpu(&route)
    );
    println!(
        "  ratio to the /healthz baseline: {:.3} by requests per second, {:.3} by CPU-second",
        route.rps / base.rps,
        per_cpu(&route) / per_cpu(&base)
    );
    for (name, m) in [("the baseline", &base), ("GET /channel", &route)] {
        if m.server_cpu >= 0.9 {
            continue;
        }
        let why = if m.loader_cpu >= 0.9 {
            "the loader's core was saturated first"
        } else {
            "other processes took CPU time; the per-CPU-second figure is the one to compare"
        };
        println!(
            "  note: the server's core was {:.0}% busy on {name}: {why}",
            m.server_cpu * 100.0
        );
    }
    Ok(())
}

/// The objects the API server needs to answer the token: what the controller would have made.
async fn world(client: &Client) -> anyhow::Result<()> {
    let params = PatchParams::apply("bench").force();
    let namespace: Namespace = serde_json::from_value(json!({ "metadata": { "name": NS } }))?;
    Api::<Namespace>::all(client.clone())
        .patch(NS, &params, &Patch::Apply(&namespace))
        .await?;
    let host = HostConfig::new(
        HOST_CONFIG_NAME,
        HostConfigSpec {
            plugins: HostPlugins {
                enabled: true,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    Api::<HostConfig>::all(client.clone())
        .patch(HOST_CONFIG_NAME, &params, &Patch::Apply(&host))
        .await?;
    // No controller runs here, so nothing pulls it: the API server answers from the Plugin's
    // manifest alone. A digest of the manifest stands for the image's.
    let image = format!(
        "registry.local/{PLUGIN}@sha256:{}",
        hex::encode(<sha2::Sha256 as sha2::Digest>::digest(FULL.as_bytes()))
    );
    let plugin = Plugin::from_manifest(FULL, &image, vec![], true)?;
    Api::<Plugin>::all(client.clone())
        .patch(PLUGIN, &params, &Patch::Apply(&plugin))
        .await?;
    let entry = PluginConfig {
        enabled: Some(true),
        settings: BTreeMap::from([
            ("question_count".to_string(), json!(8)),
            ("topics".to_string(), json!(["rust", "go"])),
        ]),
        schedules: BTreeMap::new(),
        secret_settings: BTreeMap::new(),
        risk_profile: None,
    };
    let plugins = BTreeMap::from([(PLUGIN.to_string(), entry)]);
    let trust = ProjectTrust::of(PROJECT, &plugins);
    let project = Project::new(PROJECT, ProjectSpec { plugins });
    Api::<Project>::namespaced(client.clone(), NS)
        .patch(PROJECT, &params, &Patch::Apply(&project))
        .await?;
    Api::<ProjectTrust>::namespaced(client.clone(), NS)
        .patch(PROJECT, &params, &Patch::Apply(&trust))
        .await?;
    let channel = Channel::new(
        CHAT,
        ChannelSpec {
            project: PROJECT.into(),
            kind: ChannelKind::Channel,
            parent: None,
            app: App::Desktop,
            hidden: false,
            working_tree: None,
        },
    );
    let channel = Api::<Channel>::namespaced(client.clone(), NS)
        .patch(CHAT, &params, &Patch::Apply(&channel))
        .await?;

    let name = names::instance_name(PLUGIN, CHAT);
    let mut instance = PluginInstance::new(
        &name,
        PluginInstanceSpec {
            plugin: PLUGIN.into(),
            channel: CHAT.into(),
            project: PROJECT.into(),
        },
    );
    instance.metadata.labels = Some(names::labels(PLUGIN, PROJECT, CHAT, "instance"));
    instance.metadata.owner_references = channel.controller_owner_ref(&()).map(|o| vec![o]);
    let instance = Api::<PluginInstance>::namespaced(client.clone(), NS)
        .patch(&name, &params, &Patch::Apply(&instance))
        .await?;
    let mut labels = names::labels(PLUGIN, PROJECT, CHAT, "token");
    labels.insert(names::LABEL_INSTANCE.into(), name.clone());
    let mut secret = Secret {
        data: Some(BTreeMap::from([
            ("token".to_string(), ByteString(TOKEN.as_bytes().to_vec())),
            ("secret".to_string(), ByteString(b"bench-secret".to_vec())),
        ])),
        ..Default::default()
    };
    secret.metadata.name = Some(names::secret_name(&name));
    secret.metadata.labels = Some(labels);
    secret.metadata.owner_references = instance.controller_owner_ref(&()).map(|o| vec![o]);
    Api::<Secret>::namespaced(client.clone(), NS)
        .patch(&names::secret_name(&name), &params, &Patch::Apply(&secret))
        .await?;
    Ok(())
}

struct Server {
    process: Process,
    addr: SocketAddr,
    pid: u32,
}

fn free_port() -> anyhow::Result<u16> {
    Ok(devcluster::free_port()?)
}

async fn start_api(
    kubeconfig: &Path,
    run_dir: &Path,
    taskset: Option<&Path>,
    pinned: bool,
) -> anyhow::Result<Server> {
    let binary = &testkit::binary();
    let port = free_port()?;
    let args = vec![
        "api".to_string(),
        format!("--listen=127.0.0.1:{port}"),
        format!("--metrics-addr=127.0.0.1:{}", free_port()?),
    ];
    let log = run_dir.join("api.log");
    let mut spec = match (taskset, pinned) {
        (Some(taskset), true) => {
            let cpu = online_cpus()[0].to_string();
            ProcessSpec::new("api", taskset, &log).args([
                "-c".to_string(),
                cpu,
                binary.display().to_string(),
            ])
        }
        _ => ProcessSpec::new("api", binary, &log),
    };
    spec = spec.args(args);
    spec.env
        .push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
    // As deployed: info, no colours.
    spec.env.push(("RUST_LOG".into(), "info,kube=warn".into()));
    spec.env.push(("NO_COLOR".into(), "1".into()));
    let mut process = Process::spawn(&spec).await?;
    let pid = process.pid();
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = process.try_wait() {
            bail!(
                "the API server exited with {status}:\n{}",
                tail(process.log(), 20)
            );
        }
        let request = format!("GET /healthz HTTP/1.1\r\nHost: {addr}\r\n\r\n");
        if let Ok((200, _)) = one(addr, &request).await {
            break;
        }
        ensure!(
            Instant::now() < deadline,
            "the API server did not answer within 60 s:\n{}",
            tail(process.log(), 20)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Server { process, addr, pid })
}

/// One request on its own connection: the status and the body.
async fn one(addr: SocketAddr, request: &str) -> anyhow::Result<(u16, Vec<u8>)> {
    let mut conn = Conn::connect(addr).await?;
    conn.exchange(request.as_bytes()).await
}

/// A keep-alive HTTP/1.1 connection that reads answers with a Content-Length.
struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl Conn {
    async fn connect(addr: SocketAddr) -> anyhow::Result<Self> {
        let stream = TcpStream::connect(addr).await?;
        stream.set_nodelay(true)?;
        Ok(Self {
            stream,
            buf: Vec::with_capacity(8192),
        })
    }

    async fn exchange(&mut self, request: &[u8]) -> anyhow::Result<(u16, Vec<u8>)> {
        self.stream.write_all(request).await?;
        loop {
            if let Some((status, head, length)) = parse_head(&self.buf)?
                && self.buf.len() >= head + length
            {
                let body = self.buf[head..head + length].to_vec();
                self.buf.drain(..head + length);
                return Ok((status, body));
            }
            let mut chunk = [0u8; 8192];
            let n = self.stream.read(&mut chunk).await?;
            ensure!(n > 0, "the server closed the connection");
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }
}

/// The status, the length of the head and the body's Content-Length, once the head is in.
fn parse_head(buf: &[u8]) -> anyhow::Result<Option<(u16, usize, usize)>> {
    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = std::str::from_utf8(&buf[..end])?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .context("a status line")?;
    let length = lines
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, v)| v.trim().parse().ok())
        .context("an answer without Content-Length")?;
    Ok(Some((status, end + 4, length)))
}

#[derive(Clone)]
struct Measured {
    requests: u64,
    rps: f64,
    /// The server's CPU time over the wall time: 1.0 is one core fully busy.
    server_cpu: f64,
    /// The loader thread's, likewise.
    loader_cpu: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// Warms up for a second, then drives `request` over the connections until the time or the
/// count runs out, on a loader thread pinned to `cpu`.
fn measure(
    server_pid: u32,
    addr: SocketAddr,
    request: &str,
    knobs: &Knobs,
    cpu: Option<usize>,
) -> anyhow::Result<Measured> {
    let request = request.as_bytes().to_vec();
    let connections = knobs.connections;
    let seconds = knobs.seconds;
    let max_requests = knobs.max_requests;
    std::thread::scope(|scope| {
        scope
            .spawn(move || -> anyhow::Result<Measured> {
                if let Some(cpu) = cpu {
                    pin_this_thread(cpu)?;
                }
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                runtime.block_on(async move {
                    drive(
                        addr,
                        &request,
                        connections,
                        Duration::from_secs(1),
                        u64::MAX,
                    )
                    .await?;
                    let cpu_before = cpu_seconds(server_pid)?;
                    let loader_before = thread_cpu_seconds();
                    let started = Instant::now();
                    let latencies = drive(
                        addr,
                        &request,
                        connections,
                        Duration::from_secs(seconds),
                        max_requests,
                    )
                    .await?;
                    let wall = started.elapsed().as_secs_f64();
                    let cpu_used = cpu_seconds(server_pid)? - cpu_before;
                    let loader_used = thread_cpu_seconds() - loader_before;
                    let mut latencies = latencies;
                    latencies.sort_unstable();
                    let pct = |p: f64| {
                        let i = ((latencies.len() as f64 - 1.0) * p).round() as usize;
                        latencies.get(i).copied().unwrap_or_default() as f64 / 1000.0
                    };
                    Ok(Measured {
                        requests: latencies.len() as u64,
                        rps: latencies.len() as f64 / wall,
                        server_cpu: cpu_used / wall,
                        loader_cpu: loader_used / wall,
                        p50_ms: pct(0.50),
                        p99_ms: pct(0.99),
                    })
                })
            })
            .join()
            .map_err(|_| anyhow::anyhow!("the loader thread panicked"))?
    })
}

/// Runs the connections until `time` passes or `max` requests are answered; returns each
/// request's latency in microseconds. Any answer but 200 fails the run.
async fn drive(
    addr: SocketAddr,
    request: &[u8],
    connections: usize,
    time: Duration,
    max: u64,
) -> anyhow::Result<Vec<u32>> {
    let deadline = Instant::now() + time;
    let per_connection = max.div_ceil(connections as u64);
    let mut tasks = Vec::new();
    for _ in 0..connections {
        let request = request.to_vec();
        tasks.push(tokio::spawn(async move {
            let mut conn = Conn::connect(addr).await?;
            let mut latencies = Vec::new();
            while Instant::now() < deadline && (latencies.len() as u64) < per_connection {
                let sent = Instant::now();
                let (status, body) = conn.exchange(&request).await?;
                if status != 200 {
                    bail!("answered {status}: {}", String::from_utf8_lossy(&body));
                }
                latencies.push(sent.elapsed().as_micros().min(u32::MAX as u128) as u32);
            }
            anyhow::Ok(latencies)
        }));
    }
    let mut all = Vec::new();
    for task in tasks {
        all.extend(task.await??);
    }
    Ok(all)
}

/// The process's user and system CPU time so far, in seconds (all its threads).
fn cpu_seconds(pid: u32) -> anyhow::Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let (_, rest) = stat.rsplit_once(')').context("/proc/<pid>/stat")?;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the command: state is field 3, utime 14 and stime 15 (1-based, of the whole line).
    let utime: f64 = fields.get(11).context("utime")?.parse()?;
    let stime: f64 = fields.get(12).context("stime")?.parse()?;
    // SAFETY: sysconf only reads a system constant.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Ok((utime + stime) / ticks)
}

/// The calling thread's CPU time so far, in seconds.
fn thread_cpu_seconds() -> f64 {
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe {
        let mut ts: libc::timespec = std::mem::zeroed();
        libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts);
        ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
    }
}

/// The CPUs this process may run on.
fn online_cpus() -> Vec<usize> {
    // SAFETY: a zeroed cpu_set_t is valid; sched_getaffinity writes at most its size.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        if libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) != 0 {
            return vec![0];
        }
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| libc::CPU_ISSET(c, &set))
            .collect()
    }
}

fn pin_this_thread(cpu: usize) -> anyhow::Result<()> {
    // SAFETY: as above; pid 0 is the calling thread.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            bail!(
                "pinning the loader to CPU {cpu}: {}",
                std::io::Error::last_os_error()
            );
        }
    }
    Ok(())
}

fn which(program: &str) -> Option<PathBuf> {
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}
