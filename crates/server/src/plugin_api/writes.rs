//! The Plugin API's writes of objects it makes, behind [`Writer`], so request-level tests
//! record them and the server itself writes through `kube::Api` (status fields of instances
//! go through [`crate::status`]):
//! - creating an AgentRun (`POST /runs`);
//! - merging keys into an inbox or memory ConfigMap (a JSON merge patch of `data`, an object
//!   only the API server writes, so concurrent writers of different keys never undo each
//!   other), creating it first when it is missing.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use model::names::FIELD_MANAGER_API as FIELD_MANAGER;
use model::resources::AgentRun;

/// A write that did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{0} exists already")]
    AlreadyExists(String),
    #[error("{0}")]
    Failed(String),
}

/// Keys to set (`Some`) or remove (`None`) in a ConfigMap's data.
pub type DataPatch = BTreeMap<String, Option<String>>;

/// The writes of the API server.
pub trait Writer: Send + Sync {
    /// Creates the run; answers it as the API server stored it.
    fn create_run<'a>(&'a self, run: &'a AgentRun) -> BoxFuture<'a, Result<AgentRun, WriteError>>;

    /// Merges `data` into the ConfigMap `template` names, creating it from `template` first
    /// when missing.
    fn merge_config_map<'a>(
        &'a self,
        template: &'a ConfigMap,
        data: &'a DataPatch,
    ) -> BoxFuture<'a, Result<ConfigMap, WriteError>>;
}

/// The writes, made through the Kubernetes API.
#[derive(Clone)]
pub struct KubeWriter {
    client: Client,
}

impl KubeWriter {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

fn failed(what: &str, name: &str, err: kube::Error) -> WriteError {
    match err {
        kube::Error::Api(s) if s.is_already_exists() => WriteError::AlreadyExists(name.into()),
        err => WriteError::Failed(format!("{what} {name}: {err}")),
    }
}

fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_not_found())
}

impl Writer for KubeWriter {
    fn create_run<'a>(&'a self, run: &'a AgentRun) -> BoxFuture<'a, Result<AgentRun, WriteError>> {
        Box::pin(async move {
            let ns = run.namespace().unwrap_or_default();
            let api: Api<AgentRun> = Api::namespaced(self.client.clone(), &ns);
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            api.create(&params, run)
                .await
                .map_err(|e| failed("creating AgentRun", &run.name_any(), e))
        })
    }

    fn merge_config_map<'a>(
        &'a self,
        template: &'a ConfigMap,
        data: &'a DataPatch,
    ) -> BoxFuture<'a, Result<ConfigMap, WriteError>> {
        Box::pin(async move {
            let name = template.name_any();
            let ns = template.namespace().unwrap_or_default();
            let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &ns);
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            let patch = json!({ "data": data });
            // Twice at most: a missing ConfigMap is created, and one made meanwhile by another
            // call is patched.
            for _ in 0..2 {
                match api.patch(&name, &params, &Patch::Merge(&patch)).await {
                    Ok(map) => return Ok(map),
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(failed("patching ConfigMap", &name, e)),
                }
                let mut fresh = template.clone();
                fresh.data = Some(
                    data.iter()
                        .filter_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone())))
                        .collect(),
                );
                let post = PostParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..Default::default()
                };
                match api.create(&post, &fresh).await {
                    Ok(map) => return Ok(map),
                    Err(kube::Error::Api(s)) if s.is_already_exists() => continue,
                    Err(e) => return Err(failed("creating ConfigMap", &name, e)),
                }
            }
            Err(WriteError::Failed(format!(
                "ConfigMap {name} kept changing"
            )))
        })
    }
}
