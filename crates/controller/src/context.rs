//! What every reconcile shares: the client, the Event recorder, the metrics and the reflector
//! stores every decision reads from (the controller's view of the index).

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ObjectReference, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use std::sync::Arc;

use kube::Client;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::Store;
use kube::{Resource, ResourceExt};

use super::metrics::Metrics;
use super::write::Writes;
use index::compact::Compact;
use index::manifests::Manifests;
use index::{Awaited, Index};
use model::resources::{
    AgentRun, Channel, HOST_CONFIG_NAME, HostConfig, HostConfigSpec, Plugin, PluginInstance,
    Project, ProjectTrust,
};

/// The reflector stores: the declared resources, and (label-selected) the children we own. The
/// index's stores, as the controller reads them.
#[derive(Clone)]
pub struct Stores {
    pub host: Store<HostConfig>,
    pub plugins: Store<Plugin>,
    pub projects: Store<Project>,
    /// Each project's trust (same name as its Project).
    pub project_trusts: Store<ProjectTrust>,
    pub channels: Store<Channel>,
    pub instances: Store<PluginInstance>,
    pub pods: Store<Pod>,
    pub secrets: Store<Compact<Secret>>,
    pub claims: Store<Compact<PersistentVolumeClaim>>,
    pub cronjobs: Store<Compact<CronJob>>,
    /// Secrets of the controller's own namespace: HostConfig's registry credentials.
    pub registry_secrets: Store<Secret>,
    /// The agent runs (the API server makes them), and their Jobs.
    pub runs: Store<AgentRun>,
    pub jobs: Store<Job>,
    /// Every NetworkPolicy: the plugins' egress policies, and those that close plugin Pods.
    pub network_policies: Store<NetworkPolicy>,
}

impl Stores {
    /// The stores of `index`, started with the controller's role.
    pub fn of(index: &Index) -> Self {
        Self {
            host: index.host.clone(),
            plugins: index.plugins.clone(),
            projects: index.projects.clone(),
            project_trusts: index.project_trusts.clone(),
            channels: index.channels.clone(),
            instances: index.instances.clone(),
            pods: index.pods.store().clone(),
            secrets: index.owned_secrets.clone(),
            claims: index.claims.clone(),
            cronjobs: index.cronjobs.clone(),
            registry_secrets: index.registry_secrets.clone(),
            runs: index.runs.clone(),
            jobs: index.jobs.clone(),
            network_policies: index.network_policies.clone(),
        }
    }
}

/// The options the controller is started with (its flags; not a plugin's settings).
#[derive(Clone, Debug)]
pub struct Options {
    /// Our own image, pinned by digest: CronJobs run `trigger` from it.
    pub self_image: String,
    /// LOOP_API_URL for plugin pods, unless HostConfig sets one.
    pub api_url: String,
    /// The controller's own namespace, where HostConfig's registry credentials Secret is.
    pub namespace: String,
    /// Reconciles each controller (chat, instance, plugin, project) runs at once.
    pub concurrency: u16,
    /// Writes in flight at once, across every reconcile (see `write::Writes::permit`).
    pub writes_in_flight: u16,
}

/// Shared by every reconcile.
pub struct Context {
    pub client: Client,
    pub recorder: Recorder,
    pub metrics: Metrics,
    pub stores: Stores,
    pub options: Options,
    /// Failures in a row by object, for the retry backoff.
    pub backoff: super::retry::Backoff,
    /// When this controller started reconciling (it leads from then on): a composer switch
    /// that is on starts the plugin's container once after it (see `pod_wanted`).
    pub started: jiff::Timestamp,
    /// Registry clients and image facts by digest, for admission.
    pub images: super::images::Images,
    /// Each Plugin's manifest, parsed once per version.
    pub manifests: Arc<Manifests>,
    /// The one door for writes (see `write`).
    pub writes: Writes,
}

impl Context {
    /// A context over `stores`, with a manifest cache and a memory of objects made of its own
    /// (tests).
    #[cfg(test)]
    pub fn new(client: Client, metrics: Metrics, stores: Stores, options: Options) -> Self {
        Self::built(
            client,
            metrics,
            stores,
            Default::default(),
            Default::default(),
            options,
        )
    }

    /// A context over `index`: its stores, its manifest cache and what it awaits.
    pub fn over(client: Client, metrics: Metrics, index: &Index, options: Options) -> Self {
        let (manifests, made) = (index.manifests.clone(), index.awaited.clone());
        Self::built(client, metrics, Stores::of(index), manifests, made, options)
    }

    fn built(
        client: Client,
        metrics: Metrics,
        stores: Stores,
        manifests: Arc<Manifests>,
        made: Arc<Awaited>,
        options: Options,
    ) -> Self {
        let reporter = Reporter {
            controller: "loop-plugins-controller".into(),
            instance: std::env::var(runtime::pod_env::POD_NAME).ok(),
        };
        let writes = Writes::new(
            client.clone(),
            metrics.clone(),
            options.writes_in_flight,
            made,
        );
        Self {
            recorder: Recorder::new(client.clone(), reporter),
            client,
            metrics,
            stores,
            backoff: Default::default(),
            started: jiff::Timestamp::now(),
            images: Default::default(),
            manifests,
            writes,
            options,
        }
    }

    /// The global config; its defaults while no HostConfig exists.
    pub fn host(&self) -> HostConfigSpec {
        self.stores
            .host
            .state()
            .into_iter()
            .find(|h| h.name_any() == HOST_CONFIG_NAME)
            .map(|h| h.spec.clone())
            .unwrap_or_default()
    }

    /// LOOP_API_URL as plugin pods see it.
    pub fn api_url(&self, host: &HostConfigSpec) -> String {
        host.api_url
            .clone()
            .unwrap_or_else(|| self.options.api_url.clone())
    }

    /// Publishes an Event about `object`; failing to publish never fails a reconcile.
    pub async fn event<K: Resource<DynamicType = ()>>(
        &self,
        object: &K,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        self.event_on(&object.object_ref(&()), warning, reason, action, note)
            .await
    }

    /// [`Context::event`] about the object `regarding` names (one the stores do not hold).
    pub async fn event_on(
        &self,
        regarding: &ObjectReference,
        warning: bool,
        reason: &str,
        action: &str,
        note: String,
    ) {
        let event = Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.into(),
            note: Some(note),
            action: action.into(),
            secondary: None,
        };
        self.metrics.write("Event", "create");
        let _turn = self.writes.permit().await;
        if let Err(err) = self.recorder.publish(&event, regarding).await {
            tracing::warn!(%err, reason, "could not publish an Event");
        }
    }
}
