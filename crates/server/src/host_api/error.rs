//! The host API's one error shape, the Plugin API's too: `{"error": {"code", "message"}}`,
//! with a machine-readable code from [`Code`] (each with its one status) and a message that
//! names the field or the container and the reason.

use axum::http::StatusCode;

use crate::calls::failure::{Failure, FailureCode};
use crate::delivery::target::TargetError;
use crate::http::ErrorAnswer;
pub use crate::http::ErrorCode;
use crate::tool_calls::ToolCallError;

/// Every error code the host API answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    /// No `Authorization: Bearer` header.
    MissingToken,
    /// The token is not one the cluster accepts (TokenReview).
    InvalidToken,
    /// RBAC does not let the caller do this (SubjectAccessReview).
    Forbidden,
    /// The body is not JSON, or not of the route's shape, or breaks one of its rules.
    InvalidBody,
    BodyTooLarge,
    /// No route has this path.
    NotFound,
    MethodNotAllowed,
    ChannelNotFound,
    PluginNotFound,
    ActionNotFound,
    ToolNotFound,
    AgentNotFound,
    SwitchNotFound,
    /// No live control request of that id waits for an answer (answered, or lapsed).
    RequestNotFound,
    /// The chat has no quality scan yet.
    ScanNotFound,
    /// The agent's manifest entry does not give it the tool.
    ToolNotGiven,
    /// The chat's project does not enable the plugin (or plugins are off, or the chat runs
    /// none: a hidden thread, a Slack or Discord chat).
    PluginNotEnabled,
    /// The controller has not made the instance (or its Secret) yet; try again.
    InstancePending,
    /// Too many calls already wait for this container to start.
    QueueFull,
    /// The container did not become Ready in time.
    StartTimeout,
    /// The controller cannot run the container (its instance's Ready condition says why).
    CannotStart,
    /// The breaker in front of the container is open.
    BreakerOpen,
    /// The plugin did not answer within the call's time limit.
    PluginTimeout,
    /// The plugin refused the connection (or dropped it before answering).
    PluginUnreachable,
    /// The plugin answered with an error status.
    PluginError,
    /// The plugin's answer is over the route's cap.
    AnswerTooLarge,
    /// The plugin's answer is not of the contract's shape.
    InvalidAnswer,
    /// Tool input its `input_schema` refuses (only in an `is_error` tool result).
    InputInvalid,
    /// `structured_content` its `output_schema` refuses (only in an `is_error` tool result).
    OutputInvalid,
    /// No ToolCallApproval of that name in the namespace.
    ApprovalNotFound,
    /// No agent run of that id in the chat.
    RunNotFound,
    /// The approval is a call in another chat than the route's.
    ApprovalOtherChat,
    /// The approval was already decided (a decision is taken once).
    ApprovalDecided,
    /// The approval's deadline passed: the call was denied.
    ApprovalExpired,
    /// An agent's call that needed a person's approval did not get it (only in an `is_error`
    /// tool result).
    ApprovalDenied,
    /// No Project of that name in the namespace.
    ProjectNotFound,
    /// The plugin is installed but not admitted: its manifest, and so its settings, are not
    /// known.
    PluginNotAdmitted,
    /// The config changed since the caller read it (a trust of an older version, a write
    /// that lost a race): read it again.
    ConfigChanged,
    /// The image to upgrade to could not be read from its registry, or is not a plugin
    /// image (unreachable, not found, unauthorized, refused by the image checks).
    ImageUnreadable,
    /// The upgrade would not be admitted (its stage and why), or its manifest names another
    /// plugin, or an approval names a capability it does not declare.
    UpgradeRefused,
    /// A Kubernetes call failed (a review, a write); try again.
    Unavailable,
    /// A bug: never answered on purpose.
    Internal,
}

impl Code {
    /// Every code, for the spec check.
    pub const ALL: [Code; 42] = [
        Code::MissingToken,
        Code::InvalidToken,
        Code::Forbidden,
        Code::InvalidBody,
        Code::BodyTooLarge,
        Code::NotFound,
        Code::MethodNotAllowed,
        Code::ChannelNotFound,
        Code::PluginNotFound,
        Code::ActionNotFound,
        Code::ToolNotFound,
        Code::AgentNotFound,
        Code::SwitchNotFound,
        Code::RequestNotFound,
        Code::ScanNotFound,
        Code::ToolNotGiven,
        Code::PluginNotEnabled,
        Code::InstancePending,
        Code::QueueFull,
        Code::StartTimeout,
        Code::CannotStart,
        Code::BreakerOpen,
        Code::PluginTimeout,
        Code::PluginUnreachable,
        Code::PluginError,
        Code::AnswerTooLarge,
        Code::InvalidAnswer,
        Code::InputInvalid,
        Code::OutputInvalid,
        Code::ApprovalNotFound,
        Code::RunNotFound,
        Code::ApprovalOtherChat,
        Code::ApprovalDecided,
        Code::ApprovalExpired,
        Code::ApprovalDenied,
        Code::ProjectNotFound,
        Code::PluginNotAdmitted,
        Code::ConfigChanged,
        Code::ImageUnreadable,
        Code::UpgradeRefused,
        Code::Unavailable,
        Code::Internal,
    ];
}

impl ErrorCode for Code {
    fn as_str(self) -> &'static str {
        match self {
            Code::MissingToken => "missing_token",
            Code::InvalidToken => "invalid_token",
            Code::Forbidden => "forbidden",
            Code::InvalidBody => "invalid_body",
            Code::BodyTooLarge => "body_too_large",
            Code::NotFound => "not_found",
            Code::MethodNotAllowed => "method_not_allowed",
            Code::ChannelNotFound => "channel_not_found",
            Code::PluginNotFound => "plugin_not_found",
            Code::ActionNotFound => "action_not_found",
            Code::ToolNotFound => "tool_not_found",
            Code::AgentNotFound => "agent_not_found",
            Code::SwitchNotFound => "switch_not_found",
            Code::RequestNotFound => "request_not_found",
            Code::ScanNotFound => "scan_not_found",
            Code::ToolNotGiven => "tool_not_given",
            Code::PluginNotEnabled => "plugin_not_enabled",
            Code::InstancePending => "instance_pending",
            Code::QueueFull => "queue_full",
            Code::StartTimeout => "start_timeout",
            Code::CannotStart => "cannot_start",
            Code::BreakerOpen => "breaker_open",
            Code::PluginTimeout => "plugin_timeout",
            Code::PluginUnreachable => "plugin_unreachable",
            Code::PluginError => "plugin_error",
            Code::AnswerTooLarge => "answer_too_large",
            Code::InvalidAnswer => "invalid_answer",
            Code::InputInvalid => "input_invalid",
            Code::OutputInvalid => "output_invalid",
            Code::ApprovalNotFound => "approval_not_found",
            Code::RunNotFound => "run_not_found",
            Code::ApprovalOtherChat => "approval_other_chat",
            Code::ApprovalDecided => "approval_decided",
            Code::ApprovalExpired => "approval_expired",
            Code::ApprovalDenied => crate::tool_calls::approval::APPROVAL_DENIED,
            Code::ProjectNotFound => "project_not_found",
            Code::PluginNotAdmitted => "plugin_not_admitted",
            Code::ConfigChanged => "config_changed",
            Code::ImageUnreadable => "image_unreadable",
            Code::UpgradeRefused => "upgrade_refused",
            Code::Unavailable => "unavailable",
            Code::Internal => "internal",
        }
    }

    fn status(self) -> StatusCode {
        match self {
            Code::MissingToken | Code::InvalidToken => StatusCode::UNAUTHORIZED,
            Code::Forbidden | Code::ToolNotGiven | Code::ApprovalDenied => StatusCode::FORBIDDEN,
            Code::InvalidBody => StatusCode::BAD_REQUEST,
            Code::BodyTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Code::NotFound
            | Code::ChannelNotFound
            | Code::PluginNotFound
            | Code::ActionNotFound
            | Code::ToolNotFound
            | Code::AgentNotFound
            | Code::SwitchNotFound
            | Code::RequestNotFound
            | Code::ProjectNotFound
            | Code::ScanNotFound
            | Code::ApprovalNotFound
            | Code::RunNotFound => StatusCode::NOT_FOUND,
            Code::ApprovalOtherChat | Code::ApprovalDecided | Code::ApprovalExpired => {
                StatusCode::CONFLICT
            }
            Code::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Code::PluginNotEnabled | Code::PluginNotAdmitted | Code::ConfigChanged => {
                StatusCode::CONFLICT
            }
            Code::InputInvalid | Code::OutputInvalid | Code::UpgradeRefused => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            Code::InstancePending
            | Code::QueueFull
            | Code::StartTimeout
            | Code::CannotStart
            | Code::BreakerOpen
            | Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::PluginTimeout => StatusCode::GATEWAY_TIMEOUT,
            Code::PluginUnreachable
            | Code::PluginError
            | Code::AnswerTooLarge
            | Code::InvalidAnswer
            | Code::ImageUnreadable => StatusCode::BAD_GATEWAY,
            Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The code for an error status made outside the handlers (a rejection, a layer).
    fn for_status(status: StatusCode) -> Code {
        match status {
            StatusCode::UNAUTHORIZED => Code::MissingToken,
            StatusCode::FORBIDDEN => Code::Forbidden,
            StatusCode::NOT_FOUND => Code::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => Code::MethodNotAllowed,
            StatusCode::PAYLOAD_TOO_LARGE => Code::BodyTooLarge,
            StatusCode::GATEWAY_TIMEOUT => Code::PluginTimeout,
            StatusCode::SERVICE_UNAVAILABLE => Code::Unavailable,
            s if s.is_client_error() => Code::InvalidBody,
            _ => Code::Internal,
        }
    }
}

/// An error answer of the host API.
pub type HostError = ErrorAnswer<Code>;

pub type HostResult<T> = Result<T, HostError>;

/// A chat, plugin or instance a call cannot go to: 404 for what does not exist, 409 for a
/// plugin the chat's project does not run, 503 (with a moment's wait) for what the controller
/// has not made yet.
impl From<TargetError> for HostError {
    fn from(e: TargetError) -> Self {
        let code = match &e {
            TargetError::ChatNotFound { .. } => Code::ChannelNotFound,
            TargetError::PluginNotFound { .. } => Code::PluginNotFound,
            TargetError::PluginsOff
            | TargetError::NotAdmitted { .. }
            | TargetError::Disabled(_) => Code::PluginNotEnabled,
            TargetError::Pending { .. } => Code::InstancePending,
        };
        let answer = HostError::new(code, e.to_string());
        match e {
            TargetError::Pending { .. } => answer.retry_after(1),
            _ => answer,
        }
    }
}

/// A tool call the manifest does not allow.
impl From<ToolCallError> for HostError {
    fn from(e: ToolCallError) -> Self {
        let code = match &e {
            ToolCallError::ToolNotFound { .. } => Code::ToolNotFound,
            ToolCallError::AgentNotFound { .. } => Code::AgentNotFound,
            ToolCallError::ToolNotGiven { .. } => Code::ToolNotGiven,
            ToolCallError::Invalid(_) => Code::InvalidBody,
        };
        HostError::new(code, e.to_string())
    }
}

/// A call to a plugin that failed, as the host API answers it: the failure's code, its
/// message, and when to try again.
impl From<Failure> for HostError {
    fn from(f: Failure) -> Self {
        let code = match f.code {
            FailureCode::QueueFull => Code::QueueFull,
            FailureCode::StartTimeout => Code::StartTimeout,
            FailureCode::CannotStart => Code::CannotStart,
            FailureCode::Unavailable => Code::Unavailable,
            FailureCode::Internal => Code::Internal,
            FailureCode::BreakerOpen => Code::BreakerOpen,
            FailureCode::PluginTimeout => Code::PluginTimeout,
            FailureCode::PluginUnreachable => Code::PluginUnreachable,
            FailureCode::PluginError => Code::PluginError,
            FailureCode::AnswerTooLarge => Code::AnswerTooLarge,
            FailureCode::InvalidAnswer => Code::InvalidAnswer,
        };
        let mut answer = HostError::new(code, f.message);
        if let Some(seconds) = f.retry_after {
            answer = answer.retry_after(seconds);
        }
        answer.plugin_status = f.plugin_status;
        answer
    }
}

#[cfg(test)]
mod tests {
    use axum::http::header;
    use axum::response::IntoResponse;

    use super::*;

    #[test]
    fn codes_are_distinct_and_listed() {
        let names: std::collections::BTreeSet<_> = Code::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), Code::ALL.len());
    }

    #[test]
    fn a_target_that_cannot_be_had_answers_its_code_and_message() {
        use crate::delivery::target::{Disabled, Missing};
        let pending = HostError::from(TargetError::Pending {
            missing: Missing::Secret,
            plugin: "echo".into(),
            chat: "general".into(),
        });
        assert_eq!(
            (pending.code, pending.status(), pending.message.as_str()),
            (
                Code::InstancePending,
                StatusCode::SERVICE_UNAVAILABLE,
                "the controller has not made the Secret of plugin echo in chat general yet"
            )
        );
        let r = pending.into_response();
        assert_eq!(r.headers()[header::RETRY_AFTER], "1");
        let hidden = HostError::from(TargetError::from(Disabled::HiddenThread {
            chat: "general-h".into(),
        }));
        assert_eq!(
            (hidden.code, hidden.message.as_str()),
            (
                Code::PluginNotEnabled,
                "chat general-h is a hidden thread: plugins are not called there"
            )
        );
        let missing = HostError::from(TargetError::ChatNotFound {
            namespace: "team".into(),
            name: "nowhere".into(),
        });
        assert_eq!(
            (missing.code, missing.message.as_str()),
            (
                Code::ChannelNotFound,
                "no Channel nowhere in namespace team"
            )
        );
        let r = missing.into_response();
        assert!(r.headers().get(header::RETRY_AFTER).is_none());
    }

    #[test]
    fn an_answer_carries_its_code_status_and_headers() {
        let r = HostError::new(Code::BreakerOpen, "open")
            .retry_after(12)
            .into_response();
        assert_eq!(r.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(r.headers()[header::RETRY_AFTER], "12");
        let r = HostError::new(Code::MissingToken, "no token").into_response();
        assert_eq!(r.headers()[header::WWW_AUTHENTICATE], "Bearer");
    }
}
