//! The ConfigMaps the API server keeps data in (a chat's inbox, a project's plugin memory, a
//! chat's live session): made empty, labelled and owned, before the first keys are merged in
//! ([`merge_data`], the one way keys go in).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use model::names::FIELD_MANAGER_API as FIELD_MANAGER;

/// Keys to set (`Some`) or remove (`None`) in a ConfigMap's data.
pub type DataPatch = BTreeMap<String, Option<String>>;

/// Why keys did not go in.
#[derive(Debug, Clone, thiserror::Error)]
pub enum MergeError {
    #[error("ConfigMap {0} already exists")]
    AlreadyExists(String),
    #[error("{0}")]
    Failed(String),
}

/// Merges `data` into the ConfigMap `template` names (a JSON merge patch of those keys alone),
/// creating it from `template` first when missing; answers it as written.
pub async fn merge_data(
    client: &Client,
    template: &ConfigMap,
    data: &DataPatch,
) -> Result<ConfigMap, MergeError> {
    let name = template.name_any();
    let ns = template.namespace().unwrap_or_default();
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), &ns);
    let failed = |what: &str, err: kube::Error| match err {
        kube::Error::Api(s) if s.is_already_exists() => MergeError::AlreadyExists(name.clone()),
        err => MergeError::Failed(format!("{what} {name}: {err}")),
    };
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let patch = json!({ "data": data });
    // Twice at most: a missing ConfigMap is created, and one made meanwhile by another call is
    // patched.
    for _ in 0..2 {
        match api.patch(&name, &params, &Patch::Merge(&patch)).await {
            Ok(map) => return Ok(map),
            Err(kube::Error::Api(s)) if s.is_not_found() => {}
            Err(e) => return Err(failed("patching ConfigMap", e)),
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
            Err(e) => return Err(failed("creating ConfigMap", e)),
        }
    }
    Err(MergeError::Failed(format!(
        "ConfigMap {name} kept changing"
    )))
}

/// An empty ConfigMap named `name` in `namespace`, with these labels and owner.
pub fn empty(
    name: String,
    namespace: &str,
    labels: BTreeMap<String, String>,
    owner: Option<OwnerReference>,
) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        data: Some(BTreeMap::new()),
        ..Default::default()
    }
}
