//! The one index of the cluster that every long-lived role reads (like linkerd's policy
//! controller: one index, many servers). A process starts it once for the roles it runs
//! ([`Index::start`] with [`Roles`]); the controller's reconcilers and the API server's
//! answers read its stores, never the API server. Nothing here writes to the cluster.
//!
//! - [`kinds`]: which kinds a process watches, and which of their objects, for its roles
//!   (pure; the table of what each role's index holds is there);
//! - [`watch`]: the one way the index reads the cluster: a watch per kind feeding its store,
//!   with hooks before and after the store, and a stop signal; [`start`] starts them;
//! - [`unreadable`]: an object that does not parse as its type is left out of its store (the
//!   rest of its kind is served) and recorded, for the log, the metrics and an Event;
//! - [`trim`]: what a stored object loses; [`compact`]: the compact form of the children the
//!   controller keeps by the thousand;
//! - [`feed`]: the subscribers of a kind's watch, the streams a kube `Controller` takes;
//! - derived indexes, fed by the hooks: [`tokens`] (a plugin token's digest to its instance),
//!   [`pods`] (where each instance's container answers), [`config_writes`] (for
//!   `settings.changed`), [`changed`] (change counters for the fan-out), [`epoch`] (a count of
//!   the changes that decide who a token speaks for);
//! - [`manifests`]: each Plugin's manifest parsed and its tools' schemas compiled, once per
//!   version;
//! - [`awaited`]: the objects this process made that its stores do not show yet, so a writer
//!   woken again before its store caught up does not make them twice.

pub mod awaited;
pub mod changed;
pub mod compact;
pub mod config_hashes;
pub mod config_writes;
pub mod epoch;
pub mod feed;
pub mod kinds;
pub mod manifests;
pub mod pods;
pub mod settings;
pub mod start;
pub mod tokens;
pub mod trim;
pub mod unreadable;
pub mod watch;

use std::sync::Arc;

use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::ResourceExt;
use kube::runtime::reflector::{self, ObjectRef, Store, store::Writer};

use model::resources::{
    AgentRun, Channel, HOST_CONFIG_NAME, HostConfig, HostConfigSpec, Plugin, PluginInstance,
    Project, ProjectTrust, ToolCallApproval, WorkingTree,
};

pub use awaited::Awaited;
pub use changed::Changed;
pub use compact::Compact;
pub use config_writes::ConfigWrite;
pub use epoch::Epoch;
pub use feed::Feed;
pub use kinds::{ControllerRole, Roles};
pub use manifests::{Compiled, Manifests};
pub use pods::{ContainerKey, Endpoint, InstanceKey, PodIndex, PodView};
pub use start::{Error, Started};
pub use tokens::{TokenIndex, TokenOwner};
pub use unreadable::{UnreadableObject, Unreadables};
pub use watch::Watch;

/// Every store and derived index, filled by the watches of the roles the process runs (see
/// [`kinds`]): a store no role of the process reads stays empty.
pub struct Index {
    // What both roles read.
    pub host: Store<HostConfig>,
    pub plugins: Store<Plugin>,
    pub projects: Store<Project>,
    /// Each project's trust (same name as its Project).
    pub project_trusts: Store<ProjectTrust>,
    pub channels: Store<Channel>,
    /// Label-selected: the instances the controller made.
    pub instances: Store<PluginInstance>,
    /// The Pods we made (the plugin Pods alone for the API server alone), and where each
    /// instance's container answers.
    pub pods: Arc<PodIndex>,
    /// Each Plugin's manifest compiled once per version.
    pub manifests: Arc<Manifests>,
    /// Each Project's config hash, once per version.
    pub config_hashes: Arc<config_hashes::ConfigHashes>,
    /// Each plugin's settings in each project, once per version of their sources.
    pub settings: Arc<settings::Settings>,

    // The controller's.
    /// Label-selected: the Secrets the controller made (token Secrets, registry credentials
    /// copied beside a plugin's Pods), compact.
    pub owned_secrets: Store<Compact<Secret>>,
    /// Label-selected: the chats' /data claims, compact.
    pub claims: Store<Compact<PersistentVolumeClaim>>,
    /// Label-selected: the scheduled actions' CronJobs, compact.
    pub cronjobs: Store<Compact<CronJob>>,
    /// Secrets of the controller's own namespace: HostConfig's registry credentials.
    pub registry_secrets: Store<Secret>,
    /// Label-selected: the agent runs' Jobs.
    pub jobs: Store<Job>,
    /// Every NetworkPolicy: each plugin's egress policy (ours), and the policies that close
    /// plugin Pods' egress, where ours are made (see the controller's `egress`).
    pub network_policies: Store<NetworkPolicy>,

    // The API server's.
    /// Label-selected: the runs the API server made (the controller runs them).
    pub runs: Store<AgentRun>,
    /// Label-selected: the inbox, memory, live session and quality scan ConfigMaps the API
    /// server made.
    pub config_maps: Store<ConfigMap>,
    /// The agents' tool calls waiting for (or decided by) a person, which the API server made.
    pub approvals: Store<ToolCallApproval>,
    /// The instances' token Secrets, holding only the secret that calls to the plugin carry.
    pub secrets: Store<Secret>,
    /// The digests of the tokens plugins call with, and whose each is.
    pub tokens: Arc<TokenIndex>,
    /// Woken when a kind's store changed, for the fan-out that follows it.
    pub changed: Arc<Changed>,
    /// Counts the changes to what decides who a token speaks for (see [`epoch`]).
    pub callers_epoch: Arc<Epoch>,
    /// The objects the watches left out because they do not parse (see [`unreadable`]).
    pub unreadable: Arc<Unreadables>,
    /// The objects this process made that its stores do not show yet (see [`awaited`]).
    pub awaited: Arc<Awaited>,

    /// The subscribers of each kind's watch.
    pub feeds: Feeds,
}

/// The subscribers of each kind's watch (see [`Feed`]), by the store the watch fills.
pub struct Feeds {
    pub host: Feed<HostConfig>,
    pub plugins: Feed<Plugin>,
    pub projects: Feed<Project>,
    pub project_trusts: Feed<ProjectTrust>,
    pub channels: Feed<Channel>,
    pub instances: Feed<PluginInstance>,
    pub pods: Feed<k8s_openapi::api::core::v1::Pod>,
    pub owned_secrets: Feed<Compact<Secret>>,
    pub claims: Feed<Compact<PersistentVolumeClaim>>,
    pub cronjobs: Feed<Compact<CronJob>>,
    pub registry_secrets: Feed<Secret>,
    pub jobs: Feed<Job>,
    pub network_policies: Feed<NetworkPolicy>,
    pub runs: Feed<AgentRun>,
    pub config_maps: Feed<ConfigMap>,
    pub approvals: Feed<ToolCallApproval>,
    pub secrets: Feed<Secret>,
}

/// Writers of an index's stores: the watches' ends, or a test's.
pub struct Writers {
    pub host: Writer<HostConfig>,
    pub plugins: Writer<Plugin>,
    pub projects: Writer<Project>,
    pub project_trusts: Writer<ProjectTrust>,
    pub channels: Writer<Channel>,
    pub instances: Writer<PluginInstance>,
    pub pods: Writer<k8s_openapi::api::core::v1::Pod>,
    pub owned_secrets: Writer<Compact<Secret>>,
    pub claims: Writer<Compact<PersistentVolumeClaim>>,
    pub cronjobs: Writer<Compact<CronJob>>,
    pub registry_secrets: Writer<Secret>,
    pub jobs: Writer<Job>,
    pub network_policies: Writer<NetworkPolicy>,
    pub runs: Writer<AgentRun>,
    pub config_maps: Writer<ConfigMap>,
    pub approvals: Writer<ToolCallApproval>,
    pub secrets: Writer<Secret>,
}

impl Index {
    /// An empty index and the writers that fill it (tests).
    pub fn in_memory() -> (Arc<Index>, Writers) {
        let (index, writers) = Self::empty();
        (Arc::new(index), writers)
    }

    /// An empty index, and the writers of its stores.
    fn empty() -> (Index, Writers) {
        let (host, host_w) = reflector::store();
        let (plugins, plugins_w) = reflector::store();
        let (projects, projects_w) = reflector::store();
        let (project_trusts, project_trusts_w) = reflector::store();
        let (channels, channels_w) = reflector::store();
        let (instances, instances_w) = reflector::store();
        let (pods, pods_w) = reflector::store();
        let (owned_secrets, owned_secrets_w) = reflector::store();
        let (claims, claims_w) = reflector::store();
        let (cronjobs, cronjobs_w) = reflector::store();
        let (registry_secrets, registry_secrets_w) = reflector::store();
        let (jobs, jobs_w) = reflector::store();
        let (network_policies, network_policies_w) = reflector::store();
        let (runs, runs_w) = reflector::store();
        let (config_maps, config_maps_w) = reflector::store();
        let (approvals, approvals_w) = reflector::store();
        let (secrets, secrets_w) = reflector::store();
        let feeds = Feeds {
            host: Feed::new(host.clone()),
            plugins: Feed::new(plugins.clone()),
            projects: Feed::new(projects.clone()),
            project_trusts: Feed::new(project_trusts.clone()),
            channels: Feed::new(channels.clone()),
            instances: Feed::new(instances.clone()),
            pods: Feed::new(pods.clone()),
            owned_secrets: Feed::new(owned_secrets.clone()),
            claims: Feed::new(claims.clone()),
            cronjobs: Feed::new(cronjobs.clone()),
            registry_secrets: Feed::new(registry_secrets.clone()),
            jobs: Feed::new(jobs.clone()),
            network_policies: Feed::new(network_policies.clone()),
            runs: Feed::new(runs.clone()),
            config_maps: Feed::new(config_maps.clone()),
            approvals: Feed::new(approvals.clone()),
            secrets: Feed::new(secrets.clone()),
        };
        let index = Index {
            host,
            plugins,
            projects,
            project_trusts,
            channels,
            instances,
            pods: Arc::new(PodIndex::new(pods)),
            manifests: Arc::default(),
            config_hashes: Arc::default(),
            settings: Arc::default(),
            owned_secrets,
            claims,
            cronjobs,
            registry_secrets,
            jobs,
            network_policies,
            runs,
            config_maps,
            approvals,
            secrets,
            tokens: Arc::default(),
            changed: Arc::default(),
            callers_epoch: Arc::default(),
            unreadable: Arc::default(),
            awaited: Arc::default(),
            feeds,
        };
        let writers = Writers {
            host: host_w,
            plugins: plugins_w,
            projects: projects_w,
            project_trusts: project_trusts_w,
            channels: channels_w,
            instances: instances_w,
            pods: pods_w,
            owned_secrets: owned_secrets_w,
            claims: claims_w,
            cronjobs: cronjobs_w,
            registry_secrets: registry_secrets_w,
            jobs: jobs_w,
            network_policies: network_policies_w,
            runs: runs_w,
            config_maps: config_maps_w,
            approvals: approvals_w,
            secrets: secrets_w,
        };
        (index, writers)
    }

    /// The HostConfig as the store keeps it (no copy); a default one while none exists.
    pub fn host_config(&self) -> Arc<HostConfig> {
        self.host
            .get(&ObjectRef::new(HOST_CONFIG_NAME))
            .unwrap_or_else(|| {
                Arc::new(HostConfig::new(HOST_CONFIG_NAME, HostConfigSpec::default()))
            })
    }

    pub fn plugin(&self, name: &str) -> Option<Arc<Plugin>> {
        self.plugins.get(&ObjectRef::new(name))
    }

    pub fn channel(&self, namespace: &str, name: &str) -> Option<Arc<Channel>> {
        self.channels.get(&ObjectRef::new(name).within(namespace))
    }

    pub fn project(&self, namespace: &str, name: &str) -> Option<Arc<Project>> {
        self.projects.get(&ObjectRef::new(name).within(namespace))
    }

    /// The project's trust: the ProjectTrust named like the Project.
    pub fn project_trust(&self, namespace: &str, project: &str) -> Option<Arc<ProjectTrust>> {
        self.project_trusts
            .get(&ObjectRef::new(project).within(namespace))
    }

    pub fn instance(&self, key: &InstanceKey) -> Option<Arc<PluginInstance>> {
        self.instances
            .get(&ObjectRef::new(&key.name).within(&key.namespace))
    }

    /// The chat's working tree: its own, or for a thread without one, its channel's.
    pub fn working_tree(&self, channel: &Channel) -> Option<WorkingTree> {
        if let Some(tree) = &channel.spec.working_tree {
            return Some(tree.clone());
        }
        let parent = channel.spec.parent.as_ref()?;
        let ns = channel.namespace()?;
        self.channel(&ns, parent)?.spec.working_tree.clone()
    }
}

#[cfg(test)]
mod tests {
    use kube::Resource;
    use kube::runtime::reflector::store::Writer;

    use super::*;

    fn kind<K: Resource<DynamicType = ()> + Clone>(_: &Writer<K>) -> String {
        K::kind(&()).into_owned()
    }

    // Every store is named below (a new one fails to compile until it is), and its kind must
    // be in `kinds::KINDS`, which the metrics of unreadable objects count by.
    #[test]
    fn every_stored_kind_is_one_the_metrics_name() {
        let (_, writers) = Index::empty();
        let Writers {
            host,
            plugins,
            projects,
            project_trusts,
            channels,
            instances,
            pods,
            owned_secrets,
            claims,
            cronjobs,
            registry_secrets,
            jobs,
            network_policies,
            runs,
            config_maps,
            approvals,
            secrets,
        } = writers;
        let stored = [
            kind(&host),
            kind(&plugins),
            kind(&projects),
            kind(&project_trusts),
            kind(&channels),
            kind(&instances),
            kind(&pods),
            kind(&owned_secrets),
            kind(&claims),
            kind(&cronjobs),
            kind(&registry_secrets),
            kind(&jobs),
            kind(&network_policies),
            kind(&runs),
            kind(&config_maps),
            kind(&approvals),
            kind(&secrets),
        ];
        for kind in &stored {
            assert!(kinds::KINDS.contains(&kind.as_str()), "{kind}");
        }
        for kind in kinds::KINDS {
            assert!(stored.iter().any(|k| k == kind), "{kind} is stored nowhere");
        }
    }
}
