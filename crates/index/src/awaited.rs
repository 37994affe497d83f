//! Objects this process made that its stores do not show yet.
//!
//! A reconcile decides from the stores, which lag the API server, and makes an object the
//! stores do not hold. Woken again before the store shows what it made (another change of its
//! owner, a verdict that wakes every chat, its own status write's echo come on other watches,
//! which may run ahead), it would find the object absent and make it again: the API server
//! refuses the second create (409 AlreadyExists), and the write was made twice. At a cold start
//! the controller made about five instances and Secrets twice this way.
//!
//! So the writer says what it makes ([`Awaited::made`]) before it sends the create (its watch
//! event cannot come before it then), and forgets it if the create fails; each watch, once its
//! store holds an event's object, says the object arrived: made, changed or deleted, the store
//! has shown it, and from then on the store decides again. Until then the object is awaited
//! ([`Awaited::awaited`]), and the writer does not make it again. An object made and deleted
//! while a watch relisted (the list shows neither) would never arrive: it is awaited for
//! [`AWAITED_AT_MOST`] at most.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use kube::Resource;
use kube::runtime::watcher;

/// How long an object made is awaited at most.
pub const AWAITED_AT_MOST: Duration = Duration::from_secs(30);
/// How many objects may be awaited before the ones awaited too long are let go.
const SWEEP_FROM: usize = 1024;

/// The objects made and not shown yet, by a hash of their kind, namespace and name, with when
/// each was made.
#[derive(Debug, Default)]
pub struct Awaited {
    made: Mutex<Made>,
    /// Whether anything is awaited: every event of every watch asks, and nearly always the
    /// answer is no.
    any: AtomicBool,
}

#[derive(Debug, Default)]
struct Made {
    at: HashMap<u64, Instant>,
    /// Past this many, the ones awaited too long are let go.
    sweep_at: usize,
}

fn key(kind: &str, namespace: Option<&str>, name: &str) -> u64 {
    let mut hasher = DefaultHasher::new();
    (kind, namespace, name).hash(&mut hasher);
    hasher.finish()
}

impl Awaited {
    /// The object `kind` `namespace`/`name` is being made at `now` (or was found to exist); the
    /// stores do not show it yet.
    pub fn made(&self, kind: &str, namespace: Option<&str>, name: &str, now: Instant) {
        let mut made = self.lock();
        made.at.insert(key(kind, namespace, name), now);
        if made.at.len() >= made.sweep_at.max(SWEEP_FROM) {
            made.at
                .retain(|_, at| now.duration_since(*at) < AWAITED_AT_MOST);
            made.sweep_at = made.at.len() * 2;
        }
        self.any.store(true, Ordering::Release);
    }

    /// Whether the object was made less than [`AWAITED_AT_MOST`] before `now` and no store has
    /// shown it since.
    pub fn awaited(&self, kind: &str, namespace: Option<&str>, name: &str, now: Instant) -> bool {
        if !self.any.load(Ordering::Acquire) {
            return false;
        }
        let made = self.lock();
        made.at
            .get(&key(kind, namespace, name))
            .is_some_and(|at| now.duration_since(*at) < AWAITED_AT_MOST)
    }

    /// A watch of `kind` showed `event` (its store holds it now).
    pub fn apply_watcher_event<K: Resource>(&self, kind: &str, event: &watcher::Event<K>) {
        if !self.any.load(Ordering::Acquire) {
            return;
        }
        let object = match event {
            watcher::Event::Apply(object)
            | watcher::Event::InitApply(object)
            | watcher::Event::Delete(object) => object.meta(),
            watcher::Event::Init | watcher::Event::InitDone => return,
        };
        let name = object.name.as_deref().unwrap_or_default();
        self.forget(kind, object.namespace.as_deref(), name);
    }

    /// The object is no longer awaited: a store showed it, or making it failed.
    pub fn forget(&self, kind: &str, namespace: Option<&str>, name: &str) {
        let mut made = self.lock();
        made.at.remove(&key(kind, namespace, name));
        if made.at.is_empty() {
            self.any.store(false, Ordering::Release);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Made> {
        // A panic while holding the lock leaves a map that is still whole.
        self.made.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Secret;

    fn secret(namespace: &str, name: &str) -> Secret {
        let mut secret = Secret::default();
        secret.metadata.name = Some(name.into());
        secret.metadata.namespace = Some(namespace.into());
        secret
    }

    #[test]
    fn an_object_made_is_awaited_until_a_store_shows_it() {
        let awaited = Awaited::default();
        let now = Instant::now();
        assert!(!awaited.awaited("Secret", Some("team"), "a-token", now));
        awaited.made("Secret", Some("team"), "a-token", now);
        assert!(awaited.awaited("Secret", Some("team"), "a-token", now));
        // Another object, of the same name elsewhere or of another kind, is not.
        assert!(!awaited.awaited("Secret", Some("other"), "a-token", now));
        assert!(!awaited.awaited("PluginInstance", Some("team"), "a-token", now));
        // The watch of another kind showing the same name does not count.
        awaited.apply_watcher_event(
            "ConfigMap",
            &watcher::Event::Apply(secret("team", "a-token")),
        );
        assert!(awaited.awaited("Secret", Some("team"), "a-token", now));
        awaited.apply_watcher_event("Secret", &watcher::Event::Apply(secret("team", "a-token")));
        assert!(!awaited.awaited("Secret", Some("team"), "a-token", now));
    }

    #[test]
    fn a_listed_or_deleted_object_has_been_shown_too() {
        let awaited = Awaited::default();
        let now = Instant::now();
        awaited.made("Secret", Some("team"), "a", now);
        awaited.made("Secret", Some("team"), "b", now);
        awaited.apply_watcher_event("Secret", &watcher::Event::InitApply(secret("team", "a")));
        awaited.apply_watcher_event("Secret", &watcher::Event::Delete(secret("team", "b")));
        assert!(!awaited.awaited("Secret", Some("team"), "a", now));
        assert!(!awaited.awaited("Secret", Some("team"), "b", now));
    }

    #[test]
    fn an_object_that_never_shows_is_awaited_for_a_while_only() {
        let awaited = Awaited::default();
        let now = Instant::now();
        awaited.made("Secret", None, "lost", now);
        assert!(awaited.awaited("Secret", None, "lost", now + AWAITED_AT_MOST / 2));
        assert!(!awaited.awaited("Secret", None, "lost", now + AWAITED_AT_MOST));
    }

    #[test]
    fn those_awaited_too_long_are_let_go() {
        let awaited = Awaited::default();
        let then = Instant::now();
        for n in 0..SWEEP_FROM - 1 {
            awaited.made("Secret", None, &n.to_string(), then);
        }
        let now = then + AWAITED_AT_MOST;
        awaited.made("Secret", None, "new", now);
        assert_eq!(awaited.lock().at.len(), 1, "only the one made now is left");
        assert!(awaited.awaited("Secret", None, "new", now));
    }
}
