//! Where the live sessions' ConfigMaps are read and written: the cluster ([`KubeStore`]: reads
//! from the index, writes through the Kubernetes API, whose watch brings them back to every
//! replica's index and hub), or memory ([`MemoryStore`], for request-level tests: its writes
//! reach the hub at once, as a watch would bring them).

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::hub::Hub;
use super::request;
use crate::index::Index;
use model::names::{self, FIELD_MANAGER_API};

/// Why a write failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("no ConfigMap {name} in namespace {namespace}")]
    NotFound { namespace: String, name: String },
    #[error("{0}")]
    Failed(String),
}

/// The reads and writes of live sessions' ConfigMaps.
pub trait LiveStore: Send + Sync {
    /// The ConfigMap `name` of `namespace`.
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<ConfigMap>>;
    /// The control request ConfigMaps of `namespace`.
    fn requests(&self, namespace: &str) -> Vec<Arc<ConfigMap>>;
    /// Makes or replaces `map` (a session).
    fn apply<'a>(&'a self, map: &'a ConfigMap) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Makes `map` (a request).
    fn create<'a>(&'a self, map: &'a ConfigMap) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Sets `data` keys of ConfigMap `name`.
    fn merge<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        data: BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Deletes ConfigMap `name`, if there.
    fn delete<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Deletes chat `chat`'s control requests.
    fn delete_requests<'a>(
        &'a self,
        namespace: &'a str,
        chat: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
}

fn is_request(map: &ConfigMap) -> bool {
    map.labels().get(names::LABEL_COMPONENT).map(String::as_str) == Some(request::COMPONENT)
}

/// The cluster.
pub struct KubeStore {
    client: Client,
    index: Arc<Index>,
}

impl KubeStore {
    pub fn new(client: Client, index: Arc<Index>) -> Self {
        Self { client, index }
    }

    fn api(&self, namespace: &str) -> Api<ConfigMap> {
        Api::namespaced(self.client.clone(), namespace)
    }
}

fn failed(what: String) -> impl FnOnce(kube::Error) -> StoreError {
    move |e| StoreError::Failed(format!("{what}: {e}"))
}

fn missing_is_fine(result: Result<(), kube::Error>, what: String) -> Result<(), StoreError> {
    match result {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        other => other.map_err(failed(what)),
    }
}

impl LiveStore for KubeStore {
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<ConfigMap>> {
        self.index
            .config_maps
            .get(&ObjectRef::new(name).within(namespace))
    }

    fn requests(&self, namespace: &str) -> Vec<Arc<ConfigMap>> {
        self.index
            .config_maps
            .state()
            .into_iter()
            .filter(|m| m.namespace().as_deref() == Some(namespace) && is_request(m))
            .collect()
    }

    fn apply<'a>(&'a self, map: &'a ConfigMap) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let name = map.name_any();
            self.api(&map.namespace().unwrap_or_default())
                .patch(
                    &name,
                    &PatchParams::apply(FIELD_MANAGER_API).force(),
                    &Patch::Apply(map),
                )
                .await
                .map(|_| ())
                .map_err(failed(format!("applying ConfigMap {name}")))
        })
    }

    fn create<'a>(&'a self, map: &'a ConfigMap) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            self.api(&map.namespace().unwrap_or_default())
                .create(&PostParams::default(), map)
                .await
                .map(|_| ())
                .map_err(failed(format!("creating ConfigMap {}", map.name_any())))
        })
    }

    fn merge<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        data: BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let patch = json!({ "data": data });
            match self
                .api(namespace)
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Err(StoreError::NotFound {
                    namespace: namespace.into(),
                    name: name.into(),
                }),
                Err(e) => Err(failed(format!("patching ConfigMap {name}"))(e)),
            }
        })
    }

    fn delete<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let deleted = self
                .api(namespace)
                .delete(name, &DeleteParams::default())
                .await
                .map(|_| ());
            missing_is_fine(deleted, format!("deleting ConfigMap {name}"))
        })
    }

    fn delete_requests<'a>(
        &'a self,
        namespace: &'a str,
        chat: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let selector = format!(
                "{}={},{}={chat}",
                names::LABEL_COMPONENT,
                request::COMPONENT,
                names::LABEL_CHANNEL
            );
            self.api(namespace)
                .delete_collection(
                    &DeleteParams::default(),
                    &ListParams::default().labels(&selector),
                )
                .await
                .map(|_| ())
                .map_err(failed(format!("deleting chat {chat}'s control requests")))
        })
    }
}

/// Memory: what request-level tests keep sessions in.
pub struct MemoryStore {
    maps: Mutex<BTreeMap<(String, String), Arc<ConfigMap>>>,
    hub: Arc<Hub>,
}

impl MemoryStore {
    /// A store whose writes reach `hub`.
    pub fn new(hub: Arc<Hub>) -> Self {
        Self {
            maps: Mutex::new(BTreeMap::new()),
            hub,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Arc<ConfigMap>>> {
        self.maps.lock().expect("the memory store's lock")
    }

    fn put(&self, map: ConfigMap) {
        let key = (map.namespace().unwrap_or_default(), map.name_any());
        self.lock().insert(key, Arc::new(map.clone()));
        self.hub.saw(&map);
    }
}

impl LiveStore for MemoryStore {
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<ConfigMap>> {
        self.lock()
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    fn requests(&self, namespace: &str) -> Vec<Arc<ConfigMap>> {
        self.lock()
            .iter()
            .filter(|((ns, _), m)| ns == namespace && is_request(m))
            .map(|(_, m)| m.clone())
            .collect()
    }

    fn apply<'a>(&'a self, map: &'a ConfigMap) -> BoxFuture<'a, Result<(), StoreError>> {
        self.put(map.clone());
        Box::pin(async { Ok(()) })
    }

    fn create<'a>(&'a self, map: &'a ConfigMap) -> BoxFuture<'a, Result<(), StoreError>> {
        self.put(map.clone());
        Box::pin(async { Ok(()) })
    }

    fn merge<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        data: BTreeMap<String, String>,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let result = match self.get(namespace, name) {
            None => Err(StoreError::NotFound {
                namespace: namespace.into(),
                name: name.into(),
            }),
            Some(map) => {
                let mut map = (*map).clone();
                map.data.get_or_insert_default().extend(data);
                self.put(map);
                Ok(())
            }
        };
        Box::pin(async move { result })
    }

    fn delete<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.lock()
            .remove(&(namespace.to_string(), name.to_string()));
        Box::pin(async { Ok(()) })
    }

    fn delete_requests<'a>(
        &'a self,
        namespace: &'a str,
        chat: &'a str,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        self.lock().retain(|(ns, _), m| {
            !(ns == namespace
                && is_request(m)
                && m.labels().get(names::LABEL_CHANNEL).map(String::as_str) == Some(chat))
        });
        Box::pin(async { Ok(()) })
    }
}
