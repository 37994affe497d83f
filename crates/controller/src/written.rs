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
//! with it a new look. Only writes over an object the cache shows are remembered; making an
//! absent one always goes to the server (an object made and deleted before the cache saw
//! either would otherwise never be made again).

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
pub struct Written {
    entries: Mutex<HashMap<u64, Entry>>,
}

/// Names one object, or its status, for [`Written`].
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

impl Written {
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

    /// How many writes are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().expect("not poisoned").len()
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
        let written = Written::default();
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
        let written = Written::default();
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
        let written = Written::default();
        written.record(POD, None, 1);
        assert!(!written.on_its_way(POD, None, 1));
        assert_eq!(written.len(), 0);
    }
}
