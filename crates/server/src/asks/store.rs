//! Where the ConfigMaps of chats' asks are read and written: the cluster ([`KubeStore`]: reads from
//! the index, writes through the Kubernetes API, whose watch brings them back to every
//! replica's index and hubs), or memory ([`MemoryStore`], for request-level tests: its writes
//! reach its hub at once, as a watch would bring them). A write is a creation of the empty
//! map when missing, or a merge patch of some of its keys: nothing is ever deleted (the map
//! goes with its chat), so the API server needs no right to delete ConfigMaps.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::hub::Sees;
use super::record::{self, DataPatch};
use crate::index::Index;

/// Why a write failed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    #[error("no ConfigMap {name} in namespace {namespace}")]
    NotFound { namespace: String, name: String },
    #[error("{0}")]
    Failed(String),
}

/// The reads and writes of the ConfigMaps of chats' asks.
pub trait AskStore: Send + Sync {
    /// The ConfigMap `name` of `namespace`.
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<ConfigMap>>;
    /// Makes `map` unless it is there.
    fn ensure<'a>(&'a self, map: &'a ConfigMap) -> BoxFuture<'a, Result<(), StoreError>>;
    /// Sets (`Some`) or takes out (`None`) keys of ConfigMap `name`'s data.
    fn merge<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        patch: DataPatch,
    ) -> BoxFuture<'a, Result<(), StoreError>>;
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

impl AskStore for KubeStore {
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<ConfigMap>> {
        self.index
            .config_maps
            .get(&ObjectRef::new(name).within(namespace))
    }

    fn ensure<'a>(&'a self, map: &'a ConfigMap) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let name = map.name_any();
            let namespace = map.namespace().unwrap_or_default();
            if self.get(&namespace, &name).is_some() {
                return Ok(());
            }
            match self
                .api(&namespace)
                .create(&PostParams::default(), map)
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(()),
                Err(e) => Err(StoreError::Failed(format!(
                    "creating ConfigMap {name}: {e}"
                ))),
            }
        })
    }

    fn merge<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        patch: DataPatch,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if patch.is_empty() {
                return Ok(());
            }
            let body = json!({ "data": patch });
            match self
                .api(namespace)
                .patch(name, &PatchParams::default(), &Patch::Merge(&body))
                .await
            {
                Ok(_) => Ok(()),
                Err(kube::Error::Api(s)) if s.code == 404 => Err(StoreError::NotFound {
                    namespace: namespace.into(),
                    name: name.into(),
                }),
                Err(e) => Err(StoreError::Failed(format!(
                    "patching ConfigMap {name}: {e}"
                ))),
            }
        })
    }
}

/// Memory: what request-level tests keep asks in.
pub struct MemoryStore {
    maps: Mutex<BTreeMap<(String, String), Arc<ConfigMap>>>,
    hub: Arc<dyn Sees>,
}

impl MemoryStore {
    /// A store whose writes reach `hub`.
    pub fn new(hub: Arc<dyn Sees>) -> Self {
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

impl AskStore for MemoryStore {
    fn get(&self, namespace: &str, name: &str) -> Option<Arc<ConfigMap>> {
        self.lock()
            .get(&(namespace.to_string(), name.to_string()))
            .cloned()
    }

    fn ensure<'a>(&'a self, map: &'a ConfigMap) -> BoxFuture<'a, Result<(), StoreError>> {
        if self
            .get(&map.namespace().unwrap_or_default(), &map.name_any())
            .is_none()
        {
            self.put(map.clone());
        }
        Box::pin(async { Ok(()) })
    }

    fn merge<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        patch: DataPatch,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        let result = match self.get(namespace, name) {
            None => Err(StoreError::NotFound {
                namespace: namespace.into(),
                name: name.into(),
            }),
            Some(map) => {
                let mut map = (*map).clone();
                record::apply(map.data.get_or_insert_default(), &patch);
                self.put(map);
                Ok(())
            }
        };
        Box::pin(async move { result })
    }
}
