//! The API server's one index of the cluster: a reflector store per kind, watched once per
//! process and shared by the Plugin API, the host API and the fan-out (like linkerd's policy
//! controller: one index, many servers). Nothing here writes; answers read from it, never from
//! the API server.
//!
//! - the declared resources (HostConfig, Plugins, Projects and their ProjectTrusts, Channels)
//!   and what we made
//!   (PluginInstances, AgentRuns, the inbox and memory ConfigMaps), label-selected;
//! - the instances' Secrets, keeping only the secret each call to a plugin carries: the tokens
//!   plugins call us with go to [`tokens::TokenIndex`] as digests and are dropped from the
//!   stored objects;
//! - plugin Pods, and where each instance's container answers ([`pods::PodIndex`]);
//! - each Plugin's manifest parsed and its schemas compiled once ([`Manifests`]);
//! - config writes (a Project's or the HostConfig's spec changed, a project trusted again or
//!   no longer) for `settings.changed` ([`config_writes`]).
//!
//! Stored objects lose their `managedFields`: nothing reads them, and they are most of an
//! object's size.

pub mod config_writes;
pub mod pods;
pub mod tokens;

use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch as stop_watch};

use model::contract::TOKEN_KEY;
use model::names::MANAGED_SELECTOR;
use model::resources::{
    AgentRun, Channel, HOST_CONFIG_NAME, HostConfig, HostConfigSpec, Plugin, PluginInstance,
    Project, ProjectTrust, WorkingTree,
};

pub use ::index::manifests::{Compiled, Manifests};
pub use config_writes::Written;
pub use pods::{ContainerKey, Endpoint, InstanceKey, PodIndex, PodView};
pub use tokens::{TokenIndex, TokenOwner};

/// The label selector of the instances' token Secrets.
pub fn token_secrets_selector() -> String {
    format!("{MANAGED_SELECTOR},app.kubernetes.io/component=token")
}

/// The label selector of plugin Pods.
pub fn plugin_pods_selector() -> String {
    format!("{MANAGED_SELECTOR},app.kubernetes.io/component=plugin")
}

/// The label selector of the API server's inbox and memory ConfigMaps.
pub fn config_maps_selector() -> String {
    format!("{MANAGED_SELECTOR},app.kubernetes.io/component in (inbox,memory)")
}

/// Every store, filled once per process.
pub struct Index {
    pub host: Store<HostConfig>,
    pub plugins: Store<Plugin>,
    pub projects: Store<Project>,
    /// Each project's trust (same name as its Project).
    pub project_trusts: Store<ProjectTrust>,
    pub channels: Store<Channel>,
    /// Label-selected: the instances the controller made.
    pub instances: Store<PluginInstance>,
    /// Label-selected: the runs the API server made.
    pub runs: Store<AgentRun>,
    /// Label-selected: the inbox and memory ConfigMaps the API server made.
    pub config_maps: Store<ConfigMap>,
    /// The instances' Secrets, holding only the secret that calls to the plugin carry.
    pub secrets: Store<Secret>,
    pub pods: Arc<PodIndex>,
    pub tokens: Arc<TokenIndex>,
    pub manifests: Arc<Manifests>,
    /// Woken when a kind's store changed, for the fan-out that follows it.
    pub changed: Arc<Changed>,
}

/// A change counter per kind the fan-out follows: each follower subscribes and sees every
/// change since it last looked (a change while it worked is seen at its next wait).
pub struct Changed {
    pub plugins: tokio::sync::watch::Sender<u64>,
    pub instances: tokio::sync::watch::Sender<u64>,
    pub runs: tokio::sync::watch::Sender<u64>,
}

impl Default for Changed {
    fn default() -> Self {
        Self {
            plugins: tokio::sync::watch::channel(0).0,
            instances: tokio::sync::watch::channel(0).0,
            runs: tokio::sync::watch::channel(0).0,
        }
    }
}

/// Counts one change.
fn bump(counter: &tokio::sync::watch::Sender<u64>) {
    counter.send_modify(|n| *n = n.wrapping_add(1));
}

/// A started index: the index, and the config writes it saw (for `settings.changed`).
pub struct Started {
    pub index: Arc<Index>,
    pub config_writes: mpsc::UnboundedReceiver<Written>,
}

impl Index {
    /// Starts every watch and resolves once each store holds its first list. The watches run
    /// until `stop` turns true (or its sender goes).
    pub async fn start(
        client: Client,
        stop: stop_watch::Receiver<bool>,
    ) -> anyhow::Result<Started> {
        let managed = || watcher::Config::default().labels(MANAGED_SELECTOR);
        let (writes_tx, writes_rx) = mpsc::unbounded_channel();
        let host_tx = writes_tx.clone();
        let trust_tx = writes_tx.clone();
        let mut host_gens = config_writes::Generations::default();
        let mut project_gens = config_writes::Generations::default();
        let mut trust_gens = config_writes::Generations::default();
        let tokens = Arc::new(TokenIndex::new());
        let token_feed = tokens.clone();
        let (pods_store, pods_writer) = reflector::store::<Pod>();
        let pods = Arc::new(PodIndex::new(pods_store.clone()));
        let pod_feed = pods.clone();
        let changed = Arc::new(Changed::default());
        let manifests = Arc::new(Manifests::default());
        let deleted_plugins = manifests.clone();
        let (on_plugins, on_instances, on_runs) =
            (changed.clone(), changed.clone(), changed.clone());
        let index = Index {
            host: reflect(&client, watcher::Config::default(), &stop, move |e| {
                config_writes::on_host(&mut host_gens, e, &host_tx)
            }),
            plugins: reflect(&client, watcher::Config::default(), &stop, move |e| {
                bump(&on_plugins.plugins);
                deleted_plugins.apply_watcher_event(e);
            }),
            projects: reflect(&client, watcher::Config::default(), &stop, move |e| {
                config_writes::on_project(&mut project_gens, e, &writes_tx)
            }),
            project_trusts: reflect(&client, watcher::Config::default(), &stop, move |e| {
                config_writes::on_trust(&mut trust_gens, e, &trust_tx)
            }),
            channels: reflect(&client, watcher::Config::default(), &stop, |_| {}),
            instances: reflect(&client, managed(), &stop, move |_| {
                bump(&on_instances.instances)
            }),
            runs: reflect(&client, managed(), &stop, move |_| bump(&on_runs.runs)),
            config_maps: reflect(
                &client,
                watcher::Config::default().labels(&config_maps_selector()),
                &stop,
                |_| {},
            ),
            secrets: reflect_secrets(Api::all(client.clone()), &stop, move |e| {
                token_feed.apply_watcher_event(e)
            }),
            pods,
            tokens,
            manifests,
            changed,
        };
        spawn_watch(
            Api::<Pod>::all(client),
            watcher::Config::default().labels(&plugin_pods_selector()),
            pods_writer,
            &stop,
            move |e| pod_feed.apply_watcher_event(e),
            |_| {},
        );
        tracing::info!("waiting for the caches to fill");
        futures::try_join!(
            index.host.wait_until_ready(),
            index.plugins.wait_until_ready(),
            index.projects.wait_until_ready(),
            index.project_trusts.wait_until_ready(),
            index.channels.wait_until_ready(),
            index.instances.wait_until_ready(),
            index.runs.wait_until_ready(),
            index.config_maps.wait_until_ready(),
            index.secrets.wait_until_ready(),
            pods_store.wait_until_ready(),
        )?;
        Ok(Started {
            index: Arc::new(index),
            config_writes: writes_rx,
        })
    }

    /// The global config; its defaults while no HostConfig exists.
    pub fn host(&self) -> HostConfigSpec {
        self.host
            .get(&ObjectRef::new(HOST_CONFIG_NAME))
            .map(|h| h.spec.clone())
            .unwrap_or_default()
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

/// Drops what nothing here reads from a stored object.
fn slim<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

/// Fills a store from a cluster-wide watch in the background, showing each event (once the
/// store holds it) to `on_event`.
fn reflect<K>(
    client: &Client,
    config: watcher::Config,
    stop: &stop_watch::Receiver<bool>,
    on_event: impl FnMut(&watcher::Event<K>) + Send + 'static,
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
    spawn_watch(
        Api::all(client.clone()),
        config,
        writer,
        stop,
        on_event,
        |_| {},
    );
    store
}

/// The token Secrets' store: each event goes to `on_event` (the token index) first, then the
/// stored copy keeps only the secret.
fn reflect_secrets(
    api: Api<Secret>,
    stop: &stop_watch::Receiver<bool>,
    on_event: impl FnMut(&watcher::Event<Secret>) + Send + 'static,
) -> Store<Secret> {
    let (store, writer) = reflector::store();
    spawn_watch(
        api,
        watcher::Config::default().labels(&token_secrets_selector()),
        writer,
        stop,
        |_| {},
        on_event,
    );
    store
}

/// The watch task: `before` sees each raw event, the object is slimmed (and a Secret loses
/// its token), the store takes it, then `after` sees it.
fn spawn_watch<K>(
    api: Api<K>,
    config: watcher::Config,
    writer: reflector::store::Writer<K>,
    stop: &stop_watch::Receiver<bool>,
    mut after: impl FnMut(&watcher::Event<K>) + Send + 'static,
    mut before: impl FnMut(&watcher::Event<K>) + Send + 'static,
) where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let kind = K::kind(&()).to_string();
    let stream = watcher(api, config)
        .default_backoff()
        .map_ok(move |event| {
            before(&event);
            event
        })
        .modify(|object| {
            slim(object);
            strip_token(object);
        })
        .reflect(writer);
    let mut stop = stop.clone();
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        loop {
            tokio::select! {
                event = stream.next() => match event {
                    Some(Ok(event)) => after(&event),
                    Some(Err(err)) => tracing::warn!(%err, %kind, "watch failed; retrying"),
                    None => return,
                },
                changed = stop.changed() => {
                    if changed.is_err() || *stop.borrow() {
                        return;
                    }
                }
            }
        }
    });
}

/// A token Secret's stored copy keeps no token (any other kind is left as it is).
fn strip_token<K: Resource<DynamicType = ()> + 'static>(object: &mut K) {
    if K::kind(&()) != "Secret" {
        return;
    }
    // Safe: the kind says what K is.
    let any: &mut dyn std::any::Any = object;
    if let Some(secret) = any.downcast_mut::<Secret>()
        && let Some(data) = secret.data.as_mut()
    {
        data.remove(TOKEN_KEY);
    }
}

/// Writers of an index's stores, for tests that build the world in memory.
pub struct Writers {
    pub host: reflector::store::Writer<HostConfig>,
    pub plugins: reflector::store::Writer<Plugin>,
    pub projects: reflector::store::Writer<Project>,
    pub project_trusts: reflector::store::Writer<ProjectTrust>,
    pub channels: reflector::store::Writer<Channel>,
    pub instances: reflector::store::Writer<PluginInstance>,
    pub runs: reflector::store::Writer<AgentRun>,
    pub config_maps: reflector::store::Writer<ConfigMap>,
    pub secrets: reflector::store::Writer<Secret>,
    pub pods: reflector::store::Writer<Pod>,
}

impl Index {
    /// An empty index and the writers that fill it (tests).
    pub fn in_memory() -> (Arc<Index>, Writers) {
        let (host, host_w) = reflector::store();
        let (plugins, plugins_w) = reflector::store();
        let (projects, projects_w) = reflector::store();
        let (project_trusts, trusts_w) = reflector::store();
        let (channels, channels_w) = reflector::store();
        let (instances, instances_w) = reflector::store();
        let (runs, runs_w) = reflector::store();
        let (config_maps, maps_w) = reflector::store();
        let (secrets, secrets_w) = reflector::store();
        let (pods, pods_w) = reflector::store();
        let index = Index {
            host,
            plugins,
            projects,
            project_trusts,
            channels,
            instances,
            runs,
            config_maps,
            secrets,
            pods: Arc::new(PodIndex::new(pods)),
            tokens: Arc::new(TokenIndex::new()),
            manifests: Arc::default(),
            changed: Arc::default(),
        };
        let writers = Writers {
            host: host_w,
            plugins: plugins_w,
            projects: projects_w,
            project_trusts: trusts_w,
            channels: channels_w,
            instances: instances_w,
            runs: runs_w,
            config_maps: maps_w,
            secrets: secrets_w,
            pods: pods_w,
        };
        (Arc::new(index), writers)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    #[test]
    fn a_stored_secret_keeps_no_token_and_no_managed_fields() {
        let mut secret = Secret {
            data: Some(BTreeMap::from([
                (TOKEN_KEY.to_string(), ByteString(b"t".to_vec())),
                ("secret".to_string(), ByteString(b"s".to_vec())),
            ])),
            ..Default::default()
        };
        secret.metadata.managed_fields = Some(vec![Default::default()]);
        slim(&mut secret);
        strip_token(&mut secret);
        let data = secret.data.unwrap();
        assert!(!data.contains_key(TOKEN_KEY));
        assert!(data.contains_key("secret"));
        assert!(secret.metadata.managed_fields.is_none());
        let mut map = ConfigMap {
            data: Some(BTreeMap::from([(
                TOKEN_KEY.to_string(),
                "kept".to_string(),
            )])),
            ..Default::default()
        };
        strip_token(&mut map);
        assert_eq!(map.data.unwrap()[TOKEN_KEY], "kept");
    }
}
