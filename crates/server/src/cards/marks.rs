//! The drawer's writes that are not a plugin's (those are the Plugin API's): a chat's read
//! marks on its inbox ConfigMaps ([`super::read_marks`] decides them), by a JSON merge patch
//! of those annotations alone, and the host's own notifications into the chat's host inbox
//! ([`super::host_notes`] decides them). Behind [`MarkWriter`], so request-level tests record
//! them.

use std::sync::Mutex;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::read_marks::MarkPatch;
use crate::config_map::DataPatch;
use model::names::FIELD_MANAGER_API as FIELD_MANAGER;

/// A marking that was not written.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MarkError {
    /// The ConfigMap went (its plugin was removed): its cards with it.
    #[error("ConfigMap {namespace}/{name} does not exist")]
    Gone { namespace: String, name: String },
    #[error("marking cards read in ConfigMap {namespace}/{name}: {message}")]
    Failed {
        namespace: String,
        name: String,
        message: String,
    },
}

/// Writes read marks and the host's notifications.
pub trait MarkWriter: Send + Sync {
    /// Merges `patch` into the annotations of `map` (as the index holds it); answers the
    /// ConfigMap as written.
    fn mark<'a>(
        &'a self,
        map: &'a ConfigMap,
        patch: &'a MarkPatch,
    ) -> BoxFuture<'a, Result<ConfigMap, MarkError>>;

    /// Merges `data` into the host inbox `template` names, creating it when missing.
    fn post<'a>(
        &'a self,
        template: &'a ConfigMap,
        data: &'a DataPatch,
    ) -> BoxFuture<'a, Result<(), String>>;
}

/// The marks, written through the Kubernetes API.
#[derive(Clone)]
pub struct KubeMarkWriter {
    client: Client,
}

impl KubeMarkWriter {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl MarkWriter for KubeMarkWriter {
    fn mark<'a>(
        &'a self,
        map: &'a ConfigMap,
        patch: &'a MarkPatch,
    ) -> BoxFuture<'a, Result<ConfigMap, MarkError>> {
        Box::pin(async move {
            let (namespace, name) = (map.namespace().unwrap_or_default(), map.name_any());
            let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &namespace);
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            let body = json!({ "metadata": { "annotations": patch } });
            api.patch(&name, &params, &Patch::Merge(&body))
                .await
                .map_err(|e| match e {
                    kube::Error::Api(s) if s.is_not_found() => MarkError::Gone { namespace, name },
                    e => MarkError::Failed {
                        namespace,
                        name,
                        message: e.to_string(),
                    },
                })
        })
    }

    fn post<'a>(
        &'a self,
        template: &'a ConfigMap,
        data: &'a DataPatch,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            crate::config_map::merge_data(&self.client, template, data)
                .await
                .map(|_| ())
                .map_err(|e| e.to_string())
        })
    }
}

/// Records the markings and answers each map with its patch applied, and records the posts
/// (tests).
#[derive(Default)]
pub struct RecordingMarks {
    pub written: Mutex<Vec<(String, MarkPatch)>>,
    pub posted: Mutex<Vec<(String, DataPatch)>>,
}

impl MarkWriter for RecordingMarks {
    fn mark<'a>(
        &'a self,
        map: &'a ConfigMap,
        patch: &'a MarkPatch,
    ) -> BoxFuture<'a, Result<ConfigMap, MarkError>> {
        self.written
            .lock()
            .expect("recording lock")
            .push((map.name_any(), patch.clone()));
        let mut written = map.clone();
        let annotations = written.metadata.annotations.get_or_insert_default();
        for (key, value) in patch {
            match value {
                Some(v) => annotations.insert(key.clone(), v.clone()),
                None => annotations.remove(key),
            };
        }
        Box::pin(async move { Ok(written) })
    }

    fn post<'a>(
        &'a self,
        template: &'a ConfigMap,
        data: &'a DataPatch,
    ) -> BoxFuture<'a, Result<(), String>> {
        self.posted
            .lock()
            .expect("recording lock")
            .push((template.name_any(), data.clone()));
        Box::pin(async move { Ok(()) })
    }
}
