//! What `egress` last made sure of, by namespace and plugin: the content of what it wanted
//! there, and when. Kept in the controller's context, so a plugin's policy in a namespace is
//! looked at once per change and once per `egress::REFRESH`, not at every reconcile.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// By (namespace, plugin): a fingerprint of what was wanted, when it was made sure of, and the
/// destinations then open.
#[derive(Default)]
pub struct EgressSeen {
    seen: Mutex<HashMap<(String, String), Seen>>,
}

struct Seen {
    wanted: u64,
    at: Instant,
    open: Vec<String>,
}

impl EgressSeen {
    /// The destinations open, when `wanted` was made sure of for `key` less than `refresh`
    /// ago.
    pub fn fresh(
        &self,
        key: &(String, String),
        wanted: u64,
        refresh: Duration,
    ) -> Option<Vec<String>> {
        self.seen
            .lock()
            .expect("egress lock")
            .get(key)
            .filter(|s| s.wanted == wanted && s.at.elapsed() < refresh)
            .map(|s| s.open.clone())
    }

    /// `wanted` was made sure of for `key`, now, leaving `open` open.
    pub fn record(&self, key: (String, String), wanted: u64, open: Vec<String>) {
        self.seen.lock().expect("egress lock").insert(
            key,
            Seen {
                wanted,
                at: Instant::now(),
                open,
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_made_sure_of_is_fresh_until_it_changes_or_ages() {
        let seen = EgressSeen::default();
        let key = ("team".to_string(), "echo".to_string());
        let long = Duration::from_secs(300);
        assert_eq!(seen.fresh(&key, 1, long), None);
        seen.record(key.clone(), 1, vec!["10.0.0.0/8:5432".into()]);
        assert_eq!(
            seen.fresh(&key, 1, long),
            Some(vec!["10.0.0.0/8:5432".to_string()])
        );
        assert_eq!(seen.fresh(&key, 2, long), None, "changed");
        assert_eq!(seen.fresh(&key, 1, Duration::ZERO), None, "aged");
        assert_eq!(seen.fresh(&("other".into(), "echo".into()), 1, long), None);
    }
}
