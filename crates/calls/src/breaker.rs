//! The breaker in front of each container: after `threshold` calls in a row left unanswered
//! (the connection refused, or out of time) every call fails at once for `open_for`; then one
//! call tries the container again, and an answer of any status closes it.
//!
//! [`Breaker`] is the pure state machine: time comes in as an argument, so tests drive it
//! by hand. [`Breakers`] keeps one per container, keyed by the Pod's UID and the container's
//! restart count, so a container that restarts (or a new Pod) starts afresh.
//!
//! Every API replica keeps its own breakers, and the one whose breaker opens shows it on the
//! PluginInstance's status with the container and the time it opens until. The other
//! replicas take that on ([`Breakers::adopt`]) before their next call to the same container:
//! they fail at once until then too, and the status shows one breaker, not each replica's.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::index::ContainerKey;
use model::resources::BreakerState;

/// The breaker's numbers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BreakerConfig {
    /// Calls in a row left unanswered that open it: 3.
    pub threshold: u32,
    /// How long it stays open: 30 s.
    pub open_for: Duration,
}

impl Default for BreakerConfig {
    fn default() -> Self {
        Self {
            threshold: 3,
            open_for: Duration::from_secs(30),
        }
    }
}

/// Where a breaker is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Calls go through; `failures` unanswered in a row so far.
    Closed { failures: u32 },
    /// Calls fail at once until then.
    Open { until: Instant },
    /// One trial call is on its way; the others fail at once.
    HalfOpen,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Closed { .. } => "Closed",
            Phase::Open { .. } => "Open",
            Phase::HalfOpen => "HalfOpen",
        }
    }

    /// The gauge value: 0 closed, 1 open, 2 half-open.
    pub fn gauge(self) -> i64 {
        match self {
            Phase::Closed { .. } => 0,
            Phase::Open { .. } => 1,
            Phase::HalfOpen => 2,
        }
    }
}

/// What a call learnt about the container.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// An answer came (of any status).
    Answered,
    /// The connection was refused, or the call ran out of time before an answer.
    Unanswered,
    /// The caller gave up before knowing (its request was dropped).
    Abandoned,
}

/// Leave to make a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pass {
    epoch: u64,
    trial: bool,
}

impl Pass {
    pub fn is_trial(self) -> bool {
        self.trial
    }
}

/// A call refused at once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rejected {
    /// When the breaker lets a trial call through; `None` while a trial is on its way.
    pub until: Option<Instant>,
}

/// One container's breaker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Breaker {
    config: BreakerConfig,
    phase: Phase,
    /// Moves on every change of phase, so outcomes of calls let through before it are ignored.
    epoch: u64,
}

impl Breaker {
    pub fn new(config: BreakerConfig) -> Self {
        Self {
            config,
            phase: Phase::Closed { failures: 0 },
            epoch: 0,
        }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Whether a call may go now. An open breaker whose time is up lets this one call through
    /// as the trial.
    pub fn admit(&mut self, now: Instant) -> Result<Pass, Rejected> {
        match self.phase {
            Phase::Closed { .. } => Ok(Pass {
                epoch: self.epoch,
                trial: false,
            }),
            Phase::Open { until } if now >= until => {
                self.enter(Phase::HalfOpen);
                Ok(Pass {
                    epoch: self.epoch,
                    trial: true,
                })
            }
            Phase::Open { until } => Err(Rejected { until: Some(until) }),
            Phase::HalfOpen => Err(Rejected { until: None }),
        }
    }

    /// Records what a call let through by `pass` learnt. Returns whether the phase or the
    /// failure count changed.
    pub fn record(&mut self, pass: Pass, outcome: Outcome, now: Instant) -> bool {
        if pass.epoch != self.epoch {
            // Let through before the last change of phase: it tells nothing new.
            return false;
        }
        let before = self.phase;
        match (self.phase, outcome) {
            (Phase::Closed { .. }, Outcome::Answered) => {
                self.phase = Phase::Closed { failures: 0 };
            }
            (Phase::Closed { failures }, Outcome::Unanswered) => {
                let failures = failures + 1;
                if failures >= self.config.threshold {
                    self.enter(Phase::Open {
                        until: now + self.config.open_for,
                    });
                } else {
                    self.phase = Phase::Closed { failures };
                }
            }
            (Phase::HalfOpen, Outcome::Answered) if pass.trial => {
                self.enter(Phase::Closed { failures: 0 });
            }
            (Phase::HalfOpen, Outcome::Unanswered) if pass.trial => {
                self.enter(Phase::Open {
                    until: now + self.config.open_for,
                });
            }
            // The trial went away unanswered and untried: the next call tries instead.
            (Phase::HalfOpen, Outcome::Abandoned) if pass.trial => {
                self.enter(Phase::Open { until: now });
            }
            _ => {}
        }
        self.phase != before
    }

    /// Opens a closed breaker until `until`, as another replica's opened; false when it is
    /// open or trying already (its own time stands).
    pub fn open_until(&mut self, until: Instant) -> bool {
        match self.phase {
            Phase::Closed { .. } => {
                self.enter(Phase::Open { until });
                true
            }
            Phase::Open { .. } | Phase::HalfOpen => false,
        }
    }

    fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.epoch += 1;
    }
}

/// What changed in a breaker, for its status and metrics.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Change {
    pub before: Phase,
    pub after: Phase,
    /// The breaker as the PluginInstance's status shows it.
    pub state: BreakerState,
}

struct Entry {
    breaker: Breaker,
    /// The wall-clock time an open breaker lets a trial through, fixed when it opened.
    open_until: Option<String>,
    /// The last opening this replica made or took on (its `openUntil`): a status still
    /// showing it is no news.
    known_opening: Option<String>,
}

impl Entry {
    fn new(config: BreakerConfig) -> Self {
        Self {
            breaker: Breaker::new(config),
            open_until: None,
            known_opening: None,
        }
    }
}

/// The breaker of every container the host calls.
pub struct Breakers {
    config: BreakerConfig,
    map: Mutex<HashMap<ContainerKey, Entry>>,
}

impl Breakers {
    pub fn new(config: BreakerConfig) -> Self {
        Self {
            config,
            map: Mutex::new(HashMap::new()),
        }
    }

    /// Whether a call to the container may go now, and the change if admitting it moved the
    /// breaker (open → half-open).
    pub fn admit(
        &self,
        key: &ContainerKey,
        now: Instant,
    ) -> (Result<Pass, Rejected>, Option<Change>) {
        let mut map = self.map.lock().expect("breakers lock");
        let entry = map
            .entry(key.clone())
            .or_insert_with(|| Entry::new(self.config));
        let before = entry.breaker.phase();
        let admitted = entry.breaker.admit(now);
        let change = (entry.breaker.phase() != before).then(|| Change {
            before,
            after: entry.breaker.phase(),
            state: state_of(key, entry),
        });
        (admitted, change)
    }

    /// Records a call's outcome; the change, when there is one.
    pub fn record(
        &self,
        key: &ContainerKey,
        pass: Pass,
        outcome: Outcome,
        now: Instant,
    ) -> Option<Change> {
        let mut map = self.map.lock().expect("breakers lock");
        let entry = map.get_mut(key)?;
        let before = entry.breaker.phase();
        if !entry.breaker.record(pass, outcome, now) {
            return None;
        }
        let after = entry.breaker.phase();
        entry.open_until = match after {
            Phase::Open { until } => {
                let left = until.saturating_duration_since(now);
                Some(model::time::rfc3339(jiff::Timestamp::now() + left))
            }
            _ => None,
        };
        if entry.open_until.is_some() {
            entry.known_opening = entry.open_until.clone();
        }
        Some(Change {
            before,
            after,
            state: state_of(key, entry),
        })
    }

    /// Takes on the breaker the instance's status shows, when another replica opened it for
    /// this container and its time is not up (`wall_now`, with `now` the same moment on the
    /// monotonic clock): this replica's closed breaker opens until then. The change, when
    /// there is one.
    pub fn adopt(
        &self,
        key: &ContainerKey,
        shown: &BreakerState,
        now: Instant,
        wall_now: jiff::Timestamp,
    ) -> Option<Change> {
        if shown.state != "Open" || shown.container.as_deref() != Some(key.label().as_str()) {
            return None;
        }
        let text = shown.open_until.as_deref()?;
        let left = text
            .parse::<jiff::Timestamp>()
            .ok()?
            .duration_since(wall_now);
        let left = Duration::try_from(left).ok().filter(|l| !l.is_zero())?;
        let mut map = self.map.lock().expect("breakers lock");
        let entry = map
            .entry(key.clone())
            .or_insert_with(|| Entry::new(self.config));
        if entry.known_opening.as_deref() == Some(text) {
            return None;
        }
        entry.known_opening = Some(text.to_string());
        let before = entry.breaker.phase();
        if !entry.breaker.open_until(now + left) {
            return None;
        }
        entry.open_until = Some(text.to_string());
        Some(Change {
            before,
            after: entry.breaker.phase(),
            state: state_of(key, entry),
        })
    }

    /// The breaker's state as the status shows it (closed for a container never called).
    pub fn state(&self, key: &ContainerKey) -> BreakerState {
        let map = self.map.lock().expect("breakers lock");
        map.get(key)
            .map_or_else(|| closed(key), |entry| state_of(key, entry))
    }

    /// Forgets the breakers of a Pod that is gone.
    pub fn forget_pod(&self, pod_uid: &str) {
        let mut map = self.map.lock().expect("breakers lock");
        map.retain(|k, _| k.pod_uid != pod_uid);
    }
}

fn closed(key: &ContainerKey) -> BreakerState {
    BreakerState {
        state: "Closed".into(),
        failures: 0,
        open_until: None,
        container: Some(key.label()),
    }
}

fn state_of(key: &ContainerKey, entry: &Entry) -> BreakerState {
    let phase = entry.breaker.phase();
    BreakerState {
        container: Some(key.label()),
        state: phase.name().into(),
        failures: match phase {
            Phase::Closed { failures } => failures,
            _ => entry.breaker.config.threshold,
        },
        open_until: match phase {
            Phase::Open { .. } => entry.open_until.clone(),
            _ => None,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn breaker() -> (Breaker, Instant) {
        (Breaker::new(BreakerConfig::default()), Instant::now())
    }

    /// Lets a call through and records its outcome.
    fn call(b: &mut Breaker, outcome: Outcome, now: Instant) -> Result<(), Rejected> {
        let pass = b.admit(now)?;
        b.record(pass, outcome, now);
        Ok(())
    }

    #[test]
    fn three_unanswered_in_a_row_open_it_for_thirty_seconds() {
        let (mut b, t0) = breaker();
        call(&mut b, Outcome::Unanswered, t0).unwrap();
        call(&mut b, Outcome::Unanswered, t0 + S).unwrap();
        assert_eq!(b.phase(), Phase::Closed { failures: 2 });
        call(&mut b, Outcome::Unanswered, t0 + 2 * S).unwrap();
        assert_eq!(b.phase(), Phase::Open { until: t0 + 32 * S });
        // Every call fails at once until then.
        for s in [2, 10, 31] {
            assert_eq!(
                b.admit(t0 + s * S),
                Err(Rejected {
                    until: Some(t0 + 32 * S)
                })
            );
        }
    }

    #[test]
    fn an_answer_in_between_starts_the_count_again() {
        let (mut b, t0) = breaker();
        call(&mut b, Outcome::Unanswered, t0).unwrap();
        call(&mut b, Outcome::Unanswered, t0).unwrap();
        call(&mut b, Outcome::Answered, t0).unwrap();
        call(&mut b, Outcome::Unanswered, t0).unwrap();
        call(&mut b, Outcome::Unanswered, t0).unwrap();
        assert_eq!(b.phase(), Phase::Closed { failures: 2 });
        // A call the caller abandoned tells nothing.
        call(&mut b, Outcome::Abandoned, t0).unwrap();
        assert_eq!(b.phase(), Phase::Closed { failures: 2 });
    }

    fn opened() -> (Breaker, Instant) {
        let (mut b, t0) = breaker();
        for _ in 0..3 {
            call(&mut b, Outcome::Unanswered, t0).unwrap();
        }
        (b, t0)
    }

    #[test]
    fn after_thirty_seconds_one_trial_call_goes_and_an_answer_closes_it() {
        let (mut b, t0) = opened();
        let trial = b.admit(t0 + 30 * S).unwrap();
        assert!(trial.is_trial());
        assert_eq!(b.phase(), Phase::HalfOpen);
        // Only the one: the others fail at once while it is on its way.
        assert_eq!(b.admit(t0 + 31 * S), Err(Rejected { until: None }));
        assert!(b.record(trial, Outcome::Answered, t0 + 31 * S));
        assert_eq!(b.phase(), Phase::Closed { failures: 0 });
        assert!(b.admit(t0 + 31 * S).is_ok());
    }

    #[test]
    fn an_unanswered_trial_opens_it_again() {
        let (mut b, t0) = opened();
        let trial = b.admit(t0 + 40 * S).unwrap();
        b.record(trial, Outcome::Unanswered, t0 + 50 * S);
        assert_eq!(b.phase(), Phase::Open { until: t0 + 80 * S });
    }

    #[test]
    fn an_abandoned_trial_lets_the_next_call_try() {
        let (mut b, t0) = opened();
        let trial = b.admit(t0 + 30 * S).unwrap();
        b.record(trial, Outcome::Abandoned, t0 + 31 * S);
        let next = b.admit(t0 + 31 * S).unwrap();
        assert!(next.is_trial());
    }

    #[test]
    fn calls_let_through_before_it_opened_change_nothing_after() {
        let (mut b, t0) = breaker();
        let late = b.admit(t0).unwrap();
        for _ in 0..3 {
            call(&mut b, Outcome::Unanswered, t0).unwrap();
        }
        // The slow call answers while open: still open.
        assert!(!b.record(late, Outcome::Answered, t0 + S));
        assert!(matches!(b.phase(), Phase::Open { .. }));
        // Nor does it count against the half-open trial.
        let trial = b.admit(t0 + 30 * S).unwrap();
        assert!(!b.record(late, Outcome::Unanswered, t0 + 30 * S));
        assert_eq!(b.phase(), Phase::HalfOpen);
        b.record(trial, Outcome::Answered, t0 + 30 * S);
        assert_eq!(b.phase(), Phase::Closed { failures: 0 });
    }

    #[test]
    fn any_answer_closes_it_whatever_its_status() {
        // The breaker knows no statuses: an answer is an answer. (The proxy maps every
        // HTTP answer, 5xx included, to `Answered`.)
        let (mut b, t0) = opened();
        let trial = b.admit(t0 + 30 * S).unwrap();
        b.record(trial, Outcome::Answered, t0 + 30 * S);
        assert_eq!(b.phase(), Phase::Closed { failures: 0 });
    }

    #[test]
    fn each_container_has_its_own_and_a_restarted_one_starts_afresh() {
        let breakers = Breakers::new(BreakerConfig::default());
        let t0 = Instant::now();
        let first = ContainerKey {
            pod_uid: "uid-1".into(),
            restarts: 0,
        };
        let mut changes = vec![];
        for _ in 0..3 {
            let (pass, change) = breakers.admit(&first, t0);
            assert!(change.is_none());
            changes.extend(breakers.record(&first, pass.unwrap(), Outcome::Unanswered, t0));
        }
        let last = changes.last().unwrap();
        assert_eq!(last.after, Phase::Open { until: t0 + 30 * S });
        assert_eq!(last.state.state, "Open");
        assert!(last.state.open_until.is_some());
        assert_eq!(
            changes.iter().map(|c| c.state.failures).collect::<Vec<_>>(),
            [1, 2, 3]
        );
        assert!(breakers.admit(&first, t0 + S).0.is_err());
        // The container restarted in the same Pod: a new breaker.
        let restarted = ContainerKey {
            restarts: 1,
            ..first.clone()
        };
        assert!(breakers.admit(&restarted, t0 + S).0.is_ok());
        assert_eq!(breakers.state(&restarted).state, "Closed");
        // The Pod went away: forgotten.
        breakers.forget_pod("uid-1");
        assert_eq!(breakers.state(&first).state, "Closed");
        // The open → half-open move is a change too.
        let other = ContainerKey {
            pod_uid: "uid-2".into(),
            restarts: 0,
        };
        for _ in 0..3 {
            let pass = breakers.admit(&other, t0).0.unwrap();
            breakers.record(&other, pass, Outcome::Unanswered, t0);
        }
        let (pass, change) = breakers.admit(&other, t0 + 30 * S);
        assert!(pass.unwrap().is_trial());
        assert_eq!(change.unwrap().state.state, "HalfOpen");
    }

    /// Replica A opens the breaker and shows it; replica B, given that status, takes it on.
    #[test]
    fn another_replicas_open_breaker_is_taken_on_for_the_same_container_only() {
        let (a, b) = (
            Breakers::new(BreakerConfig::default()),
            Breakers::new(BreakerConfig::default()),
        );
        let key = ContainerKey {
            pod_uid: "uid-1".into(),
            restarts: 0,
        };
        let t0 = Instant::now();
        let wall = jiff::Timestamp::now();
        let mut shown = None;
        for _ in 0..3 {
            let pass = a.admit(&key, t0).0.unwrap();
            if let Some(change) = a.record(&key, pass, Outcome::Unanswered, t0) {
                shown = Some(change.state);
            }
        }
        let shown = shown.unwrap();
        assert_eq!(shown.state, "Open");
        assert_eq!(shown.container.as_deref(), Some("uid-1/0"));

        // A's own opening is no news to A.
        assert!(a.adopt(&key, &shown, t0, wall).is_none());
        // Another container (a restart) does not take it on.
        let restarted = ContainerKey {
            restarts: 1,
            ..key.clone()
        };
        assert!(b.adopt(&restarted, &shown, t0, wall).is_none());
        assert!(b.admit(&restarted, t0).0.is_ok());
        // B takes it on once, and then fails at once as A does, showing the same breaker.
        let change = b.adopt(&key, &shown, t0, wall).unwrap();
        assert_eq!(change.state, shown);
        assert!(matches!(change.after, Phase::Open { .. }));
        assert!(b.adopt(&key, &shown, t0, wall).is_none());
        let rejected = b.admit(&key, t0 + S).0.unwrap_err();
        let until = rejected.until.unwrap();
        assert!(until > t0 + 29 * S && until <= t0 + 31 * S, "{until:?}");
        // After its time, B tries once itself.
        let (pass, _) = b.admit(&key, t0 + 31 * S);
        assert!(pass.unwrap().is_trial());
    }

    #[test]
    fn an_opening_whose_time_is_up_or_a_closed_status_is_not_taken_on() {
        let b = Breakers::new(BreakerConfig::default());
        let key = ContainerKey {
            pod_uid: "uid-1".into(),
            restarts: 0,
        };
        let t0 = Instant::now();
        let wall: jiff::Timestamp = "2026-12-02T12:00:00Z".parse().unwrap();
        let mut shown = BreakerState {
            state: "Open".into(),
            failures: 3,
            open_until: Some("2026-12-02T11:59:59Z".into()),
            container: Some("uid-1/0".into()),
        };
        assert!(b.adopt(&key, &shown, t0, wall).is_none());
        shown.open_until = Some("2026-12-02T12:00:20Z".into());
        shown.state = "Closed".into();
        assert!(b.adopt(&key, &shown, t0, wall).is_none());
        // Shown by a replica from before the container was named: not taken on either.
        shown.state = "Open".into();
        shown.container = None;
        assert!(b.adopt(&key, &shown, t0, wall).is_none());
        assert!(b.admit(&key, t0).0.is_ok());
    }
}
