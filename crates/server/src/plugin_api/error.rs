//! The one error shape of the Plugin API: `{"error": {"code": "...", "message": "..."}}`, with a
//! machine-readable code from [`Code`] and a message that names the field and the reason.

use axum::http::StatusCode;

use crate::http::ErrorAnswer;
pub use crate::http::ErrorCode;

/// Every error code the Plugin API answers, each with its one status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Code {
    /// The body is not JSON, or not of the route's shape.
    InvalidBody,
    /// A `files` path that is empty, absolute, or has `.`/`..` or empty components.
    InvalidPath,
    /// A memory key outside `[A-Za-z0-9._-]{1,128}`.
    InvalidKey,
    /// No `Authorization: Bearer` header.
    MissingToken,
    /// An `Authorization` header that is not `Bearer <token>`.
    MalformedToken,
    /// A token no live instance holds (unknown, or its instance was removed).
    InvalidToken,
    /// The route needs a capability the owner did not approve.
    CapabilityNotApproved,
    /// A `files` path that resolves outside the chat's working tree (through a symlink).
    OutsideWorkingTree,
    /// No route has this path.
    NotFound,
    RunNotFound,
    CardNotFound,
    SwitchNotFound,
    FileNotFound,
    MemoryNotFound,
    /// The chat has no working tree.
    NoWorkingTree,
    MethodNotAllowed,
    /// The chat's project does not enable the plugin (or plugins are off, or the chat runs none).
    PluginNotEnabled,
    /// The chat has no live session to control.
    NotLive,
    BodyTooLarge,
    FileTooLarge,
    /// The plugin's memory in this project holds as many keys as it may.
    MemoryFull,
    /// `agent` is not one of the manifest's agents.
    UnknownAgent,
    /// `card` is not one of the manifest's `ui.cards`.
    UnknownCard,
    /// A live control subtype the manifest's `live.control` does not list.
    SubtypeNotDeclared,
    /// A `files` path that is a directory, a fifo, a device or a socket.
    NotARegularFile,
    /// The plugin started `daily_runs` runs in the last 24 hours.
    DailyRunsExceeded,
    /// A write to the cluster failed; try again.
    Unavailable,
    /// The request ran out of time.
    Timeout,
    /// A bug: never answered on purpose.
    Internal,
}

impl Code {
    /// Every code, for the spec check.
    pub const ALL: [Code; 29] = [
        Code::InvalidBody,
        Code::InvalidPath,
        Code::InvalidKey,
        Code::MissingToken,
        Code::MalformedToken,
        Code::InvalidToken,
        Code::CapabilityNotApproved,
        Code::OutsideWorkingTree,
        Code::NotFound,
        Code::RunNotFound,
        Code::CardNotFound,
        Code::SwitchNotFound,
        Code::FileNotFound,
        Code::MemoryNotFound,
        Code::NoWorkingTree,
        Code::MethodNotAllowed,
        Code::PluginNotEnabled,
        Code::NotLive,
        Code::BodyTooLarge,
        Code::FileTooLarge,
        Code::MemoryFull,
        Code::UnknownAgent,
        Code::UnknownCard,
        Code::SubtypeNotDeclared,
        Code::NotARegularFile,
        Code::DailyRunsExceeded,
        Code::Unavailable,
        Code::Timeout,
        Code::Internal,
    ];
}

impl ErrorCode for Code {
    fn as_str(self) -> &'static str {
        match self {
            Code::InvalidBody => "invalid_body",
            Code::InvalidPath => "invalid_path",
            Code::InvalidKey => "invalid_key",
            Code::MissingToken => "missing_token",
            Code::MalformedToken => "malformed_token",
            Code::InvalidToken => "invalid_token",
            Code::CapabilityNotApproved => "capability_not_approved",
            Code::OutsideWorkingTree => "outside_working_tree",
            Code::NotFound => "not_found",
            Code::RunNotFound => "run_not_found",
            Code::CardNotFound => "card_not_found",
            Code::SwitchNotFound => "switch_not_found",
            Code::FileNotFound => "file_not_found",
            Code::MemoryNotFound => "memory_not_found",
            Code::NoWorkingTree => "no_working_tree",
            Code::MethodNotAllowed => "method_not_allowed",
            Code::PluginNotEnabled => "plugin_not_enabled",
            Code::NotLive => "not_live",
            Code::BodyTooLarge => "body_too_large",
            Code::FileTooLarge => "file_too_large",
            Code::MemoryFull => "memory_full",
            Code::UnknownAgent => "unknown_agent",
            Code::UnknownCard => "unknown_card",
            Code::SubtypeNotDeclared => "subtype_not_declared",
            Code::NotARegularFile => "not_a_regular_file",
            Code::DailyRunsExceeded => "daily_runs_exceeded",
            Code::Unavailable => "unavailable",
            Code::Timeout => "timeout",
            Code::Internal => "internal",
        }
    }

    fn status(self) -> StatusCode {
        match self {
            Code::InvalidBody | Code::InvalidPath | Code::InvalidKey => StatusCode::BAD_REQUEST,
            Code::MissingToken | Code::MalformedToken | Code::InvalidToken => {
                StatusCode::UNAUTHORIZED
            }
            Code::CapabilityNotApproved | Code::OutsideWorkingTree => StatusCode::FORBIDDEN,
            Code::NotFound
            | Code::RunNotFound
            | Code::CardNotFound
            | Code::SwitchNotFound
            | Code::FileNotFound
            | Code::MemoryNotFound
            | Code::NoWorkingTree => StatusCode::NOT_FOUND,
            Code::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Code::PluginNotEnabled | Code::NotLive => StatusCode::CONFLICT,
            Code::BodyTooLarge | Code::FileTooLarge | Code::MemoryFull => {
                StatusCode::PAYLOAD_TOO_LARGE
            }
            Code::UnknownAgent
            | Code::UnknownCard
            | Code::SubtypeNotDeclared
            | Code::NotARegularFile => StatusCode::UNPROCESSABLE_ENTITY,
            Code::DailyRunsExceeded => StatusCode::TOO_MANY_REQUESTS,
            Code::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Code::Timeout => StatusCode::GATEWAY_TIMEOUT,
            Code::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The code a bare status stands for, for answers made outside a handler (a timeout, a
    /// body limit, an unknown route).
    fn for_status(status: StatusCode) -> Code {
        match status {
            StatusCode::NOT_FOUND => Code::NotFound,
            StatusCode::METHOD_NOT_ALLOWED => Code::MethodNotAllowed,
            StatusCode::PAYLOAD_TOO_LARGE => Code::BodyTooLarge,
            StatusCode::REQUEST_TIMEOUT | StatusCode::GATEWAY_TIMEOUT => Code::Timeout,
            StatusCode::UNAUTHORIZED => Code::InvalidToken,
            StatusCode::SERVICE_UNAVAILABLE => Code::Unavailable,
            s if s.is_client_error() => Code::InvalidBody,
            _ => Code::Internal,
        }
    }
}

/// An error answer of the Plugin API.
pub type ApiError = ErrorAnswer<Code>;

/// What a handler answers.
pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn codes_are_distinct_snake_case_and_map_to_one_status() {
        let names: HashSet<_> = Code::ALL.iter().map(|c| c.as_str()).collect();
        assert_eq!(names.len(), Code::ALL.len());
        for c in Code::ALL {
            assert!(
                c.as_str()
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch == '_'),
                "{c:?}"
            );
            assert!(c.status().is_client_error() || c.status().is_server_error());
        }
    }

    #[test]
    fn bare_statuses_get_a_code() {
        assert_eq!(Code::for_status(StatusCode::NOT_FOUND), Code::NotFound);
        assert_eq!(
            Code::for_status(StatusCode::PAYLOAD_TOO_LARGE),
            Code::BodyTooLarge
        );
        assert_eq!(Code::for_status(StatusCode::REQUEST_TIMEOUT), Code::Timeout);
    }
}
