//! `loop-plugins trigger`: what a schedule's CronJob runs. It calls the host API's run-action
//! route with `"trigger": "schedule"` and the task's id, as the ServiceAccount the Job runs as
//! (its token), and exits non-zero when the call fails, so the Job shows it.
//!
//! Every tick of a cron task calls. A task on an interval its ticks do not all complete
//! (`--interval` and `--anchor`) calls only on the tick that completes one, and exits 0 on the
//! others: [`decide`] reads the tick from the Job's name and nothing from the clock (the rule,
//! and what it means for a late, a missed or a repeated tick, is `model::schedule::ticks`'s).
//!
//! A worktree task (`--worktree`, the task's own options: `model::task`) runs its action in
//! its worktree thread instead, made or rebased first ([`worktree_thread`]).

mod worktree_thread;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use jiff::Timestamp;
use model::contract::{API_URL_ENV, SERVICE_ACCOUNT_TOKEN};
use model::schedule::ticks::{JOB_ENV, scheduled_tick};
use model::schedule::{AnchoredInterval, Due};
use serde_json::json;

use server::host_api::PREFIX;

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
    /// For a task on an interval its ticks do not all complete: the interval (`1h30m`). Only
    /// the tick that completes one calls.
    #[arg(long, value_parser = parse_duration, requires = "anchor")]
    pub interval: Option<Duration>,
    /// The time the interval counts from (RFC 3339).
    #[arg(long, requires = "interval")]
    pub anchor: Option<Timestamp>,
    /// The Job this runs in, whose name holds the tick it was made for (the CronJob sets it
    /// from the Pod's job-name label).
    #[arg(long, env = JOB_ENV)]
    pub job: Option<String>,
    /// Run the action in the task's worktree thread, made on the first run.
    #[arg(long)]
    pub worktree: bool,
    /// The channel's checkout, where the channel's working tree is mounted.
    #[arg(long, requires = "worktree")]
    pub checkout: Option<PathBuf>,
    /// The folder the channel's worktrees are made in, on the same volume.
    #[arg(long, requires = "worktree")]
    pub worktrees: Option<PathBuf>,
    /// Rebase the worktree onto the origin branch before a later run.
    #[arg(long, requires = "worktree")]
    pub update_before_run: bool,
    /// Delete the thread this many seconds after the action started.
    #[arg(long, requires = "worktree")]
    pub auto_delete_seconds: Option<u64>,
}

/// Whether this run calls the action, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TickDecision {
    /// A cron task (or an interval every tick completes): each tick calls.
    EveryTick,
    /// A Job not made for a tick (by hand, `kubectl create job --from`): someone asked for a
    /// run now.
    ByHand,
    /// The tick completes the interval that ended at `completed`.
    Completes {
        tick: Timestamp,
        completed: Timestamp,
    },
    /// The tick completes no interval; the next one ends at `next`.
    Waits { tick: Timestamp, next: Timestamp },
}

impl TickDecision {
    /// Whether the action is called.
    pub fn calls(&self) -> bool {
        !matches!(self, TickDecision::Waits { .. })
    }
}

impl fmt::Display for TickDecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = |t: &Timestamp| model::time::rfc3339(*t);
        match self {
            TickDecision::EveryTick => f.write_str("every tick runs the action"),
            TickDecision::ByHand => f.write_str("a Job made by hand runs the action"),
            TickDecision::Completes { tick, completed } => write!(
                f,
                "the tick of {} completes the interval that ended at {}",
                at(tick),
                at(completed)
            ),
            TickDecision::Waits { tick, next } => write!(
                f,
                "the tick of {} completes no interval; the next ends at {}",
                at(tick),
                at(next)
            ),
        }
    }
}

/// Whether this run calls the action: pure over the args (the interval, its anchor, the task
/// and the Job's name), with no clock.
pub fn decide(args: &TriggerArgs) -> TickDecision {
    let (Some(every), Some(anchor)) = (args.interval, args.anchor) else {
        return TickDecision::EveryTick;
    };
    let Some(tick) = args
        .job
        .as_deref()
        .and_then(|job| scheduled_tick(&args.task, job))
    else {
        return TickDecision::ByHand;
    };
    match (AnchoredInterval { every, anchor }).due(tick) {
        Due::Runs { completed } => TickDecision::Completes { tick, completed },
        Due::Waits { next } => TickDecision::Waits { tick, next },
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    model::schedule::parse_interval(s).map_err(|e| e.to_string())
}

/// The run-action URL for the args, in chat `chat` (the channel, or a worktree task's thread).
pub fn action_url(args: &TriggerArgs, chat: &str) -> String {
    format!(
        "{}{PREFIX}/namespaces/{}/channels/{chat}/plugins/{}/actions/{}",
        args.api_url.trim_end_matches('/'),
        args.namespace,
        args.plugin,
        args.action
    )
}

/// How long a call into a thread made just now tries again while the host does not serve it
/// yet (its instance is being made).
const NEW_THREAD_WAIT: Duration = Duration::from_secs(90);

/// Runs the action once when this tick calls it (see [`decide`]); an error says why, and
/// makes the process exit non-zero.
pub async fn run(args: TriggerArgs) -> anyhow::Result<()> {
    let decision = decide(&args);
    println!("task {}: {decision}", args.task);
    if !decision.calls() {
        return Ok(());
    }
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
    let (chat, new_thread) = if args.worktree {
        let thread = worktree_thread::prepare(&args, Timestamp::now()).await?;
        (thread.name, thread.made)
    } else {
        (args.channel.clone(), false)
    };
    let url = action_url(&args, &chat);
    let body = json!({ "trigger": "schedule", "task_id": args.task });
    let patient_until = tokio::time::Instant::now() + NEW_THREAD_WAIT;
    let (status, text) = loop {
        let (status, text) = call_once(&http, &url, token, &body).await?;
        // A thread made just now: the host serves it once its instance is there.
        let not_yet = matches!(status.as_u16(), 404 | 409 | 503);
        if new_thread && not_yet && tokio::time::Instant::now() < patient_until {
            tracing::info!(
                status = status.as_u16(),
                "the new thread is not served yet; trying again"
            );
            tokio::time::sleep(Duration::from_secs(2)).await;
            continue;
        }
        break (status, text);
    };
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
            chat,
            args.task,
            status.as_u16()
        );
    }
    println!(
        "action {} of plugin {} in {}/{}: accepted (task {})",
        args.action, args.plugin, args.namespace, chat, args.task
    );
    Ok(())
}

/// One call; a refused connection never reached the host (it may be restarting), so it is
/// tried again a little.
async fn call_once(
    http: &reqwest::Client,
    url: &str,
    token: &str,
    body: &serde_json::Value,
) -> anyhow::Result<(reqwest::StatusCode, String)> {
    let mut attempt = 0;
    let response = loop {
        attempt += 1;
        match http.post(url).bearer_auth(token).json(body).send().await {
            Ok(r) => break r,
            Err(e) if e.is_connect() && attempt < 4 => {
                tracing::warn!(error = %e, attempt, "the host API is not reachable; trying again");
                tokio::time::sleep(Duration::from_secs(2 * attempt)).await;
            }
            Err(e) => return Err(e).with_context(|| format!("calling {url}")),
        }
    };
    let status = response.status();
    Ok((status, response.text().await.unwrap_or_default()))
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
            action_url(&cli.args, "general"),
            "http://api:8080/api/host/v1/namespaces/team/channels/general/plugins/echo/actions/tick"
        );
        assert_eq!(cli.args.token_file, PathBuf::from(SERVICE_ACCOUNT_TOKEN));
        assert_eq!(cli.args.timeout, Duration::from_secs(150));
        assert_eq!(decide(&cli.args), TickDecision::EveryTick);
    }

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    /// The args of a 90-minute task anchored at 10:00, run in the Job `job`.
    fn ninety_minutes(job: Option<String>) -> TriggerArgs {
        let mut args = Cli::parse_from([
            "trigger",
            "--api-url=http://api:8080",
            "--namespace=team",
            "--channel=c",
            "--plugin=echo",
            "--action=tick",
            "--task=echo-c-tick",
            "--interval=1h30m",
            "--anchor=2026-12-01T10:00:00Z",
        ])
        .args;
        args.job = job;
        args
    }

    /// The Job the CronJob controller makes for the tick at `tick`.
    fn job_for(tick: &str) -> Option<String> {
        Some(format!("echo-c-tick-{}", at(tick).as_second() / 60))
    }

    #[test]
    fn an_interval_calls_on_the_tick_that_completes_it_only() {
        let decide_at = |tick: &str| decide(&ninety_minutes(job_for(tick)));
        for (tick, calls) in [
            ("2026-12-01T10:30:00Z", false),
            ("2026-12-01T11:00:00Z", false),
            ("2026-12-01T11:30:00Z", true),
            ("2026-12-01T12:00:00Z", false),
            ("2026-12-01T12:30:00Z", false),
            ("2026-12-01T13:00:00Z", true),
        ] {
            assert_eq!(decide_at(tick).calls(), calls, "{tick}");
        }
        assert_eq!(
            decide_at("2026-12-01T11:30:00Z"),
            TickDecision::Completes {
                tick: at("2026-12-01T11:30:00Z"),
                completed: at("2026-12-01T11:30:00Z"),
            }
        );
        assert_eq!(
            decide_at("2026-12-01T12:00:00Z").to_string(),
            "the tick of 2026-12-01T12:00:00Z completes no interval; the next ends at 2026-12-01T13:00:00Z"
        );
    }

    /// The decision reads the tick from the Job's name, never the clock: a Job that runs long
    /// after its tick (the CronJob controller was down, or the Job of the tick before still
    /// ran), or one run again after a restart, decides as it would have on time.
    #[test]
    fn a_job_decides_for_its_own_tick_whenever_it_runs() {
        for anchor in ["1999-12-31T23:00:00Z", "2090-06-01T00:30:00Z"] {
            let mut args = ninety_minutes(None);
            args.anchor = Some(at(anchor));
            for (after, calls) in [
                (30, false),
                (60, false),
                (90, true),
                (120, false),
                (180, true),
            ] {
                let minutes = at(anchor).as_second() / 60 + after;
                args.job = Some(format!("echo-c-tick-{minutes}"));
                assert_eq!(decide(&args).calls(), calls, "{anchor} + {after}m");
                assert_eq!(decide(&args).calls(), calls, "again: {anchor} + {after}m");
            }
        }
    }

    #[test]
    fn a_job_made_by_hand_calls() {
        for job in [
            None,
            Some("manual-run".to_string()),
            Some("echo-c-tick-x".into()),
        ] {
            assert_eq!(
                decide(&ninety_minutes(job.clone())),
                TickDecision::ByHand,
                "{job:?}"
            );
        }
    }

    #[test]
    fn an_interval_needs_its_anchor() {
        let parsed = Cli::try_parse_from([
            "trigger",
            "--api-url=http://api:8080",
            "--namespace=team",
            "--channel=c",
            "--plugin=echo",
            "--action=tick",
            "--task=echo-c-tick",
            "--interval=1h30m",
        ]);
        assert!(parsed.is_err());
    }
}
