//! The host tells a chat that an agent run in it failed (the reference's "failed runs" among
//! Loop's own notifications in the drawer): the leader looks at the runs whenever they change
//! and tells each run that ended Failed within the last [`RECENT`], once
//! ([`crate::cards::host_notes`]: the entry's key is the run's, and one the chat's host inbox
//! holds is not written again, so a new leader or a restart tells nothing twice). A run told is
//! remembered for as long as this replica runs: one the inbox dropped since (a chat with more
//! than a hundred failures) is not told again, so the writes stop.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use kube::ResourceExt;
use tokio::sync::watch;

use crate::calls::Calls;
use crate::cards::host_notes::{self, About};
use crate::cards::marks::MarkWriter;
use model::resources::{AgentRun, AgentRunPhase};

/// Runs that ended longer ago than this are not told (a first start after an upgrade does not
/// fill every drawer with old failures).
pub const RECENT: Duration = Duration::from_secs(24 * 3600);

/// A Kubernetes time as this crate's timestamps (k8s-openapi has its own jiff).
fn timestamp(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> jiff::Timestamp {
    jiff::Timestamp::from_second(t.0.as_second()).unwrap_or_default()
}

/// The runs to tell at `now`: ended Failed, within [`RECENT`].
pub fn to_tell(runs: &[Arc<AgentRun>], now: jiff::Timestamp) -> Vec<Arc<AgentRun>> {
    let since = now
        .checked_sub(jiff::SignedDuration::try_from(RECENT).unwrap_or_default())
        .unwrap_or(now);
    runs.iter()
        .filter(|run| {
            let status = run.status.as_ref();
            status.and_then(|s| s.phase) == Some(AgentRunPhase::Failed)
                && status
                    .and_then(|s| s.end_time.as_ref())
                    .is_some_and(|end| timestamp(end) >= since)
        })
        .cloned()
        .collect()
}

/// Tells each failed run whenever the runs change, while leading.
pub async fn run(calls: Calls, writer: Arc<dyn MarkWriter>, mut leading: watch::Receiver<bool>) {
    let mut runs = calls.index().changed.runs.subscribe();
    let mut told: HashSet<String> = HashSet::new();
    loop {
        super::until_leading(&mut leading).await;
        runs.mark_unchanged();
        let index = calls.index();
        let now = jiff::Timestamp::now();
        for run in to_tell(&index.runs.state(), now) {
            let uid = run.uid().unwrap_or_else(|| run.name_any());
            if told.contains(&uid) {
                continue;
            }
            let namespace = run.namespace().unwrap_or_default();
            let Some(chat) = index.channel(&namespace, &run.spec.channel) else {
                continue;
            };
            let at = run
                .status
                .as_ref()
                .and_then(|s| s.end_time.as_ref())
                .map(|t| crate::clock::rfc3339(timestamp(t)))
                .unwrap_or_else(|| crate::clock::rfc3339(now));
            let about = About::FailedRun { run: &run };
            if host_notes::tell(writer.as_ref(), index, &chat, &about, &at).await {
                told.insert(uid);
            }
        }
        // Runs deleted since are forgotten.
        let present: HashSet<String> = index.runs.state().iter().filter_map(|r| r.uid()).collect();
        told.retain(|uid| present.contains(uid));
        tokio::select! {
            _ = runs.changed() => {}
            _ = super::until_not_leading(&mut leading) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use model::resources::{AgentRunSpec, AgentRunStatus};

    fn run(name: &str, phase: AgentRunPhase, ended: jiff::Timestamp) -> Arc<AgentRun> {
        let mut run = AgentRun::new(
            name,
            AgentRunSpec {
                plugin: "quiz".into(),
                channel: "general".into(),
                thread: "plugin:quiz".into(),
                agent: "tutor".into(),
                read_only: true,
                tools: vec![],
                prompt: "p".into(),
            },
        );
        run.status = Some(AgentRunStatus {
            phase: Some(phase),
            end_time: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(ended.as_second()).unwrap(),
            )),
            ..Default::default()
        });
        Arc::new(run)
    }

    #[test]
    fn failed_runs_of_the_last_day_are_told() {
        let now: jiff::Timestamp = "2026-12-07T12:00:00Z".parse().unwrap();
        let hour = jiff::SignedDuration::from_hours(1);
        let runs = [
            run("failed-now", AgentRunPhase::Failed, now),
            run("failed-yesterday", AgentRunPhase::Failed, now - hour * 25),
            run("succeeded", AgentRunPhase::Succeeded, now),
        ];
        let told: Vec<String> = to_tell(&runs, now).iter().map(|r| r.name_any()).collect();
        assert_eq!(told, ["failed-now"]);
    }
}
