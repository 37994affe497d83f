//! Starting the index: a watch for each kind the roles read ([`crate::kinds::watches`]), with
//! the hooks that feed the derived indexes, then a wait until every watched store holds its
//! first list. The thin half that talks to the cluster; what to watch is decided in `kinds`.

use std::fmt::Debug;
use std::sync::Arc;

use futures::future::BoxFuture;
use k8s_openapi::NamespaceResourceScope;
use kube::runtime::reflector::store::{Writer, WriterDropped};
use kube::runtime::watcher;
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::{mpsc, watch as signal};

use super::awaited::Awaited;
use super::changed::bump;
use super::config_writes::{self, ConfigWrite, Generations};
use super::epoch::Epoch;
use super::feed::Feed;
use super::kinds::{self, Roles, Selection};
use super::trim;
use super::unreadable::{Guarded, Unreadables};
use super::watch::Watch;
use super::{Index, Writers};

/// A started index: the index, and the config writes it sees (for `settings.changed`; none
/// unless the API server is one of its roles).
pub struct Started {
    pub index: Arc<Index>,
    pub config_writes: mpsc::UnboundedReceiver<ConfigWrite>,
}

/// Why the index did not start.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the {kind} watch stopped before its store held its first list")]
    NotFilled {
        kind: String,
        #[source]
        source: WriterDropped,
    },
}

impl Index {
    /// Starts a watch for each kind `roles` read, and resolves once each store holds its first
    /// list. The watches run until `stop` turns true (or its sender goes).
    pub async fn start(
        client: Client,
        roles: &Roles,
        stop: signal::Receiver<bool>,
    ) -> Result<Started, Error> {
        let plan = kinds::watches(roles);
        let tells = plan.tells_changes;
        let (index, writers) = Index::empty();
        let (writes, config_writes) = mpsc::unbounded_channel();
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
        let feeds = &index.feeds;
        let mut start = Starter {
            client,
            stop,
            unreadables: index.unreadable.clone(),
            awaited: index.awaited.clone(),
            filling: Vec::new(),
        };

        let epoch = &index.callers_epoch;
        start.watch(&plan.host, host, &feeds.host, |watch| {
            let (mut seen, writes) = (Generations::default(), writes.clone());
            let watch = counted(watch, epoch);
            let watch = when(tells, watch, move |e| {
                config_writes::on_host(&mut seen, e, &writes)
            });
            let changed = index.changed.clone();
            when(tells, watch, move |_| bump(&changed.configs))
        });
        start.watch(&plan.plugins, plugins, &feeds.plugins, |watch| {
            let (manifests, changed) = (index.manifests.clone(), index.changed.clone());
            let watch = watch.after(move |e| manifests.apply_watcher_event(e));
            let watch = counted(watch, epoch);
            when(tells, watch, move |_| bump(&changed.plugins))
        });
        start.watch(&plan.projects, projects, &feeds.projects, |watch| {
            let (mut seen, writes) = (Generations::default(), writes.clone());
            let watch = counted(watch, epoch);
            let watch = when(tells, watch, move |e| {
                config_writes::on_project(&mut seen, e, &writes)
            });
            let changed = index.changed.clone();
            when(tells, watch, move |_| bump(&changed.configs))
        });
        start.watch(
            &plan.project_trusts,
            project_trusts,
            &feeds.project_trusts,
            |watch| {
                let (mut seen, writes) = (Generations::default(), writes.clone());
                let watch = counted(watch, epoch);
                let watch = when(tells, watch, move |e| {
                    config_writes::on_trust(&mut seen, e, &writes)
                });
                let changed = index.changed.clone();
                when(tells, watch, move |_| bump(&changed.configs))
            },
        );
        start.watch(&plan.channels, channels, &feeds.channels, |watch| {
            counted(watch, epoch)
        });
        start.watch(&plan.instances, instances, &feeds.instances, |watch| {
            let changed = index.changed.clone();
            let watch = counted(watch, epoch);
            when(tells, watch, move |_| bump(&changed.instances))
        });
        start.watch(&plan.pods, pods, &feeds.pods, |watch| {
            let pods = index.pods.clone();
            watch.after(move |e| pods.apply_watcher_event(e))
        });
        start.watch(
            &plan.owned_secrets,
            owned_secrets,
            &feeds.owned_secrets,
            |watch| watch,
        );
        start.watch(&plan.claims, claims, &feeds.claims, |watch| watch);
        start.watch(&plan.cronjobs, cronjobs, &feeds.cronjobs, |watch| watch);
        start.watch_namespaced(
            &plan.registry_secrets,
            registry_secrets,
            &feeds.registry_secrets,
            |watch| watch,
        );
        start.watch(&plan.jobs, jobs, &feeds.jobs, |watch| watch);
        start.watch(
            &plan.network_policies,
            network_policies,
            &feeds.network_policies,
            |watch| watch,
        );
        start.watch(&plan.runs, runs, &feeds.runs, |watch| {
            let changed = index.changed.clone();
            when(tells, watch, move |_| bump(&changed.runs))
        });
        start.watch(&plan.config_maps, config_maps, &feeds.config_maps, |w| w);
        start.watch(&plan.approvals, approvals, &feeds.approvals, |watch| {
            // A call waiting for a person is woken by every change of an approval, once the
            // store holds it (woken before, it read the approval still pending and slept
            // through the decision until its deadline).
            let changed = index.changed.clone();
            watch.wakes(move || bump(&changed.approvals))
        });
        start.watch(&plan.secrets, secrets, &feeds.secrets, |watch| {
            // The token index reads each token before the stored copy loses it.
            let tokens = index.tokens.clone();
            let watch = watch
                .before(move |e| tokens.apply_watcher_event(e))
                .trim(trim::token_secret);
            counted(watch, epoch)
        });

        tracing::info!("waiting for the caches to fill");
        futures::future::try_join_all(start.filling).await?;
        Ok(Started {
            index: Arc::new(index),
            config_writes,
        })
    }
}

/// `watch` with `hook` after the store when `on`.
fn when<K>(
    on: bool,
    watch: Watch<K>,
    hook: impl FnMut(&watcher::Event<K>) + Send + 'static,
) -> Watch<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    if on { watch.after(hook) } else { watch }
}

/// `watch`, counting each of its events in `epoch` after the store holds it.
fn counted<K>(watch: Watch<K>, epoch: &Arc<Epoch>) -> Watch<K>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
{
    let epoch = epoch.clone();
    watch.after(move |_| epoch.bump())
}

/// Starts the watches, and keeps what each store's first list is awaited by.
struct Starter {
    client: Client,
    stop: signal::Receiver<bool>,
    /// Where every watch records the objects it leaves out.
    unreadables: Arc<Unreadables>,
    /// Told by every watch of each object its store shows.
    awaited: Arc<Awaited>,
    filling: Vec<BoxFuture<'static, Result<(), Error>>>,
}

impl Starter {
    /// Starts the watch of what `selection` selects into `writer`'s store, in every namespace,
    /// feeding `feed` and the hooks `hooked` adds; with no selection (no role reads the kind),
    /// starts nothing.
    fn watch<K>(
        &mut self,
        selection: &Option<Selection>,
        writer: Writer<K>,
        feed: &Feed<K>,
        hooked: impl FnOnce(Watch<K>) -> Watch<K>,
    ) where
        K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    {
        if let Some(selection) = selection {
            let api = Api::all(self.client.clone());
            self.spawn(api, selection, writer, feed, hooked);
        }
    }

    /// [`Starter::watch`] for a namespaced kind, in the selection's namespace if it has one.
    fn watch_namespaced<K>(
        &mut self,
        selection: &Option<Selection>,
        writer: Writer<K>,
        feed: &Feed<K>,
        hooked: impl FnOnce(Watch<K>) -> Watch<K>,
    ) where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + Debug
            + DeserializeOwned
            + Send
            + Sync
            + 'static,
    {
        if let Some(selection) = selection {
            let api = match &selection.namespace {
                Some(namespace) => Api::namespaced(self.client.clone(), namespace),
                None => Api::all(self.client.clone()),
            };
            self.spawn(api, selection, writer, feed, hooked);
        }
    }

    fn spawn<K>(
        &mut self,
        api: Api<Guarded<K>>,
        selection: &Selection,
        writer: Writer<K>,
        feed: &Feed<K>,
        hooked: impl FnOnce(Watch<K>) -> Watch<K>,
    ) where
        K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    {
        let config = match &selection.labels {
            Some(labels) => watcher::Config::default().labels(labels),
            None => watcher::Config::default(),
        };
        let store = writer.as_reader();
        self.filling.push(Box::pin(async move {
            store
                .wait_until_ready()
                .await
                .map_err(|source| Error::NotFilled {
                    kind: K::kind(&()).into_owned(),
                    source,
                })
        }));
        let (awaited, kind) = (self.awaited.clone(), K::kind(&()).into_owned());
        let watch = Watch::new(api, config, &self.unreadables)
            .after(move |e| awaited.apply_watcher_event(&kind, e))
            .feeding(feed);
        hooked(watch).spawn(writer, &self.stop);
    }
}
