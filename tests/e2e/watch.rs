//! Watching it, on the local control plane: a real Prometheus (Debian's, unpacked by
//! `hack/prometheus.sh`) scrapes the controller process and this process's API server every
//! second, with the chart's own alert rules (rendered by helm, their `for` shortened). The
//! test trips a breaker, spends most of a plugin's daily runs, installs a plugin admission
//! refuses and one whose registry does not answer, and sees each alert fire; then every query
//! of the chart's Grafana dashboard answers with a series.
//!
//! Not fired here: `LoopPluginsColdStartSlow` (its 10 minutes of p95 are longer than a test), and
//! `LoopPluginsUnreadableObjects` (its 5 minutes too; `unreadable::` checks the count it reads).

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use devcluster::binaries::repo_root;
use devcluster::process::{Process, ProcessSpec};
use kube::Api;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use model::names;
use model::resources::{AgentRun, AgentRunSpec, ChannelKind, Plugin};
use reqwest::StatusCode;
use serde_json::{Value, json};
use testkit::images::ImageContent;

use crate::controller_support::{
    claim_echo_tool, controller_metrics_addr, echo_plugin, echo_tool_plugin, keep_active,
    plugin_id, shared,
};
use crate::host::{Caller, Grant, caller_token, enabled, hang_three_actions, host, world};
use crate::support::{E2eTest, Ns, test};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "watch::prometheus_sees_each_alert_fire_and_every_dashboard_query_answers",
            alerts,
        )
        .timeout(Duration::from_secs(300))
        .local_only(
            "Prometheus runs on this machine and scrapes the controller process and the test's own API server",
        ),
    ]
}

/// A Prometheus process of the test, with its HTTP API.
struct Prometheus {
    _process: Process,
    url: String,
    http: reqwest::Client,
}

impl Prometheus {
    /// Starts Prometheus scraping `targets` (job name, address) every second and evaluating
    /// `rules` (a rule file's `groups`) every second; waits until it has scraped each.
    async fn start(ns: &Ns, targets: &[(&str, SocketAddr)], rules: &Value) -> anyhow::Result<Self> {
        let bin = prometheus_bin().await?;
        let dir = ns
            .cluster()
            .run_dir()
            .join(format!("prometheus-{}", ns.name()));
        std::fs::create_dir_all(&dir)?;
        // Rule and config files are YAML, and JSON is YAML.
        std::fs::write(dir.join("rules.json"), serde_json::to_vec(rules)?)?;
        let scrape: Vec<Value> = targets
            .iter()
            .map(|(job, addr)| {
                json!({"job_name": job, "static_configs": [{"targets": [addr.to_string()]}]})
            })
            .collect();
        let config = json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [dir.join("rules.json")],
            "scrape_configs": scrape,
        });
        std::fs::write(dir.join("prometheus.json"), serde_json::to_vec(&config)?)?;
        let port = devcluster::free_port()?;
        let spec = ProcessSpec::new(
            "prometheus",
            bin.join("prometheus"),
            dir.join("prometheus.log"),
        )
        .args([
            format!("--config.file={}", dir.join("prometheus.json").display()),
            format!("--storage.tsdb.path={}", dir.join("data").display()),
            format!("--web.listen-address=127.0.0.1:{port}"),
            "--log.level=warn".to_string(),
        ]);
        let process = Process::spawn(&spec).await?;
        let prometheus = Self {
            _process: process,
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::builder().no_proxy().build()?,
        };
        let until = Instant::now() + Duration::from_secs(60);
        loop {
            let up = prometheus.query("up == 1").await.unwrap_or_default();
            let jobs: BTreeSet<&str> = up
                .iter()
                .filter_map(|s| s["metric"]["job"].as_str())
                .collect();
            if targets.iter().all(|(job, _)| jobs.contains(job)) {
                return Ok(prometheus);
            }
            ensure!(
                Instant::now() < until,
                "Prometheus did not scrape {targets:?} within 60 s (up: {up:?}; log {})",
                dir.join("prometheus.log").display()
            );
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// An instant query's result: its series.
    async fn query(&self, query: &str) -> anyhow::Result<Vec<Value>> {
        let answer: Value = self
            .http
            .get(format!("{}/api/v1/query", self.url))
            .query(&[("query", query)])
            .send()
            .await?
            .json()
            .await?;
        ensure!(answer["status"] == "success", "{query}: {answer}");
        Ok(answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default())
    }

    /// The alerts firing now, with their labels.
    async fn firing(&self) -> anyhow::Result<Vec<Value>> {
        let answer: Value = self
            .http
            .get(format!("{}/api/v1/alerts", self.url))
            .send()
            .await?
            .json()
            .await?;
        Ok(answer["data"]["alerts"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|a| a["state"] == "firing")
            .map(|a| a["labels"].clone())
            .collect())
    }
}

/// The folder of Debian's prometheus and promtool (`hack/prometheus.sh`).
async fn prometheus_bin() -> anyhow::Result<PathBuf> {
    let out = tokio::process::Command::new(repo_root().join("hack/prometheus.sh"))
        .output()
        .await
        .context("running hack/prometheus.sh")?;
    ensure!(
        out.status.success(),
        "hack/prometheus.sh: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout)?;
    Ok(PathBuf::from(
        printed.lines().last().context("no folder printed")?,
    ))
}

/// The chart's PrometheusRule, rendered with `for`s a test can wait out: its `groups`.
async fn chart_rules() -> anyhow::Result<Value> {
    let docs = crate::chart::render(
        "loop-plugins",
        "loop-plugins",
        &[
            "monitoring.prometheusRule.enabled=true",
            "monitoring.prometheusRule.breakerOpenFor=2s",
            "monitoring.prometheusRule.reconcileFailuresFor=2s",
        ],
    )
    .await?;
    let rule = docs
        .into_iter()
        .find(|d| d["kind"] == "PrometheusRule")
        .context("the chart rendered no PrometheusRule")?;
    Ok(rule["spec"].clone())
}

/// The chart's dashboard's queries.
fn dashboard_queries() -> anyhow::Result<Vec<String>> {
    let path = repo_root().join("charts/loop-plugins/files/dashboard.json");
    let board: Value = serde_json::from_slice(&std::fs::read(&path)?)?;
    Ok(board["panels"]
        .as_array()
        .context("panels")?
        .iter()
        .flat_map(|p| p["targets"].as_array().cloned().unwrap_or_default())
        .filter_map(|t| t["expr"].as_str().map(String::from))
        .collect())
}

/// An agent run of `plugin` in `chat`, labelled as the API server makes them (the quota
/// counts the labelled AgentRuns of the last 24 hours, however made).
fn run_of(plugin: &str, chat: &str, n: usize) -> AgentRun {
    let mut run = AgentRun::new(
        &format!("{plugin}-quota-{n}"),
        AgentRunSpec {
            plugin: plugin.into(),
            channel: chat.into(),
            thread: format!("plugin:{plugin}"),
            agent: "helper".into(),
            read_only: true,
            tools: vec![],
            prompt: "count me".into(),
        },
    );
    let mut labels = names::labels(plugin, "proj", chat, "run");
    labels.insert(
        names::LABEL_INSTANCE.into(),
        names::instance_name(plugin, chat),
    );
    run.metadata.labels = Some(labels);
    run
}

async fn alerts(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let _echo = claim_echo_tool(&ns).await?;
    let host = host(&ns).await?;
    let (api_addr, _serving) = host
        .serve_metrics()
        .await?
        .context("the host API runs in this process")?;
    let prometheus = Prometheus::start(
        &ns,
        &[("controller", controller_metrics_addr()), ("api", api_addr)],
        &chart_rules().await?,
    )
    .await?;

    // A breaker: the echo plugin hangs its next 3 actions past the 10 s limit. The first call
    // finds the container stopped, so it is a cold start too.
    let id = plugin_id(&ns, "wb");
    world(
        &ns,
        &[(echo_tool_plugin(&id)?, enabled())],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    let instance = names::instance_name(&id, "general");
    let _active = keep_active(&ns, &instance);
    let caller = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "app", Grant::All).await?),
    );
    for a in hang_three_actions(&caller, &id).await? {
        ensure!(a.status == StatusCode::GATEWAY_TIMEOUT, "{a:?}");
    }

    // Most of the plugin's daily runs, as many as the alert's 90 % of plugins.daily_runs.
    let limit = prometheus
        .query("max(loop_plugins_api_daily_runs_limit)")
        .await?
        .first()
        .and_then(|s| s["value"][1].as_str()?.parse::<f64>().ok())
        .context("loop_plugins_api_daily_runs_limit")?;
    let runs = ns.api::<AgentRun>();
    for n in 0..(limit * 0.9).ceil() as usize {
        runs.create(&PostParams::default(), &run_of(&id, "general", n))
            .await?;
    }

    // A plugin admission refuses (its image lacks the dev.loop.plugin label), and one whose
    // registry does not answer (admission waits on it: the plugin reconciler fails and
    // retries).
    let plugins: Api<Plugin> = Api::all(ns.client());
    let apply = PatchParams::apply("e2e").force();
    let refused_id = plugin_id(&ns, "wr");
    let mut refused = echo_plugin(&refused_id)?;
    let mut content = ImageContent::for_plugin(&refused);
    content.label = false;
    refused.spec.image = ns
        .cluster()
        .plugin_images()
        .push(&refused_id, &content)
        .await?;
    plugins
        .patch(&refused_id, &apply, &Patch::Apply(&refused))
        .await?;
    let unreachable_id = plugin_id(&ns, "wu");
    let mut unreachable = echo_plugin(&unreachable_id)?;
    unreachable.spec.image = format!("127.0.0.1:9/e2e/echo@sha256:{}", "0".repeat(64));
    plugins
        .patch(&unreachable_id, &apply, &Patch::Apply(&unreachable))
        .await?;

    // Each alert fires, about what the test did.
    let wanted: [(&str, Vec<(&str, &str)>); 4] = [
        (
            "LoopPluginsBreakerOpen",
            vec![
                ("instance_namespace", ns.name()),
                ("plugin_instance", &instance),
            ],
        ),
        ("LoopPluginsDailyRunsNearlySpent", vec![("plugin", &id)]),
        ("LoopPluginsAdmissionRefused", vec![("stage", "Image")]),
        (
            "LoopPluginsReconcileFailures",
            vec![("controller", "plugin"), ("category", "registry")],
        ),
    ];
    let until = Instant::now() + Duration::from_secs(90);
    loop {
        let firing = prometheus.firing().await?;
        let missing: Vec<&str> = wanted
            .iter()
            .filter(|(name, labels)| {
                !firing
                    .iter()
                    .any(|l| l["alertname"] == *name && labels.iter().all(|(k, v)| l[*k] == *v))
            })
            .map(|(name, _)| *name)
            .collect();
        if missing.is_empty() {
            break;
        }
        if Instant::now() > until {
            bail!("not firing within 90 s: {missing:?}; firing: {firing:?}");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }

    // Every panel of the dashboard has something to draw.
    let mut empty = Vec::new();
    for query in dashboard_queries()? {
        if prometheus.query(&query).await?.is_empty() {
            empty.push(query);
        }
    }
    ensure!(
        empty.is_empty(),
        "dashboard queries with no series: {empty:#?}"
    );

    // Each controller's queue is a series, and each drained at some scrape while the test
    // ran (other tests share the controller, so "empty now" is not promised).
    let drained = prometheus
        .query("min_over_time(loop_plugins_controller_queue_depth[5m]) == 0")
        .await?;
    let controllers: BTreeSet<&str> = drained
        .iter()
        .filter_map(|s| s["metric"]["controller"].as_str())
        .collect();
    ensure!(
        controllers == BTreeSet::from(controller::metrics::CONTROLLERS),
        "queues seen empty: {controllers:?}; {drained:?}"
    );

    for name in [&refused_id, &unreachable_id] {
        plugins.delete(name, &DeleteParams::default()).await?;
    }
    Ok(())
}
