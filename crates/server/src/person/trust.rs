//! Trusting a project: records the owner's approval of a project's current plugin config, as a
//! `ProjectTrust` of its own (see `model::resources::project_trust`). `loop-plugins project
//! trust` writes it with the person's kubeconfig, the console through the host API with the
//! person's token: the same write, so the same RBAC.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};

use model::config::config_hash;
use model::names::FIELD_MANAGER_TRUST;
use model::resources::{Project, ProjectTrust};

/// Why trusting a project failed.
#[derive(Debug, thiserror::Error)]
pub enum TrustError {
    #[error("reading Project {namespace}/{name}: {source}")]
    ReadProject {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("recording trust on Project {namespace}/{name} (ProjectTrust {name}): {source}")]
    Trust {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error(
        "Project {namespace}/{name}'s config is {actual}, not the {expected} you asked to trust: \
         it changed since you read it; review it again (status.configHash) and trust that"
    )]
    ConfigChanged {
        namespace: String,
        name: String,
        expected: String,
        actual: String,
    },
}

/// Trusts a project's current plugin config: applies the same-named `ProjectTrust` holding the
/// config's canonical hash and the config itself, owned by the Project (so it goes with it,
/// and never counts for another Project of the same name). When `expected_hash` is given, the
/// current config must have that hash (the version the owner reviewed), else nothing is
/// written. Needs `get` on projects and `create`, `patch` on projecttrusts (the chart's
/// `loop-plugins-project-trustee` role); editing the config is a separate permission.
pub async fn trust_project(
    client: Client,
    namespace: &str,
    name: &str,
    expected_hash: Option<&str>,
) -> Result<String, TrustError> {
    let projects: Api<Project> = Api::namespaced(client.clone(), namespace);
    let project = projects
        .get(name)
        .await
        .map_err(|source| TrustError::ReadProject {
            namespace: namespace.into(),
            name: name.into(),
            source,
        })?;
    let hash = config_hash(&project.spec.plugins);
    if let Some(expected) = expected_hash
        && expected != hash
    {
        return Err(TrustError::ConfigChanged {
            namespace: namespace.into(),
            name: name.into(),
            expected: expected.into(),
            actual: hash,
        });
    }
    let trust = trust_of(&project);
    let trusts: Api<ProjectTrust> = Api::namespaced(client, namespace);
    trusts
        .patch(
            name,
            &PatchParams::apply(FIELD_MANAGER_TRUST).force(),
            &Patch::Apply(&trust),
        )
        .await
        .map_err(|source| TrustError::Trust {
            namespace: namespace.into(),
            name: name.into(),
            source,
        })?;
    Ok(hash)
}

/// The trust of a Project's current config: named like it, owned by it (no
/// blockOwnerDeletion, which would need more than the trustee's role).
pub fn trust_of(project: &Project) -> ProjectTrust {
    let mut trust = ProjectTrust::of(&project.name_any(), &project.spec.plugins);
    trust.metadata.namespace = project.namespace();
    trust.metadata.owner_references = project.uid().map(|uid| {
        vec![OwnerReference {
            api_version: Project::api_version(&()).into_owned(),
            kind: Project::kind(&()).into_owned(),
            name: project.name_any(),
            uid,
            controller: None,
            block_owner_deletion: None,
        }]
    });
    trust
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::config::PluginConfig;
    use model::resolve::{ProjectView, TrustState, approved_plugins};
    use model::resources::ProjectSpec;

    #[test]
    fn the_trust_of_a_project_names_its_config_and_is_owned_by_it() {
        let mut project = Project::new(
            "proj",
            ProjectSpec {
                plugins: [("echo".to_string(), PluginConfig::default())].into(),
            },
        );
        project.metadata.namespace = Some("team".into());
        project.metadata.uid = Some("uid-proj".into());
        let trust = trust_of(&project);
        assert_eq!(trust.name_any(), "proj");
        assert_eq!(trust.namespace().as_deref(), Some("team"));
        assert_eq!(trust.spec.hash, config_hash(&project.spec.plugins));
        let owner = &trust.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str()),
            ("Project", "uid-proj")
        );
        assert_eq!(owner.api_version, "plugins.loop.dev/v1alpha1");
        let view = ProjectView::new(&project, Some(&trust));
        assert_eq!(approved_plugins(view).state, TrustState::Trusted);
    }
}
