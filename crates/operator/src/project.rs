//! `project trust`: records the owner's approval of a project's current plugin config.

use kube::api::PostParams;
use kube::{Api, Client};

use model::config::config_hash;
use model::resources::{Project, TrustedConfig};

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

/// How often a trust is tried again when the Project changed under it (its status counts).
const TRUST_ATTEMPTS: usize = 5;

/// Trusts a project's current plugin config: records its canonical hash and the config as the
/// last approved version. The write carries the resourceVersion read, so what is recorded is
/// exactly the config that was read; when the Project changed in between (a status write
/// bumps the version too), it reads again and trusts what it finds then.
pub async fn trust_project(
    client: Client,
    namespace: &str,
    name: &str,
) -> Result<String, OperatorError> {
    let api: Api<Project> = Api::namespaced(client, namespace);
    let mut attempt = 0;
    loop {
        attempt += 1;
        let mut project = api
            .get(name)
            .await
            .map_err(|source| OperatorError::ReadProject {
                namespace: namespace.into(),
                name: name.into(),
                source,
            })?;
        let hash = config_hash(&project.spec.plugins);
        project.spec.trusted = Some(TrustedConfig {
            hash: hash.clone(),
            plugins: project.spec.plugins.clone(),
        });
        match api.replace(name, &PostParams::default(), &project).await {
            Ok(_) => return Ok(hash),
            Err(kube::Error::Api(status)) if status.is_conflict() && attempt < TRUST_ATTEMPTS => {
                continue;
            }
            Err(source) => {
                return Err(OperatorError::Trust {
                    namespace: namespace.into(),
                    name: name.into(),
                    source,
                });
            }
        }
    }
}
