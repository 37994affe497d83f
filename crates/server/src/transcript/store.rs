//! Where transcripts are written and read: the cluster ([`KubeTranscripts`]: a merge patch of a
//! call's keys, creating the ConfigMap when missing; a live GET per read, so no process holds
//! the transcripts of every run in memory), or memory ([`MemoryTranscripts`], for tests).

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Api, Client, ResourceExt};

use crate::config_map::{DataPatch, merge_data};

/// The writes and reads of runs' transcripts.
pub trait TranscriptStore: Send + Sync {
    /// Merges `patch` into the ConfigMap `template` names, made from `template` when missing.
    fn write<'a>(
        &'a self,
        template: &'a ConfigMap,
        patch: &'a DataPatch,
    ) -> BoxFuture<'a, Result<(), String>>;

    /// The ConfigMap `name` of `namespace`, as the cluster has it now (None: there is none).
    fn read<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConfigMap>, String>>;
}

/// The cluster.
pub struct KubeTranscripts {
    client: Client,
}

impl KubeTranscripts {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl TranscriptStore for KubeTranscripts {
    fn write<'a>(
        &'a self,
        template: &'a ConfigMap,
        patch: &'a DataPatch,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            merge_data(&self.client, template, patch)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }

    fn read<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConfigMap>, String>> {
        Box::pin(async move {
            Api::<ConfigMap>::namespaced(self.client.clone(), namespace)
                .get_opt(name)
                .await
                .map_err(|e| format!("reading ConfigMap {name}: {e}"))
        })
    }
}

/// Memory: what tests keep transcripts in. Its writes and reads fail while [`Self::fail`] says
/// so.
#[derive(Default)]
pub struct MemoryTranscripts {
    maps: Mutex<BTreeMap<(String, String), ConfigMap>>,
    failing: AtomicBool,
}

impl MemoryTranscripts {
    /// Makes every write and read fail (`true`) or go through again.
    pub fn fail(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), ConfigMap>> {
        self.maps.lock().expect("the memory transcripts' lock")
    }
}

impl TranscriptStore for MemoryTranscripts {
    fn write<'a>(
        &'a self,
        template: &'a ConfigMap,
        patch: &'a DataPatch,
    ) -> BoxFuture<'a, Result<(), String>> {
        let result = if self.failing.load(Ordering::SeqCst) {
            Err(format!(
                "writing ConfigMap {}: refused",
                template.name_any()
            ))
        } else {
            let key = (
                template.namespace().unwrap_or_default(),
                template.name_any(),
            );
            let mut maps = self.lock();
            let map = maps.entry(key).or_insert_with(|| template.clone());
            super::entry::apply(map.data.get_or_insert_default(), patch);
            Ok(())
        };
        Box::pin(async move { result })
    }

    fn read<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<ConfigMap>, String>> {
        let result = if self.failing.load(Ordering::SeqCst) {
            Err(format!("reading ConfigMap {name}: refused"))
        } else {
            Ok(self
                .lock()
                .get(&(namespace.to_string(), name.to_string()))
                .cloned())
        };
        Box::pin(async move { result })
    }
}
