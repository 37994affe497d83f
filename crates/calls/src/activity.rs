//! Demand: every call, event or schedule that needs a container, and the plugin's own accepted
//! Plugin API writes (not its reads: a plugin that only polls still goes idle), record it on the instance as
//! `status.lastActivity`, which keeps the controller running (or starts) its Pod until the
//! idle timeout. The writes are rate-limited per instance: at once (but only once a second)
//! for a container that must start, at most once every `activity_every` for a running one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jiff::Timestamp;

use crate::index::InstanceKey;

/// Calls that need a stopped container start it with one write, not one each.
pub const START_DEDUPE: Duration = Duration::from_secs(1);

/// How often a running container's activity is refreshed: `every`, or a quarter of the idle
/// timeout when that is shorter (so a short idle timeout never stops a busy container).
pub fn refresh_every(every: Duration, idle_timeout: Option<Duration>) -> Duration {
    match idle_timeout {
        Some(idle) => every.min(idle / 4).max(Duration::from_millis(250)),
        None => every,
    }
}

/// Whether a `lastActivity` write is due.
///
/// - `starting`: the container must start: due unless this process wrote it in the last
///   second (the calls arriving together share one write).
/// - otherwise: due once both what the instance records and this process's last write are
///   at least `every` old.
pub fn due(
    starting: bool,
    recorded: Option<Timestamp>,
    wrote_ago: Option<Duration>,
    now: Timestamp,
    every: Duration,
) -> bool {
    if starting {
        return wrote_ago.is_none_or(|ago| ago >= START_DEDUPE);
    }
    let recorded_ago = recorded.map(|r| {
        let d = now.duration_since(r);
        Duration::try_from(d).unwrap_or(Duration::ZERO)
    });
    wrote_ago.is_none_or(|ago| ago >= every) && recorded_ago.is_none_or(|ago| ago >= every)
}

/// When this process last wrote each instance's activity.
#[derive(Default)]
pub struct ActivityLimiter {
    last: Mutex<HashMap<InstanceKey, Instant>>,
}

impl ActivityLimiter {
    /// Claims the write if one is due (see [`due`]).
    pub fn claim(
        &self,
        key: &InstanceKey,
        starting: bool,
        recorded: Option<Timestamp>,
        every: Duration,
    ) -> bool {
        let now = Instant::now();
        let mut last = self.last.lock().expect("activity lock");
        let wrote_ago = last.get(key).map(|t| now.saturating_duration_since(*t));
        if !due(starting, recorded, wrote_ago, Timestamp::now(), every) {
            return false;
        }
        if last.len() > 10_000 {
            last.retain(|_, t| now.saturating_duration_since(*t) < Duration::from_secs(3600));
        }
        last.insert(key.clone(), now);
        true
    }

    /// Forgets a claim whose write failed, so the next call tries again.
    pub fn release(&self, key: &InstanceKey) {
        self.last.lock().expect("activity lock").remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_start_writes_once_for_the_calls_that_arrive_together() {
        let now = at("2026-01-01T10:00:00Z");
        assert!(due(true, None, None, now, 5 * S));
        // Recent activity on record does not matter: the container is not there.
        assert!(due(true, Some(now), None, now, 5 * S));
        assert!(!due(true, None, Some(S / 2), now, 5 * S));
        assert!(due(true, None, Some(S), now, 5 * S));
    }

    #[test]
    fn a_running_container_is_refreshed_at_most_every_interval() {
        let now = at("2026-01-01T10:00:10Z");
        assert!(due(false, None, None, now, 5 * S));
        assert!(!due(
            false,
            Some(at("2026-01-01T10:00:07Z")),
            None,
            now,
            5 * S
        ));
        assert!(due(
            false,
            Some(at("2026-01-01T10:00:05Z")),
            None,
            now,
            5 * S
        ));
        assert!(!due(false, None, Some(2 * S), now, 5 * S));
        assert!(due(false, None, Some(6 * S), now, 5 * S));
    }

    #[test]
    fn a_short_idle_timeout_shortens_the_interval() {
        assert_eq!(refresh_every(5 * S, None), 5 * S);
        assert_eq!(refresh_every(5 * S, Some(600 * S)), 5 * S);
        assert_eq!(refresh_every(5 * S, Some(8 * S)), 2 * S);
    }

    #[test]
    fn the_limiter_claims_once() {
        let l = ActivityLimiter::default();
        let key = InstanceKey::new("ns", "echo-general");
        assert!(l.claim(&key, true, None, 5 * S));
        assert!(!l.claim(&key, true, None, 5 * S));
        assert!(!l.claim(&key, false, None, 5 * S));
        l.release(&key);
        assert!(l.claim(&key, false, None, 5 * S));
    }
}
