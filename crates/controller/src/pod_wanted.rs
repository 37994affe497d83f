//! Whether an instance's container is wanted now: a pure decision from what the API server
//! recorded on the instance, what the plugin may still use, the host's idle timeout and when
//! this controller started.
//!
//! - Activity (a call, an event, a schedule) keeps it up for the idle timeout.
//! - A composer switch that is on starts it once when the controller starts ("When the daemon
//!   starts, it starts the plugin's container in each channel where one of its switches is
//!   on, so the plugin can bring back what the switch stands for"): it is wanted until the
//!   start plus the idle timeout, then the ordinary idle rule applies. Counted from the
//!   controller's start time, so it needs no write.
//! - A live hold keeps it up while the plugin holds the chat's live session.
//! - A stop (`loop-plugins plugin stop`, the reference's Stop button, recorded as the
//!   instance's `status.stoppedAt`) cancels every demand recorded up to it: activity at or
//!   before it, a switch on at a controller start before it, and a live hold until activity
//!   comes after it. The next call, event or schedule (activity after the stop) starts the
//!   container again. A tie goes to the stop: both are written to the second, so activity in
//!   the stop's own second counts only from the next one.
//! - Switch state of a switch the manifest no longer declares, or while `ui.composer_switch`
//!   is not approved, and a hold while `live.control` is not approved, count for nothing.
//! - Idle means up and unused: the idle timeout counts from the later of the demand and the
//!   moment the Pod became Ready, and a Pod started for a demand is not stopped while it is
//!   still starting (placed, its volume bound, its image pulled, its first containers not
//!   Ready yet), for up to
//!   [`START_GRACE`]. A first start on a real cluster can take longer than a short idle
//!   timeout (a volume provisioned, an image pulled), and the plugin would otherwise be stopped
//!   before it ever answered.

use std::time::Duration;

use jiff::Timestamp;

use model::resources::PluginInstanceStatus;

/// How long a Pod started for a demand may take to start (Pending) while that demand's idle
/// window has closed; past it, the ordinary idle rule stops it.
pub const START_GRACE: Duration = Duration::from_secs(300);

/// The longest wait before looking again: a window that closes later (an idle timeout of
/// years) is looked at again within it: tokio panics on a timer that far out.
pub const RECHECK_AT_MOST: Duration = Duration::from_secs(3600);

/// How far the instance's live Pod got, for the idle rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodProgress {
    /// No Pod runs.
    None,
    /// Made at `since`, and still starting: Pending, or running its first containers and
    /// not Ready yet.
    Starting { since: Timestamp },
    /// Ready since `since`.
    Ready { since: Timestamp },
    /// Running but not Ready after a container restarted (failing, not starting): no grace.
    Running,
}

/// Why a container should run, or that it should not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Demand {
    /// Recent activity keeps it up until this time.
    ActiveUntil(Timestamp),
    /// A composer switch was on when the controller started: it runs until this time, so the
    /// plugin can bring back what the switch stands for.
    SwitchOnAtStart(Timestamp),
    /// The plugin holds the chat's live session.
    LiveHold,
    /// Its Pod, started for a demand whose window closed meanwhile, is still starting: it is
    /// kept until it is Ready (then idleness counts from there) or until this time.
    Starting(Timestamp),
    /// Idle: stop it.
    Idle,
}

/// What the demand on an instance is decided from.
#[derive(Clone, Copy, Debug)]
pub struct DemandInputs<'a> {
    /// What the API server recorded: last activity, switch states, live hold.
    pub status: Option<&'a PluginInstanceStatus>,
    /// The composer switches that count: those the manifest declares, while
    /// `ui.composer_switch` is approved (none otherwise).
    pub switches: &'a [&'a str],
    /// Whether `live.control` is approved.
    pub live_control: bool,
    pub idle_timeout: Duration,
    /// How far its live Pod got.
    pub pod: PodProgress,
    /// When this controller started reconciling.
    pub started: Timestamp,
    pub now: Timestamp,
}

impl Demand {
    pub fn wanted(self) -> bool {
        !matches!(self, Demand::Idle)
    }

    /// When to look again: when the window that keeps it up closes.
    pub fn recheck_after(self, now: Timestamp) -> Option<Duration> {
        match self {
            Demand::ActiveUntil(until)
            | Demand::SwitchOnAtStart(until)
            | Demand::Starting(until) => {
                let left = until.duration_since(now);
                let left = Duration::try_from(left).unwrap_or(Duration::ZERO);
                Some(left.min(RECHECK_AT_MOST) + Duration::from_millis(500))
            }
            _ => None,
        }
    }
}

/// Decides the demand on an instance.
pub fn demand(input: &DemandInputs) -> Demand {
    let Some(status) = input.status else {
        return Demand::Idle;
    };
    let stopped = status
        .stopped_at
        .as_deref()
        .and_then(|t| t.parse::<Timestamp>().ok());
    let after_stop = |t: Timestamp| stopped.is_none_or(|stop| t > stop);
    let last = status
        .last_activity
        .as_deref()
        .and_then(|t| t.parse::<Timestamp>().ok())
        .filter(|last| after_stop(*last));
    if status.live_hold && input.live_control && (stopped.is_none() || last.is_some()) {
        return Demand::LiveHold;
    }
    let activity = last.map(|last| Demand::ActiveUntil(later(last, input.idle_timeout)));
    let switch_on = status
        .switches
        .iter()
        .any(|s| s.on && input.switches.contains(&s.id.as_str()));
    let at_start = (switch_on && after_stop(input.started))
        .then(|| Demand::SwitchOnAtStart(later(input.started, input.idle_timeout)));
    let windows: Vec<Demand> = [activity, at_start].into_iter().flatten().collect();
    // Idleness counts from when the Pod was up: a window that opened before the Pod became
    // Ready closes the idle timeout after it did.
    let from_ready = |d: Demand| match (d, input.pod) {
        (Demand::ActiveUntil(t), PodProgress::Ready { since }) => {
            Demand::ActiveUntil(t.max(later(since, input.idle_timeout)))
        }
        (Demand::SwitchOnAtStart(t), PodProgress::Ready { since }) => {
            Demand::SwitchOnAtStart(t.max(later(since, input.idle_timeout)))
        }
        (d, _) => d,
    };
    let open = windows
        .iter()
        .copied()
        .map(from_ready)
        .filter(|d| until(d) > input.now)
        .max_by_key(until);
    if let Some(open) = open {
        return open;
    }
    // Every window closed. A Pod made for one of them and still starting is not idle yet.
    match input.pod {
        PodProgress::Starting { since }
            if after_stop(since)
                && windows.iter().any(|d| until(d) >= since)
                && later(since, START_GRACE) > input.now =>
        {
            Demand::Starting(later(since, START_GRACE))
        }
        _ => Demand::Idle,
    }
}

/// `t` plus `d`, or the last time there is: an idle timeout is the operator's to write
/// (`999999999h` parses), and adding it must not panic the controller.
fn later(t: Timestamp, d: Duration) -> Timestamp {
    jiff::SignedDuration::try_from(d)
        .ok()
        .and_then(|d| t.checked_add(d).ok())
        .unwrap_or(Timestamp::MAX)
}

/// When a window that keeps the container up closes.
fn until(d: &Demand) -> Timestamp {
    match d {
        Demand::ActiveUntil(t) | Demand::SwitchOnAtStart(t) | Demand::Starting(t) => *t,
        Demand::LiveHold | Demand::Idle => Timestamp::MIN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resources::SwitchState;

    const TEN_MIN: Duration = Duration::from_secs(600);
    const MODE: &[&str] = &["mode"];

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn status(
        last: Option<&str>,
        switches: &[(&str, bool)],
        live_hold: bool,
    ) -> PluginInstanceStatus {
        PluginInstanceStatus {
            last_activity: last.map(Into::into),
            switches: switches
                .iter()
                .map(|(id, on)| SwitchState {
                    id: (*id).into(),
                    on: *on,
                    title: None,
                    error: false,
                    busy: false,
                })
                .collect(),
            live_hold,
            ..Default::default()
        }
    }

    /// The demand at `now` for a controller started at 10:00.
    fn decide(
        status: &PluginInstanceStatus,
        switches: &[&str],
        live_control: bool,
        now: &str,
    ) -> Demand {
        demand(&DemandInputs {
            status: Some(status),
            switches,
            live_control,
            idle_timeout: TEN_MIN,
            pod: PodProgress::None,
            started: at("2026-01-01T10:00:00Z"),
            now: at(now),
        })
    }

    /// The demand at `now` with the Pod as far as `pod`, for a controller started at 10:00.
    fn decide_with(status: &PluginInstanceStatus, pod: PodProgress, now: &str) -> Demand {
        demand(&DemandInputs {
            status: Some(status),
            switches: MODE,
            live_control: true,
            idle_timeout: TEN_MIN,
            pod,
            started: at("2026-01-01T10:00:00Z"),
            now: at(now),
        })
    }

    #[test]
    fn recent_activity_keeps_it_up_until_the_idle_timeout() {
        let active = status(Some("2026-01-01T10:00:00Z"), &[], false);
        let d = decide(&active, MODE, true, "2026-01-01T10:09:00Z");
        assert_eq!(d, Demand::ActiveUntil(at("2026-01-01T10:10:00Z")));
        assert!(d.wanted());
        assert_eq!(
            d.recheck_after(at("2026-01-01T10:09:00Z")),
            Some(Duration::from_millis(60_500))
        );
    }

    #[test]
    fn idle_past_the_timeout_stops_it() {
        let active = status(Some("2026-01-01T10:00:00Z"), &[], false);
        assert_eq!(
            decide(&active, MODE, true, "2026-01-01T10:10:01Z"),
            Demand::Idle
        );
        let none = demand(&DemandInputs {
            status: None,
            switches: MODE,
            live_control: true,
            idle_timeout: TEN_MIN,
            pod: PodProgress::None,
            started: at("2026-01-01T10:00:00Z"),
            now: at("2026-01-01T10:00:00Z"),
        });
        assert_eq!(none, Demand::Idle);
    }

    #[test]
    fn a_switch_that_is_on_starts_it_at_the_start_and_then_idle_applies() {
        let on = status(None, &[("mode", true)], false);
        // Right after the controller starts: wanted until the start plus the idle timeout.
        let d = decide(&on, MODE, true, "2026-01-01T10:00:05Z");
        assert_eq!(d, Demand::SwitchOnAtStart(at("2026-01-01T10:10:00Z")));
        // Then the ordinary idle rule: the switch alone no longer keeps it.
        assert_eq!(
            decide(&on, MODE, true, "2026-01-01T10:10:01Z"),
            Demand::Idle
        );
        // Activity after that keeps it up as usual.
        let used = status(Some("2026-01-01T11:00:00Z"), &[("mode", true)], false);
        assert_eq!(
            decide(&used, MODE, true, "2026-01-01T11:05:00Z"),
            Demand::ActiveUntil(at("2026-01-01T11:10:00Z"))
        );
        // A switch that is off starts nothing.
        let off = status(None, &[("mode", false)], false);
        assert_eq!(
            decide(&off, MODE, true, "2026-01-01T10:00:05Z"),
            Demand::Idle
        );
    }

    #[test]
    fn the_later_of_activity_and_the_start_window_counts() {
        let both = status(Some("2026-01-01T09:55:00Z"), &[("mode", true)], false);
        assert_eq!(
            decide(&both, MODE, true, "2026-01-01T10:01:00Z"),
            Demand::SwitchOnAtStart(at("2026-01-01T10:10:00Z"))
        );
        let both = status(Some("2026-01-01T10:05:00Z"), &[("mode", true)], false);
        assert_eq!(
            decide(&both, MODE, true, "2026-01-01T10:06:00Z"),
            Demand::ActiveUntil(at("2026-01-01T10:15:00Z"))
        );
    }

    #[test]
    fn stale_switch_state_counts_for_nothing() {
        // The manifest no longer declares the switch that is on.
        let ghost = status(None, &[("ghost", true), ("mode", false)], false);
        assert_eq!(
            decide(&ghost, MODE, true, "2026-01-01T10:00:05Z"),
            Demand::Idle
        );
        // ui.composer_switch is no longer approved: no switch counts.
        let on = status(None, &[("mode", true)], false);
        assert_eq!(decide(&on, &[], true, "2026-01-01T10:00:05Z"), Demand::Idle);
    }

    #[test]
    fn a_live_hold_keeps_it_only_while_live_control_is_approved() {
        let held = status(Some("2020-01-01T00:00:00Z"), &[], true);
        assert_eq!(
            decide(&held, MODE, true, "2026-01-01T12:00:00Z"),
            Demand::LiveHold
        );
        assert_eq!(
            decide(&held, MODE, false, "2026-01-01T12:00:00Z"),
            Demand::Idle
        );
    }

    #[test]
    fn a_stop_cancels_the_demand_recorded_up_to_it_and_the_next_activity_starts_it() {
        let stopped = |mut s: PluginInstanceStatus, at: &str| {
            s.stopped_at = Some(at.into());
            s
        };
        // Active until 10:10, stopped at 10:02: idle at once.
        let active = status(Some("2026-01-01T10:01:00Z"), &[], false);
        assert!(decide(&active, MODE, true, "2026-01-01T10:03:00Z").wanted());
        let stop = stopped(active, "2026-01-01T10:02:00Z");
        assert_eq!(
            decide(&stop, MODE, true, "2026-01-01T10:03:00Z"),
            Demand::Idle
        );
        // Activity in the stop's own second loses the tie.
        let tie = stopped(
            status(Some("2026-01-01T10:02:00Z"), &[], false),
            "2026-01-01T10:02:00Z",
        );
        assert_eq!(
            decide(&tie, MODE, true, "2026-01-01T10:02:30Z"),
            Demand::Idle
        );
        // The next activity starts it again.
        let again = stopped(
            status(Some("2026-01-01T10:04:00Z"), &[], false),
            "2026-01-01T10:02:00Z",
        );
        assert_eq!(
            decide(&again, MODE, true, "2026-01-01T10:05:00Z"),
            Demand::ActiveUntil(at("2026-01-01T10:14:00Z"))
        );
        // A switch on at a start before the stop no longer counts.
        let on = stopped(
            status(None, &[("mode", true)], false),
            "2026-01-01T10:01:00Z",
        );
        assert_eq!(
            decide(&on, MODE, true, "2026-01-01T10:02:00Z"),
            Demand::Idle
        );
        // A stop before the controller started leaves the start window alone.
        let before = stopped(
            status(None, &[("mode", true)], false),
            "2026-01-01T09:00:00Z",
        );
        assert!(decide(&before, MODE, true, "2026-01-01T10:02:00Z").wanted());
        // A live hold counts again only once activity comes after the stop.
        let held = stopped(
            status(Some("2026-01-01T10:00:00Z"), &[], true),
            "2026-01-01T10:01:00Z",
        );
        assert_eq!(
            decide(&held, MODE, true, "2026-01-01T10:02:00Z"),
            Demand::Idle
        );
        let used = stopped(
            status(Some("2026-01-01T10:03:00Z"), &[], true),
            "2026-01-01T10:01:00Z",
        );
        assert_eq!(
            decide(&used, MODE, true, "2026-01-01T10:04:00Z"),
            Demand::LiveHold
        );
    }

    #[test]
    fn idleness_counts_from_when_the_pod_became_ready() {
        let active = status(Some("2026-01-01T10:00:00Z"), &[], false);
        // Up at 10:04 for a call at 10:00: the timeout counts from 10:04.
        let ready = PodProgress::Ready {
            since: at("2026-01-01T10:04:00Z"),
        };
        assert_eq!(
            decide_with(&active, ready, "2026-01-01T10:12:00Z"),
            Demand::ActiveUntil(at("2026-01-01T10:14:00Z"))
        );
        assert_eq!(
            decide_with(&active, ready, "2026-01-01T10:14:01Z"),
            Demand::Idle
        );
        // Up long before the call: the call's own window.
        let long_up = PodProgress::Ready {
            since: at("2026-01-01T08:00:00Z"),
        };
        assert_eq!(
            decide_with(&active, long_up, "2026-01-01T10:05:00Z"),
            Demand::ActiveUntil(at("2026-01-01T10:10:00Z"))
        );
        // The switch's start window too.
        let on = status(None, &[("mode", true)], false);
        let late = PodProgress::Ready {
            since: at("2026-01-01T10:09:00Z"),
        };
        assert_eq!(
            decide_with(&on, late, "2026-01-01T10:11:00Z"),
            Demand::SwitchOnAtStart(at("2026-01-01T10:19:00Z"))
        );
        // Readiness alone, with no demand at all, keeps nothing.
        let none = status(None, &[], false);
        assert_eq!(
            decide_with(&none, ready, "2026-01-01T10:05:00Z"),
            Demand::Idle
        );
    }

    #[test]
    fn a_pod_still_starting_when_its_window_closes_is_kept_up_to_the_grace() {
        // An idle timeout of 45 s: the switch was on at the start (window 10:00:00-10:00:45);
        // its Pod, made at 10:00:02, is still Pending (its volume being provisioned) later.
        let short = |status: &PluginInstanceStatus, pod, now: &str| {
            demand(&DemandInputs {
                status: Some(status),
                switches: MODE,
                live_control: true,
                idle_timeout: Duration::from_secs(45),
                pod,
                started: at("2026-01-01T10:00:00Z"),
                now: at(now),
            })
        };
        let on = status(None, &[("mode", true)], false);
        let starting = PodProgress::Starting {
            since: at("2026-01-01T10:00:02Z"),
        };
        assert_eq!(
            short(&on, PodProgress::None, "2026-01-01T10:01:00Z"),
            Demand::Idle
        );
        let kept = short(&on, starting, "2026-01-01T10:01:00Z");
        assert_eq!(kept, Demand::Starting(at("2026-01-01T10:05:02Z")));
        assert!(kept.wanted());
        // Ready at 10:01:30: the 45 s count from there.
        let ready = PodProgress::Ready {
            since: at("2026-01-01T10:01:30Z"),
        };
        assert_eq!(
            short(&on, ready, "2026-01-01T10:02:00Z"),
            Demand::SwitchOnAtStart(at("2026-01-01T10:02:15Z"))
        );
        // Past the grace it is let go.
        assert_eq!(short(&on, starting, "2026-01-01T10:05:03Z"), Demand::Idle);
        // A Pod that runs but is not Ready gets no grace.
        assert_eq!(
            short(&on, PodProgress::Running, "2026-01-01T10:01:00Z"),
            Demand::Idle
        );
        // A Pod made after every window closed (not for them) gets none either.
        let stray = PodProgress::Starting {
            since: at("2026-01-01T10:30:00Z"),
        };
        assert_eq!(short(&on, stray, "2026-01-01T10:31:00Z"), Demand::Idle);
        // A stop cancels a start under way.
        let mut stopped = on.clone();
        stopped.stopped_at = Some("2026-01-01T10:00:50Z".into());
        assert_eq!(
            short(&stopped, starting, "2026-01-01T10:01:00Z"),
            Demand::Idle
        );
    }

    #[test]
    fn an_idle_timeout_past_the_end_of_time_keeps_it_up_without_a_panic() {
        let active = status(Some("2026-01-01T10:00:00Z"), &[("mode", true)], false);
        for pod in [
            PodProgress::None,
            PodProgress::Ready {
                since: at("2026-01-01T10:00:05Z"),
            },
        ] {
            let d = demand(&DemandInputs {
                status: Some(&active),
                switches: MODE,
                live_control: true,
                idle_timeout: Duration::from_secs(u64::MAX),
                pod,
                started: at("2026-01-01T10:00:00Z"),
                now: at("2026-01-01T10:01:00Z"),
            });
            assert!(d.wanted(), "{d:?}");
            assert_eq!(
                d.recheck_after(at("2026-01-01T10:01:00Z")),
                Some(RECHECK_AT_MOST + Duration::from_millis(500))
            );
        }
    }
}
