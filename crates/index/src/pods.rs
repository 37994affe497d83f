//! Where each instance's container answers, driven by the watch on plugin Pods: one
//! `tokio::sync::watch` channel per instance carries its [`PodView`], so a call held for a
//! stopped container wakes the moment the watch sees its Pod Ready — no polling.
//!
//! [`pod_view`] is the pure part: the Pods of an instance to where its container answers.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Pod, PodCondition};
use kube::ResourceExt;
use kube::runtime::reflector::Store;
use tokio::sync::watch;

use model::contract::PLUGIN_PORT;
use model::names::LABEL_INSTANCE;

/// A PluginInstance: its namespace and name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct InstanceKey {
    pub namespace: String,
    pub name: String,
}

impl InstanceKey {
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
        }
    }
}

impl std::fmt::Display for InstanceKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A container: its Pod's UID and how often it restarted in that Pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ContainerKey {
    pub pod_uid: String,
    pub restarts: i32,
}

impl ContainerKey {
    /// How the status names it: `<Pod UID>/<restarts>`.
    pub fn label(&self) -> String {
        format!("{}/{}", self.pod_uid, self.restarts)
    }
}

/// A Ready container: where it answers and which container it is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    pub pod: String,
    pub addr: SocketAddr,
    pub container: ContainerKey,
}

/// An instance's container as the Pod watch sees it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodView {
    /// A Pod runs (or starts) for it and is not being deleted.
    pub exists: bool,
    /// Where it answers, once a Pod is Ready.
    pub ready: Option<Endpoint>,
}

impl PodView {
    /// Running or on its way: an event goes to it without starting it.
    pub fn running(&self) -> bool {
        self.exists || self.ready.is_some()
    }
}

/// Where an instance's container answers, from its Pods: the newest Ready Pod not being
/// deleted, at its IP and the plugin container's `http` port.
pub fn pod_view<'a>(pods: impl IntoIterator<Item = &'a Pod>) -> PodView {
    let mut live: Vec<&Pod> = pods
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && !finished(p))
        .collect();
    live.sort_by_key(|p| std::cmp::Reverse(p.metadata.creation_timestamp.clone()));
    let ready = live.iter().find_map(|p| endpoint(p));
    PodView {
        exists: !live.is_empty(),
        ready,
    }
}

fn finished(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .is_some_and(|p| p == "Succeeded" || p == "Failed")
}

fn endpoint(pod: &Pod) -> Option<Endpoint> {
    if !pod_ready(pod) {
        return None;
    }
    let status = pod.status.as_ref()?;
    let ip: IpAddr = status.pod_ip.as_deref()?.parse().ok()?;
    let spec = pod.spec.as_ref()?;
    let container = spec
        .containers
        .iter()
        .find(|c| c.name == "plugin")
        .or(spec.containers.first())?;
    let port = container
        .ports
        .iter()
        .flatten()
        .find(|p| p.name.as_deref() == Some("http"))
        .map_or(PLUGIN_PORT, |p| p.container_port);
    let restarts = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == container.name)
        .map_or(0, |c| c.restart_count);
    Some(Endpoint {
        pod: pod.name_any(),
        addr: SocketAddr::new(ip, u16::try_from(port).ok()?),
        container: ContainerKey {
            pod_uid: pod.uid()?,
            restarts,
        },
    })
}

/// Whether a Pod's Ready condition is True.
pub fn pod_ready(pod: &Pod) -> bool {
    ready_condition(pod).is_some()
}

/// A Pod's Ready condition, when it is True (with when it became so).
pub fn ready_condition(pod: &Pod) -> Option<&PodCondition> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")
}

/// The instance a plugin Pod belongs to.
pub fn instance_of(pod: &Pod) -> Option<InstanceKey> {
    Some(InstanceKey::new(
        &pod.namespace()?,
        pod.labels().get(LABEL_INSTANCE)?,
    ))
}

/// Each instance's [`PodView`], published on a watch channel per instance.
pub struct PodIndex {
    store: Store<Pod>,
    senders: Mutex<HashMap<InstanceKey, watch::Sender<PodView>>>,
    /// The UIDs of Pods that went away, for whoever keeps per-container state (the breakers).
    gone: tokio::sync::broadcast::Sender<String>,
}

impl PodIndex {
    pub fn new(store: Store<Pod>) -> Self {
        Self {
            store,
            senders: Mutex::new(HashMap::new()),
            gone: tokio::sync::broadcast::channel(1024).0,
        }
    }

    /// Takes one event of the plugin Pods' watch, once the store holds it: publishes the
    /// views it changes, and the UID of a Pod that went away.
    pub fn apply_watcher_event(&self, event: &kube::runtime::watcher::Event<Pod>) {
        use kube::runtime::watcher::Event;
        match event {
            Event::Apply(pod) | Event::InitApply(pod) => {
                if let Some(key) = instance_of(pod) {
                    self.refresh(&key);
                }
            }
            Event::Delete(pod) => {
                if let Some(key) = instance_of(pod) {
                    self.refresh(&key);
                }
                if let Some(uid) = pod.metadata.uid.clone() {
                    let _ = self.gone.send(uid);
                }
            }
            Event::InitDone => self.refresh_all(),
            Event::Init => {}
        }
    }

    /// The store of the Pods this index follows.
    pub fn store(&self) -> &Store<Pod> {
        &self.store
    }

    /// The UIDs of Pods that go away from now on.
    pub fn gone(&self) -> tokio::sync::broadcast::Receiver<String> {
        self.gone.subscribe()
    }

    /// The view of an instance now, from the store.
    pub fn current(&self, key: &InstanceKey) -> PodView {
        let pods = self.pods_of(key);
        pod_view(pods.iter().map(|p| p.as_ref()))
    }

    fn pods_of(&self, key: &InstanceKey) -> Vec<Arc<Pod>> {
        self.store
            .state()
            .into_iter()
            .filter(|p| instance_of(p).as_ref() == Some(key))
            .collect()
    }

    /// A receiver that sees every change of the instance's view.
    pub fn subscribe(&self, key: &InstanceKey) -> watch::Receiver<PodView> {
        let mut senders = self.senders.lock().expect("pod index lock");
        if let Some(tx) = senders.get(key) {
            return tx.subscribe();
        }
        let (tx, rx) = watch::channel(self.current(key));
        senders.insert(key.clone(), tx);
        rx
    }

    /// Publishes the instance's view after its Pods changed.
    pub fn refresh(&self, key: &InstanceKey) {
        // Nobody follows most instances (the controller follows none): reading the store for
        // them would cost a pass over every Pod for each Pod event.
        if !self.followed(key) {
            return;
        }
        let view = self.current(key);
        let mut senders = self.senders.lock().expect("pod index lock");
        let Some(tx) = senders.get(key) else {
            return;
        };
        if tx.receiver_count() == 0 && view == PodView::default() {
            senders.remove(key);
            return;
        }
        tx.send_if_modified(|current| {
            if *current == view {
                false
            } else {
                *current = view;
                true
            }
        });
    }

    /// Whether anyone subscribed to the instance's view.
    fn followed(&self, key: &InstanceKey) -> bool {
        self.senders
            .lock()
            .expect("pod index lock")
            .contains_key(key)
    }

    /// Publishes every subscribed instance's view (after the watch relisted).
    pub fn refresh_all(&self) {
        let keys: Vec<InstanceKey> = self
            .senders
            .lock()
            .expect("pod index lock")
            .keys()
            .cloned()
            .collect();
        for key in keys {
            self.refresh(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::{
        Container, ContainerPort, ContainerStatus, PodCondition, PodSpec, PodStatus,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use kube::runtime::reflector;
    use kube::runtime::watcher;

    use super::*;

    pub(crate) fn plugin_pod(name: &str, instance: &str, ready: bool, created: i64) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                uid: Some(format!("uid-{name}")),
                labels: Some([(LABEL_INSTANCE.to_string(), instance.to_string())].into()),
                creation_timestamp: Some(Time(
                    k8s_openapi::jiff::Timestamp::from_second(created).unwrap(),
                )),
                ..Default::default()
            },
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "plugin".into(),
                    ports: Some(vec![ContainerPort {
                        name: Some("http".into()),
                        container_port: 8080,
                        ..Default::default()
                    }]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            status: Some(PodStatus {
                pod_ip: Some("127.0.0.7".into()),
                conditions: Some(vec![PodCondition {
                    type_: "Ready".into(),
                    status: if ready { "True" } else { "False" }.into(),
                    ..Default::default()
                }]),
                container_statuses: Some(vec![ContainerStatus {
                    name: "plugin".into(),
                    restart_count: 2,
                    ..Default::default()
                }]),
                ..Default::default()
            }),
        }
    }

    #[test]
    fn a_ready_pod_is_where_the_container_answers() {
        let pod = plugin_pod("p1", "echo-general", true, 100);
        let view = pod_view([&pod]);
        let ep = view.ready.unwrap();
        assert_eq!(ep.addr, "127.0.0.7:8080".parse().unwrap());
        assert_eq!(ep.container.pod_uid, "uid-p1");
        assert_eq!(ep.container.restarts, 2);
        assert!(view.exists);
    }

    #[test]
    fn a_pod_not_ready_exists_but_answers_nowhere_yet() {
        let view = pod_view([&plugin_pod("p1", "i", false, 100)]);
        assert!(view.exists && view.ready.is_none() && view.running());
        assert_eq!(pod_view([]), PodView::default());
    }

    #[test]
    fn a_pod_being_deleted_counts_for_nothing_and_the_newest_ready_wins() {
        let mut old = plugin_pod("old", "i", true, 100);
        let new = plugin_pod("new", "i", true, 200);
        assert_eq!(pod_view([&old, &new]).ready.unwrap().pod, "new");
        old.metadata.deletion_timestamp = old.metadata.creation_timestamp.clone();
        let view = pod_view([&old]);
        assert!(!view.exists && view.ready.is_none());
    }

    #[tokio::test]
    async fn subscribers_see_the_pod_become_ready() {
        let (store, mut writer) = reflector::store::<Pod>();
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let index = PodIndex::new(store);
        let key = InstanceKey::new("ns", "echo-general");
        let mut rx = index.subscribe(&key);
        assert_eq!(*rx.borrow(), PodView::default());
        writer.apply_watcher_event(&watcher::Event::Apply(plugin_pod(
            "p1",
            "echo-general",
            false,
            1,
        )));
        index.refresh(&key);
        assert!(rx.borrow_and_update().exists);
        let waiter =
            tokio::spawn(async move { rx.wait_for(|v| v.ready.is_some()).await.unwrap().clone() });
        writer.apply_watcher_event(&watcher::Event::Apply(plugin_pod(
            "p1",
            "echo-general",
            true,
            1,
        )));
        index.refresh(&key);
        let view = waiter.await.unwrap();
        assert_eq!(view.ready.unwrap().pod, "p1");
    }
}
