//! How a call to a plugin failed, told to whoever asked: one code of the call failures the
//! host API documents and a message naming the container and the reason. The host API
//! answers it as an error (`host_api::error`), a tool call makes it an `is_error` result
//! (`crate::tool_calls`), the fan-out records it on a run. Pure.

use std::time::Duration;

use super::client::{CallFailure, PluginAnswer, seconds};
use super::{CallError, StartError, Target};

/// The code of a failed call, as the host API's error vocabulary names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FailureCode {
    /// Too many calls already wait for the container to start.
    QueueFull,
    /// The container did not become Ready in time.
    StartTimeout,
    /// The controller cannot run the container.
    CannotStart,
    /// A Kubernetes call failed (the demand could not be recorded), or the container is
    /// stopped and this call starts none.
    Unavailable,
    /// The server is stopping (its Pod watch went away).
    Internal,
    /// The breaker in front of the container is open.
    BreakerOpen,
    /// No answer within the call's time limit.
    PluginTimeout,
    /// The container refused the connection or dropped it.
    PluginUnreachable,
    /// The plugin answered with an error status.
    PluginError,
    /// The answer is over the route's cap.
    AnswerTooLarge,
    /// The answer broke off, or is not of the contract's shape.
    InvalidAnswer,
}

impl FailureCode {
    pub fn as_str(self) -> &'static str {
        match self {
            FailureCode::QueueFull => "queue_full",
            FailureCode::StartTimeout => "start_timeout",
            FailureCode::CannotStart => "cannot_start",
            FailureCode::Unavailable => "unavailable",
            FailureCode::Internal => "internal",
            FailureCode::BreakerOpen => "breaker_open",
            FailureCode::PluginTimeout => "plugin_timeout",
            FailureCode::PluginUnreachable => "plugin_unreachable",
            FailureCode::PluginError => "plugin_error",
            FailureCode::AnswerTooLarge => "answer_too_large",
            FailureCode::InvalidAnswer => "invalid_answer",
        }
    }
}

/// A failed call, told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    pub code: FailureCode,
    pub message: String,
    /// When trying again makes sense, in seconds.
    pub retry_after: Option<u64>,
    /// The plugin's own error status, for [`FailureCode::PluginError`].
    pub plugin_status: Option<u16>,
}

impl Failure {
    fn new(code: FailureCode, message: String) -> Failure {
        Failure {
            code,
            message,
            retry_after: None,
            plugin_status: None,
        }
    }

    fn retry_after(mut self, seconds: u64) -> Failure {
        self.retry_after = Some(seconds);
        self
    }
}

/// The container of the target's plugin could not be had.
pub fn of_start(target: &Target, e: &StartError) -> Failure {
    let (plugin, chat) = (target.plugin_name(), &target.chat);
    match e {
        StartError::CannotStart(why) => Failure::new(
            FailureCode::CannotStart,
            format!("the container of plugin {plugin} in chat {chat} cannot start: {why}"),
        ),
        StartError::QueueFull(n) => Failure::new(
            FailureCode::QueueFull,
            format!(
                "{n} calls already wait for the container of plugin {plugin} in chat {chat} to start"
            ),
        )
        .retry_after(1),
        StartError::Timeout {
            limit,
            instance_says,
        } => {
            let why = instance_says
                .as_ref()
                .map(|m| format!(" (the instance says: {m})"))
                .unwrap_or_default();
            Failure::new(
                FailureCode::StartTimeout,
                format!(
                    "the container of plugin {plugin} in chat {chat} did not become Ready within {}{why}",
                    seconds(*limit)
                ),
            )
            .retry_after(5)
        }
        StartError::Unavailable(why) => {
            Failure::new(FailureCode::Unavailable, why.clone()).retry_after(1)
        }
        StartError::NotRunning => Failure::new(
            FailureCode::Unavailable,
            format!("the container of plugin {plugin} in chat {chat} is not running"),
        ),
        StartError::WatchGone => {
            Failure::new(FailureCode::Internal, "the Pod watch went away".into())
        }
    }
}

/// The call, named `what`, was made but brought no answer.
pub fn of_call(what: &str, failure: &CallFailure) -> Failure {
    match failure {
        CallFailure::BreakerOpen { retry_after } => Failure::new(
            FailureCode::BreakerOpen,
            format!(
                "{what} was not called: its container left 3 calls in a row unanswered, so \
                 the host stops calling it for a while (next try in {})",
                seconds(*retry_after)
            ),
        )
        .retry_after(whole_seconds(*retry_after)),
        CallFailure::TimedOut(limit) => Failure::new(
            FailureCode::PluginTimeout,
            format!("{what} did not answer within {}", seconds(*limit)),
        ),
        CallFailure::Refused(why) => Failure::new(
            FailureCode::PluginUnreachable,
            format!("{what} could not be reached: {why}"),
        ),
        CallFailure::TooLarge { cap } => Failure::new(
            FailureCode::AnswerTooLarge,
            format!("{what} answered more than {cap} bytes; the host refuses it"),
        ),
        CallFailure::Broken(why) => Failure::new(
            FailureCode::InvalidAnswer,
            format!("{what}'s answer broke off: {why}"),
        ),
    }
}

/// The call, named `what`, brought no usable answer.
pub fn of_error(target: &Target, what: &str, e: &CallError) -> Failure {
    match e {
        CallError::Start(e) => of_start(target, e),
        CallError::Plugin(failure) => of_call(what, failure),
    }
}

/// The plugin answered the call, named `what`, with an error status.
pub fn of_answer(what: &str, answer: &PluginAnswer) -> Failure {
    let mut f = Failure::new(
        FailureCode::PluginError,
        format!(
            "{what} answered {}: {}",
            answer.status.as_u16(),
            answer.error_text()
        ),
    );
    f.plugin_status = Some(answer.status.as_u16());
    f
}

fn whole_seconds(d: Duration) -> u64 {
    d.as_secs_f64().ceil() as u64
}
