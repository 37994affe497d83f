//! The CRDs of every resource, as `loop-plugins crds` prints them and crds/ holds them.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::resources::{AgentRun, Channel, HostConfig, Plugin, PluginInstance, Project};

/// Every CRD, in a stable order.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        HostConfig::crd(),
        Plugin::crd(),
        Project::crd(),
        Channel::crd(),
        PluginInstance::crd(),
        AgentRun::crd(),
    ]
}

/// Every CRD as one multi-document YAML stream.
pub fn yaml() -> String {
    all()
        .iter()
        .map(|crd| {
            let body = serde_saphyr::to_string(crd).expect("a CRD serializes to YAML");
            format!("---\n{body}")
        })
        .collect()
}
