//! One `settings.changed` per config write, however many API replicas see it. Every replica
//! watches the Projects and the HostConfig, so every replica notices the same write; with a
//! namespace to keep it in (the chart's `POD_NAMESPACE`), the replicas record in one ConfigMap,
//! `loop-plugins-settings-sent`, the last generation of each written object (by uid) whose
//! event went out. A replica sends only after it moved that generation forward by a write made
//! under the resourceVersion it read; the others find it taken and stay quiet.
//!
//! The record is pruned on every write of the objects that no longer exist. When the record
//! cannot be written at all the replica sends anyway: a second `settings.changed` is better
//! than none.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

/// The record's name, in the replicas' namespace.
pub const RECORD: &str = "loop-plugins-settings-sent";
/// How often to read and decide again when another replica wrote in between.
const ATTEMPTS: usize = 8;

/// Why the record could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    #[error("the record {namespace}/{RECORD}: {source}")]
    Kube {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("the record {namespace}/{RECORD} kept changing under {ATTEMPTS} attempts")]
    Contended { namespace: String },
}

/// The record after this replica takes the write of `uid` at `generation`, keeping only the
/// objects in `live`; None when the write was taken already (at this generation or a later
/// one). Generations are kept as decimal strings, a ConfigMap's values.
pub fn take(
    sent: &BTreeMap<String, String>,
    uid: &str,
    generation: i64,
    live: &BTreeSet<String>,
) -> Option<BTreeMap<String, String>> {
    let taken = sent
        .get(uid)
        .and_then(|g| g.parse::<i64>().ok())
        .is_some_and(|g| g >= generation);
    if taken {
        return None;
    }
    let mut next: BTreeMap<String, String> = sent
        .iter()
        .filter(|(k, _)| live.contains(*k))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    next.insert(uid.to_string(), generation.to_string());
    Some(next)
}

/// The replicas' record in one namespace.
pub struct SettingsSent {
    namespace: String,
    api: Api<ConfigMap>,
}

impl SettingsSent {
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            api: Api::namespaced(client, namespace),
        }
    }

    /// Whether this replica sends the event for the write of `uid` at `generation`: true when
    /// its write of the record took it, false when another replica's had.
    pub async fn claim(
        &self,
        uid: &str,
        generation: i64,
        live: &BTreeSet<String>,
    ) -> Result<bool, RecordError> {
        let failed = |source| RecordError::Kube {
            namespace: self.namespace.clone(),
            source,
        };
        for _ in 0..ATTEMPTS {
            let current = self.api.get_opt(RECORD).await.map_err(failed)?;
            let sent = current
                .as_ref()
                .and_then(|m| m.data.clone())
                .unwrap_or_default();
            let Some(next) = take(&sent, uid, generation, live) else {
                return Ok(false);
            };
            let written = match current {
                Some(mut map) => {
                    // The resourceVersion read stays in the object: a write in between makes
                    // this one fail with a conflict.
                    map.data = Some(next);
                    self.api.replace(RECORD, &PostParams::default(), &map).await
                }
                None => {
                    let map = ConfigMap {
                        metadata: ObjectMeta {
                            name: Some(RECORD.to_string()),
                            labels: Some(BTreeMap::from([
                                ("app.kubernetes.io/part-of".into(), "loop-plugins".into()),
                                ("app.kubernetes.io/component".into(), "settings-sent".into()),
                            ])),
                            ..Default::default()
                        },
                        data: Some(next),
                        ..Default::default()
                    };
                    self.api.create(&PostParams::default(), &map).await
                }
            };
            match written {
                Ok(_) => return Ok(true),
                // Another replica wrote first (or made it first): read and decide again.
                Err(kube::Error::Api(status)) if status.code == 409 => continue,
                Err(e) => return Err(failed(e)),
            }
        }
        Err(RecordError::Contended {
            namespace: self.namespace.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn live(uids: &[&str]) -> BTreeSet<String> {
        uids.iter().map(|u| u.to_string()).collect()
    }

    #[test]
    fn the_first_replica_takes_a_write_and_the_next_finds_it_taken() {
        let first = take(&record(&[]), "u1", 2, &live(&["u1"])).unwrap();
        assert_eq!(first, record(&[("u1", "2")]));
        assert_eq!(take(&first, "u1", 2, &live(&["u1"])), None);
    }

    #[test]
    fn a_later_generation_is_a_new_write_and_an_earlier_one_is_stale() {
        let sent = record(&[("u1", "3")]);
        assert_eq!(
            take(&sent, "u1", 4, &live(&["u1"])),
            Some(record(&[("u1", "4")]))
        );
        assert_eq!(take(&sent, "u1", 2, &live(&["u1"])), None);
    }

    #[test]
    fn objects_gone_leave_the_record_and_others_stay() {
        let sent = record(&[("gone", "7"), ("u2", "1")]);
        assert_eq!(
            take(&sent, "u1", 2, &live(&["u1", "u2"])),
            Some(record(&[("u1", "2"), ("u2", "1")]))
        );
    }

    #[test]
    fn an_unreadable_generation_is_taken_again() {
        let sent = record(&[("u1", "not a number")]);
        assert_eq!(
            take(&sent, "u1", 1, &live(&["u1"])),
            Some(record(&[("u1", "1")]))
        );
    }
}
