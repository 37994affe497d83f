//! `loop-plugins api`: the server. One index of the cluster, one router serving the Plugin API
//! and the host API behind one stack of layers, one metrics registry, and the fan-out, which
//! only the holder of the fan-out Lease runs. Stops on SIGTERM or Ctrl-C, finishing the
//! requests in flight.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;

use kube::Client;
use prometheus_client::registry::Registry;
use tokio::sync::watch;

use crate::calls::{CallSettings, Calls};
use crate::cards::marks::KubeMarkWriter;
use crate::fanout::runs_done::KubeDoneRecorder;
use crate::host_api::HostState;
use crate::host_api::auth::KubeReviewer;
use crate::host_api::state::REVIEW_TTL;
use crate::http::RequestMetrics;
use crate::index::{Index, Roles};
use crate::plugin_api::files::MAX_FILE_BYTES;
use crate::plugin_api::state::{MAX_BODY_BYTES, REQUEST_TIMEOUT};
use crate::plugin_api::{ApiConfig, PluginApiState, shared_runs};
use crate::status::KubeStatusWriter;
use crate::ui::cache::BundleCache;
use crate::ui::key_store::KeyStore;
use crate::ui::route::UiState;
use crate::ui::source::RegistrySource;
use runtime::pod_env::{LEADER_ELECTION_NAMESPACE, POD_NAMESPACE};
use runtime::shutdown;

/// The fan-out's Lease unless told otherwise (the chart passes `<release>-api`).
pub const DEFAULT_FANOUT_LEASE: &str = "loop-plugins-api";

/// Flags of `loop-plugins api`.
#[derive(clap::Args, Debug)]
pub struct ApiArgs {
    /// Where plugin pods (LOOP_API_URL) and callers of the host API reach the server.
    #[arg(long, env = "LOOP_PLUGINS_API_ADDR", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// Where /metrics and /healthz answer.
    #[arg(
        long,
        env = "LOOP_PLUGINS_API_METRICS_ADDR",
        default_value = "0.0.0.0:9091"
    )]
    pub metrics_addr: SocketAddr,
    /// The folder holding each chat's working tree as DIR/<namespace>/<claimName>/<subPath>;
    /// without it, GET /files answers 404 no_working_tree.
    #[arg(long, env = "LOOP_PLUGINS_WORKTREE_ROOT")]
    pub worktree_root: Option<PathBuf>,
    /// Where the replicas count each plugin's runs together (the chart: the release's
    /// namespace), so `plugins.daily_runs` holds across them. Without it, each server counts
    /// alone, which is exact for one replica.
    #[arg(long, env = POD_NAMESPACE)]
    pub replicas_namespace: Option<String>,
    /// Elect the replica that does the fan-out (settings.changed, /runs/{id}/done, ...) on a
    /// Lease in this namespace; without it, this server does it.
    #[arg(long, env = LEADER_ELECTION_NAMESPACE)]
    pub leader_election_namespace: Option<String>,
    /// The fan-out Lease's name.
    #[arg(long, env = "LOOP_PLUGINS_FANOUT_LEASE_NAME", default_value = DEFAULT_FANOUT_LEASE)]
    pub fanout_lease_name: String,
    /// Our holderIdentity; default: $POD_NAME, else the hostname.
    #[arg(long)]
    pub leader_identity: Option<String>,
    /// The Secret (in the replicas' namespace) holding the keys that sign the UI's links; the
    /// API server makes and rotates it.
    #[arg(
        long,
        env = "LOOP_PLUGINS_UI_LINKS_SECRET",
        default_value = crate::ui::key_store::DEFAULT_SECRET
    )]
    pub ui_links_secret: String,
}

/// Runs the server with the cluster's default client (a person's writes go to the same
/// cluster, with their token).
pub async fn serve(args: ApiArgs) -> anyhow::Result<()> {
    let config = kube::Config::infer().await?;
    let client = Client::try_from(config.clone())?;
    let mut options = Options::from_args(&args);
    options.person = Some(config);
    run_with(client, args, options).await
}

/// How a server is set up.
#[derive(Clone, Debug)]
pub struct Options {
    pub api: ApiConfig,
    pub calls: CallSettings,
    pub review_ttl: Duration,
    /// The fan-out Lease (namespace, name, our identity); None: this server does it alone.
    pub lease: Option<(String, String, String)>,
    pub ui: UiOptions,
    /// How to reach the cluster as a person, with their token instead of the server's own
    /// credentials (Settings → Plugins, trust); None: the server makes no such writes.
    pub person: Option<kube::Config>,
}

/// How the UI's bundles are served.
#[derive(Clone, Debug)]
pub struct UiOptions {
    /// The link keys' Secret, in the replicas' namespace (else the client's).
    pub links_secret: String,
    /// Bytes of bundles kept.
    pub cache_bytes: u64,
}

impl Default for UiOptions {
    fn default() -> Self {
        Self {
            links_secret: crate::ui::key_store::DEFAULT_SECRET.to_string(),
            cache_bytes: crate::ui::cache::DEFAULT_CACHE_BYTES,
        }
    }
}

impl Options {
    /// From the flags of `loop-plugins api`.
    pub fn from_args(args: &ApiArgs) -> Self {
        let lease = args
            .leader_election_namespace
            .clone()
            .filter(|n| !n.is_empty())
            .map(|ns| {
                let identity = args
                    .leader_identity
                    .clone()
                    .unwrap_or_else(runtime::leader::default_identity);
                (ns, args.fanout_lease_name.clone(), identity)
            });
        Self {
            api: ApiConfig {
                worktree_root: args.worktree_root.clone(),
                replicas_namespace: args.replicas_namespace.clone().filter(|n| !n.is_empty()),
                max_file_bytes: MAX_FILE_BYTES,
                max_body_bytes: MAX_BODY_BYTES,
                request_timeout: REQUEST_TIMEOUT,
            },
            calls: CallSettings::default(),
            review_ttl: REVIEW_TTL,
            lease,
            person: None,
            ui: UiOptions {
                links_secret: args.ui_links_secret.clone(),
                ..UiOptions::default()
            },
        }
    }
}

/// A started server: its router (both APIs, every layer) and metrics registry, its index's
/// watches and its fan-out, which stop with it.
/// Every metric the API server exports, registered in one place: the chart's alerts and
/// dashboard may name only these (tests/chart.rs checks).
pub struct ServerMetrics {
    pub requests: Arc<RequestMetrics>,
    pub calls: Arc<crate::calls::metrics::CallMetrics>,
    pub host: Arc<crate::host_api::metrics::HostMetrics>,
    pub api: Arc<crate::plugin_api::metrics::Metrics>,
    pub approvals: Arc<crate::tool_calls::approval::ApprovalMetrics>,
}

impl ServerMetrics {
    /// Registers them all in `registry`, the index's gauges reporting what `gauges` answers.
    pub fn register(registry: &mut Registry, gauges: crate::gauges::Source) -> Self {
        let metrics = Self {
            requests: Arc::new(RequestMetrics::new(registry)),
            calls: Calls::register_metrics(registry),
            host: HostState::register_metrics(registry),
            api: Arc::new(crate::plugin_api::metrics::Metrics::new(registry)),
            approvals: Arc::new(crate::tool_calls::approval::ApprovalMetrics::new(registry)),
        };
        crate::gauges::IndexGauges::register_source(registry, gauges);
        metrics
    }
}

pub struct Server {
    pub router: Router,
    pub registry: Arc<Registry>,
    /// The stores its answers read (tests wait on what a replica's stores hold).
    pub index: Arc<Index>,
    stop: watch::Sender<bool>,
    fanout: Option<tokio::task::JoinHandle<()>>,
}

impl Server {
    /// Starts the index (resolving once its caches are full) and the fan-out.
    pub async fn start(client: Client, options: Options) -> anyhow::Result<Self> {
        let (stop, stopped) = watch::channel(false);
        let started = Index::start(client.clone(), &Roles::api(), stopped.clone()).await?;
        let index = started.index;

        let mut registry = Registry::default();
        let gauges_of = index.clone();
        let ServerMetrics {
            requests,
            calls: call_metrics,
            host: host_metrics,
            api: api_metrics,
            approvals: approval_metrics,
        } = ServerMetrics::register(
            &mut registry,
            Box::new(move || crate::gauges::Snapshot::of(&gauges_of)),
        );

        let status = Arc::new(KubeStatusWriter::new(client.clone()));
        let calls = Calls::new(options.calls, index.clone(), status.clone(), call_metrics);
        let mut host = HostState::new(
            calls.clone(),
            status.clone(),
            Arc::new(KubeMarkWriter::new(client.clone())),
            Arc::new(KubeReviewer::new(client.clone())),
            options.review_ttl,
            host_metrics,
            crate::tool_calls::approval::ApprovalDesk::new(
                index.clone(),
                Arc::new(crate::tool_calls::approval::KubeApprovals::new(
                    client.clone(),
                )),
                approval_metrics,
            ),
        );
        let replicas_namespace = options.api.replicas_namespace.clone();
        let ui = start_ui(
            &client,
            index.clone(),
            replicas_namespace.as_deref(),
            &options.ui,
            stopped.clone(),
        );
        host.links = ui.keys.clone();
        let live = Arc::new(crate::live::Live::in_cluster(
            client.clone(),
            index.clone(),
            stopped.clone(),
        ));
        host.live = Some(live.clone());
        let ui_commands = Arc::new(crate::ui_commands::UiCommands::in_cluster(
            client.clone(),
            index.clone(),
            stopped.clone(),
        ));
        host.ui_commands = Some(ui_commands.clone());
        host.tasks = Some(Arc::new(client.clone()));
        host.images = Some(Arc::new(RegistrySource::new(
            client.clone(),
            replicas_namespace
                .as_deref()
                .unwrap_or(client.default_namespace()),
        )));
        host.person = options.person.clone().map(|config| {
            Arc::new(crate::person::KubePerson::new(config)) as crate::person::SharedPerson
        });
        let transcripts: Arc<dyn crate::transcript::store::TranscriptStore> = Arc::new(
            crate::transcript::store::KubeTranscripts::new(client.clone()),
        );
        host.transcripts = Some(transcripts.clone());
        let secrets = crate::plugin_api::secrets::SecretSettings {
            reader: Arc::new(crate::plugin_api::secrets::KubeSecretReader::new(
                client.clone(),
            )),
            // As the UI's keys: the release namespace, else the client's own.
            release_namespace: replicas_namespace
                .clone()
                .unwrap_or_else(|| client.default_namespace().to_string()),
        };
        let mut app = PluginApiState::new(
            options.api,
            calls,
            Arc::new(crate::plugin_api::writes::KubeWriter::new(client.clone())),
            secrets,
            status,
            Arc::new(crate::clock::SystemClock),
            live.clone(),
            api_metrics,
        );
        app.ui_commands = Some(ui_commands);
        // One store of the chats' quality scans: what the host API stores, the Plugin API on
        // this replica reads at once.
        let quality = Arc::new(crate::quality::Quality::in_cluster(
            client.clone(),
            index.clone(),
        ));
        host.quality = quality.clone();
        app.quality = quality;
        match &replicas_namespace {
            Some(namespace) => {
                tracing::info!(%namespace, "replicas count plugins.daily_runs together");
                let replica = options
                    .lease
                    .as_ref()
                    .map(|(_, _, identity)| identity.clone())
                    .unwrap_or_else(runtime::leader::default_identity);
                app.shared_runs = Some(shared_runs::SharedRuns::new(
                    client.clone(),
                    namespace,
                    &replica,
                ));
            }
            None => tracing::warn!(
                "no --replicas-namespace (POD_NAMESPACE): this server counts plugins.daily_runs \
                 alone, exact only while it is the one replica"
            ),
        }

        if options.lease.is_none() {
            tracing::warn!("no --leader-election-namespace: this server does the fan-out alone");
        }
        let mark = options.lease.as_ref().map(|(ns, name, _)| {
            crate::fanout::sent_mark::SentRecord::new(client.clone(), ns, name)
        });
        let leading = runtime::leader::leading(client.clone(), options.lease, stopped.clone());
        let fanout = tokio::spawn(crate::fanout::run(
            crate::fanout::Duties {
                calls: host.calls.clone(),
                status: host.status.clone(),
                done: Arc::new(KubeDoneRecorder::new(client.clone())),
                desk: host.tools.desk().clone(),
                drawer: host.marks.clone(),
            },
            started.config_writes,
            leading,
            mark,
            stopped,
        ));
        let router = crate::http::stack(
            crate::plugin_api::router(Arc::new(app))
                .merge(crate::host_api::router(host.clone()))
                .merge(crate::mcp::router(crate::mcp::McpState {
                    tools: host.tools.clone(),
                    ledger: Arc::new(crate::mcp::record::ToolCallLog::new(Box::new(
                        crate::mcp::record::KubeRecorder::new(client),
                    ))),
                    transcripts,
                }))
                .merge(crate::ui::route::router(ui))
                .merge(crate::console::router()),
            requests,
        );
        Ok(Self {
            router,
            registry: Arc::new(registry),
            index,
            stop,
            fanout: Some(fanout),
        })
    }

    /// Stops the watches and the fan-out (releasing the fan-out Lease).
    pub async fn stop(mut self) {
        self.stop.send_replace(true);
        if let Some(fanout) = self.fanout.take() {
            let _ = fanout.await;
        }
    }
}

/// The UI's route state, with the task that keeps its link keys fresh and its cache pruned.
fn start_ui(
    client: &Client,
    index: Arc<Index>,
    replicas_namespace: Option<&str>,
    options: &UiOptions,
    stopped: watch::Receiver<bool>,
) -> UiState {
    let namespace = replicas_namespace.unwrap_or(client.default_namespace());
    let (keys, keys_read) = watch::channel(None);
    let state = UiState {
        index,
        keys: keys_read,
        cache: Arc::new(Mutex::new(BundleCache::new(options.cache_bytes))),
        source: Arc::new(RegistrySource::new(client.clone(), namespace)),
    };
    let store = KeyStore::new(client.clone(), namespace, &options.links_secret);
    let pruned = state.clone();
    tokio::spawn(store.run(keys, stopped, move || pruned.prune()));
    state
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.send_replace(true);
    }
}

/// Runs the server until SIGTERM or Ctrl-C.
pub async fn run(client: Client, args: ApiArgs) -> anyhow::Result<()> {
    let options = Options::from_args(&args);
    run_with(client, args, options).await
}

async fn run_with(client: Client, args: ApiArgs, options: Options) -> anyhow::Result<()> {
    let server = Server::start(client, options).await?;
    let api_listener = tokio::net::TcpListener::bind(args.listen).await?;
    tracing::info!(listen = %args.listen, metrics_addr = %args.metrics_addr, "API server serving");
    let api =
        axum::serve(api_listener, server.router.clone()).with_graceful_shutdown(shutdown::signal());
    let metrics = runtime::metrics::serve(
        args.metrics_addr,
        server.registry.clone(),
        shutdown::signal(),
    );
    let (a, m) = tokio::join!(api, metrics);
    server.stop().await;
    a?;
    m?;
    tracing::info!("API server stopped");
    Ok(())
}
