//! What `egress` last made sure of, by namespace and plugin: the content of what it wanted
//! there, and when. Kept in the controller's context, so a plugin's policy in a namespace is
//! looked at once per change and once per `egress::REFRESH`, not at every reconcile.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// By (namespace, plugin): a fingerprint of what was wanted, and when it was made sure of.
#[derive(Default)]
pub struct EgressSeen {
    seen: Mutex<HashMap<(String, String), (u64, Instant)>>,
}

impl EgressSeen {
    /// Whether `wanted` was made sure of for `key` less than `refresh` ago.
    pub fn fresh(&self, key: &(String, String), wanted: u64, refresh: Duration) -> bool {
        self.seen
            .lock()
            .expect("egress lock")
            .get(key)
            .is_some_and(|(seen, at)| *seen == wanted && at.elapsed() < refresh)
    }

    /// `wanted` was made sure of for `key`, now.
    pub fn record(&self, key: (String, String), wanted: u64) {
        self.seen
            .lock()
            .expect("egress lock")
            .insert(key, (wanted, Instant::now()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_made_sure_of_is_fresh_until_it_changes_or_ages() {
        let seen = EgressSeen::default();
        let key = ("team".to_string(), "echo".to_string());
        assert!(!seen.fresh(&key, 1, Duration::from_secs(300)));
        seen.record(key.clone(), 1);
        assert!(seen.fresh(&key, 1, Duration::from_secs(300)));
        assert!(!seen.fresh(&key, 2, Duration::from_secs(300)), "changed");
        assert!(!seen.fresh(&key, 1, Duration::ZERO), "aged");
        assert!(!seen.fresh(
            &("other".into(), "echo".into()),
            1,
            Duration::from_secs(300)
        ));
    }
}
