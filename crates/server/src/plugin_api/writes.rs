//! The Plugin API's writes of objects it makes, behind [`Writer`], so request-level tests
//! record them and the server itself writes through `kube::Api` (status fields of instances
//! go through [`crate::status`]):
//! - creating an AgentRun (`POST /runs`);
//! - merging keys into an inbox or memory ConfigMap (a JSON merge patch of `data`, an object
//!   only the API server writes, so concurrent writers of different keys never undo each
//!   other), creating it first when it is missing.

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::PostParams;
use kube::{Api, Client, ResourceExt};

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
pub use crate::config_map::DataPatch;
use crate::config_map::MergeError;

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
            crate::config_map::merge_data(&self.client, template, data)
                .await
                .map_err(|e| match e {
                    MergeError::AlreadyExists(name) => WriteError::AlreadyExists(name),
                    MergeError::Failed(why) => WriteError::Failed(why),
                })
        })
    }
}
