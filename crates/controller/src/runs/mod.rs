//! The AgentRun reconciler: runs each agent run a plugin asked for (POST /runs, made by the
//! API server) as a Job of HostConfig's runner (`spec.runner`), one at a time per hidden
//! `plugin:<id>` thread, in order, and keeps the run's status following its Job.
//!
//! - [`plan`] decides, purely, what becomes of a run: wait its turn, start, follow its Job,
//!   or fail as lost (its table is there);
//! - [`job`] builds, purely, the run's prompt Secret and Job (the runner's side of the
//!   contract is docs/runner.md);
//! - this file gathers the facts from the index, and writes what the plan says: the Secret
//!   and the Job by create, the status by a merge patch of the fields this controller owns
//!   (phase, reason, start and end times). `/done` is the API server's (its fan-out sends it
//!   once a run's phase is final, and records it in the status fields it owns).
//!
//! The reference's restart rules follow from deciding from the cluster alone: a queued run
//! is a Queued AgentRun, started when the controller is back; a Job that ended while the
//! controller was down is read as it ended; a Job that went away (deleted, its node gone)
//! fails the run as `RunnerLost`, once a live read confirms the cache is not merely behind.

pub mod job;
pub mod plan;

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::ListParams;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::context::Context;
use super::error::{GatherError, Result};
use super::write::StatusWrite;
use model::resources::{AgentRun, AgentRunPhase, AgentRunStatus};
use plan::Step;

/// How soon a run whose Job the cache does not show, but the cluster does, is looked at again.
const CACHE_BEHIND: Duration = Duration::from_secs(2);

pub async fn reconcile(run: Arc<AgentRun>, ctx: Arc<Context>) -> Result<Action> {
    let ns = run
        .namespace()
        .ok_or_else(|| GatherError::NoNamespace(run.name_any()))?;
    let runs = ctx.stores.runs.state();
    let thread: Vec<&AgentRun> = runs
        .iter()
        .map(|r| r.as_ref())
        .filter(|r| same_thread(r, &run))
        .collect();
    let name = job::job_name(&run);
    let cached = ctx
        .stores
        .jobs
        .get(&ObjectRef::<Job>::new(&name).within(&ns));
    let host = ctx.host();
    let step = plan::decide(&run, &thread, cached.as_deref(), host.runner.is_some());
    let current = run.status.clone().unwrap_or_default();
    let mut status = current.clone();
    match step {
        Step::Nothing => return Ok(Action::await_change()),
        Step::Queue => status.phase = Some(AgentRunPhase::Queued),
        Step::Start => {
            let runner = host
                .runner
                .as_ref()
                .expect("the plan starts only with a runner");
            let token = crate::instance::random_token();
            let secret = job::build_secret(&run, &token);
            let token = if ctx.writes.create(&secret).await? {
                token
            } else {
                // Made by an earlier try that ended before the status said so.
                live_token(&ctx, &ns, &name).await?
            };
            let api_url = ctx.api_url(&host);
            let chat = ctx
                .stores
                .channels
                .get(&ObjectRef::new(&run.spec.channel).within(&ns));
            let parent = chat.as_ref().and_then(|c| {
                let parent = c.spec.parent.as_deref()?;
                ctx.stores.channels.get(&ObjectRef::new(parent).within(&ns))
            });
            let tree = chat
                .as_deref()
                .and_then(|c| crate::instance::decide::working_tree(c, parent.as_deref()));
            ctx.writes
                .create(&job::build_job(&run, runner, &api_url, tree))
                .await?;
            tracing::info!(run = %run.name_any(), thread = %run.spec.thread, "started the run");
            status.phase = Some(AgentRunPhase::Running);
            status.start_time = Some(now());
            status.mcp_token_sha256 = Some(token_sha256(&token));
        }
        Step::Running => {
            status.phase = Some(AgentRunPhase::Running);
            if status.mcp_token_sha256.is_none() {
                let token = live_token(&ctx, &ns, &name).await?;
                status.mcp_token_sha256 = Some(token_sha256(&token));
            }
            let made = cached.and_then(|j| j.metadata.creation_timestamp.clone());
            status.start_time = status.start_time.or(made).or_else(|| Some(now()));
        }
        Step::Lost => {
            let jobs: Api<Job> = Api::namespaced(ctx.client.clone(), &ns);
            let live = jobs
                .get_opt(&name)
                .await
                .map_err(|source| GatherError::Read {
                    kind: "Job",
                    name: name.clone(),
                    source,
                })?;
            if live.is_some() {
                return Ok(Action::requeue(CACHE_BEHIND));
            }
            lost(&mut status);
        }
        Step::Ended(outcome) => {
            status.phase = Some(outcome.phase);
            status.reason = outcome.reason;
            status.end_time = outcome.at.or_else(|| Some(now()));
            if outcome.phase == AgentRunPhase::Failed && status.result.is_none() {
                status.result = Some(failure_message(status.reason.as_deref()));
            }
            if outcome.phase == AgentRunPhase::Succeeded && status.result.is_none() {
                status.result = final_message(&ctx, &ns, &run).await?;
            }
        }
    }
    let api: Api<AgentRun> = Api::namespaced(ctx.client.clone(), &ns);
    let wrote = ctx
        .writes
        .status(
            &api,
            run.as_ref(),
            Some(&current),
            &status,
            StatusWrite::AtVersion,
        )
        .await?;
    if wrote && let Some(outcome) = ended(current.phase, status.phase) {
        ctx.metrics.run_ended(outcome);
    }
    Ok(Action::await_change())
}

/// The MCP token in the run's Secret `name`, read live: the controller watches no run
/// Secrets, and needs this only when an earlier try made the Secret but never said so. A list
/// by name, not a get: the controller may list Secrets, and is not given get on every one.
async fn live_token(ctx: &Context, ns: &str, name: &str) -> Result<String> {
    let secrets: Api<k8s_openapi::api::core::v1::Secret> = Api::namespaced(ctx.client.clone(), ns);
    let listed = secrets
        .list(&ListParams::default().fields(&format!("metadata.name={name}")))
        .await
        .map_err(|source| GatherError::Read {
            kind: "Secret",
            name: name.to_string(),
            source,
        })?;
    // A Secret without a token (made before runs had MCP) gets none: the run's endpoint
    // then refuses every token (it takes none shorter than 32 characters).
    Ok(listed
        .items
        .first()
        .and_then(job::token_of)
        .unwrap_or_default())
}

/// How the status names a run's MCP token: its SHA-256, in hex.
pub fn token_sha256(token: &str) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(token.as_bytes()))
}

/// The final message the run's runner left (a live read of the Job's Pods, once per run: the
/// controller watches no runner Pods).
async fn final_message(ctx: &Context, ns: &str, run: &AgentRun) -> Result<Option<String>> {
    let pods: Api<Pod> = Api::namespaced(ctx.client.clone(), ns);
    let selector = format!("{}={}", job::LABEL_RUN, run.name_any());
    let list = pods
        .list(&ListParams::default().labels(&selector))
        .await
        .map_err(|source| GatherError::Read {
            kind: "Pod",
            name: selector.clone(),
            source,
        })?;
    Ok(plan::final_message(&list.items))
}

/// Whether `a` and `b` are runs of one thread: one chat's `plugin:<id>`.
pub fn same_thread(a: &AgentRun, b: &AgentRun) -> bool {
    a.namespace() == b.namespace()
        && a.spec.channel == b.spec.channel
        && a.spec.thread == b.spec.thread
}

/// How a run ended, when this write ended it (`was` not final, `is` final).
fn ended(was: Option<AgentRunPhase>, is: Option<AgentRunPhase>) -> Option<&'static str> {
    if was.is_some_and(AgentRunPhase::is_final) {
        return None;
    }
    match is? {
        AgentRunPhase::Succeeded => Some("Succeeded"),
        AgentRunPhase::Failed => Some("Failed"),
        AgentRunPhase::Queued | AgentRunPhase::Running => None,
    }
}

/// A run whose Job went away fails.
fn lost(status: &mut AgentRunStatus) {
    status.phase = Some(AgentRunPhase::Failed);
    status.reason = Some(plan::RUNNER_LOST.into());
    status.end_time = Some(now());
    status.result = Some(failure_message(status.reason.as_deref()));
}

/// What the plugin's `/done` says of a failed run.
fn failure_message(reason: Option<&str>) -> String {
    match reason {
        Some("DeadlineExceeded") => "the run went past its time limit".into(),
        Some(plan::RUNNER_LOST) => "the run's runner went away before it ended".into(),
        _ => "the runner failed".into(),
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

#[cfg(test)]
mod tests {
    use super::*;
    use AgentRunPhase::*;

    #[test]
    fn a_run_is_counted_once_when_it_ends() {
        assert_eq!(ended(Some(Running), Some(Succeeded)), Some("Succeeded"));
        assert_eq!(ended(None, Some(Failed)), Some("Failed"));
        assert_eq!(ended(Some(Queued), Some(Running)), None);
        assert_eq!(ended(Some(Failed), Some(Failed)), None);
        assert_eq!(ended(Some(Succeeded), Some(Failed)), None);
    }
}
