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
//! What no running replica saw, or saw longer ago than the window, the holders' mark of what
//! they sent covers ([`super::sent_mark`]); the backlog also carries the containers' stops, which
//! the mark does not.

use std::collections::VecDeque;
use std::time::Duration;

use runtime::leader::HANDOVER_WINDOW;
use tokio::sync::watch;
use tokio::time::Instant;

/// One fan-out task's side of leading: what to send now, what to keep, and what to send on
/// taking over.
pub struct Handover<T> {
    leading: watch::Receiver<bool>,
    backlog: Backlog<T>,
    /// False once the flag's sender is gone (without leader election the flag is true for
    /// good): no takeover will come.
    watching: bool,
}

impl<T> Handover<T> {
    pub fn new(leading: watch::Receiver<bool>) -> Self {
        Self {
            leading,
            backlog: Backlog::new(HANDOVER_WINDOW),
            watching: true,
        }
    }

    /// `events` to send now while this replica leads; none, and `events` kept, while not.
    pub fn now_or_later(&mut self, events: Vec<T>) -> Vec<T> {
        if *self.leading.borrow() {
            return events;
        }
        let now = Instant::now();
        for event in events {
            self.backlog.keep(now, event);
        }
        Vec::new()
    }

    /// Resolves each time this replica takes over, with what it kept meanwhile. Cancel-safe
    /// (for `select!`): a takeover is not missed by dropping the future.
    pub async fn taken_over(&mut self) -> Vec<T> {
        loop {
            if !self.watching {
                std::future::pending::<()>().await;
            }
            match self.leading.changed().await {
                Ok(()) if *self.leading.borrow_and_update() => {
                    return self.backlog.take(Instant::now());
                }
                Ok(()) => {}
                Err(_) => self.watching = false,
            }
        }
    }
}

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
    #[cfg(test)]
    fn len(&self) -> usize {
        self.kept.len()
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

    #[tokio::test]
    async fn what_came_while_another_led_goes_out_on_taking_over_and_not_before() {
        let (flag, leading) = watch::channel(false);
        let mut handover = Handover::new(leading);
        assert!(handover.now_or_later(vec!["a", "b"]).is_empty());
        let waiting = tokio::time::timeout(Duration::from_millis(50), handover.taken_over());
        assert!(waiting.await.is_err(), "no takeover yet");
        flag.send_replace(true);
        assert_eq!(handover.taken_over().await, ["a", "b"]);
        // Leading: sent at once, nothing kept for a later takeover.
        assert_eq!(handover.now_or_later(vec!["c"]), ["c"]);
        flag.send_replace(false);
        flag.send_replace(true);
        assert!(handover.taken_over().await.is_empty());
        // Without leader election (the flag's sender gone) no takeover ever comes.
        drop(flag);
        let never = tokio::time::timeout(Duration::from_millis(50), handover.taken_over());
        assert!(never.await.is_err());
    }
}
