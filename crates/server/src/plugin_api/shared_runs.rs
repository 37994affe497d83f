//! `plugins.daily_runs` across API replicas. Each replica's store and [`Ledger`] see the runs
//! it created at once but another replica's only through its watch, so two replicas could
//! both take the 50th run. With a namespace to keep it in (the chart's `POD_NAMESPACE`), the
//! runs each plugin started in the window are also recorded in one of the replicas'
//! [records](crate::records), `loop-plugins-runs-<plugin>`: a replica takes a run only by a
//! write no other replica made in between, else it reads and decides again. The decision
//! stays [`quota::decide`]'s.
//!
//! A run is recorded before it is created, as reserved by this replica's process; one whose
//! creation then fails is taken out again ([`SharedRuns::release`]), so only runs that started
//! count. A process killed between the two leaves a reservation no run follows: the next
//! decision drops it (see [`merge`]) once it is sure no run will come, that is when the same
//! replica runs another process now (after [`IN_FLIGHT`]), or after [`ORPHAN_AFTER`] for a
//! replica gone for good. A reservation whose run a replica's store (or ledger) shows is a
//! started run from then on.
//!
//! [`Ledger`]: super::quota::Ledger

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::Client;
use model::names;

use super::quota::{self, Quota, Started, WINDOW};
use super::writes::WriteError;
use crate::records::{RecordDecision, Records};

/// The ConfigMap key holding the runs, a JSON list of [`Entry`].
const KEY: &str = "started";

/// How long a reservation by another replica counts without its run showing up: far longer
/// than creating an AgentRun and seeing it through a watch takes.
pub const ORPHAN_AFTER: std::time::Duration = std::time::Duration::from_secs(120);

/// How long a reservation by an earlier process of this replica counts without its run: the
/// create it sent as it was killed may still land, and the store show it, within this.
pub const IN_FLIGHT: std::time::Duration = std::time::Duration::from_secs(10);

/// Who reserved a run: the replica (its Pod's name) and its process (random per start).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Reserver {
    pub replica: String,
    pub process: String,
}

/// A run in a record: reserved by a process and not yet seen created, or started.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    #[serde(flatten)]
    pub run: Started,
    /// None once a store showed the run (and in records written before reservations were).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reserved_by: Option<Reserver>,
}

/// The record's name for a plugin.
pub fn record_name(plugin: &str) -> String {
    format!("loop-plugins-runs-{plugin}")
}

/// The runs of the record and of `seen` (the store's, the ledger's) still in the window at
/// `now`, each once, oldest first, as `me` decides: a reservation `seen` shows is a started
/// run; one no run followed is dropped when its process is gone (`me`'s replica with another
/// process) and [`IN_FLIGHT`] has passed, or it is older than [`ORPHAN_AFTER`].
pub fn merge(recorded: Vec<Entry>, seen: &[Started], me: &Reserver, now: Timestamp) -> Vec<Entry> {
    let window = jiff::SignedDuration::try_from(WINDOW).expect("24 hours fit");
    let orphan = jiff::SignedDuration::try_from(ORPHAN_AFTER).expect("minutes fit");
    let in_flight = jiff::SignedDuration::try_from(IN_FLIGHT).expect("seconds fit");
    let key = |r: &Started| (r.namespace.clone(), r.name.clone());
    let seen_keys: std::collections::BTreeSet<(String, String)> = seen.iter().map(key).collect();
    let mut runs: BTreeMap<(String, String), Entry> = BTreeMap::new();
    for mut entry in recorded {
        if entry.run.at <= now - window {
            continue;
        }
        if seen_keys.contains(&key(&entry.run)) {
            entry.reserved_by = None;
        } else if let Some(by) = &entry.reserved_by {
            let process_gone = by.replica == me.replica && by.process != me.process;
            if (process_gone && entry.run.at <= now - in_flight) || entry.run.at <= now - orphan {
                continue;
            }
        }
        runs.entry(key(&entry.run)).or_insert(entry);
    }
    for run in seen.iter().filter(|r| r.at > now - window) {
        runs.entry(key(run)).or_insert_with(|| Entry {
            run: run.clone(),
            reserved_by: None,
        });
    }
    let mut runs: Vec<Entry> = runs.into_values().collect();
    runs.sort_by_key(|e| e.run.at);
    runs
}

/// The recorded runs without `run`; None when it is not among them.
pub fn without(recorded: Vec<Entry>, run: &Started) -> Option<Vec<Entry>> {
    let before = recorded.len();
    let rest: Vec<Entry> = recorded
        .into_iter()
        .filter(|e| (e.run.namespace.as_str(), e.run.name.as_str()) != (&run.namespace, &run.name))
        .collect();
    (rest.len() != before).then_some(rest)
}

/// The runs a record's data holds (none when it is missing or unreadable).
fn recorded(data: &BTreeMap<String, String>) -> Vec<Entry> {
    data.get(KEY)
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// A record's data holding `runs`.
fn data_of(runs: &[Entry]) -> BTreeMap<String, String> {
    let text = serde_json::to_string(runs).expect("runs serialize");
    BTreeMap::from([(KEY.to_string(), text)])
}

/// The per-plugin records in the replicas' namespace.
pub struct SharedRuns {
    records: Records,
    me: Reserver,
}

impl SharedRuns {
    /// The records in `namespace`, written as `replica` (this Pod's name) from a process of
    /// its own.
    pub fn new(client: Client, namespace: &str, replica: &str) -> Self {
        use rand::Rng;
        let process: [u8; 8] = rand::rng().random();
        Self {
            records: Records::new(client, namespace),
            me: Reserver {
                replica: replica.to_string(),
                process: hex::encode(process),
            },
        }
    }

    /// Takes a run in the plugin's window for `run` unless it is full; answers the decision.
    pub async fn reserve(
        &self,
        plugin: &str,
        run: &Started,
        seen: &[Started],
        limit: u32,
        now: Timestamp,
    ) -> Result<Quota, WriteError> {
        let labels = [
            (names::LABEL_PART_OF, names::PART_OF),
            (names::LABEL_COMPONENT, "runs"),
            (names::LABEL_PLUGIN, plugin),
        ];
        self.records
            .update(&record_name(plugin), &labels, |data| {
                let mut runs = merge(recorded(data), seen, &self.me, now);
                let started: Vec<Started> = runs.iter().map(|e| e.run.clone()).collect();
                match quota::decide(&started, limit, now) {
                    full @ Quota::Full { .. } => RecordDecision::Keep(full),
                    open => {
                        runs.push(Entry {
                            run: run.clone(),
                            reserved_by: Some(self.me.clone()),
                        });
                        RecordDecision::Write(data_of(&runs), open)
                    }
                }
            })
            .await
            .map_err(|e| WriteError::Failed(e.to_string()))
    }

    /// Takes a run [`reserve`](Self::reserve)d out of the plugin's record again: its AgentRun
    /// was never created.
    pub async fn release(&self, plugin: &str, run: &Started) -> Result<(), WriteError> {
        self.records
            .update(&record_name(plugin), &[], |data| {
                match without(recorded(data), run) {
                    Some(rest) => RecordDecision::Write(data_of(&rest), ()),
                    None => RecordDecision::Keep(()),
                }
            })
            .await
            .map_err(|e| WriteError::Failed(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, minutes_ago: i64, now: Timestamp) -> Started {
        Started {
            namespace: "ns".into(),
            name: name.into(),
            at: now - jiff::SignedDuration::from_mins(minutes_ago),
        }
    }

    fn started(name: &str, minutes_ago: i64, now: Timestamp) -> Entry {
        Entry {
            run: run(name, minutes_ago, now),
            reserved_by: None,
        }
    }

    fn by(replica: &str, process: &str) -> Reserver {
        Reserver {
            replica: replica.into(),
            process: process.into(),
        }
    }

    fn reserved(name: &str, minutes_ago: i64, now: Timestamp, who: Reserver) -> Entry {
        Entry {
            run: run(name, minutes_ago, now),
            reserved_by: Some(who),
        }
    }

    fn names(entries: &[Entry]) -> Vec<&str> {
        entries.iter().map(|e| e.run.name.as_str()).collect()
    }

    #[test]
    fn merge_counts_each_run_once_and_only_inside_the_window() {
        let now: Timestamp = "2026-12-02T12:00:00Z".parse().unwrap();
        let recorded = vec![
            started("a", 60, now),
            started("old", 24 * 60, now),
            started("b", 180, now),
        ];
        let seen = [run("a", 60, now), run("c", 120, now)];
        let merged = merge(recorded, &seen, &by("api-0", "p1"), now);
        assert_eq!(names(&merged), ["b", "c", "a"]);
    }

    #[test]
    fn a_reservation_no_run_followed_stops_counting_once_no_run_can_follow() {
        let now: Timestamp = "2026-12-02T12:00:00Z".parse().unwrap();
        let me = by("api-0", "p2");
        let seconds_ago = |name: &str, seconds: i64, who: Reserver| Entry {
            run: Started {
                at: now - jiff::SignedDuration::from_secs(seconds),
                ..run(name, 0, now)
            },
            reserved_by: Some(who),
        };
        let recorded = vec![
            // This replica's earlier process reserved it and was killed before creating it.
            reserved("killed", 1, now, by("api-0", "p1")),
            // Killed a moment ago: the create it sent may still land.
            seconds_ago("landing", 3, by("api-0", "p1")),
            // Its run was created: a store shows it.
            reserved("created", 1, now, by("api-0", "p1")),
            // In flight in this process, or in another replica's.
            reserved("mine", 0, now, me.clone()),
            reserved("theirs", 1, now, by("api-1", "q1")),
            // Another replica's, long enough ago that its run would show by now.
            reserved("gone", 3, now, by("api-1", "q0")),
        ];
        let seen = [run("created", 1, now)];
        let merged = merge(recorded, &seen, &me, now);
        assert_eq!(names(&merged), ["created", "theirs", "landing", "mine"]);
        assert_eq!(merged[0].reserved_by, None, "seen created: a started run");
        assert!(merged[1..].iter().all(|e| e.reserved_by.is_some()));
    }

    #[test]
    fn without_takes_out_only_the_run_named() {
        let now: Timestamp = "2026-12-02T12:00:00Z".parse().unwrap();
        let recorded = vec![started("a", 60, now), started("b", 120, now)];
        let rest = without(recorded.clone(), &run("a", 60, now)).unwrap();
        assert_eq!(rest, vec![started("b", 120, now)]);
        let mut elsewhere = run("b", 120, now);
        elsewhere.namespace = "other".into();
        assert_eq!(without(recorded, &elsewhere), None);
    }

    #[test]
    fn a_missing_or_unreadable_record_holds_no_runs() {
        assert!(recorded(&BTreeMap::new()).is_empty());
        let data = BTreeMap::from([(KEY.into(), "not json".into())]);
        assert!(recorded(&data).is_empty());
    }

    #[test]
    fn a_record_reads_back_what_was_written_and_older_records_still_read() {
        let now: Timestamp = "2026-12-02T12:00:00Z".parse().unwrap();
        let runs = vec![
            started("a", 60, now),
            reserved("b", 1, now, by("api-0", "p1")),
        ];
        assert_eq!(recorded(&data_of(&runs)), runs);
        // A record from before reservations: its runs are started ones.
        let old = BTreeMap::from([(
            KEY.to_string(),
            r#"[{"namespace":"ns","name":"a","at":"2026-12-02T11:00:00Z"}]"#.to_string(),
        )]);
        assert_eq!(recorded(&old), vec![started("a", 60, now)]);
    }

    #[test]
    fn names_fit_a_config_map() {
        let longest = "a".repeat(32);
        assert!(record_name(&longest).len() <= 253);
    }
}
