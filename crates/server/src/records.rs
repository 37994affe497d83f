//! The API replicas' shared records: ConfigMaps in the replicas' namespace (the chart's release
//! namespace) through which replicas that each see the same cluster act as one:
//! `plugins.daily_runs` ([`crate::plugin_api::shared_runs`]), and the fan-out's mark of what it
//! sent ([`crate::fanout::sent_mark`]; what is sent once for all, such as `settings.changed`, is sent
//! by the holder of the fan-out Lease: see [`crate::fanout`]).
//!
//! A record is written only under the resourceVersion just read: a replica reads it, decides
//! (a pure function of what it read), and writes what it decided; a write another replica made
//! in between fails that write with a conflict, and the replica reads and decides again.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

/// How often to read and decide again when another replica wrote in between.
pub const ATTEMPTS: usize = 8;

/// What a replica decided from the record it read.
#[derive(Debug, PartialEq, Eq)]
pub enum RecordDecision<T> {
    /// Leave the record as it is, and answer `T`.
    Keep(T),
    /// Write this data (the record's whole data) and, once written, answer `T`.
    Write(BTreeMap<String, String>, T),
}

/// Why a record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("the record {namespace}/{name}: {source}")]
    Kube {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the record {namespace}/{name} kept changing under {ATTEMPTS} attempts")]
    Contended { namespace: String, name: String },
}

/// The records in one namespace.
pub struct Records {
    namespace: String,
    api: Api<ConfigMap>,
}

impl Records {
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            api: Api::namespaced(client, namespace),
        }
    }

    /// Reads the record `name` (its data; empty when it does not exist yet), lets `decide`
    /// choose, and writes what it chose under the resourceVersion read, making the record
    /// with `labels` when it does not exist. Reads and decides again after another replica's
    /// write, at most [`ATTEMPTS`] times.
    pub async fn update<T>(
        &self,
        name: &str,
        labels: &[(&str, &str)],
        mut decide: impl FnMut(&BTreeMap<String, String>) -> RecordDecision<T>,
    ) -> Result<T, RecordError> {
        let failed = |source| RecordError::Kube {
            namespace: self.namespace.clone(),
            name: name.to_string(),
            source,
        };
        for _ in 0..ATTEMPTS {
            let current = self.api.get_opt(name).await.map_err(failed)?;
            let data = current
                .as_ref()
                .and_then(|m| m.data.clone())
                .unwrap_or_default();
            let (data, answer) = match decide(&data) {
                RecordDecision::Keep(answer) => return Ok(answer),
                RecordDecision::Write(data, answer) => (data, answer),
            };
            let written = match current {
                Some(mut map) => {
                    // The resourceVersion read stays in the object: a write in between makes
                    // this one fail with a conflict.
                    map.data = Some(data);
                    self.api.replace(name, &PostParams::default(), &map).await
                }
                None => {
                    let map = ConfigMap {
                        metadata: ObjectMeta {
                            name: Some(name.to_string()),
                            labels: Some(
                                labels
                                    .iter()
                                    .map(|(k, v)| (k.to_string(), v.to_string()))
                                    .collect(),
                            ),
                            ..Default::default()
                        },
                        data: Some(data),
                        ..Default::default()
                    };
                    self.api.create(&PostParams::default(), &map).await
                }
            };
            match written {
                Ok(_) => return Ok(answer),
                // Another replica wrote first (or made it first): read and decide again.
                Err(kube::Error::Api(status)) if status.code == 409 => continue,
                Err(e) => return Err(failed(e)),
            }
        }
        Err(RecordError::Contended {
            namespace: self.namespace.clone(),
            name: name.to_string(),
        })
    }
}
