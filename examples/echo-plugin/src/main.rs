//! `echo-plugin`: serves the plugin contract on `$LOOP_PLUGIN_HOST:$LOOP_PLUGIN_PORT` until
//! SIGTERM or Ctrl-C, then finishes the requests in flight.

use std::process::ExitCode;

use anyhow::Context;
use echo_plugin::{Config, Plugin};
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .with_ansi(false)
        .with_writer(std::io::stderr)
        .init();
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let cfg = Config::from_env(|name| std::env::var(name).ok())?;
    let plugin = Plugin::from_config(&cfg)?;
    let listener = TcpListener::bind((cfg.host, cfg.port))
        .await
        .with_context(|| format!("binding {}:{}", cfg.host, cfg.port))?;
    let m = &plugin.state().manifest;
    tracing::info!(id = m.id, version = m.version, data = %cfg.data_dir.display(), "starting");
    // Tests wait for this line and read the port from it.
    tracing::info!("listening on {}", listener.local_addr()?);
    plugin.serve(listener, shutdown_signal()).await?;
    tracing::info!("stopped");
    Ok(())
}

/// SIGTERM (what Kubernetes sends) or Ctrl-C.
async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(e) = tokio::signal::ctrl_c().await {
            tracing::error!(error = %e, "listening for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(e) => {
                tracing::error!(error = %e, "listening for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => tracing::info!("Ctrl-C: shutting down"),
        () = term => tracing::info!("SIGTERM: shutting down"),
    }
}
