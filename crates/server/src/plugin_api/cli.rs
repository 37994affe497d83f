//! `loop-plugins api`: the Plugin API server's flags.

use std::net::SocketAddr;
use std::path::PathBuf;

use super::files::MAX_FILE_BYTES;
use super::state::{ApiConfig, MAX_BODY_BYTES, REQUEST_TIMEOUT};

/// Flags of `loop-plugins api`.
#[derive(clap::Args, Debug)]
pub struct ApiArgs {
    /// Where plugin pods reach the Plugin API (LOOP_API_URL points here).
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
    /// Where the API replicas keep the records that make them act as one (the chart: the
    /// release's namespace): each plugin's runs, so they count `plugins.daily_runs` together,
    /// and which of them sent each config write's `settings.changed`. Without it, each server
    /// counts and sends alone, which is exact for one replica.
    #[arg(long, env = "POD_NAMESPACE")]
    pub replicas_namespace: Option<String>,
}

/// Runs the server with the cluster's default client.
pub async fn serve(args: ApiArgs) -> anyhow::Result<()> {
    let client = kube::Client::try_default().await?;
    let config = ApiConfig {
        worktree_root: args.worktree_root,
        replicas_namespace: args.replicas_namespace.filter(|n| !n.is_empty()),
        max_file_bytes: MAX_FILE_BYTES,
        max_body_bytes: MAX_BODY_BYTES,
        request_timeout: REQUEST_TIMEOUT,
    };
    super::run(client, config, args.listen, args.metrics_addr).await
}
