//! `echo-plugin`: serves the plugin contract on `$LOOP_PLUGIN_HOST:$LOOP_PLUGIN_PORT` until
//! SIGTERM or Ctrl-C, then finishes the requests in flight. The manifest is
//! `$LOOP_PLUGIN_MANIFEST`, or the one built in when there is no such file (run by hand, or
//! by the e2e suite's kubelet stand-in).

use std::process::ExitCode;

use loop_plugin_sdk::api::Client;
use loop_plugin_sdk::env::ManifestReadError;
use loop_plugin_sdk::{Env, shutdown_signal};
use tracing_subscriber::EnvFilter;

#[tokio::main]
async fn main() -> ExitCode {
    // reqwest's TLS provider (the SDK builds it without one): ring's, before any client is
    // built. The SDK's Plugin API client installs it too, for plugins that do not.
    let _ = rustls::crypto::ring::default_provider().install_default();
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
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let env = Env::from_env()?;
    let manifest = match env.read_manifest() {
        Err(ManifestReadError::Read { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            let path = env.manifest.display();
            tracing::info!(%path, "no manifest there; using the built-in one");
            loop_plugin_sdk::manifest::parse_str(echo_plugin::BUILTIN)?
        }
        read => read?,
    };
    // Both LOOP_API_URL and LOOP_PLUGIN_TOKEN_FILE, or no Plugin API (ping then only answers).
    let api = match (&env.api_url, &env.token_file) {
        (Some(_), Some(_)) => Some(Client::from_env(&env)?),
        _ => None,
    };
    let (id, version) = (manifest.id.clone(), manifest.version.clone());
    let server = echo_plugin::plugin(manifest, api, &env.data_dir)
        .map_err(|e| format!("opening the journal in {}: {e}", env.data_dir.display()))?
        .build(&env.secret()?)?;
    let listener = tokio::net::TcpListener::bind((env.host, env.port))
        .await
        .map_err(|e| format!("binding {}:{}: {e}", env.host, env.port))?;
    tracing::info!(id, version, data = %env.data_dir.display(), "starting");
    // Tests wait for this line and read the port from it.
    tracing::info!("listening on {}", listener.local_addr()?);
    server.serve(listener, shutdown_signal()).await?;
    tracing::info!("stopped");
    Ok(())
}
