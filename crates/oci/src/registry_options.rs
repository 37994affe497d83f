//! The registry client's options from HostConfig `plugins.registry` and its credentials'
//! bytes: what every process that pulls a plugin image by digest builds its client from (the
//! controller, to admit; the API server, to serve the UI bundle). Pure: the Secret's bytes are
//! the caller's to read.

use std::collections::BTreeMap;

use crate::credentials::{DOCKER_CONFIG_SECRET_KEY, DockerConfig};
use crate::registry::{Endpoint, RegistryOptions};
use model::resources::RegistryConfig;

/// Why the registry cannot be set up from HostConfig: a config error, shown on the Image
/// stage and looked at again when HostConfig or the Secret changes.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum RegistrySetupError {
    #[error(
        "plugins.registry.credentialsSecret {name:?} is not in the controller's namespace {namespace}"
    )]
    SecretMissing { name: String, namespace: String },
    #[error("plugins.registry.credentialsSecret {name:?} has no key {DOCKER_CONFIG_SECRET_KEY}")]
    NoKey { name: String },
    #[error("plugins.registry.credentialsSecret {name:?}: {message}")]
    Credentials { name: String, message: String },
    #[error("plugins.registry: {0}")]
    Client(String),
}

/// The registry client's options: credentials, plain-HTTP registries, other addresses.
pub fn options(
    config: &RegistryConfig,
    credentials: Option<&[u8]>,
) -> Result<RegistryOptions, RegistrySetupError> {
    let credentials = match credentials {
        None => DockerConfig::default(),
        Some(bytes) => DockerConfig::parse(bytes).map_err(|e| RegistrySetupError::Credentials {
            name: config.credentials_secret.clone().unwrap_or_default(),
            message: e.to_string(),
        })?,
    };
    let endpoints: BTreeMap<String, Endpoint> = config
        .mirrors
        .iter()
        .map(|m| {
            (
                m.registry.clone(),
                Endpoint {
                    host: m.address.clone(),
                    plain_http: m.plain_http,
                },
            )
        })
        .collect();
    Ok(RegistryOptions {
        credentials,
        insecure: config.insecure.clone(),
        endpoints,
        ..RegistryOptions::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resources::RegistryMirror;

    #[test]
    fn options_follow_host_config() {
        let config = RegistryConfig {
            credentials_secret: Some("pull".into()),
            insecure: vec!["registry.lan:5000".into()],
            mirrors: vec![RegistryMirror {
                registry: "localhost:5001".into(),
                address: "kind-registry:5000".into(),
                plain_http: true,
            }],
        };
        let creds = br#"{"auths":{"localhost:5001":{"username":"u","password":"p"}}}"#;
        let o = options(&config, Some(creds)).unwrap();
        assert_eq!(o.insecure, ["registry.lan:5000"]);
        assert_eq!(
            o.endpoints["localhost:5001"],
            Endpoint {
                host: "kind-registry:5000".into(),
                plain_http: true
            }
        );
        assert!(o.credentials.for_registry("localhost:5001").is_some());
        let err = options(&config, Some(b"{")).unwrap_err().to_string();
        assert!(err.contains("\"pull\""), "{err}");
    }
}
