//! Whether an instance's container is wanted now: a pure decision from what the API server
//! recorded on the instance and the host's idle timeout.

use std::time::Duration;

use jiff::Timestamp;

use model::resources::PluginInstanceStatus;

/// Why a container should run, or that it should not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Demand {
    /// Recent activity keeps it up until this time.
    ActiveUntil(Timestamp),
    /// One of its composer switches is on in the chat.
    SwitchOn,
    /// The plugin holds the chat's live session.
    LiveHold,
    /// Idle: stop it.
    Idle,
}

impl Demand {
    pub fn wanted(self) -> bool {
        !matches!(self, Demand::Idle)
    }

    /// When to look again: when the activity window closes.
    pub fn recheck_after(self, now: Timestamp) -> Option<Duration> {
        match self {
            Demand::ActiveUntil(until) => {
                let left = until.duration_since(now);
                Some(
                    Duration::try_from(left).unwrap_or(Duration::ZERO) + Duration::from_millis(500),
                )
            }
            _ => None,
        }
    }
}

/// Decides the demand on an instance at `now`.
pub fn demand(
    status: Option<&PluginInstanceStatus>,
    idle_timeout: Duration,
    now: Timestamp,
) -> Demand {
    let Some(status) = status else {
        return Demand::Idle;
    };
    if status.switches.iter().any(|s| s.on) {
        return Demand::SwitchOn;
    }
    if status.live_hold {
        return Demand::LiveHold;
    }
    let last = status
        .last_activity
        .as_deref()
        .and_then(|t| t.parse::<Timestamp>().ok());
    match last {
        Some(last) => {
            let until = last + idle_timeout;
            if until > now {
                Demand::ActiveUntil(until)
            } else {
                Demand::Idle
            }
        }
        None => Demand::Idle,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resources::SwitchState;

    const TEN_MIN: Duration = Duration::from_secs(600);

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn active(last: &str) -> PluginInstanceStatus {
        PluginInstanceStatus {
            last_activity: Some(last.into()),
            ..Default::default()
        }
    }

    #[test]
    fn recent_activity_keeps_it_up_until_the_idle_timeout() {
        let d = demand(
            Some(&active("2026-01-01T10:00:00Z")),
            TEN_MIN,
            at("2026-01-01T10:09:00Z"),
        );
        assert_eq!(d, Demand::ActiveUntil(at("2026-01-01T10:10:00Z")));
        assert!(d.wanted());
    }

    #[test]
    fn idle_past_the_timeout_stops_it() {
        let d = demand(
            Some(&active("2026-01-01T10:00:00Z")),
            TEN_MIN,
            at("2026-01-01T10:10:01Z"),
        );
        assert_eq!(d, Demand::Idle);
        assert_eq!(
            demand(None, TEN_MIN, at("2026-01-01T10:00:00Z")),
            Demand::Idle
        );
    }

    #[test]
    fn a_switch_that_is_on_keeps_it_up() {
        let mut status = active("2020-01-01T00:00:00Z");
        status.switches.push(SwitchState {
            id: "mode".into(),
            on: true,
            title: None,
            error: false,
            busy: false,
        });
        assert_eq!(
            demand(Some(&status), TEN_MIN, at("2026-01-01T00:00:00Z")),
            Demand::SwitchOn
        );
        status.switches[0].on = false;
        assert_eq!(
            demand(Some(&status), TEN_MIN, at("2026-01-01T00:00:00Z")),
            Demand::Idle
        );
    }
}
