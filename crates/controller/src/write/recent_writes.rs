//! Writes this controller made that its cache may not show yet.
//!
//! A reconcile reads the watch cache, which lags the API server: an object written a moment
//! ago can still show the version the write went over. A second reconcile in that moment (the
//! chat's own CronJob event, an instance's Secret event) would find "a field we set differs"
//! and write the same content again: one more request per object on every fan-out, and twice
//! the status writes of a cold start (measured by `make bench-scale`).
//!
//! So each write is remembered as (the version it went over, a hash of what it wrote). While
//! the cache still shows that very version, writing the same content again is skipped: the
//! server has it already, and whatever changes the object after it brings a new version and
//! with it a new look. Only writes over an object the cache shows are remembered here; making
//! an absent one is remembered by the index (`index::awaited`), whose watches say when the
//! store shows the object: the version to compare with comes only then (an object made and
//! deleted before the cache saw either would otherwise never be made again).
//!
//! A status write also brings the watch event of the object as the write left it (its echo),
//! which would wake the reconciler that wrote it to find what it has just written. So the
//! version a status write produced is remembered too, and the event that carries exactly that
//! version is the echo ([`RecentWrites::is_echo`]): nobody else wrote in between, or the version
//! would differ and that write's own event wake the reconciler.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;

use serde::Serialize;

/// What one object (or its status) had written over which version.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    over: u64,
    content: u64,
}

/// The writes whose effect the cache may not show yet, by object.
#[derive(Debug, Default)]
pub struct RecentWrites {
    entries: Mutex<HashMap<u64, Entry>>,
    /// The version each status write produced, until its echo (or another version) comes.
    produced: Mutex<HashMap<u64, u64>>,
}

/// Names one object, or its status, for [`RecentWrites`].
#[derive(Clone, Copy, Debug, Hash)]
pub struct Target<'a> {
    pub kind: &'a str,
    /// `status` for a status write, empty for the object.
    pub part: &'a str,
    pub namespace: &'a str,
    pub name: &'a str,
}

fn hash_of(value: impl Hash) -> u64 {
    let mut hasher = DefaultHasher::new();
    value.hash(&mut hasher);
    hasher.finish()
}

/// A hash of what a write sends.
pub fn content_hash<T: Serialize>(content: &T) -> u64 {
    hash_of(serde_json::to_vec(content).expect("objects serialize"))
}

/// A hash of a status, blind to conditions' `lastTransitionTime`: a status built again a moment
/// later stamps a condition that is new to it (the cache not showing the first write) with a
/// later time, and is still the same write.
pub fn status_hash<T: Serialize>(status: &T) -> u64 {
    let mut value = serde_json::to_value(status).expect("statuses serialize");
    forget_times(&mut value);
    hash_of(value.to_string())
}

fn forget_times(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove("lastTransitionTime");
            map.values_mut().for_each(forget_times);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(forget_times),
        _ => {}
    }
}

impl RecentWrites {
    /// Whether `content` was written over `version` of `target`, which the cache still shows:
    /// the write is on its way. A remembered write over another version is forgotten (the
    /// cache moved on).
    pub fn on_its_way(&self, target: Target, version: Option<&str>, content: u64) -> bool {
        let Some(version) = version else {
            return false;
        };
        let key = hash_of(target);
        let mut entries = self.entries.lock().expect("not poisoned");
        match entries.get(&key) {
            Some(entry) if entry.over == hash_of(version) => entry.content == content,
            Some(_) => {
                entries.remove(&key);
                false
            }
            None => false,
        }
    }

    /// Remembers that `content` was written over `version` of `target` (nothing when the
    /// object was absent).
    pub fn record(&self, target: Target, version: Option<&str>, content: u64) {
        let Some(version) = version else {
            return;
        };
        self.entries.lock().expect("not poisoned").insert(
            hash_of(target),
            Entry {
                over: hash_of(version),
                content,
            },
        );
    }

    /// Remembers that our write to `target` left it at `version` (the version the API server
    /// answered with).
    pub fn produced(&self, target: Target, version: Option<&str>) {
        let Some(version) = version else {
            return;
        };
        self.produced
            .lock()
            .expect("not poisoned")
            .insert(hash_of(target), hash_of(version));
    }

    /// Whether a watch event showing `target` at `version` is the echo of our own last write
    /// to it. Either way the write is forgotten: its echo comes once, and a later version
    /// means someone wrote after us.
    pub fn is_echo(&self, target: Target, version: Option<&str>) -> bool {
        let mut produced = self.produced.lock().expect("not poisoned");
        match (produced.remove(&hash_of(target)), version) {
            (Some(ours), Some(version)) => ours == hash_of(version),
            _ => false,
        }
    }

    /// How many writes are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().expect("not poisoned").len()
            + self.produced.lock().expect("not poisoned").len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const POD: Target = Target {
        kind: "CronJob",
        part: "",
        namespace: "ns",
        name: "echo-ch-tick",
    };

    #[test]
    fn the_same_write_over_the_same_version_is_on_its_way() {
        let written = RecentWrites::default();
        assert!(!written.on_its_way(POD, Some("7"), 1));
        written.record(POD, Some("7"), 1);
        assert!(written.on_its_way(POD, Some("7"), 1));
        // Other content: it must be written.
        assert!(!written.on_its_way(POD, Some("7"), 2));
        // The status is another target.
        let status = Target {
            part: "status",
            ..POD
        };
        assert!(!written.on_its_way(status, Some("7"), 1));
    }

    #[test]
    fn a_new_version_in_the_cache_ends_the_wait() {
        let written = RecentWrites::default();
        written.record(POD, Some("7"), 1);
        // Our write arrived, or someone else's did: look at the object as it is.
        assert!(!written.on_its_way(POD, Some("8"), 1));
        assert_eq!(written.len(), 0);
        // And an old version showing again later counts for nothing either.
        assert!(!written.on_its_way(POD, Some("7"), 1));
    }

    #[test]
    fn a_status_stamped_again_is_the_same_status() {
        let at = |time: &str, status: &str| {
            serde_json::json!({"phase": "Stopped", "conditions": [
                {"type": "Ready", "status": status, "lastTransitionTime": time}]})
        };
        assert_eq!(
            status_hash(&at("t1", "True")),
            status_hash(&at("t2", "True"))
        );
        assert_ne!(
            status_hash(&at("t1", "True")),
            status_hash(&at("t1", "False"))
        );
    }

    #[test]
    fn making_an_absent_object_is_never_skipped() {
        let written = RecentWrites::default();
        written.record(POD, None, 1);
        assert!(!written.on_its_way(POD, None, 1));
        assert_eq!(written.len(), 0);
    }

    #[test]
    fn only_the_version_our_write_produced_is_its_echo() {
        let written = RecentWrites::default();
        let status = Target {
            kind: "PluginInstance",
            part: "status",
            namespace: "ns",
            name: "echo-general",
        };
        // Nothing written: no event is an echo.
        assert!(!written.is_echo(status, Some("8")));
        written.produced(status, Some("9"));
        // The event of the version before ours (someone else's write) is no echo, and after
        // it ours is not awaited any more (a reconcile is woken anyway).
        assert!(!written.is_echo(status, Some("8")));
        assert!(!written.is_echo(status, Some("9")));
        // Ours, seen once: the echo; seen again (a relist), a change to look at.
        written.produced(status, Some("11"));
        assert!(written.is_echo(status, Some("11")));
        assert!(!written.is_echo(status, Some("11")));
        // Another object's write is not this one's echo.
        written.produced(status, Some("12"));
        let other = Target {
            name: "echo-random",
            ..status
        };
        assert!(!written.is_echo(other, Some("12")));
        assert_eq!(written.len(), 1);
    }
}
