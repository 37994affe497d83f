//! The process's one reader of a kind of ask's ConfigMaps from its index (one hub per kind,
//! told apart by the maps' component label): it wakes the plugin's call waiting for an ask's
//! answer, and hands the asks waiting to the app's streams of their chat. Both come from the
//! ConfigMap watch the index already runs, whichever replica wrote them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use serde_json::Value;
use tokio::sync::{broadcast, oneshot, watch};

use super::record::{self, Ask};
use crate::index::Index;
use model::names::LABEL_COMPONENT;

/// How many requests a slow stream may fall behind by before it is told to list again.
const STREAM_BACKLOG: usize = 256;

/// An ask for the app, with its chat's namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct ForApp<A> {
    pub namespace: String,
    pub request: A,
}

/// What a store's writes are shown to (a hub, as the watch would show them).
pub trait Sees: Send + Sync {
    /// A ConfigMap was made or changed.
    fn saw(&self, map: &ConfigMap);
}

/// The waiting calls and the app's streams of one process, for one kind of ask.
pub struct Hub<A> {
    /// The component label of the kind's ConfigMaps.
    component: &'static str,
    /// By namespace, the chat's ConfigMap, and the ask's id.
    waiting: Mutex<HashMap<(String, String, String), oneshot::Sender<Value>>>,
    requests: broadcast::Sender<ForApp<A>>,
}

impl<A: Ask> Hub<A> {
    /// A hub of the asks in ConfigMaps labelled `component`, fed by nothing yet (see
    /// [`Hub::start`]).
    pub fn new(component: &'static str) -> Arc<Self> {
        Arc::new(Self {
            component,
            waiting: Mutex::new(HashMap::new()),
            requests: broadcast::channel(STREAM_BACKLOG).0,
        })
    }

    /// A hub reading the index's ConfigMaps until `stop`.
    pub fn start(
        component: &'static str,
        index: &Arc<Index>,
        mut stop: watch::Receiver<bool>,
    ) -> Arc<Self> {
        let hub = Self::new(component);
        let mut changes = Box::pin(index.feeds.config_maps.subscribe());
        let reader = hub.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = stop.wait_for(|s| *s) => return,
                    next = changes.next() => match next {
                        Some(Ok(map)) => reader.saw(&map),
                        Some(Err(_)) => {}
                        None => return,
                    },
                }
            }
        });
        hub
    }

    /// Waits for the answer to request `id` in the live ConfigMap `map` of `namespace`:
    /// register before the request is written, so no answer comes before anyone waits for it.
    pub fn wait_for(&self, namespace: &str, map: &str, id: &str) -> oneshot::Receiver<Value> {
        let (tx, rx) = oneshot::channel();
        self.lock()
            .insert((namespace.to_string(), map.to_string(), id.to_string()), tx);
        rx
    }

    /// Stops waiting for request `id` (answered, or given up).
    pub fn forget(&self, namespace: &str, map: &str, id: &str) {
        self.lock()
            .remove(&(namespace.to_string(), map.to_string(), id.to_string()));
    }

    /// The requests written from now on, for the app's streams (a request may come more
    /// than once: each change of its map brings the ones still waiting again).
    pub fn subscribe(&self) -> broadcast::Receiver<ForApp<A>> {
        self.requests.subscribe()
    }

    /// A ConfigMap was made or changed: if it is one of this kind's, its answers wake their
    /// waiters and its asks still waiting go to the streams.
    pub fn saw(&self, map: &ConfigMap) {
        if map.labels().get(LABEL_COMPONENT).map(String::as_str) != Some(self.component) {
            return;
        }
        let namespace = map.namespace().unwrap_or_default();
        let name = map.name_any();
        for request in record::requests::<A>(map) {
            if let Some(response) = record::response(map, request.id()) {
                let key = (namespace.clone(), name.clone(), request.id().to_string());
                if let Some(waiter) = self.lock().remove(&key) {
                    let _ = waiter.send(response);
                }
            }
        }
        for request in record::pending::<A>(map, jiff::Timestamp::now()) {
            let _ = self.requests.send(ForApp {
                namespace: namespace.clone(),
                request,
            });
        }
    }

    #[allow(clippy::type_complexity)]
    fn lock(
        &self,
    ) -> std::sync::MutexGuard<'_, HashMap<(String, String, String), oneshot::Sender<Value>>> {
        self.waiting.lock().expect("the hub's lock")
    }
}

impl<A: Ask> Sees for Hub<A> {
    fn saw(&self, map: &ConfigMap) {
        Hub::saw(self, map)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::asks::testing::{COMPONENT, Probe, map_of};

    fn request(id: &str) -> Probe {
        Probe::new(id, jiff::Timestamp::now(), 30)
    }

    fn live_map(patches: &[record::DataPatch]) -> ConfigMap {
        map_of("team", "live-general", patches)
    }

    #[tokio::test]
    async fn a_new_request_goes_to_the_streams_and_its_answer_to_its_waiter() {
        let hub = Hub::<Probe>::new(COMPONENT);
        let mut stream = hub.subscribe();
        let waiter = hub.wait_for("team", "live-general", "a");
        let asked = live_map(&[record::add(&request("a"))]);
        hub.saw(&asked);
        let sent = stream.try_recv().unwrap();
        assert_eq!(
            (sent.namespace.as_str(), sent.request.id.as_str()),
            ("team", "a")
        );
        let answered = live_map(&[
            record::add(&request("a")),
            record::answer("a", &json!({"ok": 1})),
        ]);
        hub.saw(&answered);
        assert_eq!(waiter.await.unwrap(), json!({"ok": 1}));
        assert!(
            stream.try_recv().is_err(),
            "an answered request is not sent again"
        );
    }

    #[tokio::test]
    async fn other_config_maps_are_ignored() {
        let hub = Hub::<Probe>::new(COMPONENT);
        let mut stream = hub.subscribe();
        let mut map = live_map(&[record::add(&request("a"))]);
        map.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(LABEL_COMPONENT.into(), "inbox".into());
        hub.saw(&map);
        assert!(stream.try_recv().is_err());
    }
}
