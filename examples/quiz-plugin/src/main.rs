//! The quiz plugin's binary: the environment the host sets, the handlers of `lib.rs`.

use loop_plugin_sdk::api::Client;
use loop_plugin_sdk::{Env, shutdown_signal};

/// The manifest built in, for a plugin run where there is no `/loop-plugin/plugin.json` (by
/// hand, or played by the e2e suite's kubelet stand-in); an image always has one.
const BUILTIN: &str = include_str!("../plugin.json");

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // reqwest's TLS provider (the SDK builds it without one): ring's, before any client is
    // built. The SDK's Plugin API client installs it too, for plugins that do not.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = Env::from_env()?;
    let api = match Client::from_env(&env) {
        Ok(client) => Some(client),
        Err(err) => {
            eprintln!("no Plugin API: {err}");
            None
        }
    };
    let manifest = if env.manifest.exists() {
        env.read_manifest()?
    } else {
        eprintln!(
            "{} is missing: the manifest built in",
            env.manifest.display()
        );
        loop_plugin_sdk::manifest::parse_str(BUILTIN)?
    };
    let server = quiz_plugin::plugin(manifest, api, env.data_dir.clone()).build(&env.secret()?)?;
    let listener = tokio::net::TcpListener::bind((env.host, env.port)).await?;
    eprintln!("listening on {}", listener.local_addr()?);
    server.serve(listener, shutdown_signal()).await?;
    Ok(())
}
