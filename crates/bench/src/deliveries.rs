//! How many times a run's `/done` reached the plugin, judged against the API server's kills.
//!
//! The API server records `doneDelivered` once the plugin answered 2xx. A SIGKILL that lands
//! after the plugin took the request and before that record reached the API server leaves the
//! next leader unable to tell whether the plugin has it: no sender can know, without the
//! receiver's help, and the Plugin API has no way to ask. The run is then delivered again
//! (at least once, never lost). That second delivery is counted apart, as
//! [`Deliveries::AgainAfterKill`]: one kill between the two, no later than the `/done` time
//! limit after the first (the longest the dying sender could have been waiting for the answer).
//! Any other repeat is a bug, and so is a third delivery.

use std::time::Duration;

/// What reached the plugin for one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Deliveries {
    Lost,
    Once,
    /// Twice, the first in flight when the API server was killed.
    AgainAfterKill,
    /// More than once otherwise.
    Repeated(usize),
}

/// Judges one run from when its `/done` requests reached the plugin and when the API server
/// was killed (both in milliseconds of the same clock), with the `/done` time limit.
pub fn judge(received_ms: &[u128], kills_ms: &[u128], limit: Duration) -> Deliveries {
    let mut received = received_ms.to_vec();
    received.sort_unstable();
    match received.as_slice() {
        [] => Deliveries::Lost,
        [_] => Deliveries::Once,
        [first, second] => {
            let limit = limit.as_millis();
            let in_flight = kills_ms
                .iter()
                .any(|kill| first <= kill && kill <= second && kill - first <= limit);
            if in_flight {
                Deliveries::AgainAfterKill
            } else {
                Deliveries::Repeated(2)
            }
        }
        more => Deliveries::Repeated(more.len()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMIT: Duration = Duration::from_secs(10);

    #[test]
    fn none_is_lost_and_one_is_once() {
        assert_eq!(judge(&[], &[5_000], LIMIT), Deliveries::Lost);
        assert_eq!(judge(&[1_000], &[], LIMIT), Deliveries::Once);
    }

    #[test]
    fn a_second_delivery_after_a_kill_that_caught_the_first_in_flight() {
        // `make chaos` at 07b0aef: the plugin took it at …123, the server died at …130 and
        // its successor delivered again at …542.
        assert_eq!(
            judge(&[61_542, 61_123], &[40_000, 61_130], LIMIT),
            Deliveries::AgainAfterKill
        );
    }

    #[test]
    fn a_repeat_with_no_kill_between_is_a_bug() {
        assert_eq!(judge(&[1_000, 1_400], &[], LIMIT), Deliveries::Repeated(2));
        assert_eq!(
            judge(&[1_000, 1_400], &[900, 1_500], LIMIT),
            Deliveries::Repeated(2)
        );
    }

    #[test]
    fn a_kill_long_after_the_first_delivery_does_not_explain_a_repeat() {
        // The sender had its answer and ten seconds to record it.
        assert_eq!(
            judge(&[1_000, 30_000], &[20_000], LIMIT),
            Deliveries::Repeated(2)
        );
    }

    #[test]
    fn a_third_delivery_is_a_bug_whatever_the_kills() {
        assert_eq!(
            judge(&[1_000, 2_000, 3_000], &[1_500, 2_500], LIMIT),
            Deliveries::Repeated(3)
        );
    }
}
