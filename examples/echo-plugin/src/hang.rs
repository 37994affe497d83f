//! The hang hook (`POST /x/hang`): the next N calls of the chosen kinds sleep past the
//! host's time limits before they are handled, so tests can trip the host's breaker.

use std::sync::Mutex;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The kinds of call a hang can catch, by the route's first segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    Actions,
    Tools,
    Runs,
    Events,
    Switches,
    X,
}

impl Kind {
    /// The kind of call a path is; `None` for `/healthz` and the test hooks themselves.
    pub fn of(path: &str) -> Option<Self> {
        let first = path.trim_start_matches('/').split('/').next()?;
        match first {
            "actions" => Some(Self::Actions),
            "tools" => Some(Self::Tools),
            "runs" => Some(Self::Runs),
            "events" => Some(Self::Events),
            "switches" => Some(Self::Switches),
            "x" if matches!(path, "/x/hang" | "/x/journal") => None,
            "x" => Some(Self::X),
            _ => None,
        }
    }

    /// The host's time limit for this kind of call, plus 5 s.
    pub fn past_limit(self) -> Duration {
        let limit = match self {
            Self::Tools => 60,
            Self::X => 30,
            Self::Actions | Self::Runs | Self::Events | Self::Switches => 10,
        };
        Duration::from_secs(limit + 5)
    }
}

/// `POST /x/hang`'s body.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HangRequest {
    /// How many calls hang (default 1; 0 disarms).
    #[serde(default = "one")]
    pub count: u32,
    /// How long each sleeps, in seconds (default: that kind's time limit plus 5 s).
    #[serde(default)]
    pub seconds: Option<f64>,
    /// Which kinds of call (default tools and actions).
    #[serde(default = "tools_and_actions")]
    pub kinds: Vec<Kind>,
}

fn one() -> u32 {
    1
}

fn tools_and_actions() -> Vec<Kind> {
    vec![Kind::Tools, Kind::Actions]
}

/// What is armed now; also `POST /x/hang`'s answer.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Armed {
    pub pending: u32,
    pub kinds: Vec<Kind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub seconds: Option<f64>,
}

#[derive(Default)]
pub struct Hang(Mutex<Armed>);

impl Hang {
    /// Replaces whatever was armed.
    pub fn arm(&self, req: &HangRequest) -> Result<Armed, String> {
        if let Some(s) = req.seconds
            && !(s.is_finite() && (0.0..=3600.0).contains(&s))
        {
            return Err(format!("seconds: {s} is not between 0 and 3600"));
        }
        let armed = Armed {
            pending: req.count,
            kinds: req.kinds.clone(),
            seconds: req.seconds,
        };
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = armed.clone();
        Ok(armed)
    }

    /// Takes one hang for a call of `kind`, answering how long it sleeps.
    pub fn take(&self, kind: Kind) -> Option<Duration> {
        let mut armed = self.0.lock().unwrap_or_else(|e| e.into_inner());
        if armed.pending == 0 || !armed.kinds.contains(&kind) {
            return None;
        }
        armed.pending -= 1;
        Some(
            armed
                .seconds
                .map_or_else(|| kind.past_limit(), Duration::from_secs_f64),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_of_paths() {
        assert_eq!(Kind::of("/tools/echo"), Some(Kind::Tools));
        assert_eq!(Kind::of("/actions/ping"), Some(Kind::Actions));
        assert_eq!(Kind::of("/runs/r1/done"), Some(Kind::Runs));
        assert_eq!(Kind::of("/events"), Some(Kind::Events));
        assert_eq!(Kind::of("/switches/mode"), Some(Kind::Switches));
        assert_eq!(Kind::of("/x/anything/else"), Some(Kind::X));
        assert_eq!(Kind::of("/x/hang"), None);
        assert_eq!(Kind::of("/x/journal"), None);
        assert_eq!(Kind::of("/healthz"), None);
    }

    #[test]
    fn past_the_limits() {
        assert!(Kind::Tools.past_limit() > Duration::from_secs(60));
        assert!(Kind::Actions.past_limit() > Duration::from_secs(10));
        assert!(Kind::X.past_limit() > Duration::from_secs(30));
    }

    #[test]
    fn takes_count_calls_of_the_armed_kinds() {
        let h = Hang::default();
        assert_eq!(h.take(Kind::Tools), None);
        let req: HangRequest = serde_json::from_str(r#"{"count": 2}"#).unwrap();
        h.arm(&req).unwrap();
        assert_eq!(h.take(Kind::Events), None);
        assert_eq!(h.take(Kind::Tools), Some(Kind::Tools.past_limit()));
        assert_eq!(h.take(Kind::Actions), Some(Kind::Actions.past_limit()));
        assert_eq!(h.take(Kind::Tools), None);

        let req: HangRequest =
            serde_json::from_str(r#"{"count": 1, "seconds": 0.5, "kinds": ["x"]}"#).unwrap();
        h.arm(&req).unwrap();
        assert_eq!(h.take(Kind::X), Some(Duration::from_millis(500)));
        let bad: HangRequest = serde_json::from_str(r#"{"seconds": -1}"#).unwrap();
        assert!(h.arm(&bad).is_err());
        assert!(serde_json::from_str::<HangRequest>(r#"{"kinds": ["nope"]}"#).is_err());
    }
}
