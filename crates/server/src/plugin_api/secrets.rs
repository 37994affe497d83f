//! Secret settings' values (issue 30). A setting the manifest marks `"secret": true` takes its
//! value from a key of a Secret that the config references (`secretSettings`; which reference
//! applies is `model::resolve::secret_source`'s). A plugin approved for `secrets.read` reads it
//! with `GET /settings/secrets/{name}`, and nothing else ever carries it: not `GET /channel`,
//! not `settings.changed`, not a status, an Event or a log line.
//!
//! Each call reads the Secret live, one GET of the Kubernetes API (never a cache: the index
//! watches only the instances' token Secrets, label-selected), so a rotated Secret shows on
//! the next call, and the answer names the revision it read (the Secret's `resourceVersion`).
//! A project's reference names a Secret of the project's namespace, the global config's one
//! of the release namespace.
//!
//! [`SecretReader`] is the seam: the server reads through `kube::Api` ([`KubeSecretReader`]),
//! request-level tests through a map. [`value_of`] decides the answer from what was read.

use std::sync::Arc;

use futures::future::BoxFuture;
use jsonschema::Validator;
use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};

use model::config::SecretKeyRef;

/// Reads a Secret now.
pub trait SecretReader: Send + Sync {
    /// The Secret `name` of `namespace` as the Kubernetes API has it now; `None` when there is
    /// none.
    fn read<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Secret>, SecretReadError>>;
}

/// A read that could not be made (as opposed to a Secret that is not there).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretReadError {
    #[error(
        "the API server may not get Secret {namespace}/{name}: grant its ServiceAccount get on \
         secrets in that namespace (the chart's projectNamespaces)"
    )]
    Forbidden { namespace: String, name: String },
    #[error("reading Secret {namespace}/{name}: {reason}")]
    Failed {
        namespace: String,
        name: String,
        reason: String,
    },
}

/// What secret settings are read from: the reader, and the namespace of the global config's
/// Secrets.
#[derive(Clone)]
pub struct SecretSettings {
    pub reader: Arc<dyn SecretReader>,
    /// The release namespace (the API server's `POD_NAMESPACE`): where HostConfig's
    /// `secretSettings` name their Secrets.
    pub release_namespace: String,
}

/// Reads Secrets through the Kubernetes API, one GET each.
#[derive(Clone)]
pub struct KubeSecretReader {
    client: Client,
}

impl KubeSecretReader {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl SecretReader for KubeSecretReader {
    fn read<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Secret>, SecretReadError>> {
        Box::pin(async move {
            let api: Api<Secret> = Api::namespaced(self.client.clone(), namespace);
            api.get_opt(name).await.map_err(|e| match e {
                kube::Error::Api(s) if s.code == 403 => SecretReadError::Forbidden {
                    namespace: namespace.into(),
                    name: name.into(),
                },
                e => SecretReadError::Failed {
                    namespace: namespace.into(),
                    name: name.into(),
                    reason: e.to_string(),
                },
            })
        })
    }
}

/// Where a secret setting's value is: a key of a Secret in a namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SecretAt {
    pub namespace: String,
    pub secret: SecretKeyRef,
}

/// A secret setting's value as one read found it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretValue {
    pub value: String,
    /// The Secret's `resourceVersion` the value was read at.
    pub revision: String,
}

impl std::fmt::Debug for SecretValue {
    /// Without the value: a test's or a log's debug print must not show it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretValue")
            .field("value", &"<not shown>")
            .field("revision", &self.revision)
            .finish()
    }
}

/// Why a reference gives no value now (409 `secret_unavailable`). The messages never hold the
/// value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SecretUnavailable {
    #[error("Secret {namespace}/{name} does not exist")]
    NoSecret { namespace: String, name: String },
    #[error("Secret {namespace}/{name} has no key {key}")]
    NoKey {
        namespace: String,
        name: String,
        key: String,
    },
    #[error("key {key} of Secret {namespace}/{name} is not UTF-8 text")]
    NotText {
        namespace: String,
        name: String,
        key: String,
    },
    #[error(
        "the value in key {key} of Secret {namespace}/{name} does not satisfy the setting's \
         schema (the reasons are not shown: they would quote it)"
    )]
    Refused {
        namespace: String,
        name: String,
        key: String,
    },
}

/// The value `at` names in what was read (`None`: no such Secret), checked against the
/// setting's schema when it compiles.
pub fn value_of(
    secret: Option<&Secret>,
    at: &SecretAt,
    schema: Option<&Validator>,
) -> Result<SecretValue, SecretUnavailable> {
    let (namespace, name, key) = (
        at.namespace.clone(),
        at.secret.name.clone(),
        at.secret.key.clone(),
    );
    let Some(secret) = secret else {
        return Err(SecretUnavailable::NoSecret { namespace, name });
    };
    let Some(bytes) = secret.data.as_ref().and_then(|d| d.get(&key)) else {
        return Err(SecretUnavailable::NoKey {
            namespace,
            name,
            key,
        });
    };
    let Ok(value) = String::from_utf8(bytes.0.clone()) else {
        return Err(SecretUnavailable::NotText {
            namespace,
            name,
            key,
        });
    };
    if schema.is_some_and(|v| !v.is_valid(&serde_json::Value::String(value.clone()))) {
        return Err(SecretUnavailable::Refused {
            namespace,
            name,
            key,
        });
    }
    Ok(SecretValue {
        value,
        revision: secret.metadata.resource_version.clone().unwrap_or_default(),
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use serde_json::json;

    use super::*;

    fn at(key: &str) -> SecretAt {
        SecretAt {
            namespace: "team".into(),
            secret: SecretKeyRef {
                name: "creds".into(),
                key: key.into(),
            },
        }
    }

    fn secret(version: &str, data: &[(&str, &[u8])]) -> Secret {
        let mut s = Secret::default();
        s.metadata.name = Some("creds".into());
        s.metadata.resource_version = Some(version.into());
        s.data = Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), ByteString(v.to_vec())))
                .collect::<BTreeMap<_, _>>(),
        );
        s
    }

    #[test]
    fn the_value_comes_with_the_revision_it_was_read_at() {
        let s = secret("41", &[("token", b"s3cret")]);
        let read = value_of(Some(&s), &at("token"), None).unwrap();
        assert_eq!(
            (read.value.as_str(), read.revision.as_str()),
            ("s3cret", "41")
        );
        assert!(!format!("{read:?}").contains("s3cret"));
    }

    #[test]
    fn a_missing_secret_key_or_text_says_which_without_the_value() {
        assert_eq!(
            value_of(None, &at("token"), None).unwrap_err().to_string(),
            "Secret team/creds does not exist"
        );
        let s = secret("1", &[("other", b"x"), ("binary", &[0xff, 0xfe])]);
        assert_eq!(
            value_of(Some(&s), &at("token"), None)
                .unwrap_err()
                .to_string(),
            "Secret team/creds has no key token"
        );
        assert!(matches!(
            value_of(Some(&s), &at("binary"), None),
            Err(SecretUnavailable::NotText { .. })
        ));
    }

    #[test]
    fn a_value_its_schema_refuses_is_not_quoted() {
        let schema =
            jsonschema::validator_for(&json!({"type": "string", "pattern": "^ghp_"})).unwrap();
        let s = secret("7", &[("token", b"hunter2")]);
        let refused = value_of(Some(&s), &at("token"), Some(&schema)).unwrap_err();
        assert!(matches!(refused, SecretUnavailable::Refused { .. }));
        assert!(!refused.to_string().contains("hunter2"), "{refused}");
        let s = secret("8", &[("token", b"ghp_abc")]);
        assert_eq!(
            value_of(Some(&s), &at("token"), Some(&schema))
                .unwrap()
                .value,
            "ghp_abc"
        );
    }
}
