//! The quiz plugin's binary: the environment the host sets, the handlers of `lib.rs`.

use loop_plugin_sdk::api::Client;
use loop_plugin_sdk::{Env, shutdown_signal};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let env = Env::from_env()?;
    let api = match Client::from_env(&env) {
        Ok(client) => Some(client),
        Err(err) => {
            eprintln!("no Plugin API: {err}");
            None
        }
    };
    let server = quiz_plugin::plugin(env.read_manifest()?, api, env.data_dir.clone())
        .build(&env.secret()?)?;
    let listener = tokio::net::TcpListener::bind((env.host, env.port)).await?;
    eprintln!("listening on {}", listener.local_addr()?);
    server.serve(listener, shutdown_signal()).await?;
    Ok(())
}
