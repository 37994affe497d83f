//! Each controller's queue depth: the objects a change woke that have not begun to reconcile
//! (`loop_plugins_controller_queue_depth{controller}`). kube's scheduler keeps its queue to
//! itself, so the depth is counted beside it, the same way it merges requests: an object woken
//! twice before it reconciles counts once; one woken while it reconciles counts again, as the
//! scheduler runs it again once the first reconcile ends.
//!
//! Every trigger of a controller goes through this module: its own objects' stream
//! ([`Queue::objects`]), its children's streams ([`Queue::owners`], the owners the way kube's
//! `owns_stream` finds them) and the mappings of the other streams ([`Queue::mapped`]). A
//! reconcile's start takes its object out ([`Queue::started`]), and so does an object the
//! controller found gone ([`Queue::gone`]). A requeue after a delay is not in the queue until
//! it falls due, which the depth cannot see: it counts what is waiting now.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use prometheus_client::metrics::gauge::Gauge;

/// One controller's woken objects, by `namespace/name`.
pub struct Queue {
    waiting: Mutex<HashSet<String>>,
    depth: Gauge,
}

/// An object's key in a queue: `namespace/name`, or `name` for a cluster-wide one.
pub fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

fn ref_key<K: Resource>(object: &ObjectRef<K>) -> String {
    key(object.namespace.as_deref(), &object.name)
}

impl Queue {
    /// A queue whose depth `depth` shows.
    pub fn new(depth: Gauge) -> Arc<Self> {
        depth.set(0);
        Arc::new(Self {
            waiting: Mutex::new(HashSet::new()),
            depth,
        })
    }

    fn change(&self, f: impl FnOnce(&mut HashSet<String>)) {
        let mut waiting = self.waiting.lock().expect("queue lock");
        f(&mut waiting);
        self.depth.set(waiting.len() as i64);
    }

    /// `key` was woken.
    pub fn woken(&self, key: String) {
        self.change(|w| {
            w.insert(key);
        });
    }

    /// `key`'s reconcile began.
    pub fn started(&self, key: &str) {
        self.change(|w| {
            w.remove(key);
        });
    }

    /// `object` was woken but is gone: it will not reconcile.
    pub fn gone<K: Resource>(&self, object: &ObjectRef<K>) {
        self.started(&ref_key(object));
    }

    /// How many objects wait (what the gauge shows).
    #[cfg(test)]
    fn depth(&self) -> usize {
        self.waiting.lock().expect("queue lock").len()
    }

    /// The controller's own objects' stream, each change counted.
    pub fn objects<K, S>(
        self: &Arc<Self>,
        stream: S,
    ) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static + use<K, S>
    where
        K: Resource<DynamicType = ()> + Send + 'static,
        S: Stream<Item = Result<K, watcher::Error>> + Send + 'static,
    {
        let queue = self.clone();
        stream.inspect(move |item| {
            if let Ok(object) = item {
                queue.woken(ref_key(&ObjectRef::from_obj(object)));
            }
        })
    }

    /// A children's stream, each change counted for the owners of kind `K` it wakes.
    pub fn owners<K, Child, S>(
        self: &Arc<Self>,
        stream: S,
    ) -> impl Stream<Item = Result<Child, watcher::Error>> + Send + 'static + use<K, Child, S>
    where
        K: Resource<DynamicType = ()>,
        Child: Resource + Send + 'static,
        S: Stream<Item = Result<Child, watcher::Error>> + Send + 'static,
    {
        let queue = self.clone();
        stream.inspect(move |item| {
            if let Ok(child) = item {
                for owner in owner_keys::<K, Child>(child) {
                    queue.woken(owner);
                }
            }
        })
    }

    /// A mapping from another stream's object to the objects it wakes, each counted.
    pub fn mapped<K, Other, I, F>(
        self: &Arc<Self>,
        mapper: F,
    ) -> impl Fn(Other) -> Vec<ObjectRef<K>> + Send + Sync + 'static + use<K, Other, I, F>
    where
        K: Resource<DynamicType = ()> + 'static,
        I: IntoIterator<Item = ObjectRef<K>>,
        F: Fn(Other) -> I + Send + Sync + 'static,
    {
        let queue = self.clone();
        move |other| {
            let woken: Vec<ObjectRef<K>> = mapper(other).into_iter().collect();
            for object in &woken {
                queue.woken(ref_key(object));
            }
            woken
        }
    }
}

/// The keys of `child`'s owners of kind `K`, as kube's `owns_stream` wakes them: every owner
/// reference of that kind and API version, in the child's namespace.
pub fn owner_keys<K, Child>(child: &Child) -> Vec<String>
where
    K: Resource<DynamicType = ()>,
    Child: Resource,
{
    let (kind, api_version) = (K::kind(&()), K::api_version(&()));
    let namespace = child.meta().namespace.as_deref();
    child
        .meta()
        .owner_references
        .iter()
        .flatten()
        .filter(|o| o.kind == kind && o.api_version == api_version)
        .map(|o| key(namespace, &o.name))
        .collect()
}

#[cfg(test)]
mod tests {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
    use model::resources::{Channel, PluginInstance, PluginInstanceSpec};

    use super::*;

    fn instance(ns: &str, name: &str) -> PluginInstance {
        let mut i = PluginInstance::new(
            name,
            PluginInstanceSpec {
                plugin: "echo".into(),
                channel: "general".into(),
                project: "proj".into(),
            },
        );
        i.metadata.namespace = Some(ns.into());
        i
    }

    fn owned_by(owners: &[(&str, &str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                namespace: Some("team".into()),
                name: Some("p".into()),
                owner_references: Some(
                    owners
                        .iter()
                        .map(|(api_version, kind, name)| OwnerReference {
                            api_version: api_version.to_string(),
                            kind: kind.to_string(),
                            name: name.to_string(),
                            uid: "u".into(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            },
            ..Default::default()
        }
    }

    #[test]
    fn an_object_woken_twice_waits_once_and_leaves_when_it_starts() {
        let gauge = Gauge::default();
        let q = Queue::new(gauge.clone());
        q.woken(key(Some("team"), "a"));
        q.woken(key(Some("team"), "a"));
        q.woken(key(Some("team"), "b"));
        assert_eq!((q.depth(), gauge.get()), (2, 2));
        q.started("team/a");
        assert_eq!((q.depth(), gauge.get()), (1, 1));
        // Woken again while it reconciles: it will run again, so it waits again.
        q.woken(key(Some("team"), "a"));
        assert_eq!(gauge.get(), 2);
        q.started("team/a");
        q.gone(&ObjectRef::<PluginInstance>::new("b").within("team"));
        assert_eq!((q.depth(), gauge.get()), (0, 0));
        // Starting what never waited (a requeue falling due) changes nothing.
        q.started("team/c");
        assert_eq!(gauge.get(), 0);
    }

    #[test]
    fn a_child_wakes_its_owners_of_the_controllers_kind_only() {
        let api_version = PluginInstance::api_version(&()).to_string();
        let pod = owned_by(&[
            (&api_version, "PluginInstance", "echo-general"),
            ("v1", "PluginInstance", "other-group"),
            (&api_version, "Channel", "general"),
        ]);
        assert_eq!(owner_keys::<PluginInstance, _>(&pod), ["team/echo-general"]);
        assert_eq!(owner_keys::<Channel, _>(&pod), ["team/general"]);
        assert!(owner_keys::<PluginInstance, _>(&Pod::default()).is_empty());
    }

    #[tokio::test]
    async fn every_kind_of_trigger_counts() {
        let q = Queue::new(Gauge::default());
        let objects = futures::stream::iter([
            Ok(instance("team", "a")),
            Err(watcher::Error::NoResourceVersion),
        ]);
        let seen: Vec<_> = q.objects(objects).collect().await;
        assert_eq!((seen.len(), q.depth()), (2, 1));

        let api_version = PluginInstance::api_version(&()).to_string();
        let pods = futures::stream::iter([Ok(owned_by(&[(&api_version, "PluginInstance", "b")]))]);
        let _: Vec<_> = q.owners::<PluginInstance, _, _>(pods).collect().await;
        assert_eq!(q.depth(), 2);

        let map = q.mapped(|n: usize| {
            (0..n).map(|i| ObjectRef::<PluginInstance>::new(&format!("m{i}")).within("team"))
        });
        assert_eq!(map(3).len(), 3);
        assert_eq!(q.depth(), 5);
    }
}
