//! What a replica saw while another led, kept so that a handover loses nothing.
//!
//! The fan-out acts on watch events, and only the Lease holder sends. An event that reaches
//! the holder as it stops (killed, or releasing the Lease at a rolling update), or that comes
//! while nobody holds the Lease, would be sent by no one: every other replica saw it while not
//! leading. So a replica that does not lead keeps what it sees for
//! [`runtime::leader::HANDOVER_WINDOW`] and sends it when it takes over. Delivery across a
//! handover is at least once: what the last holder did send within that window goes out again
//! (the reference allows it for `settings.changed`: "the settings may be unchanged: a plugin
//! compares them with the ones it acted on"; `plugins.changed` only asks to list again).

use std::collections::VecDeque;
use std::time::Duration;

use tokio::time::Instant;

/// Events seen while not leading, each with when it was seen; older than the window, dropped.
#[derive(Debug)]
pub struct Backlog<T> {
    window: Duration,
    kept: VecDeque<(Instant, T)>,
}

impl<T> Backlog<T> {
    pub fn new(window: Duration) -> Self {
        Self {
            window,
            kept: VecDeque::new(),
        }
    }

    /// Keeps `event`, seen at `now` while another replica leads (or none does).
    pub fn keep(&mut self, now: Instant, event: T) {
        self.forget_before(now);
        self.kept.push_back((now, event));
    }

    /// On taking over at `now`: the events seen within the window, oldest first; none stay.
    pub fn take(&mut self, now: Instant) -> Vec<T> {
        self.forget_before(now);
        self.kept.drain(..).map(|(_, e)| e).collect()
    }

    /// How many are kept (the window not applied).
    pub fn len(&self) -> usize {
        self.kept.len()
    }

    pub fn is_empty(&self) -> bool {
        self.kept.is_empty()
    }

    fn forget_before(&mut self, now: Instant) {
        while let Some((seen, _)) = self.kept.front() {
            if now.saturating_duration_since(*seen) <= self.window {
                break;
            }
            self.kept.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taking_over_gives_what_was_seen_within_the_window_in_order() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut backlog = Backlog::new(Duration::from_secs(20));
        backlog.keep(at(0), "old");
        backlog.keep(at(15), "a");
        backlog.keep(at(25), "b");
        // "old" was seen 30 s before taking over: the last holder was surely working then.
        assert_eq!(backlog.take(at(30)), ["a", "b"]);
        // Taken once: a second takeover sends nothing again.
        assert!(backlog.take(at(31)).is_empty());
    }

    #[test]
    fn keeping_forgets_what_the_window_left_behind() {
        let start = Instant::now();
        let at = |s: u64| start + Duration::from_secs(s);
        let mut backlog = Backlog::new(Duration::from_secs(20));
        for s in 0..100 {
            backlog.keep(at(s), s);
        }
        // A replica that waits for hours holds only a window's worth.
        assert_eq!(backlog.len(), 21);
        assert_eq!(backlog.take(at(99)), (79..100).collect::<Vec<_>>());
    }
}
