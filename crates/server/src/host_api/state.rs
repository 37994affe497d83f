//! The host API's shared state, and the two things every call to a plugin goes through:
//! [`HostState::ready`] (scale-from-zero: record demand, then wait for the Pod watch to see
//! the container Ready, in a bounded queue) and [`HostState::call`] (the breaker, the secret,
//! the time limit and the size cap, with metrics and the breaker's state on the instance).

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use prometheus_client::registry::Registry;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::auth::{Auth, KubeReviewer, Reviewer};
use super::breaker::{Breakers, Change, ContainerKey, Outcome, Pass};
use super::call::{CallFailure, PluginAnswer, PluginClient, PluginRequest, seconds};
use super::config::HostSettings;
use super::config_events::{self, Generations};
use super::demand::{ActivityLimiter, refresh_every, rfc3339};
use super::error::{Code, HostError, HostResult};
use super::metrics::{
    CallLabels, HostMetrics, InstanceLabels, KindLabels, ResultLabels, TransitionLabels,
};
use super::pods::{Endpoint, PodIndex, Waiting, instance_of};
use super::settings_sent::SettingsSent;
use super::status::{BreakerSync, KubeStatusWriter, StatusWriter};
use super::target::{self, Stores, Target};
use super::tools::ManifestCache;
use model::names::MANAGED_SELECTOR;
use model::resources::{Channel, HostConfig, Plugin, PluginInstance, Project};

/// Everything the host API's handlers share. Cheap to clone.
#[derive(Clone)]
pub struct HostState {
    pub(crate) inner: Arc<Inner>,
}

pub(crate) struct Inner {
    /// Dropped with the last clone of the state: the background tasks (watches, the breaker's
    /// status writes) end then.
    _stop: watch::Sender<()>,
    pub settings: HostSettings,
    pub stores: Stores,
    pub pods: Arc<PodIndex>,
    pub waiting: Waiting,
    pub breakers: Breakers,
    pub breaker_sync: Arc<BreakerSync>,
    pub activity: ActivityLimiter,
    pub client: PluginClient,
    pub auth: Auth,
    pub writer: Arc<dyn StatusWriter>,
    pub metrics: Arc<HostMetrics>,
    pub manifests: ManifestCache,
}

/// Why a call brought no usable answer: the host's own refusal, or the container's failure.
#[derive(Clone, Debug)]
pub enum CallError {
    Host(HostError),
    Plugin(CallFailure),
}

impl From<HostError> for CallError {
    fn from(e: HostError) -> Self {
        CallError::Host(e)
    }
}

impl CallError {
    /// The error answer for a route other than tools.
    pub fn into_host_error(self, what: &str) -> HostError {
        match self {
            CallError::Host(e) => e,
            CallError::Plugin(failure) => failure_error(what, &failure),
        }
    }
}

/// The error answer for a call that brought no answer (actions, events, switches, `/x`).
pub fn failure_error(what: &str, failure: &CallFailure) -> HostError {
    match failure {
        CallFailure::BreakerOpen { retry_after } => HostError::new(
            Code::BreakerOpen,
            format!(
                "{what} was not called: its container left 3 calls in a row unanswered, so \
                 the host stops calling it for a while (next try in {})",
                seconds(*retry_after)
            ),
        )
        .retry_after(retry_after.as_secs_f64().ceil() as u64),
        CallFailure::TimedOut(limit) => HostError::new(
            Code::PluginTimeout,
            format!("{what} did not answer within {}", seconds(*limit)),
        ),
        CallFailure::Refused(why) => HostError::new(
            Code::PluginUnreachable,
            format!("{what} could not be reached: {why}"),
        ),
        CallFailure::TooLarge { cap } => HostError::new(
            Code::AnswerTooLarge,
            format!("{what} answered more than {cap} bytes; the host refuses it"),
        ),
        CallFailure::Broken(why) => HostError::new(
            Code::InvalidAnswer,
            format!("{what}'s answer broke off: {why}"),
        ),
    }
}

/// The error answer for a plugin's own error status.
pub fn plugin_error(what: &str, answer: &PluginAnswer) -> HostError {
    let mut e = HostError::new(
        Code::PluginError,
        format!(
            "{what} answered {}: {}",
            answer.status.as_u16(),
            answer.error_text()
        ),
    );
    e.plugin_status = Some(answer.status.as_u16());
    e
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

impl HostState {
    /// The state from its parts (tests give in-memory stores, reviewer and writer).
    pub fn from_parts(
        settings: HostSettings,
        stores: Stores,
        pods: Arc<PodIndex>,
        reviewer: Arc<dyn Reviewer>,
        writer: Arc<dyn StatusWriter>,
        metrics: Arc<HostMetrics>,
    ) -> Self {
        let (stop, _) = watch::channel(());
        Self::build(settings, stores, pods, reviewer, writer, metrics, stop)
    }

    fn build(
        settings: HostSettings,
        stores: Stores,
        pods: Arc<PodIndex>,
        reviewer: Arc<dyn Reviewer>,
        writer: Arc<dyn StatusWriter>,
        metrics: Arc<HostMetrics>,
        stop: watch::Sender<()>,
    ) -> Self {
        let breaker_sync = Arc::new(BreakerSync::default());
        tokio::spawn(until_stopped(
            stop.subscribe(),
            breaker_sync.clone().run(writer.clone()),
        ));
        let inner = Inner {
            _stop: stop,
            auth: Auth::new(reviewer, settings.review_ttl),
            breakers: Breakers::new(settings.breaker),
            settings,
            stores,
            pods,
            waiting: Waiting::default(),
            breaker_sync,
            activity: ActivityLimiter::default(),
            client: PluginClient::new(),
            writer,
            metrics,
            manifests: ManifestCache::default(),
        };
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The state of a running server: reflectors on the resources and the plugin Pods, the
    /// reviews and writes through `client`, metrics in `registry`. Resolves once every store
    /// holds its first list. The watches run until the last clone of the state is dropped.
    pub async fn new(
        client: Client,
        settings: HostSettings,
        registry: &mut Registry,
    ) -> anyhow::Result<Self> {
        let (stop, _) = watch::channel(());
        let managed = || watcher::Config::default().labels(MANAGED_SELECTOR);
        // Config writes (Project and HostConfig specs) send settings.changed.
        let (written_tx, written_rx) = tokio::sync::mpsc::unbounded_channel();
        let (mut host_gens, mut project_gens) = (Generations::default(), Generations::default());
        let host_tx = written_tx.clone();
        let stores = Stores {
            host: reflect_with(
                Api::<HostConfig>::all(client.clone()),
                Default::default(),
                &stop,
                move |e| config_events::on_host(&mut host_gens, e, &host_tx),
            ),
            plugins: reflect(
                Api::<Plugin>::all(client.clone()),
                Default::default(),
                &stop,
            ),
            projects: reflect_with(
                Api::<Project>::all(client.clone()),
                Default::default(),
                &stop,
                move |e| config_events::on_project(&mut project_gens, e, &written_tx),
            ),
            channels: reflect(
                Api::<Channel>::all(client.clone()),
                Default::default(),
                &stop,
            ),
            instances: reflect(Api::<PluginInstance>::all(client.clone()), managed(), &stop),
            secrets: reflect(
                Api::<Secret>::all(client.clone()),
                watcher::Config::default().labels(&format!(
                    "{MANAGED_SELECTOR},app.kubernetes.io/component=token"
                )),
                &stop,
            ),
        };
        let (pods, pods_store) = watch_pods(client.clone(), &stop);
        futures::try_join!(
            stores.host.wait_until_ready(),
            stores.plugins.wait_until_ready(),
            stores.projects.wait_until_ready(),
            stores.channels.wait_until_ready(),
            stores.instances.wait_until_ready(),
            stores.secrets.wait_until_ready(),
            pods_store.wait_until_ready(),
        )?;
        let metrics = Arc::new(HostMetrics::new(registry));
        let settings_stop = stop.subscribe();
        let settings_sent = settings
            .replicas_namespace
            .as_deref()
            .map(|ns| SettingsSent::new(client.clone(), ns));
        let state = Self::build(
            settings,
            stores,
            pods.index.clone(),
            Arc::new(KubeReviewer::new(client.clone())),
            Arc::new(KubeStatusWriter::new(client)),
            metrics,
            stop,
        );
        pods.attach(&state);
        tokio::spawn(until_stopped(
            settings_stop,
            config_events::run(Arc::downgrade(&state.inner), written_rx, settings_sent),
        ));
        Ok(state)
    }

    pub fn settings(&self) -> &HostSettings {
        &self.inner.settings
    }

    pub fn metrics(&self) -> &Arc<HostMetrics> {
        &self.inner.metrics
    }

    /// Checks the caller (401) and RBAC (403).
    pub async fn authorize(
        &self,
        headers: &axum::http::HeaderMap,
        permission: &super::auth::Permission,
    ) -> HostResult<()> {
        let (_, lookup) = self.inner.auth.check(headers, permission).await?;
        let result = match lookup {
            super::auth::Lookup::Cached => "cached",
            super::auth::Lookup::Reviewed => "reviewed",
        };
        self.inner
            .metrics
            .reviews
            .get_or_create(&ResultLabels { result })
            .inc();
        Ok(())
    }

    /// The plugin's instance in a chat.
    pub fn resolve(&self, namespace: &str, chat: &str, plugin: &str) -> HostResult<Target> {
        target::resolve(
            &self.inner.stores,
            &self.inner.manifests,
            namespace,
            chat,
            plugin,
        )
    }

    /// Where the target's container answers: at once when it runs; else after recording
    /// demand and waiting, with the other calls for it, until the Pod watch sees it Ready.
    pub async fn ready(&self, target: &Target) -> HostResult<Endpoint> {
        let inner = &self.inner;
        let mut rx = inner.pods.subscribe(&target.key);
        let view = rx.borrow_and_update().clone();
        if let Some(endpoint) = view.ready {
            self.touch_running(target);
            return Ok(endpoint);
        }
        if let Some(why) = cannot_run(&target.instance) {
            return Err(HostError::new(
                Code::CannotStart,
                format!(
                    "the container of plugin {} in chat {} cannot start: {why}",
                    target.plugin_name(),
                    target.chat
                ),
            ));
        }
        let Some(_place) = inner.waiting.enter(&target.key, inner.settings.max_waiting) else {
            self.count_start("queue_full");
            return Err(HostError::new(
                Code::QueueFull,
                format!(
                    "{} calls already wait for the container of plugin {} in chat {} to start",
                    inner.settings.max_waiting,
                    target.plugin_name(),
                    target.chat
                ),
            )
            .retry_after(1));
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
            Ok(Err(_)) => Err(HostError::new(Code::Internal, "the Pod watch went away")),
            Err(_) => {
                self.count_start("timeout");
                let why = inner
                    .stores
                    .instance(&target.key)
                    .and_then(|i| ready_message(&i))
                    .map(|m| format!(" (the instance says: {m})"))
                    .unwrap_or_default();
                Err(HostError::new(
                    Code::StartTimeout,
                    format!(
                        "the container of plugin {} in chat {} did not become Ready within {}{why}",
                        target.plugin_name(),
                        target.chat,
                        seconds(limit)
                    ),
                )
                .retry_after(5))
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

    fn activity_every(&self, target: &Target) -> Duration {
        refresh_every(self.inner.settings.activity_every, target.idle_timeout)
    }

    fn recorded_activity(target: &Target) -> Option<jiff::Timestamp> {
        target
            .instance
            .status
            .as_ref()?
            .last_activity
            .as_deref()?
            .parse()
            .ok()
    }

    /// Records demand for a stopped container and waits for the write: it is what starts it.
    async fn touch_start(&self, target: &Target) -> HostResult<()> {
        let inner = &self.inner;
        let every = self.activity_every(target);
        if !inner
            .activity
            .claim(&target.key, true, Self::recorded_activity(target), every)
        {
            return Ok(());
        }
        let at = rfc3339(jiff::Timestamp::now());
        if let Err(e) = inner.writer.last_activity(&target.key, at).await {
            inner.activity.release(&target.key);
            return Err(HostError::new(
                Code::Unavailable,
                format!("could not record the demand that starts the container: {e}"),
            )
            .retry_after(1));
        }
        Ok(())
    }

    /// Refreshes a running container's demand, at most every so often, in the background.
    fn touch_running(&self, target: &Target) {
        let inner = self.inner.clone();
        let every = self.activity_every(target);
        if !inner
            .activity
            .claim(&target.key, false, Self::recorded_activity(target), every)
        {
            return;
        }
        let key = target.key.clone();
        tokio::spawn(async move {
            let at = rfc3339(jiff::Timestamp::now());
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

    /// Makes sure the target's container runs, then calls it.
    pub async fn call_target(
        &self,
        target: &Target,
        request: &PluginRequest,
    ) -> Result<PluginAnswer, CallError> {
        let endpoint = self.ready(target).await?;
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
                namespace: target.key.namespace.clone(),
                instance: target.key.name.clone(),
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
                namespace: target.key.namespace.clone(),
                instance: target.key.name.clone(),
            })
            .set(match state.state.as_str() {
                "Open" => 1,
                "HalfOpen" => 2,
                _ => 0,
            });
        self.inner.breaker_sync.set(&target.key, state, shown);
    }
}

/// Why the controller cannot run the instance's container, when its Ready condition says so.
fn cannot_run(instance: &PluginInstance) -> Option<String> {
    let c = instance
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.r#type == "Ready")?;
    (c.reason == "CannotRun").then(|| c.message.clone())
}

fn ready_message(instance: &PluginInstance) -> Option<String> {
    let c = instance
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.r#type == "Ready")?;
    Some(format!("{}: {}", c.reason, c.message))
}

/// Runs `task` until the state's stop channel closes.
async fn until_stopped(mut stop: watch::Receiver<()>, task: impl std::future::Future<Output = ()>) {
    tokio::select! {
        () = task => {}
        _ = stop.changed() => {}
    }
}

/// Fills a reflector store from a watch, in the background, until the state is dropped.
fn reflect<K>(api: Api<K>, config: watcher::Config, stop: &watch::Sender<()>) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    reflect_with(api, config, stop, |_| {})
}

/// [`reflect`], showing each event (once the store holds it) to `on_event`.
fn reflect_with<K>(
    api: Api<K>,
    config: watcher::Config,
    stop: &watch::Sender<()>,
    mut on_event: impl FnMut(&watcher::Event<K>) + Send + 'static,
) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, config).default_backoff().reflect(writer);
    tokio::spawn(until_stopped(stop.subscribe(), async move {
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => on_event(&event),
                Err(err) => {
                    tracing::warn!(%err, kind = %K::kind(&()), "host API watch failed; retrying");
                }
            }
        }
    }));
    store
}

/// The plugin Pods' watch: feeds the store and publishes each instance's view as events come.
struct PodWatch {
    index: Arc<PodIndex>,
    state: Arc<std::sync::OnceLock<std::sync::Weak<Inner>>>,
}

impl PodWatch {
    /// Lets the watch forget the breakers of Pods that are gone.
    fn attach(&self, state: &HostState) {
        let _ = self.state.set(Arc::downgrade(&state.inner));
    }
}

fn watch_pods(client: Client, stop: &watch::Sender<()>) -> (PodWatch, Store<Pod>) {
    let (store, writer) = reflector::store::<Pod>();
    let index = Arc::new(PodIndex::new(store.clone()));
    let state: Arc<std::sync::OnceLock<std::sync::Weak<Inner>>> = Arc::default();
    let selector = format!("{MANAGED_SELECTOR},app.kubernetes.io/component=plugin");
    let stream = watcher(
        Api::<Pod>::all(client),
        watcher::Config::default().labels(&selector),
    )
    .default_backoff()
    .reflect(writer);
    let (idx, st) = (index.clone(), state.clone());
    tokio::spawn(until_stopped(stop.subscribe(), async move {
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::Apply(pod)) | Ok(watcher::Event::InitApply(pod)) => {
                    if let Some(key) = instance_of(&pod) {
                        idx.refresh(&key);
                    }
                }
                Ok(watcher::Event::Delete(pod)) => {
                    if let Some(key) = instance_of(&pod) {
                        idx.refresh(&key);
                    }
                    let inner = st.get().and_then(std::sync::Weak::upgrade);
                    if let (Some(inner), Some(uid)) = (inner, pod.metadata.uid.as_deref()) {
                        inner.breakers.forget_pod(uid);
                    }
                }
                Ok(watcher::Event::InitDone) => idx.refresh_all(),
                Ok(watcher::Event::Init) => {}
                Err(err) => tracing::warn!(%err, "host API watch of plugin Pods failed; retrying"),
            }
        }
    }));
    (PodWatch { index, state }, store)
}
