//! The ConfigMaps the API server keeps data in (a chat's inbox, a project's plugin memory, a
//! chat's live session): made empty, labelled and owned, before the first keys are merged in.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

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
