//! `ProjectTrust`: the config version a project's owner trusts, one per `Project` (same name,
//! same namespace). It is a resource of its own so that editing a project's plugin config
//! (`update` on `projects`) and trusting it (`create`/`update` on `projecttrusts`) are two RBAC
//! permissions: someone who may only edit the config cannot make their edit count (the
//! reference: "a project's value applies once the owner trusts that config; until then the
//! last approved version's values do").
//!
//! `loop-plugins project trust` writes it, with an owner reference to the Project it trusts:
//! garbage collection removes it with the Project, and a trust made for an earlier Project of
//! the same name does not count for a new one (see `resolve::trust`).

use kube::{CustomResource, KubeSchema};
use serde::{Deserialize, Serialize};

use crate::config::PluginsConfig;

/// The config version of the same-named Project that its owner approved.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[kube(
    group = "plugins.loop.dev",
    version = "v1alpha1",
    kind = "ProjectTrust",
    namespaced,
    shortname = "ptrust",
    category = "loop-plugins",
    doc = "The plugin config version of the same-named Project that its owner trusts (loop-plugins project trust writes it)",
    printcolumn(name = "Hash", type_ = "string", json_path = ".spec.hash"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[serde(rename_all = "camelCase")]
pub struct ProjectTrustSpec {
    /// `sha256:<hex>` of the canonical JSON of `plugins`: the Project's config is trusted while
    /// its own hash (`status.configHash`) is this one.
    #[x_kube(validation = Rule::new("self.matches('^sha256:[0-9a-f]{64}$')").message("sha256:<64 hex>"))]
    pub hash: String,
    /// The approved config itself: its `enabled` values and schedules apply while the
    /// Project's current config is not the trusted one.
    #[serde(default, skip_serializing_if = "PluginsConfig::is_empty")]
    pub plugins: PluginsConfig,
}

impl ProjectTrust {
    /// The trust of exactly this config, named like its Project.
    pub fn of(project: &str, plugins: &PluginsConfig) -> Self {
        ProjectTrust::new(
            project,
            ProjectTrustSpec {
                hash: crate::config::config_hash(plugins),
                plugins: plugins.clone(),
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;
    use crate::resources::Project;

    /// examples/project.yaml trusts exactly the config it declares.
    #[test]
    fn the_example_trusts_its_own_config() {
        let text = include_str!("../../../../examples/project.yaml");
        let docs: Vec<Value> = serde_saphyr::from_multiple(text).expect("YAML");
        let of_kind = |kind: &str| {
            docs.iter()
                .find(|d| d["kind"] == kind)
                .cloned()
                .unwrap_or_else(|| panic!("no {kind} in examples/project.yaml"))
        };
        let project: Project = serde_json::from_value(of_kind("Project")).unwrap();
        let trust: ProjectTrust = serde_json::from_value(of_kind("ProjectTrust")).unwrap();
        assert_eq!(trust.metadata.name, project.metadata.name);
        assert_eq!(
            trust.spec,
            ProjectTrust::of("demo", &project.spec.plugins).spec
        );
    }
}
