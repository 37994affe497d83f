//! When a reconcile that failed looks again: 1 s after the first failure in a row, doubling
//! with each further one up to 5 minutes, with a little jitter so that objects that failed
//! together do not all come back together. A success forgets the object's count.
//! Permanent failures do not come here: they wait for a change (see `Error::is_permanent`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use kube::{Resource, ResourceExt};

/// The first wait.
pub const FIRST: Duration = Duration::from_secs(1);
/// The longest wait.
pub const CAP: Duration = Duration::from_secs(300);

/// The wait after `failures` failures in a row (1 for the first), before jitter.
pub fn delay(failures: u32) -> Duration {
    let doubled = FIRST.saturating_mul(1u32 << failures.saturating_sub(1).min(16));
    doubled.min(CAP)
}

/// `delay` plus up to a tenth more, from `jitter` in [0, 1).
pub fn with_jitter(base: Duration, jitter: f64) -> Duration {
    base + base.mul_f64(jitter.clamp(0.0, 1.0) / 10.0)
}

/// An object's key: kind, namespace and name.
pub fn key<K: Resource<DynamicType = ()>>(object: &K) -> String {
    format!(
        "{}/{}/{}",
        K::kind(&()),
        object.namespace().unwrap_or_default(),
        object.name_any()
    )
}

/// Failures in a row, by object.
#[derive(Default)]
pub struct Backoff {
    failures: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// Counts a failure of `key` and says how long to wait.
    pub fn next(&self, key: String) -> Duration {
        let mut failures = self.failures.lock().expect("backoff lock");
        let n = failures.entry(key).or_default();
        *n = n.saturating_add(1);
        with_jitter(delay(*n), rand::random::<f64>())
    }

    /// Forgets `key`'s failures: it reconciled.
    pub fn forget(&self, key: &str) {
        self.failures.lock().expect("backoff lock").remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_double_up_to_the_cap() {
        let waits: Vec<u64> = (1..=12).map(|n| delay(n).as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(delay(u32::MAX), CAP);
    }

    #[test]
    fn jitter_adds_at_most_a_tenth() {
        let base = Duration::from_secs(10);
        assert_eq!(with_jitter(base, 0.0), base);
        let most = with_jitter(base, 0.999_999);
        assert!(most > base + Duration::from_millis(999) && most < base + Duration::from_secs(1));
        assert!(with_jitter(base, 7.0) <= base + Duration::from_secs(1));
    }

    #[test]
    fn a_success_starts_the_count_again() {
        let backoff = Backoff::default();
        let first = backoff.next("a".into());
        let second = backoff.next("a".into());
        assert!(first < Duration::from_millis(1101) && second >= Duration::from_secs(2));
        backoff.forget("a");
        assert!(backoff.next("a".into()) < Duration::from_millis(1101));
    }
}
