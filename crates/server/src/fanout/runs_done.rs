//! `POST /runs/{run_id}/done`: once a run ended, the plugin's container in the run's chat is
//! told, once, through the one way to call a plugin (the breaker, the 10 s limit, the secret).
//!
//! - `status.doneDelivered` is written only after the plugin answered 2xx, so a run that ended
//!   while no replica led is delivered when one leads again, and a delivered one never again
//!   (the replica that delivered remembers it until its cache shows the record); a replica
//!   killed after the plugin took it and before the record was written leaves the next
//!   leader no way to tell, and it delivers again (at least once, never lost: `make chaos`
//!   counts those apart, see `loop_plugins_bench::deliveries`);
//! - a try that fails (the container could not be had, it did not answer, or it refused) is
//!   counted in `status.doneAttempts` with the reason in `status.doneError`, and tried again
//!   after a backoff that doubles ([`retry_after`]); after [`DONE_ATTEMPTS`] it gives up;
//! - a try may start the plugin's stopped container, but records no demand on a running one: a
//!   delivery that keeps failing wakes a container at most [`DONE_ATTEMPTS`] times, and never
//!   keeps one from going idle;
//! - tries run side by side ([`MAX_IN_FLIGHT`] at once): a try that starts a container may wait
//!   out the start limit, and a plugin that cannot start holds back no other plugin's /done.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::Store;
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::calls::Calls;
use crate::calls::client::PluginRequest;
use crate::calls::failure;
use crate::calls::{CallError, CallKind, CallOptions};
use crate::delivery::target;
use crate::status::status_body;
use model::names::FIELD_MANAGER_API;
use model::resources::{AgentRun, AgentRunPhase, AgentRunStatus};
use sdk::wire::{RunDone, RunStatus};

/// How many tries before giving up.
pub const DONE_ATTEMPTS: u32 = 5;
/// The wait after the first failed try; it doubles with each further one.
pub const FIRST_RETRY: Duration = Duration::from_secs(2);
/// The longest wait between tries.
pub const MAX_RETRY: Duration = Duration::from_secs(60);

/// The body the plugin gets for a run that ended in `phase`.
pub fn done_body(phase: AgentRunPhase, result: Option<&str>) -> RunDone {
    match phase {
        AgentRunPhase::Succeeded => RunDone {
            status: RunStatus::Done,
            result: Some(result.unwrap_or_default().to_string()),
            error: None,
        },
        _ => RunDone {
            status: RunStatus::Failed,
            result: None,
            error: Some(result.unwrap_or("the run failed").to_string()),
        },
    }
}

/// The wait after `attempts` failed tries.
pub fn retry_after(attempts: u32) -> Duration {
    FIRST_RETRY
        .saturating_mul(1 << attempts.saturating_sub(1).min(10))
        .min(MAX_RETRY)
}

/// What to do about a run now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// Nothing: it has not ended, /done reached the plugin, or the tries are used up.
    Nothing,
    /// Try now.
    Deliver,
    /// Try after this long.
    Wait(Duration),
}

/// Decides for a run with `status`, whose last failed try this process made `since` ago.
pub fn next(status: &AgentRunStatus, since: Option<Duration>) -> Next {
    let ended = status.phase.is_some_and(AgentRunPhase::is_final);
    if !ended || status.done_delivered || status.done_attempts >= DONE_ATTEMPTS {
        return Next::Nothing;
    }
    match since {
        // The last try is unknown here (another replica, or before a restart): try now.
        None => Next::Deliver,
        Some(since) => {
            let wait = retry_after(status.done_attempts);
            if since >= wait {
                Next::Deliver
            } else {
                Next::Wait(wait - since)
            }
        }
    }
}

/// What a try came to, for the run's status.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DoneOutcome {
    Delivered,
    Failed { attempts: u32, error: String },
}

/// Records a try on the run.
pub trait DoneRecorder: Send + Sync {
    fn record<'a>(
        &'a self,
        run: &'a AgentRun,
        outcome: &'a DoneOutcome,
    ) -> BoxFuture<'a, Result<(), String>>;
}

/// Records through the Kubernetes API: server-side apply of the run's delivery fields.
pub struct KubeDoneRecorder {
    client: Client,
}

impl KubeDoneRecorder {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

/// The status part the API server applies on a run.
pub fn status_patch(outcome: &DoneOutcome) -> Value {
    let status = match outcome {
        DoneOutcome::Delivered => json!({ "doneDelivered": true }),
        DoneOutcome::Failed { attempts, error } => {
            json!({ "doneAttempts": attempts, "doneError": error })
        }
    };
    status_body::<AgentRun>(status, None)
}

impl DoneRecorder for KubeDoneRecorder {
    fn record<'a>(
        &'a self,
        run: &'a AgentRun,
        outcome: &'a DoneOutcome,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let api: Api<AgentRun> =
                Api::namespaced(self.client.clone(), &run.namespace().unwrap_or_default());
            api.patch_status(
                &run.name_any(),
                &PatchParams::apply(FIELD_MANAGER_API).force(),
                &Patch::Apply(&status_patch(outcome)),
            )
            .await
            .map(|_| ())
            .map_err(|e| format!("recording /done on AgentRun {}: {e}", run.name_any()))
        })
    }
}

/// A try at telling the plugin a run ended.
pub trait Deliverer: Send + Sync + 'static {
    fn deliver(
        &self,
        run: Arc<AgentRun>,
        status: AgentRunStatus,
    ) -> BoxFuture<'static, DoneOutcome>;
}

/// Tries through the host's one way to call a plugin.
struct CallsDeliverer(Calls);

impl Deliverer for CallsDeliverer {
    fn deliver(
        &self,
        run: Arc<AgentRun>,
        status: AgentRunStatus,
    ) -> BoxFuture<'static, DoneOutcome> {
        let calls = self.0.clone();
        Box::pin(async move { deliver(&calls, &run, &status).await })
    }
}

/// Delivers /done for every run that ended, while leading.
pub async fn run(calls: Calls, recorder: Arc<dyn DoneRecorder>, leading: watch::Receiver<bool>) {
    let runs = calls.index().runs.clone();
    let changed = calls.index().changed.runs.subscribe();
    deliver_all(
        runs,
        changed,
        Arc::new(CallsDeliverer(calls)),
        recorder,
        leading,
    )
    .await
}

/// The most tries in flight at once; the rest wait for the next pass.
pub const MAX_IN_FLIGHT: usize = 32;

/// Delivers /done for every run in `runs` that ended, while leading; looks again whenever
/// `changed` moves. Each try runs on its own (up to [`MAX_IN_FLIGHT`]): a try may wait as long
/// as a container's start limit, and one plugin that cannot start holds no other run's /done.
pub async fn deliver_all(
    runs: Store<AgentRun>,
    mut runs_changed: watch::Receiver<u64>,
    deliverer: Arc<dyn Deliverer>,
    recorder: Arc<dyn DoneRecorder>,
    mut leading: watch::Receiver<bool>,
) {
    let mut book = Book::default();
    let mut flight: JoinSet<(Arc<AgentRun>, DoneOutcome)> = JoinSet::new();
    loop {
        // Not leading: what is in flight still ends and is recorded; nothing new starts.
        while !*leading.borrow_and_update() {
            tokio::select! {
                Some(joined) = flight.join_next_with_id(), if !flight.is_empty() => {
                    book.settle(&*recorder, joined).await;
                }
                changed = leading.changed() => if changed.is_err() { return },
            }
        }
        let mut soonest = book.retry_records(&runs.state(), &*recorder).await;
        for run in runs.state() {
            if flight.len() >= MAX_IN_FLIGHT {
                break;
            }
            let uid = run.uid().unwrap_or_default();
            if book.in_flight.values().any(|u| *u == uid) || book.delivered.contains_key(&uid) {
                continue;
            }
            let status = run.status.clone().unwrap_or_default();
            match next(&status, book.tried.get(&uid).map(Instant::elapsed)) {
                Next::Nothing => {}
                Next::Wait(wait) => soonest = Some(soonest.map_or(wait, |s| s.min(wait))),
                Next::Deliver => {
                    let attempt = deliverer.deliver(run.clone(), status);
                    let task = flight.spawn(async move { (run, attempt.await) });
                    book.in_flight.insert(task.id(), uid);
                }
            }
        }
        let wake = runs_changed.changed();
        let lost = super::until_not_leading(&mut leading);
        let sleep = tokio::time::sleep(soonest.unwrap_or(Duration::MAX));
        tokio::select! {
            Some(joined) = flight.join_next_with_id(), if !flight.is_empty() => {
                book.settle(&*recorder, joined).await;
            }
            _ = wake => {}
            _ = sleep, if soonest.is_some() => {}
            _ = lost => {}
        }
    }
}

/// What this process knows of its own tries.
#[derive(Default)]
struct Book {
    /// When this process last tried each run (by uid).
    tried: HashMap<String, Instant>,
    /// Runs this process delivered /done to, until the cache shows `doneDelivered` (the cache
    /// lags the write: a pass in that moment delivered again, `make chaos` found 86 of 300
    /// runs told twice), and whether the record is written.
    delivered: HashMap<String, bool>,
    /// Runs whose try has not ended, by the try's task.
    in_flight: HashMap<tokio::task::Id, String>,
}

type Joined = Result<(tokio::task::Id, (Arc<AgentRun>, DoneOutcome)), tokio::task::JoinError>;

impl Book {
    /// Records how a try went.
    async fn settle(&mut self, recorder: &dyn DoneRecorder, joined: Joined) {
        let (run, outcome) = match joined {
            Ok((id, ended)) => {
                self.in_flight.remove(&id);
                ended
            }
            Err(e) => {
                // Nothing was recorded: tried again after the backoff.
                let uid = self.in_flight.remove(&e.id());
                tracing::warn!(run_uid = ?uid, error = %e, "a /done try ended without an outcome");
                if let Some(uid) = uid {
                    self.tried.insert(uid, Instant::now());
                }
                return;
            }
        };
        let uid = run.uid().unwrap_or_default();
        match &outcome {
            DoneOutcome::Failed { attempts, error } => {
                tracing::warn!(run = %run.name_any(), attempts, %error, "/done not delivered");
                self.tried.insert(uid.clone(), Instant::now());
            }
            DoneOutcome::Delivered => tracing::info!(run = %run.name_any(), "/done delivered"),
        }
        let recorded = recorder.record(&run, &outcome).await;
        if let Err(e) = &recorded {
            tracing::warn!(error = %e, "could not record /done");
        }
        if outcome == DoneOutcome::Delivered {
            self.delivered.insert(uid, recorded.is_ok());
        }
    }

    /// Forgets runs that are gone and the delivered ones the cache shows, and writes the
    /// records a try could not: when to look again if one still failed.
    async fn retry_records(
        &mut self,
        runs: &[Arc<AgentRun>],
        recorder: &dyn DoneRecorder,
    ) -> Option<Duration> {
        let exists = |uid: &String| runs.iter().any(|r| r.uid().as_deref() == Some(uid));
        self.tried.retain(|uid, _| exists(uid));
        self.delivered.retain(|uid, _| exists(uid));
        let mut soonest = None;
        for run in runs {
            let uid = run.uid().unwrap_or_default();
            let Some(recorded) = self.delivered.get_mut(&uid) else {
                continue;
            };
            if run.status.as_ref().is_some_and(|s| s.done_delivered) {
                self.delivered.remove(&uid);
            } else if !*recorded {
                match recorder.record(run, &DoneOutcome::Delivered).await {
                    Ok(()) => *recorded = true,
                    Err(e) => {
                        tracing::warn!(error = %e, "could not record /done");
                        soonest = Some(Duration::from_secs(1));
                    }
                }
            }
        }
        soonest
    }
}

/// One try.
async fn deliver(calls: &Calls, run: &AgentRun, status: &AgentRunStatus) -> DoneOutcome {
    let attempts = status.done_attempts + 1;
    let failed = |error: String| DoneOutcome::Failed { attempts, error };
    let ns = run.namespace().unwrap_or_default();
    let target = match target::resolve(calls.index(), &ns, &run.spec.channel, &run.spec.plugin) {
        Ok(t) => t,
        Err(e) => return failed(e.to_string()),
    };
    let limits = calls.limits();
    let request = PluginRequest::json(
        CallKind::RunDone,
        format!("/runs/{}/done", run.name_any()),
        &done_body(
            status.phase.unwrap_or(AgentRunPhase::Failed),
            status.result.as_deref(),
        ),
        limits.run_done,
        limits.body,
    );
    let options = CallOptions {
        start: true,
        touch: false,
    };
    let what = format!(
        "/runs/{}/done of plugin {}",
        run.name_any(),
        run.spec.plugin
    );
    match calls.call_target(&target, &request, options).await {
        Ok(answer) if answer.status.is_success() => DoneOutcome::Delivered,
        Ok(answer) => failed(format!(
            "{what} answered {}: {}",
            answer.status.as_u16(),
            answer.error_text()
        )),
        Err(e @ (CallError::Start(_) | CallError::Plugin(_))) => {
            failed(failure::of_error(&target, &what, &e).message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ended(attempts: u32) -> AgentRunStatus {
        AgentRunStatus {
            phase: Some(AgentRunPhase::Succeeded),
            done_attempts: attempts,
            ..Default::default()
        }
    }

    #[test]
    fn the_body_says_how_the_run_ended() {
        let done = serde_json::to_value(done_body(AgentRunPhase::Succeeded, Some("42"))).unwrap();
        assert_eq!(done, serde_json::json!({"status": "done", "result": "42"}));
        let failed = serde_json::to_value(done_body(AgentRunPhase::Failed, None)).unwrap();
        assert_eq!(
            failed,
            serde_json::json!({"status": "failed", "error": "the run failed"})
        );
    }

    #[test]
    fn only_an_ended_undelivered_run_is_tried_a_few_times_with_backoff() {
        let s = Duration::from_secs;
        let running = AgentRunStatus {
            phase: Some(AgentRunPhase::Running),
            ..Default::default()
        };
        let delivered = AgentRunStatus {
            done_delivered: true,
            ..ended(0)
        };
        let rows = [
            (running, None, Next::Nothing),
            (delivered, None, Next::Nothing),
            (ended(0), None, Next::Deliver),
            (ended(1), None, Next::Deliver),
            (ended(1), Some(s(1)), Next::Wait(s(1))),
            (ended(1), Some(s(2)), Next::Deliver),
            (ended(3), Some(s(2)), Next::Wait(s(6))),
            (ended(DONE_ATTEMPTS), None, Next::Nothing),
        ];
        for (status, since, want) in rows {
            assert_eq!(next(&status, since), want, "{status:?} {since:?}");
        }
        let waits: Vec<u64> = (1..=8).map(|n| retry_after(n).as_secs()).collect();
        assert_eq!(waits, [2, 4, 8, 16, 32, 60, 60, 60]);
    }

    #[test]
    fn the_status_patch_names_only_the_delivery_fields() {
        assert_eq!(
            status_patch(&DoneOutcome::Delivered)["status"],
            json!({ "doneDelivered": true })
        );
        let failed = status_patch(&DoneOutcome::Failed {
            attempts: 2,
            error: "refused".into(),
        });
        assert_eq!(
            failed["status"],
            json!({ "doneAttempts": 2, "doneError": "refused" })
        );
    }

    /// Tells every run at once, except the ones whose name starts with `stuck`: those never
    /// answer (a container that cannot start while its start limit runs).
    struct Stalling {
        started: tokio::sync::mpsc::UnboundedSender<String>,
    }

    impl Deliverer for Stalling {
        fn deliver(
            &self,
            run: Arc<AgentRun>,
            _: AgentRunStatus,
        ) -> BoxFuture<'static, DoneOutcome> {
            let name = run.name_any();
            let _ = self.started.send(name.clone());
            Box::pin(async move {
                if name.starts_with("stuck") {
                    futures::future::pending::<()>().await;
                }
                DoneOutcome::Delivered
            })
        }
    }

    /// Keeps what it was told to record.
    struct Kept(tokio::sync::mpsc::UnboundedSender<(String, DoneOutcome)>);

    impl DoneRecorder for Kept {
        fn record<'a>(
            &'a self,
            run: &'a AgentRun,
            outcome: &'a DoneOutcome,
        ) -> BoxFuture<'a, Result<(), String>> {
            let _ = self.0.send((run.name_any(), outcome.clone()));
            Box::pin(async { Ok(()) })
        }
    }

    fn ended_run(name: &str) -> AgentRun {
        let mut run = AgentRun::new(
            name,
            model::resources::AgentRunSpec {
                plugin: "p".into(),
                channel: "general".into(),
                thread: "plugin:p".into(),
                agent: "a".into(),
                read_only: false,
                tools: vec![],
                prompt: "hello".into(),
            },
        );
        run.metadata.namespace = Some("ns".into());
        run.metadata.uid = Some(format!("uid-{name}"));
        run.status = Some(ended(0));
        run
    }

    /// Counts what it was told to record, and fails each time.
    struct Refusing(Arc<std::sync::atomic::AtomicUsize>);

    impl DoneRecorder for Refusing {
        fn record<'a>(
            &'a self,
            _: &'a AgentRun,
            _: &'a DoneOutcome,
        ) -> BoxFuture<'a, Result<(), String>> {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async { Err("refused".to_string()) })
        }
    }

    /// The bench's profile saw it: a server without a Lease leads for good, and the sender of
    /// its lead flag is gone; waiting for the lead to be lost answered at once, so the loop
    /// made pass after pass with nothing to do (a tenth of the API server's CPU under load).
    #[tokio::test]
    async fn a_server_that_leads_for_good_looks_again_only_when_there_is_cause() {
        let (runs, mut writer) = kube::runtime::reflector::store::<AgentRun>();
        let (_changed, changed_rx) = watch::channel(0u64);
        let leading_rx = watch::channel(true).1;
        let (started, _started_rx) = tokio::sync::mpsc::unbounded_channel();
        let records = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(ended_run("quick")));
        let loop_ = tokio::spawn(deliver_all(
            runs,
            changed_rx,
            Arc::new(Stalling { started }),
            Arc::new(Refusing(records.clone())),
            leading_rx,
        ));
        // The try's record, then one retry of it per second.
        tokio::time::sleep(Duration::from_millis(300)).await;
        loop_.abort();
        let n = records.load(std::sync::atomic::Ordering::SeqCst);
        assert!(
            (1..=2).contains(&n),
            "{n} records in 300 ms: each pass retries the record once"
        );
    }

    /// CI saw it: one run's /done waited 90 s on a container that could not start (its
    /// namespace was going), and every other run's /done waited behind it.
    #[tokio::test]
    async fn a_delivery_that_hangs_holds_no_other_run() {
        let (runs, mut writer) = kube::runtime::reflector::store::<AgentRun>();
        let (changed, changed_rx) = watch::channel(0u64);
        let (_leading, leading_rx) = watch::channel(true);
        let (started, mut started_rx) = tokio::sync::mpsc::unbounded_channel();
        let (kept, mut kept_rx) = tokio::sync::mpsc::unbounded_channel();
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(ended_run("stuck")));
        let loop_ = tokio::spawn(deliver_all(
            runs,
            changed_rx,
            Arc::new(Stalling { started }),
            Arc::new(Kept(kept)),
            leading_rx,
        ));
        assert_eq!(started_rx.recv().await.as_deref(), Some("stuck"));
        // A run that ends while the first one's try still hangs is told at once.
        writer.apply_watcher_event(&kube::runtime::watcher::Event::Apply(ended_run("quick")));
        changed.send_modify(|n| *n += 1);
        let recorded = tokio::time::timeout(Duration::from_secs(10), kept_rx.recv()).await;
        loop_.abort();
        assert_eq!(
            recorded.ok().flatten(),
            Some(("quick".to_string(), DoneOutcome::Delivered)),
            "the second run's /done waited behind the first's"
        );
        // The hanging one is not tried twice meanwhile.
        let mut again = vec![];
        while let Ok(name) = started_rx.try_recv() {
            again.push(name);
        }
        assert_eq!(again, ["quick"]);
    }
}
