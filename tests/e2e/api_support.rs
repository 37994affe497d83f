//! What the Plugin API's e2e tests share: `loop-plugins api` as a process of the test (as the
//! chart's ServiceAccount under the chart's RBAC, on a free loopback port, with a folder of
//! working trees of its own) or, on an existing cluster, the chart's API Service, a small
//! HTTP/1.1 client, the world a test calls it in (plugins
//! of the test's own, a trusted project enabling them, chats with working trees) and the
//! tokens the controller issues.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use devcluster::process::{Process, ProcessSpec, tail};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use kube::api::PostParams;
use kube::{Api, ResourceExt};
use model::config::PluginConfig;
use model::names;
use model::resources::{App, Channel, ChannelKind, ChannelSpec, Plugin, WorkingTree};
use serde_json::{Value, json};
use server::plugin_api::PREFIX;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::OnceCell;

use crate::controller_support::{
    CONTROLLER_ACCOUNT, CONTROLLER_NAMESPACE, WAIT, apply, apply_trusted, install, plugin_id,
    rename_tools, setup, unpublished,
};
use crate::support::{Ns, wait};

/// The project every API test's chats belong to.
pub const PROJECT: &str = "proj";
/// The claim holding the chats' working trees.
pub const TREE_CLAIM: &str = "repo";
/// The manifest that uses every field (the `cogtest` plugin), with every capability.
const FULL: &str = include_str!("../../examples/manifests/full.json");

/// A Plugin of the test's own with the full manifest under id `id`: every capability is
/// declared; `approved` are those the owner approved (all of them when None). Its tools are
/// `ask-<id>` and `score-<id>` ([`tool`]): tool names are registered across admitted plugins,
/// one plugin holding each, and the suite installs many of these.
pub fn full_plugin(id: &str, approved: Option<&[&str]>) -> anyhow::Result<Plugin> {
    let text = FULL.replacen("\"id\": \"cogtest\"", &format!("\"id\": \"{id}\""), 1);
    let mut plugin = Plugin::from_manifest(&text, &unpublished(id), vec![], true)?;
    rename_tools(&mut plugin, |t| tool(t, id));
    if let Some(approved) = approved {
        plugin.spec.approved_capabilities = approved.iter().map(|c| c.to_string()).collect();
    }
    Ok(plugin)
}

/// The name of the full plugin's tool `base` under plugin `id`.
pub fn tool(base: &str, id: &str) -> String {
    format!("{base}-{id}")
}

/// The project's entry for the full plugin: enabled (or not), with two settings of its own,
/// one of which (`language: xx`) the manifest's schema refuses.
pub fn full_entry(enabled: bool) -> PluginConfig {
    PluginConfig {
        enabled: Some(enabled),
        settings: BTreeMap::from([
            ("question_count".to_string(), json!(8)),
            ("language".to_string(), json!("xx")),
        ]),
        schedules: BTreeMap::new(),
        secret_settings: BTreeMap::new(),
        risk_profile: None,
    }
}

/// The settings `GET /channel` resolves for [`full_entry`]: the project's valid value, the
/// manifest's defaults for the rest.
pub fn full_settings() -> Value {
    json!({
        "question_count": 8,
        "pass_mark": 0.7,
        "sync_all": false,
        "language": "en",
        "topics": ["rust"],
        "weights": { "easy": 1 },
    })
}

/// A chat of [`PROJECT`] whose working tree is `<TREE_CLAIM>/<name>` (a thread uses its
/// channel's).
pub fn chat(name: &str, kind: ChannelKind, parent: Option<&str>) -> Channel {
    let working_tree = match kind {
        ChannelKind::Thread => None,
        _ => Some(WorkingTree {
            claim_name: TREE_CLAIM.into(),
            sub_path: Some(name.into()),
        }),
    };
    Channel::new(
        name,
        ChannelSpec {
            project: PROJECT.into(),
            kind,
            parent: parent.map(Into::into),
            app: App::Desktop,
            hidden: false,
            working_tree,
        },
    )
}

/// What a test calls the API in: its plugins and each (plugin, chat)'s token.
pub struct World {
    /// The first plugin's id.
    pub plugin: String,
    pub tokens: BTreeMap<(String, String), String>,
}

impl World {
    /// The first plugin's token in `chat`.
    pub fn token(&self, chat: &str) -> &str {
        self.token_of(&self.plugin, chat)
    }

    pub fn token_of(&self, plugin: &str, chat: &str) -> &str {
        &self.tokens[&(plugin.to_string(), chat.to_string())]
    }
}

/// Sets up the controller, installs `plugins`, a trusted project enabling them ([`full_entry`])
/// and the chats, and waits for each (plugin, chat)'s token.
pub async fn world(ns: &Ns, plugins: &[Plugin], chats: &[Channel]) -> anyhow::Result<World> {
    setup(ns).await?;
    tree_claim(ns).await?;
    for plugin in plugins {
        install(ns, plugin).await?;
    }
    let ids: Vec<String> = plugins.iter().map(|p| p.name_any()).collect();
    let entries = ids
        .iter()
        .map(|id| (id.clone(), full_entry(true)))
        .collect();
    apply_trusted(ns, PROJECT, entries).await?;
    for chat in chats {
        apply(ns, chat).await?;
    }
    let mut tokens = BTreeMap::new();
    for id in &ids {
        for chat in chats {
            let name = chat.name_any();
            tokens.insert((id.clone(), name.clone()), token_of(ns, id, &name).await?);
        }
    }
    Ok(World {
        plugin: ids.first().cloned().unwrap_or_default(),
        tokens,
    })
}

/// The full plugin, every capability approved, in `chats`.
pub async fn full_world(ns: &Ns, suffix: &str, chats: &[Channel]) -> anyhow::Result<World> {
    let id = plugin_id(ns, suffix);
    world(ns, &[full_plugin(&id, None)?], chats).await
}

/// The claim the chats' working trees are on, so their Pods can start.
async fn tree_claim(ns: &Ns) -> anyhow::Result<()> {
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": { "name": TREE_CLAIM },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": { "requests": { "storage": "1Gi" } },
        },
    }))?;
    apply(ns, &claim).await?;
    Ok(())
}

/// The token of the instance of `plugin` in `chat`, once the controller made its Secret.
pub async fn token_of(ns: &Ns, plugin: &str, chat: &str) -> anyhow::Result<String> {
    let secret = names::secret_name(&names::instance_name(plugin, chat));
    let found: Secret = wait::exists(&ns.api::<Secret>(), &secret, WAIT).await?;
    let token = found
        .data
        .as_ref()
        .and_then(|d| d.get("token"))
        .with_context(|| format!("Secret {secret} has no token"))?;
    Ok(String::from_utf8(token.0.clone())?.trim().to_string())
}

/// The API server's kubeconfig, made once per run.
static KUBECONFIG: OnceCell<PathBuf> = OnceCell::const_new();

/// A kubeconfig for the ServiceAccount the API server runs as: the chart's, with the chart's
/// RBAC (its `-api` ClusterRole), as the sidecar beside the controller does, so a permission
/// the chart lacks fails a test.
async fn api_kubeconfig(ns: &Ns) -> anyhow::Result<PathBuf> {
    KUBECONFIG
        .get_or_try_init(|| make_api_kubeconfig(ns))
        .await
        .cloned()
}

async fn make_api_kubeconfig(ns: &Ns) -> anyhow::Result<PathBuf> {
    use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
    use k8s_openapi::api::core::v1::ServiceAccount;

    // The controller's setup applies the chart's ServiceAccount and RBAC.
    setup(ns).await?;
    let accounts: Api<ServiceAccount> = Api::namespaced(ns.client(), CONTROLLER_NAMESPACE);
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(24 * 3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    let token = accounts
        .create_token_request(CONTROLLER_ACCOUNT, &PostParams::default(), &request)
        .await?
        .status
        .and_then(|s| s.token)
        .context("the TokenRequest has no token")?;
    let dev = ns.cluster().dev()?;
    let path = dev.run_dir().join("api.kubeconfig");
    let plane = dev.control_plane();
    devcluster::kubeconfig::write(
        &path,
        plane.server(),
        plane.ca_pem(),
        CONTROLLER_ACCOUNT,
        &token,
    )?;
    Ok(path)
}

/// The Plugin API a test calls: `loop-plugins api` started by the test (killed when dropped),
/// or the chart's API Service on an existing cluster.
pub struct ApiServer {
    addr: SocketAddr,
    /// The test's own process, on the local control plane.
    local: Option<LocalApi>,
}

/// The API server process of a test, its metrics and its working trees.
struct LocalApi {
    process: Process,
    metrics: SocketAddr,
    worktrees: PathBuf,
}

/// A port nothing listens on right now (another process may take it before the server does;
/// [`ApiServer::start`] retries then).
fn free_port() -> anyhow::Result<u16> {
    Ok(devcluster::free_port()?)
}

/// The namespace the API replicas keep their shared records in (their `POD_NAMESPACE`): the
/// chart's release namespace.
pub fn replicas_namespace(ns: &Ns) -> String {
    match ns.cluster().existing() {
        Some(existing) => existing.namespace.clone(),
        None => CONTROLLER_NAMESPACE.to_string(),
    }
}

impl ApiServer {
    /// Starts the API server for the test's namespace and waits until it answers (its caches
    /// are full by then). Its log is `api-<namespace>.log` in the run's folder; the working
    /// trees are `api-<namespace>/worktrees/<namespace>/<claim>/<subPath>` there.
    pub async fn start(ns: &Ns) -> anyhow::Result<Self> {
        Self::start_with(ns, &[]).await
    }

    /// [`ApiServer::start`], its process given `env` too (on an existing cluster, the
    /// chart's API, without it).
    pub async fn start_with(ns: &Ns, env: &[(&str, String)]) -> anyhow::Result<Self> {
        if let Some(existing) = ns.cluster().existing() {
            return Self::in_cluster(ns, existing.api_addr).await;
        }
        let kubeconfig = api_kubeconfig(ns).await?;
        let dev = ns.cluster().dev()?;
        let worktrees = dev
            .run_dir()
            .join(format!("api-{}", ns.name()))
            .join("worktrees");
        std::fs::create_dir_all(&worktrees)?;
        let log = dev.run_dir().join(format!("api-{}.log", ns.name()));
        let mut last_error = None;
        for _ in 0..3 {
            let port = free_port()?;
            let metrics = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()?));
            let mut spec = ProcessSpec::new("api", testkit::binary(), &log);
            spec.append_log = true;
            spec.env
                .push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
            // As in the chart: the release namespace, where the replicas keep their shared records.
            spec.env
                .push(("POD_NAMESPACE".into(), CONTROLLER_NAMESPACE.into()));
            spec.env.push((
                "RUST_LOG".into(),
                "info,kube=warn,loop_plugins_controller=debug,loop_plugins_server=debug,loop_plugins_runtime=debug".into(),
            ));
            for (name, value) in env {
                spec.env.push((name.to_string(), value.clone()));
            }
            let spec = spec.args([
                "api".to_string(),
                format!("--listen=127.0.0.1:{port}"),
                format!("--metrics-addr={metrics}"),
                format!("--worktree-root={}", worktrees.display()),
                format!("--leader-election-namespace={CONTROLLER_NAMESPACE}"),
                format!(
                    "--fanout-lease-name={}",
                    crate::controller_support::FANOUT_LEASE
                ),
                format!("--leader-identity=e2e-api-{}-{port}", ns.name()),
            ]);
            let process = Process::spawn(&spec).await?;
            let mut server = Self {
                addr: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
                local: Some(LocalApi {
                    process,
                    metrics,
                    worktrees: worktrees.clone(),
                }),
            };
            match server.wait_ready(Duration::from_secs(60)).await {
                Ok(()) => return Ok(server),
                Err(e) => last_error = Some(e),
            }
        }
        Err(last_error.expect("tried at least once"))
    }

    /// The chart's API on an existing cluster, once the controller leads and it answers.
    async fn in_cluster(ns: &Ns, addr: SocketAddr) -> anyhow::Result<Self> {
        setup(ns).await?;
        let mut server = Self { addr, local: None };
        server.wait_ready(Duration::from_secs(120)).await?;
        Ok(server)
    }

    /// Waits until `/healthz` answers 200, failing early when the process exits.
    async fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        let last_lines = |local: &LocalApi| {
            format!(
                "last lines of {}:\n{}",
                local.process.log().display(),
                tail(local.process.log(), 20)
            )
        };
        loop {
            if let Some(local) = &mut self.local
                && let Some(status) = local.process.try_wait()
            {
                bail!("the API server exited with {status}; {}", last_lines(local));
            }
            if let Ok(answer) = request(self.addr, "GET", "/healthz", &[], None).await
                && answer.status == 200
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                let more = self.local.as_ref().map(last_lines).unwrap_or_default();
                bail!(
                    "the API server at {} did not answer /healthz within {timeout:?}; {more}",
                    self.addr
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// The test's own API server process: what only it has (working trees on this machine,
    /// metrics, a log file).
    fn local(&self) -> anyhow::Result<&LocalApi> {
        self.local.as_ref().context(
            "the chart's API on an existing cluster has no working trees, metrics or log on \
             this machine (mark the test local_only)",
        )
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL of the Plugin API: `http://127.0.0.1:<port>/api/plugin/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}{PREFIX}", self.addr)
    }

    /// The folder of a chat's working tree on claim [`TREE_CLAIM`], made if missing.
    pub fn tree(&self, ns: &Ns, sub_path: &str) -> anyhow::Result<PathBuf> {
        let dir = self
            .local()?
            .worktrees
            .join(ns.name())
            .join(TREE_CLAIM)
            .join(sub_path);
        std::fs::create_dir_all(&dir)?;
        Ok(dir)
    }

    /// Requests served so far by status, from the server's own metrics.
    pub async fn requests_by_status(&self) -> anyhow::Result<BTreeMap<u16, u64>> {
        let answer = request(self.local()?.metrics, "GET", "/metrics", &[], None).await?;
        answer.expect(200, None)?;
        let text = String::from_utf8(answer.body)?;
        let mut by_status = BTreeMap::new();
        for line in text.lines() {
            if !line.starts_with("loop_plugins_api_requests_total{") {
                continue;
            }
            let status = line
                .split("status=\"")
                .nth(1)
                .and_then(|r| r.split('"').next())
                .and_then(|s| s.parse::<u16>().ok());
            let count = line.rsplit(' ').next().and_then(|c| c.parse::<f64>().ok());
            if let (Some(status), Some(count)) = (status, count) {
                *by_status.entry(status).or_default() += count as u64;
            }
        }
        Ok(by_status)
    }

    pub fn log(&self) -> anyhow::Result<&Path> {
        Ok(self.local()?.process.log())
    }

    /// Calls `method PREFIX<path>` with the token (if any) and a JSON body (if any).
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> anyhow::Result<Answer> {
        let mut headers = Vec::new();
        if let Some(token) = token {
            headers.push(("Authorization".to_string(), format!("Bearer {token}")));
        }
        let body = body.map(|b| b.to_string().into_bytes());
        if body.is_some() {
            headers.push(("Content-Type".to_string(), "application/json".to_string()));
        }
        let target = format!("{PREFIX}{path}");
        request(self.addr, method, &target, &headers, body.as_deref())
            .await
            .with_context(|| format!("{method} {target}"))
    }

    /// Repeats a call until it answers `status` (the server's caches follow the cluster
    /// through watches); returns that answer, or fails with the last one.
    pub async fn until(
        &self,
        status: u16,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> anyhow::Result<Answer> {
        self.until_saying(status, "", method, path, token, body)
            .await
    }

    /// Repeats a call until it answers `status` with `says` in its body: with several
    /// replicas, each follows the cluster through its own watches, so one may still answer
    /// what the other no longer does. Returns that answer, or fails with the last one.
    pub async fn until_saying(
        &self,
        status: u16,
        says: &str,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<&Value>,
    ) -> anyhow::Result<Answer> {
        let deadline = Instant::now() + WAIT;
        loop {
            let answer = self.call(method, path, token, body).await?;
            if answer.status == status && answer.to_string().contains(says) {
                return Ok(answer);
            }
            if Instant::now() > deadline {
                bail!(
                    "{method} {path} answered {answer} after {WAIT:?}, not {status} saying {says:?}"
                );
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// An HTTP answer.
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Answer {
    /// The first header named `name` (any case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> anyhow::Result<Value> {
        serde_json::from_slice(&self.body).with_context(|| format!("the body of {self}"))
    }

    /// The error code of an error answer.
    pub fn code(&self) -> Option<String> {
        let body: Value = serde_json::from_slice(&self.body).ok()?;
        body["error"]["code"].as_str().map(Into::into)
    }

    /// Fails unless the answer has `status` and, for an error, the error `code`.
    pub fn expect(&self, status: u16, code: Option<&str>) -> anyhow::Result<&Self> {
        if self.status != status || (code.is_some() && self.code().as_deref() != code) {
            bail!(
                "expected {status}{}, got {self}",
                code.map(|c| format!(" {c}")).unwrap_or_default()
            );
        }
        Ok(self)
    }
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let body = String::from_utf8_lossy(&self.body);
        let body: String = body.chars().take(600).collect();
        write!(f, "{} {body}", self.status)
    }
}

/// One HTTP/1.1 request on a fresh connection (`Connection: close`), with a 30 s limit.
pub async fn request(
    addr: SocketAddr,
    method: &str,
    target: &str,
    headers: &[(String, String)],
    body: Option<&[u8]>,
) -> anyhow::Result<Answer> {
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        let mut head =
            format!("{method} {target} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
        for (k, v) in headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        if let Some(body) = body {
            head.push_str(&format!("Content-Length: {}\r\n", body.len()));
        }
        head.push_str("\r\n");
        let mut bytes = head.into_bytes();
        bytes.extend_from_slice(body.unwrap_or_default());
        stream.write_all(&bytes).await?;
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).await?;
        parse_answer(&raw)
    };
    tokio::time::timeout(Duration::from_secs(30), exchange)
        .await
        .context("no answer within 30 s")?
}

fn parse_answer(raw: &[u8]) -> anyhow::Result<Answer> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .context("the answer has no end of headers")?;
    let head = std::str::from_utf8(&raw[..end])?;
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .with_context(|| format!("status line {status_line:?}"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    let rest = &raw[end + 4..];
    let chunked = headers.iter().any(|(k, v)| {
        k.eq_ignore_ascii_case("transfer-encoding") && v.eq_ignore_ascii_case("chunked")
    });
    let body = if chunked {
        dechunk(rest)?
    } else {
        rest.to_vec()
    };
    Ok(Answer {
        status,
        headers,
        body,
    })
}

fn dechunk(mut rest: &[u8]) -> anyhow::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let line_end = rest
            .windows(2)
            .position(|w| w == b"\r\n")
            .context("a chunk size without its line end")?;
        let size = std::str::from_utf8(&rest[..line_end])?;
        let size = size.split(';').next().unwrap_or_default().trim();
        let size =
            usize::from_str_radix(size, 16).with_context(|| format!("chunk size {size:?}"))?;
        rest = &rest[line_end + 2..];
        if size == 0 {
            return Ok(body);
        }
        anyhow::ensure!(rest.len() >= size + 2, "a chunk cut short");
        body.extend_from_slice(&rest[..size]);
        rest = &rest[size + 2..];
    }
}
