//! The one way to call a plugin: a crate of its own, so that nothing else in the API server
//! reaches a plugin's container another way (cargo enforces the boundary). The API server's
//! host API (actions, tools, switches, `/x`), its MCP endpoint (tools), its events (the host
//! API's and the fan-out's `settings.changed` and `plugins.changed`) and its
//! `/runs/{run_id}/done` delivery all call through [`Calls`]:
//!
//! 1. [`Calls::ready`]: scale-from-zero. A running container answers at once; a stopped one
//!    gets its demand recorded (`lastActivity`, which makes the controller start its Pod) and
//!    the call waits, with at most [`CallSettings::max_waiting`] others, until the Pod watch
//!    sees it Ready (or [`CallSettings::start_timeout`] passes);
//! 2. [`Calls::call`]: the breaker in front of the container (3 calls in a row unanswered →
//!    30 s of failing at once → one trial call; a call whose answer stalls past its limit is
//!    unanswered too), the instance's secret, the call's time limit and answer cap, metrics,
//!    and the breaker's state on the instance.
//!
//! The parts, each with one job: [`breaker`] (the rule), [`breaker_sync`] (its state on the
//! instance), [`client`] (HTTP to a container), [`config`] (the reference's limits),
//! [`activity`] (when to write activity), [`waiting`] (the queue per container), [`metrics`],
//! [`failure`] (how a failed call is told). Beside them, what a call is for:
//! - [`delivery`]: the instance a call goes to ([`delivery::target`]), events routed to the
//!   containers the rules name and sent, and what `plugins.changed` tells;
//! - [`tool_calls`]: the one path of a tool call (checked, called, its answer checked);
//! - [`status`]: the writes of PluginInstance status a call makes (activity, breaker,
//!   switches, the live hold), a field manager per field;
//! - `index`: the index the calls read, under the names these modules use.

pub mod activity;
pub mod breaker;
pub mod breaker_sync;
pub mod client;
pub mod config;
pub mod delivery;
pub mod failure;
mod index;
pub mod metrics;
pub mod status;
pub mod tool_calls;
pub mod waiting;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::registry::Registry;
use tokio::sync::watch;

use crate::index::{Compiled, ContainerKey, Endpoint, Index, InstanceKey};
use crate::status::StatusWriter;
use activity::{ActivityLimiter, refresh_every};
use breaker::{Breakers, Change, Outcome, Pass};
use breaker_sync::BreakerSync;
use client::{CallFailure, PluginAnswer, PluginClient, PluginRequest};
pub use config::{CallKind, CallSettings, Limits};
use metrics::{
    CallLabels, CallMetrics, InstanceLabels, KindLabels, ResultLabels, TransitionLabels,
};
use model::manifest::Capability;
use model::resources::{Plugin, PluginInstance};
use waiting::Waiting;

/// The instance a call goes to, with what the call needs.
#[derive(Clone)]
pub struct Target {
    pub key: InstanceKey,
    /// The chat (a channel, thread or worktree thread).
    pub chat: String,
    /// The chat's name when it is a thread or worktree thread.
    pub thread_id: Option<String>,
    pub plugin: Arc<Plugin>,
    pub compiled: Arc<Compiled>,
    pub approved: BTreeSet<Capability>,
    pub instance: Arc<PluginInstance>,
    /// The instance's secret, which every request to its container carries.
    pub secret: String,
    /// HostConfig's idle timeout.
    pub idle_timeout: Option<Duration>,
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("key", &self.key)
            .field("chat", &self.chat)
            .field("plugin", &self.plugin_name())
            .finish_non_exhaustive()
    }
}

impl Target {
    pub fn plugin_name(&self) -> String {
        self.plugin.metadata.name.clone().unwrap_or_default()
    }
}

/// Why a stopped container could not be had.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StartError {
    /// The controller cannot run it: its instance's Ready condition says why.
    CannotStart(String),
    /// This many calls already wait for it.
    QueueFull(usize),
    /// It did not become Ready in time; what the instance says, if anything.
    Timeout {
        limit: Duration,
        instance_says: Option<String>,
    },
    /// The demand that starts it could not be recorded.
    Unavailable(String),
    /// It is stopped, and this call does not start containers.
    NotRunning,
    /// The Pod watch went away (the server is stopping).
    WatchGone,
}

/// Why a call brought no usable answer: the container could not be had, or it failed.
#[derive(Clone, Debug)]
pub enum CallError {
    Start(StartError),
    Plugin(CallFailure),
}

/// How a call treats a stopped container and the demand it records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallOptions {
    /// Start a stopped container (and wait for it).
    pub start: bool,
    /// Record the call as demand on a running one (keeps it from going idle).
    pub touch: bool,
}

impl CallOptions {
    /// A call the app, a workflow or a schedule makes: it starts the container and keeps it up.
    pub const DEMAND: Self = Self {
        start: true,
        touch: true,
    };
    /// A delivery that goes only to a container that runs, and keeps none up.
    pub const IF_RUNNING: Self = Self {
        start: false,
        touch: false,
    };
}

/// Records `Abandoned` for a call whose caller went away before it ended.
struct PassGuard<'a> {
    breakers: &'a Breakers,
    container: &'a ContainerKey,
    pass: Option<Pass>,
}

impl PassGuard<'_> {
    fn finish(mut self, outcome: Outcome) -> Option<Change> {
        let pass = self.pass.take()?;
        self.breakers
            .record(self.container, pass, outcome, Instant::now())
    }
}

impl Drop for PassGuard<'_> {
    fn drop(&mut self) {
        if let Some(pass) = self.pass.take() {
            self.breakers
                .record(self.container, pass, Outcome::Abandoned, Instant::now());
        }
    }
}

/// Calls to plugins. Cheap to clone.
#[derive(Clone)]
pub struct Calls {
    inner: Arc<Inner>,
}

struct Inner {
    /// Dropped with the last clone: the background tasks end then.
    _stop: watch::Sender<()>,
    settings: CallSettings,
    index: Arc<Index>,
    waiting: Waiting,
    breakers: Breakers,
    breaker_sync: Arc<BreakerSync>,
    activity: ActivityLimiter,
    client: PluginClient,
    writer: Arc<dyn StatusWriter>,
    metrics: Arc<CallMetrics>,
}

impl Calls {
    /// Calls through `index` (where containers answer), writing demand and the breaker's state
    /// with `writer`. Spawns the breaker's status writes and forgets the breakers of Pods that
    /// go away, until the last clone is dropped.
    pub fn new(
        settings: CallSettings,
        index: Arc<Index>,
        writer: Arc<dyn StatusWriter>,
        metrics: Arc<CallMetrics>,
    ) -> Self {
        let (stop, _) = watch::channel(());
        let breaker_sync = Arc::new(BreakerSync::default());
        tokio::spawn(until_stopped(
            stop.subscribe(),
            breaker_sync.clone().run(writer.clone()),
        ));
        let inner = Arc::new(Inner {
            breakers: Breakers::new(settings.breaker),
            _stop: stop,
            settings,
            waiting: Waiting::default(),
            breaker_sync,
            activity: ActivityLimiter::default(),
            client: PluginClient::new(),
            writer,
            metrics,
            index: index.clone(),
        });
        let mut gone = index.pods.gone();
        let weak = Arc::downgrade(&inner);
        tokio::spawn(until_stopped(inner._stop.subscribe(), async move {
            while let Ok(uid) = gone.recv().await {
                match weak.upgrade() {
                    Some(inner) => inner.breakers.forget_pod(&uid),
                    None => return,
                }
            }
        }));
        Self { inner }
    }

    /// The metrics of calls, registered in `registry`.
    pub fn register_metrics(registry: &mut Registry) -> Arc<CallMetrics> {
        Arc::new(CallMetrics::new(registry))
    }

    pub fn settings(&self) -> &CallSettings {
        &self.inner.settings
    }

    pub fn index(&self) -> &Arc<Index> {
        &self.inner.index
    }

    pub fn limits(&self) -> &Limits {
        &self.inner.settings.limits
    }

    /// How many calls wait for the instance's container to start now.
    pub fn waiting(&self, key: &InstanceKey) -> usize {
        self.inner.waiting.count(key)
    }

    /// Whether the target's container runs (or starts) now.
    pub fn running(&self, key: &InstanceKey) -> bool {
        self.inner.index.pods.current(key).running()
    }

    /// Where the target's container answers: at once when it runs; else, when `options`
    /// allow, after recording demand and waiting with the other calls for it until the Pod
    /// watch sees it Ready.
    pub async fn ready(
        &self,
        target: &Target,
        options: CallOptions,
    ) -> Result<Endpoint, StartError> {
        let inner = &self.inner;
        let mut rx = inner.index.pods.subscribe(&target.key);
        let view = rx.borrow_and_update().clone();
        if let Some(endpoint) = view.ready {
            if options.touch {
                self.touch_running(target);
            }
            return Ok(endpoint);
        }
        if !options.start {
            return Err(StartError::NotRunning);
        }
        if let Some(why) = cannot_run(&target.instance) {
            return Err(StartError::CannotStart(why));
        }
        let Some(_place) = inner.waiting.enter(&target.key, inner.settings.max_waiting) else {
            self.count_start("queue_full");
            return Err(StartError::QueueFull(inner.settings.max_waiting));
        };
        if view.exists {
            self.touch_running(target);
        } else {
            self.touch_start(target).await?;
        }
        let started = Instant::now();
        let limit = inner.settings.start_timeout;
        match tokio::time::timeout(limit, rx.wait_for(|v| v.ready.is_some())).await {
            Ok(Ok(view)) => {
                let endpoint = view.ready.clone().expect("waited for it");
                inner
                    .metrics
                    .start_wait_seconds
                    .observe(started.elapsed().as_secs_f64());
                self.count_start("ready");
                Ok(endpoint)
            }
            Ok(Err(_)) => Err(StartError::WatchGone),
            Err(_) => {
                self.count_start("timeout");
                let instance_says = inner
                    .index
                    .instance(&target.key)
                    .and_then(|i| ready_message(&i));
                Err(StartError::Timeout {
                    limit,
                    instance_says,
                })
            }
        }
    }

    fn count_start(&self, result: &'static str) {
        self.inner
            .metrics
            .starts
            .get_or_create(&ResultLabels { result })
            .inc();
    }

    fn activity_every(&self, idle_timeout: Option<Duration>) -> Duration {
        refresh_every(self.inner.settings.activity_every, idle_timeout)
    }

    fn recorded_activity(instance: &PluginInstance) -> Option<jiff::Timestamp> {
        instance
            .status
            .as_ref()?
            .last_activity
            .as_deref()
            .and_then(model::time::parse)
    }

    /// Records demand for a stopped container and waits for the write: it is what starts it.
    async fn touch_start(&self, target: &Target) -> Result<(), StartError> {
        let inner = &self.inner;
        let every = self.activity_every(target.idle_timeout);
        let recorded = Self::recorded_activity(&target.instance);
        if !inner.activity.claim(&target.key, true, recorded, every) {
            return Ok(());
        }
        let at = model::time::now_rfc3339();
        if let Err(e) = inner.writer.last_activity(&target.key, at).await {
            inner.activity.release(&target.key);
            return Err(StartError::Unavailable(format!(
                "could not record the demand that starts the container: {e}"
            )));
        }
        Ok(())
    }

    /// Refreshes a running container's demand, at most every so often, in the background.
    fn touch_running(&self, target: &Target) {
        self.record_activity(&target.key, &target.instance, target.idle_timeout);
    }

    /// Records accepted work for an instance whose container runs (or starts), at most every
    /// so often, in the background: what keeps it from going idle.
    pub fn record_activity(
        &self,
        key: &InstanceKey,
        instance: &PluginInstance,
        idle_timeout: Option<Duration>,
    ) {
        let inner = self.inner.clone();
        let every = self.activity_every(idle_timeout);
        if !inner
            .activity
            .claim(key, false, Self::recorded_activity(instance), every)
        {
            return;
        }
        let key = key.clone();
        tokio::spawn(async move {
            let at = model::time::now_rfc3339();
            if let Err(e) = inner.writer.last_activity(&key, at).await {
                inner.activity.release(&key);
                tracing::warn!(instance = %key, error = %e, "could not refresh the activity");
            }
        });
    }

    /// Calls the container behind its breaker; an answer of any status is `Ok`.
    pub async fn call(
        &self,
        target: &Target,
        endpoint: &Endpoint,
        request: &PluginRequest,
    ) -> Result<PluginAnswer, CallFailure> {
        let inner = &self.inner;
        let container = &endpoint.container;
        // Another replica's breaker opened for this container: this one's opens too.
        if let Some(shown) = target
            .instance
            .status
            .as_ref()
            .and_then(|s| s.breaker.as_ref())
            && let Some(change) =
                inner
                    .breakers
                    .adopt(container, shown, Instant::now(), jiff::Timestamp::now())
        {
            self.breaker_changed(target, change);
        }
        let (admitted, change) = inner.breakers.admit(container, Instant::now());
        match change {
            Some(change) => self.breaker_changed(target, change),
            None => self.show_breaker(target, container),
        }
        let pass = match admitted {
            Ok(pass) => pass,
            Err(rejected) => {
                let retry_after = rejected
                    .until
                    .map_or(Duration::from_secs(1), |u| {
                        u.saturating_duration_since(Instant::now())
                    })
                    .max(Duration::from_millis(1));
                let failure = CallFailure::BreakerOpen { retry_after };
                self.count_call(request, failure.label(), None);
                return Err(failure);
            }
        };
        let guard = PassGuard {
            breakers: &inner.breakers,
            container,
            pass: Some(pass),
        };
        let started = Instant::now();
        let result = inner.client.send(endpoint, &target.secret, request).await;
        let outcome = match &result {
            Ok(_) => Outcome::Answered,
            Err(failure) => failure.outcome(),
        };
        if let Some(change) = guard.finish(outcome) {
            self.breaker_changed(target, change);
        }
        let label = match &result {
            Ok(_) => "answered",
            Err(failure) => failure.label(),
        };
        self.count_call(request, label, Some(started.elapsed()));
        result
    }

    /// Has the target's container (as `options` allow), then calls it.
    pub async fn call_target(
        &self,
        target: &Target,
        request: &PluginRequest,
        options: CallOptions,
    ) -> Result<PluginAnswer, CallError> {
        let endpoint = self
            .ready(target, options)
            .await
            .map_err(CallError::Start)?;
        self.call(target, &endpoint, request)
            .await
            .map_err(CallError::Plugin)
    }

    fn count_call(&self, request: &PluginRequest, outcome: &'static str, took: Option<Duration>) {
        let m = &self.inner.metrics;
        m.calls
            .get_or_create(&CallLabels {
                kind: request.kind,
                outcome,
            })
            .inc();
        if let Some(took) = took {
            m.call_seconds
                .get_or_create(&KindLabels { kind: request.kind })
                .observe(took.as_secs_f64());
        }
    }

    fn breaker_changed(&self, target: &Target, change: Change) {
        let m = &self.inner.metrics;
        if change.before.name() != change.after.name() {
            m.breaker_transitions
                .get_or_create(&TransitionLabels {
                    to: change.after.name(),
                })
                .inc();
            tracing::info!(
                instance = %target.key,
                from = change.before.name(),
                to = change.after.name(),
                "breaker"
            );
        }
        m.breaker_state
            .get_or_create(&InstanceLabels {
                instance_namespace: target.key.namespace.clone(),
                plugin_instance: target.key.name.clone(),
            })
            .set(change.after.gauge());
        self.inner.breaker_sync.set(
            &target.key,
            change.state,
            target
                .instance
                .status
                .as_ref()
                .and_then(|s| s.breaker.as_ref()),
        );
    }

    /// Makes the instance show the breaker of the container called now (a new container's
    /// is closed, whatever its predecessor's was).
    fn show_breaker(&self, target: &Target, container: &ContainerKey) {
        let shown = target
            .instance
            .status
            .as_ref()
            .and_then(|s| s.breaker.as_ref());
        let state = self.inner.breakers.state(container);
        if shown == Some(&state) {
            return;
        }
        if shown.is_none() && state.state == "Closed" && state.failures == 0 {
            return;
        }
        self.inner
            .metrics
            .breaker_state
            .get_or_create(&InstanceLabels {
                instance_namespace: target.key.namespace.clone(),
                plugin_instance: target.key.name.clone(),
            })
            .set(match state.state.as_str() {
                "Open" => 1,
                "HalfOpen" => 2,
                _ => 0,
            });
        self.inner.breaker_sync.set(&target.key, state, shown);
    }
}

/// The instance's Ready condition, as the controller writes it.
fn ready_condition(instance: &PluginInstance) -> Option<&model::resources::Condition> {
    instance
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.r#type == "Ready")
}

/// Why the controller cannot run the instance's container, when its Ready condition says so.
fn cannot_run(instance: &PluginInstance) -> Option<String> {
    ready_condition(instance)
        .filter(|c| c.reason == "CannotRun")
        .map(|c| c.message.clone())
}

fn ready_message(instance: &PluginInstance) -> Option<String> {
    ready_condition(instance).map(|c| format!("{}: {}", c.reason, c.message))
}

/// Runs `task` until the stop channel closes.
async fn until_stopped(mut stop: watch::Receiver<()>, task: impl std::future::Future<Output = ()>) {
    tokio::select! {
        () = task => {}
        _ = stop.changed() => {}
    }
}
