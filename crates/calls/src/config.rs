//! How calls to plugins are set up: the reference's time limits and size caps (the defaults are
//! the spec's numbers; tests shorten them), the breaker's numbers, how long a call waits for a
//! stopped container and how many may wait.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelValue;

use super::breaker::BreakerConfig;

/// The kinds of call the host makes to a plugin, each with its own time limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, EncodeLabelValue)]
pub enum CallKind {
    /// `POST /actions/{action}`.
    Action,
    /// `POST /tools/{tool}`.
    Tool,
    /// `POST /runs/{run_id}/done`.
    RunDone,
    /// `POST /events`.
    Event,
    /// `POST /switches/{switch}`.
    Switch,
    /// `/x/...`.
    X,
}

impl CallKind {
    pub const fn as_str(self) -> &'static str {
        match self {
            CallKind::Action => "action",
            CallKind::Tool => "tool",
            CallKind::RunDone => "run_done",
            CallKind::Event => "event",
            CallKind::Switch => "switch",
            CallKind::X => "x",
        }
    }
}

/// The reference's megabyte: a MiB, as `model::manifest::sizes` counts every cap.
pub const MB: usize = model::manifest::sizes::MB as usize;

/// The reference's limits ("When a plugin stops answering").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// 10 s.
    pub action: Duration,
    /// 60 s, unless a workflow node asks for longer.
    pub tool: Duration,
    /// 10 s.
    pub run_done: Duration,
    /// 10 s.
    pub event: Duration,
    /// 10 s.
    pub switch: Duration,
    /// 30 s.
    pub x: Duration,
    /// The longest a workflow node may ask a tool call to run.
    pub workflow_tool_max: Duration,
    /// A tool answer: 1 MB.
    pub tool_answer: usize,
    /// An `/x` body, both ways: 8 MB.
    pub x_body: usize,
    /// Any other body, both ways (action, event and switch requests and answers).
    pub body: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            action: Duration::from_secs(10),
            tool: Duration::from_secs(60),
            run_done: Duration::from_secs(10),
            event: Duration::from_secs(10),
            switch: Duration::from_secs(10),
            x: Duration::from_secs(30),
            workflow_tool_max: Duration::from_secs(3600),
            tool_answer: model::manifest::sizes::TOOL_ANSWER_MAX_BYTES as usize,
            x_body: model::manifest::sizes::X_BODY_MAX_BYTES as usize,
            body: MB,
        }
    }
}

impl Limits {
    /// A call's time limit.
    pub fn time(&self, kind: CallKind) -> Duration {
        match kind {
            CallKind::Action => self.action,
            CallKind::Tool => self.tool,
            CallKind::RunDone => self.run_done,
            CallKind::Event => self.event,
            CallKind::Switch => self.switch,
            CallKind::X => self.x,
        }
    }

    /// The largest answer taken from a plugin.
    pub fn answer_cap(&self, kind: CallKind) -> usize {
        match kind {
            CallKind::Tool => self.tool_answer,
            CallKind::X => self.x_body,
            _ => self.body,
        }
    }
}

/// How calls to plugins go.
#[derive(Clone, Debug)]
pub struct CallSettings {
    pub limits: Limits,
    pub breaker: BreakerConfig,
    /// How long a call waits for a stopped container to become Ready.
    pub start_timeout: Duration,
    /// How many calls may wait for one container to start; past that they fail at once.
    pub max_waiting: usize,
    /// At most one `lastActivity` write per instance this often while its container runs
    /// (shortened to a quarter of the idle timeout when that is shorter).
    pub activity_every: Duration,
}

impl Default for CallSettings {
    fn default() -> Self {
        Self {
            limits: Limits::default(),
            breaker: BreakerConfig::default(),
            start_timeout: Duration::from_secs(90),
            max_waiting: 64,
            activity_every: Duration::from_secs(5),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_the_references_numbers() {
        let l = Limits::default();
        assert_eq!(l.time(CallKind::Action), Duration::from_secs(10));
        assert_eq!(l.time(CallKind::RunDone), Duration::from_secs(10));
        assert_eq!(l.time(CallKind::Event), Duration::from_secs(10));
        assert_eq!(l.time(CallKind::Switch), Duration::from_secs(10));
        assert_eq!(l.time(CallKind::Tool), Duration::from_secs(60));
        assert_eq!(l.time(CallKind::X), Duration::from_secs(30));
        assert_eq!(l.answer_cap(CallKind::Tool), 1_048_576);
        assert_eq!(l.answer_cap(CallKind::X), 8_388_608);
        let b = BreakerConfig::default();
        assert_eq!((b.threshold, b.open_for), (3, Duration::from_secs(30)));
    }
}
