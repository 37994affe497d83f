//! Writes this controller made that its cache may not show yet: the one memory of "my write,
//! until the cache shows it", for every write the `write` door makes.
//!
//! A reconcile reads the watch cache, which lags the API server: an object written a moment
//! ago can still show the version the write went over. A second reconcile in that moment (the
//! chat's own CronJob event, an instance's Secret event) would find "a field we set differs"
//! and write the same content again: one more request per object on every fan-out, and twice
//! the status writes of a cold start (measured by `make bench-scale`).
//!
//! Four things are remembered, each until the cache shows the write:
//!
//! | what | remembered as | until | asked by |
//! |---|---|---|---|
//! | a write over an object the cache shows | the version it went over, a hash of what it wrote | the cache shows another version | [`RecentWrites::on_its_way`] |
//! | a status kept (the chat's) | the same, and the status itself | the same | [`RecentWrites::kept`] |
//! | the version a status write produced | that version | its watch event (the echo) comes, or another | [`RecentWrites::is_echo`] |
//! | an object made | its kind, namespace and name | a watch event of it | [`RecentWrites::making`] |
//!
//! While the cache still shows the version a write went over, writing the same content again
//! is skipped: the server has it already, and whatever changes the object after it brings a
//! new version and with it a new look. A status that a reconcile reads back (the chat's: the
//! schedule entries it recorded decide what it applies next) is kept whole, so a reconcile in
//! that moment starts from what was written, not from the version before it (it would apply a
//! CronJob someone deleted by hand again).
//!
//! A status write also brings the watch event of the object as the write left it (its echo),
//! which would wake the reconciler that wrote it to find what it has just written. So the
//! version a status write produced is remembered too, and the event that carries exactly that
//! version is the echo ([`RecentWrites::is_echo`]): nobody else wrote in between, or the version
//! would differ and that write's own event wake the reconciler.
//!
//! Making an absent object is the same idea with one difference: there is no version to
//! compare with until the cache shows the object, and an object made and deleted before the
//! cache saw either would never be made again if the memory waited for a version. So it is
//! cleared by the watches themselves, which live in the index: that part is the index's
//! `index::awaited` (every watch tells it each object its store shows), and a `RecentWrites`
//! holds the index's as its "made" part, so the writer asks one memory about every write.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde::Serialize;
use serde::de::DeserializeOwned;

use index::Awaited;

/// What one object (or its status) had written over which version.
#[derive(Clone, Debug, PartialEq)]
struct Entry {
    over: u64,
    content: u64,
    /// What was written, when the writer reads it back ([`RecentWrites::kept`]).
    kept: Option<serde_json::Value>,
}

/// The writes whose effect the cache may not show yet, by object.
#[derive(Debug, Default)]
pub struct RecentWrites {
    entries: Mutex<HashMap<u64, Entry>>,
    /// The version each status write produced, until its echo (or another version) comes.
    produced: Mutex<HashMap<u64, u64>>,
    /// The objects made, until a watch shows them: the index's, which its watches clear.
    made: Arc<Awaited>,
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
    /// A memory whose "made" part is `made`: the index's, which its watches clear.
    pub fn over(made: Arc<Awaited>) -> Self {
        Self {
            made,
            ..Default::default()
        }
    }

    /// Whether `content` was written over `version` of `target`, which the cache still shows:
    /// the write is on its way. A remembered write over another version is forgotten (the
    /// cache moved on).
    pub fn on_its_way(&self, target: Target, version: Option<&str>, content: u64) -> bool {
        self.over_version(target, version, |entry| entry.content == content)
            .unwrap_or(false)
    }

    /// What was kept of the write over `version` of `target`, while the cache still shows
    /// that version (see [`RecentWrites::record_kept`]).
    pub fn kept<T: DeserializeOwned>(&self, target: Target, version: Option<&str>) -> Option<T> {
        self.over_version(target, version, |entry| {
            let kept = entry.kept.clone()?;
            serde_json::from_value(kept).ok()
        })
        .flatten()
    }

    /// `read` of the entry of `target` written over `version`, if there is one; an entry over
    /// another version is forgotten.
    fn over_version<T>(
        &self,
        target: Target,
        version: Option<&str>,
        read: impl FnOnce(&Entry) -> T,
    ) -> Option<T> {
        let version = version?;
        let key = hash_of(target);
        let mut entries = self.entries.lock().expect("not poisoned");
        match entries.get(&key) {
            Some(entry) if entry.over == hash_of(version) => Some(read(entry)),
            Some(_) => {
                entries.remove(&key);
                None
            }
            None => None,
        }
    }

    /// Remembers that `content` was written over `version` of `target` (nothing when the
    /// object was absent).
    pub fn record(&self, target: Target, version: Option<&str>, content: u64) {
        self.insert(target, version, content, None);
    }

    /// [`RecentWrites::record`], keeping what was written to read back.
    pub fn record_kept<T: Serialize>(
        &self,
        target: Target,
        version: Option<&str>,
        content: u64,
        written: &T,
    ) {
        let kept = serde_json::to_value(written).expect("what is written serializes");
        self.insert(target, version, content, Some(kept));
    }

    fn insert(
        &self,
        target: Target,
        version: Option<&str>,
        content: u64,
        kept: Option<serde_json::Value>,
    ) {
        let Some(version) = version else {
            return;
        };
        self.entries.lock().expect("not poisoned").insert(
            hash_of(target),
            Entry {
                over: hash_of(version),
                content,
                kept,
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

    /// Forgets every write to `target`: its object is gone.
    pub fn forget(&self, target: Target) {
        let key = hash_of(target);
        self.entries.lock().expect("not poisoned").remove(&key);
        self.produced.lock().expect("not poisoned").remove(&key);
    }

    /// Whether `target` may be made now: false while it was made and no watch has shown it
    /// yet. Otherwise it is remembered as made from `now` (before the create is sent, so the
    /// watch event it brings always finds it), until a watch shows it or [`RecentWrites::not_made`].
    pub fn making(&self, target: Target, now: Instant) -> bool {
        let namespace = Some(target.namespace).filter(|ns| !ns.is_empty());
        if self.made.awaited(target.kind, namespace, target.name, now) {
            return false;
        }
        self.made.made(target.kind, namespace, target.name, now);
        true
    }

    /// Making `target` failed: it is not awaited.
    pub fn not_made(&self, target: Target) {
        let namespace = Some(target.namespace).filter(|ns| !ns.is_empty());
        self.made.forget(target.kind, namespace, target.name);
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
    fn a_status_kept_is_read_until_the_cache_moves_past_it_then_forgotten() {
        let written = RecentWrites::default();
        let status = Target {
            kind: "Channel",
            part: "status",
            namespace: "ns",
            name: "general",
        };
        let wrote = serde_json::json!({ "plugins": ["echo"] });
        written.record_kept(status, Some("10"), status_hash(&wrote), &wrote);
        assert_eq!(
            written.kept::<serde_json::Value>(status, Some("10")),
            Some(wrote.clone()),
            "the cache still shows version 10"
        );
        assert!(written.on_its_way(status, Some("10"), status_hash(&wrote)));
        // Only what was kept is read back: a write remembered by its hash alone has nothing.
        written.record(POD, Some("7"), 1);
        assert_eq!(written.kept::<serde_json::Value>(POD, Some("7")), None);
        // The cache shows our write (version 11): the status is read from the cache again.
        assert_eq!(written.kept::<serde_json::Value>(status, Some("11")), None);
        // Forgotten: a cache that went back to version 10 (a relist) is read as it is.
        assert_eq!(written.kept::<serde_json::Value>(status, Some("10")), None);
    }

    #[test]
    fn a_gone_objects_writes_are_forgotten() {
        let written = RecentWrites::default();
        let status = Target {
            part: "status",
            ..POD
        };
        written.record_kept(status, Some("3"), 1, &serde_json::json!({}));
        written.produced(status, Some("4"));
        written.forget(status);
        assert_eq!(written.len(), 0);
    }

    #[test]
    fn an_object_made_is_not_made_again_until_a_watch_shows_it() {
        let made = Arc::new(Awaited::default());
        let written = RecentWrites::over(made.clone());
        let now = Instant::now();
        assert!(written.making(POD, now));
        assert!(!written.making(POD, now), "made, and not shown yet");
        // A watch shows it (the index's hook): it may be made again should it go.
        made.forget(POD.kind, Some(POD.namespace), POD.name);
        assert!(written.making(POD, now));
        // A create that failed is not awaited.
        written.not_made(POD);
        assert!(written.making(POD, now));
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
