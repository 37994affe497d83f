//! Calls to a plugin's container: `Authorization: Bearer <secret>` on every request, the
//! call's time limit, and a cap on the answer's size. What went wrong is told apart the way
//! the breaker needs it: a call the container left unanswered (refused, or no answer in time)
//! from one it answered, whatever the answer.

use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode, header};
use tokio::time::Instant;

use super::breaker::Outcome;
use super::config::CallKind;
use crate::index::Endpoint;

/// A request to a plugin.
#[derive(Clone, Debug)]
pub struct PluginRequest {
    pub kind: CallKind,
    pub method: Method,
    /// The path and query, from `/`.
    pub path: String,
    pub content_type: Option<HeaderValue>,
    pub body: Bytes,
    pub timeout: Duration,
    /// The largest answer taken.
    pub answer_cap: usize,
}

impl PluginRequest {
    /// A JSON `POST` of `body`, written straight from it (no `Value` made on the way).
    pub fn json(
        kind: CallKind,
        path: String,
        body: &impl serde::Serialize,
        timeout: Duration,
        answer_cap: usize,
    ) -> Self {
        Self {
            kind,
            method: Method::POST,
            path,
            content_type: Some(HeaderValue::from_static("application/json")),
            // Only a map with keys other than strings fails, and no request body has one.
            body: Bytes::from(serde_json::to_vec(body).expect("a request body is JSON")),
            timeout,
            answer_cap,
        }
    }
}

/// A plugin's answer.
#[derive(Clone, Debug)]
pub struct PluginAnswer {
    pub status: StatusCode,
    pub content_type: Option<HeaderValue>,
    pub body: Bytes,
}

impl PluginAnswer {
    /// The `error` of an `Error` body, or the body's text.
    pub fn error_text(&self) -> String {
        let parsed: Option<serde_json::Value> = serde_json::from_slice(&self.body).ok();
        let text = match parsed.as_ref().and_then(|v| v.get("error")) {
            Some(serde_json::Value::String(s)) => s.clone(),
            Some(other) => other.to_string(),
            None => String::from_utf8_lossy(&self.body).into_owned(),
        };
        let text = text.trim();
        let mut short: String = text.chars().take(500).collect();
        if short.len() < text.len() {
            short.push('…');
        }
        short
    }
}

/// Why a call brought no usable answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CallFailure {
    /// The breaker is open: the call was not made.
    BreakerOpen { retry_after: Duration },
    /// The container refused the connection (or dropped it before answering).
    Refused(String),
    /// No answer within the time limit.
    TimedOut(Duration),
    /// The answer was over the cap.
    TooLarge { cap: usize },
    /// The answer began but its body broke off (the connection closed or failed); one that
    /// stalls past the limit is `TimedOut`.
    Broken(String),
}

impl CallFailure {
    /// What the call tells the breaker.
    pub fn outcome(&self) -> Outcome {
        match self {
            CallFailure::Refused(_) | CallFailure::TimedOut(_) => Outcome::Unanswered,
            CallFailure::TooLarge { .. } | CallFailure::Broken(_) => Outcome::Answered,
            CallFailure::BreakerOpen { .. } => Outcome::Abandoned,
        }
    }

    /// A label for metrics.
    pub fn label(&self) -> &'static str {
        match self {
            CallFailure::BreakerOpen { .. } => "breaker_open",
            CallFailure::Refused(_) => "refused",
            CallFailure::TimedOut(_) => "timeout",
            CallFailure::TooLarge { .. } => "too_large",
            CallFailure::Broken(_) => "broken",
        }
    }
}

/// The HTTP client for plugin calls: connections kept per container, no proxy.
#[derive(Clone)]
pub struct PluginClient {
    http: reqwest::Client,
}

impl PluginClient {
    pub fn new() -> Self {
        let http = reqwest::Client::builder()
            .no_proxy()
            .pool_idle_timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(5))
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .expect("a plain HTTP client builds");
        Self { http }
    }

    /// Makes the call; an answer of any status is `Ok`.
    pub async fn send(
        &self,
        endpoint: &Endpoint,
        secret: &str,
        request: &PluginRequest,
    ) -> Result<PluginAnswer, CallFailure> {
        let deadline = Instant::now() + request.timeout;
        let url = format!("http://{}{}", endpoint.addr, request.path);
        let mut builder = self
            .http
            .request(request.method.clone(), url)
            .bearer_auth(secret)
            .body(request.body.clone());
        if let Some(ct) = &request.content_type {
            builder = builder.header(header::CONTENT_TYPE, ct.clone());
        }
        let sent = tokio::time::timeout_at(deadline, builder.send()).await;
        let mut response = match sent {
            Err(_) => return Err(CallFailure::TimedOut(request.timeout)),
            Ok(Err(e)) if e.is_timeout() => return Err(CallFailure::TimedOut(request.timeout)),
            Ok(Err(e)) => return Err(CallFailure::Refused(describe(&e))),
            Ok(Ok(r)) => r,
        };
        let status = response.status();
        let content_type = response.headers().get(header::CONTENT_TYPE).cloned();
        if response
            .content_length()
            .is_some_and(|n| n > request.answer_cap as u64)
        {
            return Err(CallFailure::TooLarge {
                cap: request.answer_cap,
            });
        }
        let mut body = Vec::new();
        loop {
            let chunk = tokio::time::timeout_at(deadline, response.chunk()).await;
            match chunk {
                // The answer began but did not end within the limit: as unanswered as one that
                // never began, for the caller and for the breaker.
                Err(_) => return Err(CallFailure::TimedOut(request.timeout)),
                Ok(Err(e)) => return Err(CallFailure::Broken(describe(&e))),
                Ok(Ok(None)) => break,
                Ok(Ok(Some(bytes))) => {
                    if body.len() + bytes.len() > request.answer_cap {
                        return Err(CallFailure::TooLarge {
                            cap: request.answer_cap,
                        });
                    }
                    body.extend_from_slice(&bytes);
                }
            }
        }
        Ok(PluginAnswer {
            status,
            content_type,
            body: Bytes::from(body),
        })
    }
}

impl Default for PluginClient {
    fn default() -> Self {
        Self::new()
    }
}

/// An error with its causes.
fn describe(e: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// A duration as people read it: `10s`, `1.5s`.
pub fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{}s", s as u64)
    } else {
        format!("{s:.1}s")
    }
}
