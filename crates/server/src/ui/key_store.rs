//! The link keys' Secret, read and written: every replica reads it every
//! [`REFRESH`], decides with [`super::keys::decide`], and writes what it decided under the
//! resourceVersion it read (as [`crate::records`] does for ConfigMaps). Any replica may make or
//! rotate the Secret, and exactly one write wins: the others' writes fail with a conflict, and
//! they read the winner's keys. No Lease is needed for that, and a replica signs with the keys
//! it last read, which every replica verifies (the previous key stays for a link's lifetime).

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::sync::watch;

use super::keys::{self, KeysDecision};
use super::link::LinkKeys;

/// How often a replica reads the Secret again.
pub const REFRESH: Duration = Duration::from_secs(30);

/// The Secret's name unless told otherwise (the chart passes `<release>-ui-links`).
pub const DEFAULT_SECRET: &str = "loop-plugins-ui-links";

/// How often to read and decide again when another replica wrote in between.
const ATTEMPTS: usize = 8;

/// Why the keys could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum KeyStoreError {
    #[error("the link keys Secret {namespace}/{name}: {source}")]
    Kube {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("the link keys Secret {namespace}/{name} kept changing under {ATTEMPTS} attempts")]
    Contended { namespace: String, name: String },
}

/// The Secret of one release.
pub struct KeyStore {
    api: Api<Secret>,
    namespace: String,
    name: String,
}

impl KeyStore {
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_string(),
            name: name.to_string(),
        }
    }

    /// The keys at `now` (unix seconds), after making or rotating the Secret if it is time.
    pub async fn refresh(&self, now: i64) -> Result<LinkKeys, KeyStoreError> {
        let failed = |source| KeyStoreError::Kube {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            source,
        };
        for _ in 0..ATTEMPTS {
            let current = self.api.get_opt(&self.name).await.map_err(failed)?;
            let data: BTreeMap<String, Vec<u8>> = current
                .as_ref()
                .and_then(|s| s.data.clone())
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.0))
                .collect();
            let stored = match keys::decide(&data, now, keys::fresh_key) {
                KeysDecision::Keep(stored) => return Ok(stored.keys),
                KeysDecision::Write(stored) => stored,
            };
            let data = keys::data(&stored)
                .into_iter()
                .map(|(k, v)| (k, ByteString(v)))
                .collect();
            let written = match current {
                Some(mut secret) => {
                    // The resourceVersion read stays: a write in between fails this one.
                    secret.data = Some(data);
                    secret.string_data = None;
                    self.api
                        .replace(&self.name, &PostParams::default(), &secret)
                        .await
                }
                None => {
                    let secret = Secret {
                        metadata: ObjectMeta {
                            name: Some(self.name.clone()),
                            labels: Some(BTreeMap::from([(
                                "app.kubernetes.io/component".to_string(),
                                "ui-links".to_string(),
                            )])),
                            ..Default::default()
                        },
                        data: Some(data),
                        ..Default::default()
                    };
                    self.api.create(&PostParams::default(), &secret).await
                }
            };
            match written {
                Ok(_) => {
                    tracing::info!(secret = %self.name, key = %stored.keys.current.id, "link keys written");
                    return Ok(stored.keys);
                }
                Err(kube::Error::Api(status)) if status.code == 409 => continue,
                Err(e) => return Err(failed(e)),
            }
        }
        Err(KeyStoreError::Contended {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        })
    }

    /// Refreshes the keys into `keys` every [`REFRESH`] until `stopped`, calling `each` after
    /// every round (the cache's pruning rides on it).
    pub async fn run(
        self,
        keys: watch::Sender<Option<LinkKeys>>,
        mut stopped: watch::Receiver<bool>,
        each: impl Fn() + Send,
    ) {
        loop {
            match self.refresh(jiff::Timestamp::now().as_second()).await {
                Ok(read) => {
                    keys.send_if_modified(|held| {
                        let changed = held.as_ref() != Some(&read);
                        *held = Some(read);
                        changed
                    });
                }
                // The keys read last stay in use: links keep opening while the API server
                // cannot be reached.
                Err(e) => tracing::warn!(error = %e, "link keys not refreshed"),
            }
            each();
            tokio::select! {
                _ = tokio::time::sleep(REFRESH) => {}
                _ = stopped.wait_for(|s| *s) => return,
            }
        }
    }
}
