//! Chats' quality scans, from the app that posts them to the plugins that read their hotspots.
//!
//! - The app scans a chat's working tree and posts the scan through the host API (`PUT
//!   .../channels/{channel}/quality`, RBAC `update channels/quality`; `GET` reads it back:
//!   `crate::host_api::quality`). [`scan`] reads and checks it, and decides what is kept: the
//!   worst functions, sorted, with the scan's totals.
//! - The scan is kept in the cluster, one ConfigMap per chat (`<chat>-quality`, owned by the
//!   Channel so it goes with it, labelled `app.kubernetes.io/component=quality`), written by a
//!   merge patch of its one key; every API replica's index holds it through its ConfigMap
//!   watch, so any replica serves it. [`Quality`] reads it from the index, with what this
//!   process wrote itself over the index until the watch brings it back.
//! - Storing one sends the chat's plugins subscribed to `quality.scanned` the event
//!   ([`scan::event_data`]), as `POST .../events` sends the app's.
//! - Plugins read it with the Plugin API, behind `files.read` (hotspots describe the chat's
//!   working tree): `GET /hotspots` (the worst), `GET /hotspots/page` (a page, with the totals),
//!   `crate::plugin_api`'s `hotspots` routes.

pub mod scan;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Client, ResourceExt};

use crate::config_map::DataPatch;
use crate::index::Index;
use crate::own_writes::OwnWrites;
use model::resources::Channel;
use scan::Scan;

/// Writes a chat's quality ConfigMap: merges `data` into the map `template` names, creating it
/// from `template` first when missing; answers the map as written.
pub trait ScanWriter: Send + Sync {
    fn write<'a>(
        &'a self,
        template: &'a ConfigMap,
        data: &'a DataPatch,
    ) -> BoxFuture<'a, Result<ConfigMap, String>>;
}

/// Through the Kubernetes API (`crate::config_map::merge_data`, the one way keys go in).
pub struct KubeScanWriter {
    client: Client,
}

impl KubeScanWriter {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl ScanWriter for KubeScanWriter {
    fn write<'a>(
        &'a self,
        template: &'a ConfigMap,
        data: &'a DataPatch,
    ) -> BoxFuture<'a, Result<ConfigMap, String>> {
        Box::pin(async move {
            crate::config_map::merge_data(&self.client, template, data)
                .await
                .map_err(|e| e.to_string())
        })
    }
}

/// In memory (request-level tests): each write answers the map with a newer resourceVersion;
/// [`MemoryScanWriter::fail`] makes the writes fail, as an API server that is down does.
#[derive(Default)]
pub struct MemoryScanWriter {
    maps: Mutex<BTreeMap<(String, String), ConfigMap>>,
    version: AtomicU64,
    failing: AtomicBool,
}

impl MemoryScanWriter {
    pub fn fail(&self, failing: bool) {
        self.failing.store(failing, Ordering::SeqCst);
    }

    /// The maps written.
    pub fn written(&self) -> Vec<ConfigMap> {
        self.maps
            .lock()
            .expect("maps lock")
            .values()
            .cloned()
            .collect()
    }
}

impl ScanWriter for MemoryScanWriter {
    fn write<'a>(
        &'a self,
        template: &'a ConfigMap,
        data: &'a DataPatch,
    ) -> BoxFuture<'a, Result<ConfigMap, String>> {
        let result = if self.failing.load(Ordering::SeqCst) {
            Err(format!(
                "writing ConfigMap {}: the API server is down",
                template.name_any()
            ))
        } else {
            let key = (
                template.namespace().unwrap_or_default(),
                template.name_any(),
            );
            let mut maps = self.maps.lock().expect("maps lock");
            let map = maps.entry(key).or_insert_with(|| template.clone());
            let values = map.data.get_or_insert_default();
            for (k, v) in data {
                match v {
                    Some(v) => values.insert(k.clone(), v.clone()),
                    None => values.remove(k),
                };
            }
            // Past any version a test puts in the index by hand.
            let version = 1_000_000 + self.version.fetch_add(1, Ordering::SeqCst);
            map.metadata.resource_version = Some(version.to_string());
            Ok(map.clone())
        };
        Box::pin(async move { result })
    }
}

/// Why a scan was not stored.
#[derive(Clone, Debug, thiserror::Error)]
#[error("storing the quality scan of chat {chat}: {why}")]
pub struct StoreError {
    pub chat: String,
    pub why: String,
}

/// Chats' quality scans: read from the index (with this process's own writes over it), written
/// through a [`ScanWriter`].
pub struct Quality {
    index: Arc<Index>,
    writer: Arc<dyn ScanWriter>,
    fresh: OwnWrites<ConfigMap>,
}

impl Quality {
    pub fn new(index: Arc<Index>, writer: Arc<dyn ScanWriter>) -> Self {
        Self {
            index,
            writer,
            fresh: OwnWrites::default(),
        }
    }

    /// Kept in the cluster.
    pub fn in_cluster(client: Client, index: Arc<Index>) -> Self {
        Self::new(index, Arc::new(KubeScanWriter::new(client)))
    }

    /// Kept in memory (request-level tests).
    pub fn in_memory(index: Arc<Index>) -> Self {
        Self::new(index, Arc::new(MemoryScanWriter::default()))
    }

    /// The latest scan of chat `chat`, if it has one.
    pub fn scan(&self, namespace: &str, chat: &str) -> Option<Scan> {
        let map = self.fresh.get(
            &self.index.config_maps,
            namespace,
            &scan::name(chat),
            Timestamp::now(),
        )?;
        scan::read(&map)
    }

    /// The scan a plugin in `chat` reads: its own, else its channel's for a thread on the
    /// channel's tree ([`scan::chats_read`]).
    pub fn scan_for(&self, chat: &Channel) -> Option<Scan> {
        let namespace = chat.namespace().unwrap_or_default();
        scan::chats_read(chat)
            .iter()
            .find_map(|c| self.scan(&namespace, c))
    }

    /// Stores `scan` as `chat`'s latest.
    pub async fn store(&self, chat: &Channel, scan: &Scan) -> Result<(), StoreError> {
        let template = scan::config_map(chat);
        let written = self
            .writer
            .write(&template, &scan::write(scan))
            .await
            .map_err(|why| StoreError {
                chat: chat.name_any(),
                why,
            })?;
        self.fresh.remember(written, Timestamp::now());
        Ok(())
    }
}
