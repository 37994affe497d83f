//! The process's one reader of chats' live ConfigMaps from its index: it wakes the plugin's
//! call waiting for a request's answer, and hands the requests waiting to the app's streams
//! of their chat. Both come from the ConfigMap watch the index already runs, whichever replica
//! wrote them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;
use serde_json::Value;
use tokio::sync::{broadcast, oneshot, watch};

use super::request::{self, ControlRequest};
use super::session;
use crate::index::Index;
use model::names::LABEL_COMPONENT;

/// How many requests a slow stream may fall behind by before it is told to list again.
const STREAM_BACKLOG: usize = 256;

/// A request for the app, with its chat's namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct ForApp {
    pub namespace: String,
    pub request: ControlRequest,
}

/// The waiting calls and the app's streams of one process.
pub struct Hub {
    /// By namespace, the chat's live ConfigMap, and the request's id.
    waiting: Mutex<HashMap<(String, String, String), oneshot::Sender<Value>>>,
    requests: broadcast::Sender<ForApp>,
}

impl Hub {
    /// A hub fed by nothing yet (see [`Hub::start`]).
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            waiting: Mutex::new(HashMap::new()),
            requests: broadcast::channel(STREAM_BACKLOG).0,
        })
    }

    /// A hub reading the index's ConfigMaps until `stop`.
    pub fn start(index: &Arc<Index>, mut stop: watch::Receiver<bool>) -> Arc<Self> {
        let hub = Self::new();
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
    pub fn subscribe(&self) -> broadcast::Receiver<ForApp> {
        self.requests.subscribe()
    }

    /// A chat's live ConfigMap was made or changed.
    pub fn saw(&self, map: &ConfigMap) {
        if map.labels().get(LABEL_COMPONENT).map(String::as_str) != Some(session::COMPONENT) {
            return;
        }
        let namespace = map.namespace().unwrap_or_default();
        let name = map.name_any();
        for request in request::requests(map) {
            if let Some(response) = request::response(map, &request.id) {
                let key = (namespace.clone(), name.clone(), request.id.clone());
                if let Some(waiter) = self.lock().remove(&key) {
                    let _ = waiter.send(response);
                }
            }
        }
        for request in request::pending(map, jiff::Timestamp::now()) {
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    fn request(id: &str) -> ControlRequest {
        ControlRequest::new(
            id.into(),
            "general",
            "echo",
            "interrupt",
            json!({}),
            jiff::Timestamp::now(),
            Duration::from_secs(30),
        )
    }

    fn live_map(patches: &[request::DataPatch]) -> ConfigMap {
        let mut map = session::config_map("team", "general", "proj", None);
        for patch in patches {
            request::apply(map.data.get_or_insert_default(), patch);
        }
        map
    }

    #[tokio::test]
    async fn a_new_request_goes_to_the_streams_and_its_answer_to_its_waiter() {
        let hub = Hub::new();
        let mut stream = hub.subscribe();
        let waiter = hub.wait_for("team", "live-general", "a");
        let asked = live_map(&[request::add(&request("a"))]);
        hub.saw(&asked);
        let sent = stream.try_recv().unwrap();
        assert_eq!(
            (sent.namespace.as_str(), sent.request.id.as_str()),
            ("team", "a")
        );
        let answered = live_map(&[
            request::add(&request("a")),
            request::answer("a", &json!({"ok": 1})),
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
        let hub = Hub::new();
        let mut stream = hub.subscribe();
        let mut map = live_map(&[request::add(&request("a"))]);
        map.metadata
            .labels
            .as_mut()
            .unwrap()
            .insert(LABEL_COMPONENT.into(), "inbox".into());
        hub.saw(&map);
        assert!(stream.try_recv().is_err());
    }
}
