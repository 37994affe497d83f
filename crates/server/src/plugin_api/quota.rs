//! `plugins.daily_runs`: each plugin starts at most that many agent runs in any 24 hours,
//! across all channels. Pure counting here; the runs route holds the plugin's lock around
//! counting and creating, so two calls cannot both take the last run.
//!
//! The runs counted are the plugin's AgentRuns in the store, by `creationTimestamp`, and the
//! runs this process created that the store has not shown yet (the [`Ledger`]).
//!
//! "In any 24 hours": a run counts while it started less than 24 hours ago; at exactly 24 hours
//! it has left the window, which is when `Retry-After` points.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;

/// The window `daily_runs` counts over.
pub const WINDOW: Duration = Duration::from_secs(24 * 60 * 60);

/// A run started at `at`, named (namespace, name).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Started {
    pub namespace: String,
    pub name: String,
    pub at: Timestamp,
}

/// What the quota decides for one more run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Quota {
    /// Room for it: this many started in the window before it.
    Room { started: usize },
    /// No room until `retry_after` has passed (when the oldest run in the window leaves it).
    Full {
        started: usize,
        retry_after: Duration,
    },
}

/// Whether a run started `at` still counts at `now`: it started less than [`WINDOW`] ago.
pub fn counts_at(at: Timestamp, now: Timestamp) -> bool {
    at > now - window()
}

fn window() -> jiff::SignedDuration {
    jiff::SignedDuration::try_from(WINDOW).expect("24 hours fit")
}

/// Decides whether one more run may start at `now`, given every run the plugin started.
pub fn decide(started: &[Started], limit: u32, now: Timestamp) -> Quota {
    let window = window();
    let mut in_window: Vec<Timestamp> = started
        .iter()
        .map(|s| s.at)
        .filter(|at| counts_at(*at, now))
        .collect();
    in_window.sort();
    let count = in_window.len();
    if count < limit as usize {
        return Quota::Room { started: count };
    }
    // The run that must leave the window before one more fits.
    let leaving = count - limit as usize;
    let retry_after = in_window
        .get(leaving)
        .map(|at| Duration::try_from((*at + window).duration_since(now)).unwrap_or(Duration::ZERO))
        .unwrap_or(WINDOW);
    Quota::Full {
        started: count,
        retry_after: retry_after.max(Duration::from_secs(1)),
    }
}

/// Runs this process created, by plugin, kept until the store shows them or they leave the
/// window.
#[derive(Default)]
pub struct Ledger {
    created: Mutex<HashMap<String, Vec<Started>>>,
}

impl Ledger {
    /// Records a run the plugin just started.
    pub fn record(&self, plugin: &str, run: Started) {
        self.created
            .lock()
            .expect("ledger lock")
            .entry(plugin.to_string())
            .or_default()
            .push(run);
    }

    /// Every run of the plugin: those in the store and those created here it lacks.
    pub fn with_unseen(
        &self,
        plugin: &str,
        in_store: Vec<Started>,
        now: Timestamp,
    ) -> Vec<Started> {
        let window = jiff::SignedDuration::try_from(WINDOW).expect("24 hours fit");
        let seen: BTreeSet<(String, String)> = in_store
            .iter()
            .map(|s| (s.namespace.clone(), s.name.clone()))
            .collect();
        let mut created = self.created.lock().expect("ledger lock");
        let mine = created.entry(plugin.to_string()).or_default();
        mine.retain(|s| {
            s.at > now - window && !seen.contains(&(s.namespace.clone(), s.name.clone()))
        });
        let mut all = in_store;
        all.extend(mine.iter().cloned());
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn runs(times: &[&str]) -> Vec<Started> {
        times
            .iter()
            .enumerate()
            .map(|(i, at)| Started {
                namespace: "ns".into(),
                name: format!("r{i}"),
                at: t(at),
            })
            .collect()
    }

    #[test]
    fn runs_older_than_a_day_do_not_count() {
        let now = t("2026-01-02T12:00:00Z");
        let started = runs(&[
            "2026-01-01T11:59:59Z",
            "2026-01-01T12:00:00Z",
            "2026-01-01T12:00:01Z",
        ]);
        assert_eq!(decide(&started, 2, now), Quota::Room { started: 1 });
        assert_eq!(
            decide(&started, 1, now),
            Quota::Full {
                started: 1,
                retry_after: Duration::from_secs(1)
            }
        );
    }

    #[test]
    fn a_full_window_says_when_room_comes() {
        let now = t("2026-01-02T00:00:00Z");
        let started = runs(&["2026-01-01T06:00:00Z", "2026-01-01T18:00:00Z"]);
        assert_eq!(
            decide(&started, 2, now),
            Quota::Full {
                started: 2,
                retry_after: Duration::from_secs(6 * 3600)
            }
        );
        assert!(matches!(decide(&started, 0, now), Quota::Full { .. }));
    }

    #[test]
    fn the_ledger_adds_runs_the_store_has_not_shown() {
        let now = t("2026-01-02T00:00:00Z");
        let ledger = Ledger::default();
        let mine = runs(&["2026-01-01T23:00:00Z", "2026-01-01T23:30:00Z"]);
        for r in &mine {
            ledger.record("p", r.clone());
        }
        ledger.record("other", mine[0].clone());
        let all = ledger.with_unseen("p", vec![mine[0].clone()], now);
        assert_eq!(all.len(), 2, "the run the store shows is not counted twice");
        // Once out of the window they are forgotten.
        let later = now + WINDOW;
        assert!(ledger.with_unseen("p", vec![], later).is_empty());
    }
}
