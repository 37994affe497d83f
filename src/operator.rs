//! Operator verbs: the few writes a person makes through the CLI rather than with kubectl.

use kube::api::PostParams;
use kube::{Api, Client};

use crate::config::config_hash;
use crate::resources::{Project, TrustedConfig};

/// Why an operator verb failed.
#[derive(Debug, thiserror::Error)]
pub enum OperatorError {
    #[error("reading Project {namespace}/{name}: {source}")]
    ReadProject {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("recording trust on Project {namespace}/{name}: {source}")]
    Trust {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Trusts a project's current plugin config: records its canonical hash and the config as the
/// last approved version.
pub async fn trust_project(
    client: Client,
    namespace: &str,
    name: &str,
) -> Result<String, OperatorError> {
    let api: Api<Project> = Api::namespaced(client, namespace);
    let project = api
        .get(name)
        .await
        .map_err(|source| OperatorError::ReadProject {
            namespace: namespace.into(),
            name: name.into(),
            source,
        })?;
    let mut project = project;
    let hash = config_hash(&project.spec.plugins);
    project.spec.trusted = Some(TrustedConfig {
        hash: hash.clone(),
        plugins: project.spec.plugins.clone(),
    });
    // A replace carries the resourceVersion read: a config edited in between is not trusted.
    api.replace(name, &PostParams::default(), &project)
        .await
        .map_err(|source| OperatorError::Trust {
            namespace: namespace.into(),
            name: name.into(),
            source,
        })?;
    Ok(hash)
}
