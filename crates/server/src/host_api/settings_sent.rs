//! One `settings.changed` per config write, however many API replicas see it. Every replica
//! watches the Projects and the HostConfig, so every replica notices the same write; with a
//! namespace to keep it in (the chart's `POD_NAMESPACE`), the replicas record in one of their
//! [records](crate::records), `loop-plugins-settings-sent`, the last generation of each written
//! object (by uid) whose event went out. A replica sends only after its own write moved that
//! generation forward; the others find it taken and stay quiet.
//!
//! The record is pruned on every write of the objects that no longer exist. When the record
//! cannot be written at all the replica sends anyway: a second `settings.changed` is better
//! than none.

use std::collections::{BTreeMap, BTreeSet};

use kube::Client;

use crate::records::{Decision, RecordError, Records};

/// The record's name, in the replicas' namespace.
pub const RECORD: &str = "loop-plugins-settings-sent";

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

/// The replicas' record in their namespace.
pub struct SettingsSent {
    records: Records,
}

impl SettingsSent {
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            records: Records::new(client, namespace),
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
        let labels = [
            ("app.kubernetes.io/part-of", "loop-plugins"),
            ("app.kubernetes.io/component", "settings-sent"),
        ];
        self.records
            .update(RECORD, &labels, |sent| {
                match take(sent, uid, generation, live) {
                    Some(next) => Decision::Write(next, true),
                    None => Decision::Keep(false),
                }
            })
            .await
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
