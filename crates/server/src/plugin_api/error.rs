//! The one error shape of the Plugin API: `{"error": {"code": "...", "message": "..."}}`, with a
//! machine-readable code from [`Code`] and a message that names the field and the reason.

use axum::http::StatusCode;

use crate::http::ErrorAnswer;
pub use crate::http::ErrorCode;

/// Every error code the Plugin API answers, each with its one status: the SDK's, so the
/// host and the fake host plugin authors test against answer the same codes.
pub use sdk::api::ErrorCode as Code;

impl ErrorCode for Code {
    fn as_str(self) -> &'static str {
        Code::as_str(self)
    }

    fn status(self) -> StatusCode {
        StatusCode::from_u16(Code::status(self)).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
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
        for &c in Code::ALL {
            assert!(
                c.as_str()
                    .chars()
                    .all(|ch| ch.is_ascii_lowercase() || ch == '_'),
                "{c:?}"
            );
            let status = <Code as ErrorCode>::status(c);
            assert!(status.is_client_error() || status.is_server_error());
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
