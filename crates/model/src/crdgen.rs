//! The CRDs of every resource, as `loop-plugins crds` prints them and crds/ holds them
//! (tests/crds.rs fails while a checked-in copy differs; `make crds` rewrites them).

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::resources::{
    AgentRun, Channel, HostConfig, Plugin, PluginInstance, Project, ProjectTrust, ToolCallApproval,
};

/// Every CRD, in a stable order.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        HostConfig::crd(),
        Plugin::crd(),
        Project::crd(),
        ProjectTrust::crd(),
        Channel::crd(),
        PluginInstance::crd(),
        AgentRun::crd(),
        ToolCallApproval::crd(),
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

#[cfg(test)]
mod tests {
    /// Kinds that only people write and nothing observes: no status.
    const WITHOUT_STATUS: [&str; 1] = [
        // The Project's status says whether its trust applies.
        "projecttrusts.plugins.loop.dev",
    ];

    #[test]
    fn every_crd_has_a_status_subresource_and_printer_columns() {
        for crd in super::all() {
            let version = &crd.spec.versions[0];
            let name = &crd.metadata.name;
            let has_status = version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some();
            let wanted = !WITHOUT_STATUS.contains(&name.as_deref().unwrap_or_default());
            assert_eq!(
                has_status, wanted,
                "{name:?}: status subresource {has_status}, wanted {wanted}"
            );
            assert!(
                version
                    .additional_printer_columns
                    .as_ref()
                    .is_some_and(|c| c.len() >= 2),
                "{name:?} lacks printer columns"
            );
        }
    }
}
