//! The secret check: every request must carry `Authorization: Bearer <secret>`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use crate::error::ApiError;

/// The shared secret, from `LOOP_PLUGIN_SECRET_FILE`.
#[derive(Clone)]
pub struct Secret(Arc<[u8]>);

impl Secret {
    pub fn new(secret: &str) -> Self {
        Self(secret.as_bytes().into())
    }

    /// Whether `presented` is the secret, in time that doesn't depend on where they differ.
    pub fn matches(&self, presented: &[u8]) -> bool {
        bool::from(self.0.as_ref().ct_eq(presented))
    }
}

/// The credentials of an `Authorization: Bearer <credentials>` header (the scheme's case
/// doesn't matter).
pub fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii())
}

/// Middleware: 401 for any request without the secret, on every route.
pub async fn require_secret(State(secret): State<Secret>, req: Request, next: Next) -> Response {
    match bearer(req.headers()) {
        Some(presented) if secret.matches(presented) => next.run(req).await,
        _ => {
            let mut res = ApiError::new(StatusCode::UNAUTHORIZED, "missing or wrong bearer secret")
                .into_response();
            res.headers_mut()
                .insert(header::WWW_AUTHENTICATE, "Bearer".parse().expect("static"));
            res
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, auth.parse().unwrap());
        h
    }

    #[test]
    fn bearer_credentials() {
        assert_eq!(bearer(&headers("Bearer abc")), Some(&b"abc"[..]));
        assert_eq!(bearer(&headers("bearer abc")), Some(&b"abc"[..]));
        assert_eq!(bearer(&headers("Basic abc")), None);
        assert_eq!(bearer(&headers("Bearer")), None);
        assert_eq!(bearer(&HeaderMap::new()), None);
    }

    #[test]
    fn only_the_exact_secret_matches() {
        let s = Secret::new("s3cret");
        assert!(s.matches(b"s3cret"));
        assert!(!s.matches(b"s3cre"));
        assert!(!s.matches(b"s3cret!"));
        assert!(!s.matches(b"S3cret"));
        assert!(!s.matches(b""));
    }
}
