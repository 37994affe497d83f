//! `plugins.daily_runs` across API replicas. Each replica's store and [`Ledger`] see the runs
//! it created at once but another replica's only through its watch, so two replicas could
//! both take the 50th run. With a namespace to keep it in (the chart's `POD_NAMESPACE`), the
//! runs each plugin started in the window are also recorded in one ConfigMap per plugin,
//! `loop-plugins-runs-<plugin>`, written only under the resourceVersion just read: a replica
//! takes a run only by a write no other replica made in between, else it reads and decides
//! again. The decision stays [`quota::decide`]'s.
//!
//! A run is recorded before it is created; one whose creation then fails is taken out again
//! ([`SharedRuns::release`]), so only runs that started count.
//!
//! [`Ledger`]: super::quota::Ledger

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use super::quota::{self, Quota, Started, WINDOW};
use super::writes::WriteError;

/// The ConfigMap key holding the runs, a JSON list of [`Started`].
const KEY: &str = "started";
/// How often to read and decide again when another replica wrote in between.
const ATTEMPTS: usize = 8;

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

/// The runs a record holds (none when it is missing or unreadable).
fn recorded(map: Option<&ConfigMap>) -> Vec<Started> {
    map.and_then(|m| m.data.as_ref())
        .and_then(|d| d.get(KEY))
        .and_then(|text| serde_json::from_str(text).ok())
        .unwrap_or_default()
}

/// The per-plugin records in one namespace.
pub struct SharedRuns {
    api: Api<ConfigMap>,
}

impl SharedRuns {
    pub fn new(client: Client, namespace: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
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
        let name = record_name(plugin);
        let failed = |e: kube::Error| WriteError::Failed(format!("the run record {name}: {e}"));
        for _ in 0..ATTEMPTS {
            let current = self.api.get_opt(&name).await.map_err(failed)?;
            let mut runs = merge(recorded(current.as_ref()), seen, now);
            let quota = quota::decide(&runs, limit, now);
            if let Quota::Full { .. } = quota {
                return Ok(quota);
            }
            runs.push(run.clone());
            let text = serde_json::to_string(&runs).expect("runs serialize");
            let data = BTreeMap::from([(KEY.to_string(), text)]);
            let written = match current {
                Some(mut map) => {
                    // The resourceVersion read stays in the object: a write in between
                    // makes this one fail with a conflict.
                    map.data = Some(data);
                    self.api.replace(&name, &PostParams::default(), &map).await
                }
                None => {
                    let map = ConfigMap {
                        metadata: ObjectMeta {
                            name: Some(name.clone()),
                            labels: Some(BTreeMap::from([
                                ("app.kubernetes.io/part-of".into(), "loop-plugins".into()),
                                ("app.kubernetes.io/component".into(), "runs".into()),
                                ("plugins.loop.dev/plugin".into(), plugin.into()),
                            ])),
                            ..Default::default()
                        },
                        data: Some(data),
                        ..Default::default()
                    };
                    self.api.create(&PostParams::default(), &map).await
                }
            };
            match written {
                Ok(_) => return Ok(quota),
                // Another replica wrote first (or made it first): read and decide again.
                Err(kube::Error::Api(status)) if status.code == 409 => continue,
                Err(e) => return Err(failed(e)),
            }
        }
        Err(WriteError::Failed(format!(
            "the run record {name} kept changing under {ATTEMPTS} attempts"
        )))
    }

    /// Takes a run [`reserve`](Self::reserve)d out of the plugin's record again: its AgentRun
    /// was never created.
    pub async fn release(&self, plugin: &str, run: &Started) -> Result<(), WriteError> {
        let name = record_name(plugin);
        let failed = |e: kube::Error| WriteError::Failed(format!("the run record {name}: {e}"));
        for _ in 0..ATTEMPTS {
            let Some(mut map) = self.api.get_opt(&name).await.map_err(failed)? else {
                return Ok(());
            };
            let Some(rest) = without(recorded(Some(&map)), run) else {
                return Ok(());
            };
            let text = serde_json::to_string(&rest).expect("runs serialize");
            map.data = Some(BTreeMap::from([(KEY.to_string(), text)]));
            match self.api.replace(&name, &PostParams::default(), &map).await {
                Ok(_) => return Ok(()),
                Err(kube::Error::Api(status)) if status.code == 409 => continue,
                Err(e) => return Err(failed(e)),
            }
        }
        Err(WriteError::Failed(format!(
            "the run record {name} kept changing under {ATTEMPTS} attempts"
        )))
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
        assert!(recorded(None).is_empty());
        let map = ConfigMap {
            data: Some(BTreeMap::from([(KEY.into(), "not json".into())])),
            ..Default::default()
        };
        assert!(recorded(Some(&map)).is_empty());
    }

    #[test]
    fn a_record_reads_back_what_was_written() {
        let now: Timestamp = "2026-12-02T12:00:00Z".parse().unwrap();
        let runs = vec![run("a", 1, now)];
        let map = ConfigMap {
            data: Some(BTreeMap::from([(
                KEY.into(),
                serde_json::to_string(&runs).unwrap(),
            )])),
            ..Default::default()
        };
        assert_eq!(recorded(Some(&map)), runs);
    }

    #[test]
    fn names_fit_a_config_map() {
        let longest = "a".repeat(32);
        assert!(record_name(&longest).len() <= 253);
    }
}
