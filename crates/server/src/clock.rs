//! The time, injected: the quota and the activity limiter read it through [`Clock`], so tests
//! move it by hand.

use std::sync::Mutex;
use std::time::Duration;

use jiff::Timestamp;

/// Where the API server reads the time.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

/// The system's clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// A clock that moves only when told.
#[derive(Debug)]
pub struct ManualClock(Mutex<Timestamp>);

impl ManualClock {
    pub fn at(t: Timestamp) -> Self {
        Self(Mutex::new(t))
    }

    pub fn set(&self, t: Timestamp) {
        *self.0.lock().expect("clock lock") = t;
    }

    pub fn advance(&self, by: Duration) {
        let mut t = self.0.lock().expect("clock lock");
        *t += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Timestamp {
        *self.0.lock().expect("clock lock")
    }
}

/// A timestamp as Kubernetes writes them: RFC 3339, whole seconds.
pub fn rfc3339(t: Timestamp) -> String {
    t.round(jiff::Unit::Second).unwrap_or(t).to_string()
}

/// A timestamp to the millisecond, RFC 3339 (no fraction on a whole second): when an inbox
/// entry was posted, which orders the chat's drawer, where two cards may come in one second.
pub fn rfc3339_millis(t: Timestamp) -> String {
    t.round(jiff::Unit::Millisecond).unwrap_or(t).to_string()
}

/// A Kubernetes `Time` (k8s-openapi's jiff) as our jiff's timestamp.
pub fn from_kube(t: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time) -> Option<Timestamp> {
    Timestamp::from_nanosecond(t.0.as_nanosecond()).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_inbox_time_keeps_milliseconds_and_shows_none_on_a_whole_second() {
        let t: Timestamp = "2026-01-01T10:00:02.123456Z".parse().unwrap();
        assert_eq!(rfc3339_millis(t), "2026-01-01T10:00:02.123Z");
        assert_eq!(rfc3339(t), "2026-01-01T10:00:02Z");
        let whole: Timestamp = "2026-01-01T10:00:02Z".parse().unwrap();
        assert_eq!(rfc3339_millis(whole), "2026-01-01T10:00:02Z");
    }
}
