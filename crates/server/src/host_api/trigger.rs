//! `loop-plugins trigger`: what a schedule's CronJob runs. It calls the host API's run-action
//! route with `"trigger": "schedule"` and the task's id, as the ServiceAccount the Job runs as
//! (its token), and exits non-zero when the call fails, so the Job shows it.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use model::contract::{API_URL_ENV, SERVICE_ACCOUNT_TOKEN};
use serde_json::json;

use super::PREFIX;
use crate::calls::client::install_crypto_provider;

/// Flags of `loop-plugins trigger`.
#[derive(clap::Args, Debug, Clone)]
pub struct TriggerArgs {
    /// The host API's base URL (the API server's).
    #[arg(long, env = API_URL_ENV)]
    pub api_url: String,
    /// The chat's namespace.
    #[arg(long)]
    pub namespace: String,
    /// The channel whose container runs the action.
    #[arg(long)]
    pub channel: String,
    /// The plugin's id.
    #[arg(long)]
    pub plugin: String,
    /// The action's id.
    #[arg(long)]
    pub action: String,
    /// The scheduled task's id (the CronJob's name).
    #[arg(long)]
    pub task: String,
    /// The file holding the bearer token to call with.
    #[arg(long, env = "LOOP_PLUGINS_TOKEN_FILE", default_value = SERVICE_ACCOUNT_TOKEN)]
    pub token_file: PathBuf,
    /// A PEM CA bundle to trust for an https API URL, besides the system's roots.
    #[arg(long, env = "LOOP_PLUGINS_CA_FILE")]
    pub ca_file: Option<PathBuf>,
    /// How long to wait for the answer: the host may start the container first.
    #[arg(long, default_value = "150s", value_parser = parse_duration)]
    pub timeout: Duration,
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    model::schedule::parse_interval(s).map_err(|e| e.to_string())
}

/// The run-action URL for the args.
pub fn action_url(args: &TriggerArgs) -> String {
    format!(
        "{}{PREFIX}/namespaces/{}/channels/{}/plugins/{}/actions/{}",
        args.api_url.trim_end_matches('/'),
        args.namespace,
        args.channel,
        args.plugin,
        args.action
    )
}

/// Runs the action once; an error says why, and makes the process exit non-zero.
pub async fn run(args: TriggerArgs) -> anyhow::Result<()> {
    install_crypto_provider();
    let token = std::fs::read_to_string(&args.token_file)
        .with_context(|| format!("reading the token from {}", args.token_file.display()))?;
    let token = token.trim();
    if token.is_empty() {
        bail!("{} holds no token", args.token_file.display());
    }
    let mut builder = reqwest::Client::builder().timeout(args.timeout).no_proxy();
    if let Some(ca) = &args.ca_file {
        let pem = std::fs::read(ca).with_context(|| format!("reading {}", ca.display()))?;
        for cert in reqwest::Certificate::from_pem_bundle(&pem)
            .with_context(|| format!("{} is not a PEM bundle", ca.display()))?
        {
            builder = builder.add_root_certificate(cert);
        }
    }
    let http = builder.build().context("building the HTTP client")?;
    let url = action_url(&args);
    let body = json!({ "trigger": "schedule", "task_id": args.task });
    // A refused connection never reached the host (it may be restarting): try again a little.
    let mut attempt = 0;
    let response = loop {
        attempt += 1;
        match http.post(&url).bearer_auth(token).json(&body).send().await {
            Ok(r) => break r,
            Err(e) if e.is_connect() && attempt < 4 => {
                tracing::warn!(error = %e, attempt, "the host API is not reachable; trying again");
                tokio::time::sleep(Duration::from_secs(2 * attempt)).await;
            }
            Err(e) => return Err(e).with_context(|| format!("calling {url}")),
        }
    };
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if !status.is_success() {
        let message = serde_json::from_str::<serde_json::Value>(&text)
            .ok()
            .and_then(|v| {
                let e = v.get("error")?;
                Some(format!(
                    "{}: {}",
                    e.get("code")?.as_str()?,
                    e.get("message")?.as_str()?
                ))
            })
            .unwrap_or(text);
        bail!(
            "action {} of plugin {} in {}/{} (task {}) failed: {} {message}",
            args.action,
            args.plugin,
            args.namespace,
            args.channel,
            args.task,
            status.as_u16()
        );
    }
    println!(
        "action {} of plugin {} in {}/{}: accepted (task {})",
        args.action, args.plugin, args.namespace, args.channel, args.task
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser;

    use super::*;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: TriggerArgs,
    }

    #[test]
    fn the_cronjob_args_make_the_run_action_url() {
        let cli = Cli::parse_from([
            "trigger",
            "--api-url=http://api:8080/",
            "--namespace=team",
            "--channel=general",
            "--plugin=echo",
            "--action=tick",
            "--task=echo-general-tick",
        ]);
        assert_eq!(
            action_url(&cli.args),
            "http://api:8080/api/host/v1/namespaces/team/channels/general/plugins/echo/actions/tick"
        );
        assert_eq!(cli.args.token_file, PathBuf::from(SERVICE_ACCOUNT_TOKEN));
        assert_eq!(cli.args.timeout, Duration::from_secs(150));
    }
}
