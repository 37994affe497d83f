//! `plugins.daily_runs` across API replicas. Each replica's store and [`Ledger`] see the runs
//! it created at once but another replica's only through its watch, so two replicas could
//! both take the 50th run. With a namespace to keep it in (the chart's `POD_NAMESPACE`), the
//! runs each plugin started in the window are also recorded in one of the replicas'
//! [records](crate::records), `loop-plugins-runs-<plugin>`: a replica takes a run only by a
//! write no other replica made in between, else it reads and decides again. The decision
//! stays [`quota::decide`]'s.
//!
//! A run is recorded before it is created; one whose creation then fails is taken out again
//! ([`SharedRuns::release`]), so only runs that started count.
//!
//! [`Ledger`]: super::quota::Ledger

use std::collections::BTreeMap;

use jiff::Timestamp;
use kube::Client;

use super::quota::{self, Quota, Started, WINDOW};
use super::writes::WriteError;
use crate::records::{Decision, Records};

/// The ConfigMap key holding the runs, a JSON list of [`Started`].
const KEY: &str = "started";

/// The record's name for a plugin.
pub fn record_name(plugin: &str) -> String {
    format!("loop-plugins-runs-{plugin}")
}

/// The runs of the record and of `seen` (the store's, the ledger's) still in the window at
/// `now`, each once, oldest first.
pub fn merge(recorded: Vec<Started>, seen: &[Started], now: Timestamp) -> Vec<Started> {
    let window = jiff::SignedDuration::try_from(WINDOW).expect("24 hours fit");
    let mut runs: BTreeMap<(String, String), Started> = BTreeMap::new();
    for run in recorded.into_iter().chain(seen.iter().cloned()) {
        if run.at > now - window {
            runs.entry((run.namespace.clone(), run.name.clone()))
                .or_insert(run);
        }
    }
    let mut runs: Vec<Started> = runs.into_values().collect();
    runs.sort_by_key(|r| r.at);
    runs
}

/// The recorded runs without `run`; None when it is not among them.
pub fn without(recorded: Vec<Started>, run: &Started) -> Option<Vec<Started>> {
    let before = recorded.len();
    let rest: Vec<Started> = recorded
        .into_iter()
        .filter(|r| (r.namespace.as_str(), r.name.as_str()) != (&run.namespace, &run.name))
        .collect();
    (rest.len() != before).then_some(rest)
}

/// The runs a record's data holds (none when it is missing or unreadable).
fn recorded(data: &BTreeMap<String, String>) -> Vec<Started> {
    data.get(KEY)
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// A record's data holding `runs`.
fn data_of(runs: &[Started]) -> BTreeMap<String, String> {
    let text = serde_json::to_string(runs).expect("runs serialize");
    BTreeMap::from([(KEY.to_string(), text)])
}

/// The per-plugin records in the replicas' namespace.
pub struct SharedRuns {
    records: Records,
}

impl SharedRuns {
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            records: Records::new(client, namespace),
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
            ("app.kubernetes.io/part-of", "loop-plugins"),
            ("app.kubernetes.io/component", "runs"),
            ("plugins.loop.dev/plugin", plugin),
        ];
        self.records
            .update(&record_name(plugin), &labels, |data| {
                let mut runs = merge(recorded(data), seen, now);
                match quota::decide(&runs, limit, now) {
                    full @ Quota::Full { .. } => Decision::Keep(full),
                    open => {
                        runs.push(run.clone());
                        Decision::Write(data_of(&runs), open)
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
                    Some(rest) => Decision::Write(data_of(&rest), ()),
                    None => Decision::Keep(()),
                }
            })
            .await
            .map_err(|e| WriteError::Failed(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(name: &str, hours_ago: i64, now: Timestamp) -> Started {
        Started {
            namespace: "ns".into(),
            name: name.into(),
            at: now - jiff::SignedDuration::from_hours(hours_ago),
        }
    }

    #[test]
    fn merge_counts_each_run_once_and_only_inside_the_window() {
        let now: Timestamp = "2026-12-02T12:00:00Z".parse().unwrap();
        let recorded = vec![run("a", 1, now), run("old", 24, now), run("b", 3, now)];
        let seen = [run("a", 1, now), run("c", 2, now)];
        let merged = merge(recorded, &seen, now);
        let names: Vec<&str> = merged.iter().map(|r| r.name.as_str()).collect();
        assert_eq!(names, ["b", "c", "a"]);
    }

    #[test]
    fn without_takes_out_only_the_run_named() {
        let now: Timestamp = "2026-12-02T12:00:00Z".parse().unwrap();
        let recorded = vec![run("a", 1, now), run("b", 2, now)];
        let rest = without(recorded.clone(), &run("a", 1, now)).unwrap();
        assert_eq!(rest, vec![run("b", 2, now)]);
        let mut elsewhere = run("b", 2, now);
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
    fn a_record_reads_back_what_was_written() {
        let now: Timestamp = "2026-12-02T12:00:00Z".parse().unwrap();
        let runs = vec![run("a", 1, now)];
        assert_eq!(recorded(&data_of(&runs)), runs);
    }

    #[test]
    fn names_fit_a_config_map() {
        let longest = "a".repeat(32);
        assert!(record_name(&longest).len() <= 253);
    }
}
