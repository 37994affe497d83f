//! [`Client`]: the Plugin API, `$LOOP_API_URL/api/plugin/v1/...` with the chat's token.

use std::path::PathBuf;
use std::time::Duration;

use reqwest::Method;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::limits::REQUEST_TIMEOUT;
use super::ui_command::{self, UiCommandAnswer, UiCommandRequest};
use super::wire::{
    CardRequest, Channel, ErrorBody, ErrorCode, Hold, Hotspots, HotspotsPage, InboxEntry,
    LiveControlAnswer, LiveControlRequest, MemoryEntry, MemoryWrite, NotificationRequest, Run,
    RunRequest, SecretSetting, Switch, SwitchRequest,
};
use crate::env::{API_URL, Env, EnvError, TOKEN_FILE, read_trimmed};

/// How long a call may take, unless it is one the host itself waits on.
pub const TIMEOUT: Duration = Duration::from_secs(10);
/// How long [`Client::live_control`] waits: as long as the host waits for the live session
/// ([`REQUEST_TIMEOUT`]), and a little more, so the host's own `504 timeout` arrives first.
pub const LIVE_CONTROL_TIMEOUT: Duration = REQUEST_TIMEOUT.saturating_add(Duration::from_secs(5));

/// A Plugin API client. Cheap to clone; clones share one connection pool.
#[derive(Clone, Debug)]
pub struct Client {
    base: String,
    token: Token,
    http: reqwest::Client,
}

#[derive(Clone, Debug)]
enum Token {
    /// `LOOP_PLUGIN_TOKEN_FILE`, read afresh on every call: the host rotates it.
    File(PathBuf),
    Fixed(String),
}

/// A call that did not answer 2xx, or could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Status(#[from] StatusError),
    #[error("the Plugin API token: {0}")]
    Token(#[source] EnvError),
    #[error("{route}: {source}")]
    Transport {
        route: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{route}: the answer is not a {what}: {source}")]
    Decode {
        route: String,
        what: &'static str,
        #[source]
        source: serde_json::Error,
    },
    #[error("building the Plugin API client: {0}")]
    Build(#[source] reqwest::Error),
}

/// A non-2xx answer: its status and, when the body is the API's error shape, its code and
/// message.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
#[error("{route} answered {status}{}: {message}", code.map(|c| format!(" {c}")).unwrap_or_default())]
pub struct StatusError {
    /// `METHOD /path`.
    pub route: String,
    pub status: u16,
    pub code: Option<ErrorCode>,
    pub message: String,
    /// `Retry-After` (429 `daily_runs_exceeded`).
    pub retry_after: Option<Duration>,
}

impl Error {
    /// The answer's status, when there was one.
    pub fn status(&self) -> Option<u16> {
        match self {
            Error::Status(e) => Some(e.status),
            _ => None,
        }
    }

    /// Whether the host answered `status`.
    pub fn has_status(&self, status: u16) -> bool {
        self.status() == Some(status)
    }

    /// The answer's error code, when there was one.
    pub fn code(&self) -> Option<ErrorCode> {
        match self {
            Error::Status(e) => e.code,
            _ => None,
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why [`Client::from_env`] could not make a client.
#[derive(Debug, thiserror::Error)]
pub enum FromEnvError {
    #[error(transparent)]
    Env(#[from] EnvError),
    #[error(transparent)]
    Client(#[from] Error),
}

impl Client {
    /// The client of the plugin's environment: [`Env::api_url`] with the token of
    /// [`Env::token_file`].
    pub fn from_env(env: &Env) -> Result<Self, FromEnvError> {
        let url = env.api_url.as_deref().ok_or(EnvError::Missing(API_URL))?;
        let token = env
            .token_file
            .clone()
            .ok_or(EnvError::Missing(TOKEN_FILE))?;
        Ok(Client::new(url, token)?)
    }

    /// `base` is `LOOP_API_URL`; the token is read from `token_file` on every call.
    pub fn new(base: &str, token_file: impl Into<PathBuf>) -> Result<Self> {
        Self::with(base, Token::File(token_file.into()))
    }

    /// A client with a fixed token (tests, tools).
    pub fn with_token(base: &str, token: impl Into<String>) -> Result<Self> {
        Self::with(base, Token::Fixed(token.into()))
    }

    fn with(base: &str, token: Token) -> Result<Self> {
        // reqwest's TLS provider, installed on the library's side because the SDK cannot know
        // its binary: a plugin author's main may never install one (ours do, at the top of
        // main; installing again does nothing). ring's, as everywhere in loop-plugins (no
        // aws-lc build). rustls 0.23.48 deprecates it for lacking post-quantum key exchange;
        // the Plugin API in a cluster is plain HTTP, and TLS to it, where used, stays classical.
        #[allow(deprecated)]
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder().timeout(TIMEOUT);
        // The API in a cluster is a plain-HTTP Service, which needs no root certificates; an
        // image FROM scratch has none, and the platform verifier refuses to start without.
        if base.starts_with("http://") {
            builder = builder.tls_certs_only([]);
        }
        Ok(Client {
            base: base.trim_end_matches('/').to_string(),
            token,
            http: builder.build().map_err(Error::Build)?,
        })
    }

    /// The URL of a route (`path` starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}/api/plugin/v1{path}", self.base)
    }

    /// `GET /channel`: the chat and the plugin's settings in its project.
    pub async fn channel(&self) -> Result<Channel> {
        self.json(Method::GET, "/channel", None::<&()>, TIMEOUT)
            .await
    }

    /// `POST /runs`: starts a run of one of the manifest's agents in the chat's hidden thread.
    pub async fn start_run(&self, agent: &str, prompt: &str) -> Result<Run> {
        let body = RunRequest {
            agent: agent.into(),
            prompt: prompt.into(),
        };
        self.json(Method::POST, "/runs", Some(&body), TIMEOUT).await
    }

    /// `GET /runs/{run_id}`.
    pub async fn run(&self, run_id: &str) -> Result<Run> {
        let path = format!("/runs/{}", segment(run_id));
        self.json(Method::GET, &path, None::<&()>, TIMEOUT).await
    }

    /// `PUT /composer/switches/{id}`: the pill as the chat shows it now.
    pub async fn set_switch(&self, id: &str, state: &SwitchRequest) -> Result<Switch> {
        let path = format!("/composer/switches/{}", segment(id));
        self.json(Method::PUT, &path, Some(state), TIMEOUT).await
    }

    /// `DELETE /composer/switches/{id}`: forgets the switch's state in this chat.
    pub async fn reset_switch(&self, id: &str) -> Result<Switch> {
        let path = format!("/composer/switches/{}", segment(id));
        self.json(Method::DELETE, &path, None::<&()>, TIMEOUT).await
    }

    /// `POST /cards`: a card in the chat's drawer.
    pub async fn post_card(&self, card: &CardRequest) -> Result<InboxEntry> {
        self.json(Method::POST, "/cards", Some(card), TIMEOUT).await
    }

    /// `GET /cards/{id}`.
    pub async fn card(&self, id: &str) -> Result<InboxEntry> {
        let path = format!("/cards/{}", segment(id));
        self.json(Method::GET, &path, None::<&()>, TIMEOUT).await
    }

    /// `POST /notifications`.
    pub async fn notify(&self, notification: &NotificationRequest) -> Result<InboxEntry> {
        self.json(Method::POST, "/notifications", Some(notification), TIMEOUT)
            .await
    }

    /// `POST /channel/live/control`: waits as long as the host waits for the live session
    /// ([`LIVE_CONTROL_TIMEOUT`]), past [`TIMEOUT`].
    pub async fn live_control(&self, request: &LiveControlRequest) -> Result<LiveControlAnswer> {
        self.json(
            Method::POST,
            "/channel/live/control",
            Some(request),
            LIVE_CONTROL_TIMEOUT,
        )
        .await
    }

    /// `POST /ui/commands`: carries out `command`'s steps in the app showing the chat, and
    /// answers what became of each. Waits as long as the command's timeout, and a little more,
    /// past [`TIMEOUT`], so the host's own `504 timeout` (no app answered) arrives first.
    pub async fn run_ui(&self, command: &UiCommandRequest) -> Result<UiCommandAnswer> {
        let wait = command
            .timeout_seconds
            .map(Duration::from_secs)
            .unwrap_or(ui_command::DEFAULT_TIMEOUT)
            .min(ui_command::MAX_TIMEOUT)
            .saturating_add(Duration::from_secs(5));
        self.json(Method::POST, "/ui/commands", Some(command), wait)
            .await
    }

    /// `PUT /channel/live/hold`: the hold now.
    pub async fn hold(&self, hold: bool) -> Result<bool> {
        let answer: Hold = self
            .json(
                Method::PUT,
                "/channel/live/hold",
                Some(&Hold { hold }),
                TIMEOUT,
            )
            .await?;
        Ok(answer.hold)
    }

    /// `GET /files/{path}`: a file of the chat's working tree, whole.
    pub async fn read_file(&self, path: &str) -> Result<Vec<u8>> {
        // Sent whole as one segment (`/` as `%2F`, which the API takes): a URL keeps no
        // `..` segment as written, so a path the host must refuse would not reach it.
        let route = format!("/files/{}", segment(path));
        let res = self.send(Method::GET, &route, None::<&()>, TIMEOUT).await?;
        let what = format!("GET {route}");
        let bytes = res.bytes().await.map_err(|source| Error::Transport {
            route: what,
            source,
        })?;
        Ok(bytes.to_vec())
    }

    /// `GET /memory/{key}`: the value, or `None` for a key never written.
    pub async fn memory(&self, key: &str) -> Result<Option<Value>> {
        let path = format!("/memory/{}", segment(key));
        match self
            .json::<MemoryEntry>(Method::GET, &path, None::<&()>, TIMEOUT)
            .await
        {
            Ok(entry) => Ok(Some(entry.value)),
            Err(e) if e.code() == Some(ErrorCode::MemoryNotFound) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `PUT /memory/{key}`.
    pub async fn remember(&self, key: &str, value: Value) -> Result<MemoryEntry> {
        let path = format!("/memory/{}", segment(key));
        self.json(Method::PUT, &path, Some(&MemoryWrite { value }), TIMEOUT)
            .await
    }

    /// `GET /hotspots?limit=`: the worst `limit` functions (1 to
    /// [`MAX_HOTSPOTS`](super::limits::MAX_HOTSPOTS)) of the chat's latest quality scan, worst
    /// first, or `None` while the chat has no scan (`scan_not_found`). Needs `files.read`.
    pub async fn hotspots(&self, limit: u32) -> Result<Option<Hotspots>> {
        let path = format!("/hotspots?limit={limit}");
        none_when_no_scan(self.json(Method::GET, &path, None::<&()>, TIMEOUT).await)
    }

    /// `GET /hotspots/page?offset=&limit=`: `limit` functions (1 to
    /// [`MAX_HOTSPOTS`](super::limits::MAX_HOTSPOTS)) of the chat's latest quality scan from
    /// the `offset`-th worst on, with the scan's totals, or `None` while the chat has no scan
    /// (`scan_not_found`). Needs `files.read`.
    pub async fn hotspots_page(&self, offset: u64, limit: u32) -> Result<Option<HotspotsPage>> {
        let path = format!("/hotspots/page?offset={offset}&limit={limit}");
        none_when_no_scan(self.json(Method::GET, &path, None::<&()>, TIMEOUT).await)
    }

    /// `GET /settings/secrets/{name}`: a secret setting's value, read from its Secret now (call
    /// it at each point of use: a rotation shows on the next call), or `None` when neither the
    /// project nor the global config references a Secret for it (`secret_not_set`).
    pub async fn secret_setting(&self, name: &str) -> Result<Option<SecretSetting>> {
        let path = format!("/settings/secrets/{}", segment(name));
        match self
            .json::<SecretSetting>(Method::GET, &path, None::<&()>, TIMEOUT)
            .await
        {
            Ok(secret) => Ok(Some(secret)),
            Err(e) if e.code() == Some(ErrorCode::SecretNotSet) => Ok(None),
            Err(e) => Err(e),
        }
    }

    async fn json<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Option<&impl Serialize>,
        timeout: Duration,
    ) -> Result<T> {
        let route = format!("{method} {path}");
        let res = self.send(method, path, body, timeout).await?;
        let bytes = res.bytes().await.map_err(|source| Error::Transport {
            route: route.clone(),
            source,
        })?;
        serde_json::from_slice(&bytes).map_err(|source| Error::Decode {
            route,
            what: std::any::type_name::<T>()
                .rsplit("::")
                .next()
                .unwrap_or("value"),
            source,
        })
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<&impl Serialize>,
        timeout: Duration,
    ) -> Result<reqwest::Response> {
        let route = format!("{method} {path}");
        let token = match &self.token {
            Token::File(file) => read_trimmed(file).map_err(Error::Token)?,
            Token::Fixed(token) => token.clone(),
        };
        let mut req = self
            .http
            .request(method, self.url(path))
            .bearer_auth(token)
            .timeout(timeout);
        if let Some(body) = body {
            req = req.json(body);
        }
        let res = req.send().await.map_err(|source| Error::Transport {
            route: route.clone(),
            source,
        })?;
        if res.status().is_success() {
            return Ok(res);
        }
        let status = res.status().as_u16();
        let retry_after = res
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse().ok())
            .map(Duration::from_secs);
        let bytes = res.bytes().await.unwrap_or_default();
        let (code, message) = match serde_json::from_slice::<ErrorBody>(&bytes) {
            Ok(body) => (Some(body.error.code), body.error.message),
            Err(_) => (None, String::from_utf8_lossy(&bytes).trim().to_string()),
        };
        Err(StatusError {
            route,
            status,
            code,
            message,
            retry_after,
        }
        .into())
    }
}

/// `None` for the chat's having no quality scan yet.
fn none_when_no_scan<T>(answer: Result<T>) -> Result<Option<T>> {
    match answer {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.code() == Some(ErrorCode::ScanNotFound) => Ok(None),
        Err(e) => Err(e),
    }
}

/// One path segment, percent-encoded.
fn segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_percent_encoded() {
        assert_eq!(segment("last-quiz.v1_x~"), "last-quiz.v1_x~");
        assert_eq!(segment("a b/c"), "a%20b%2Fc");
    }

    #[test]
    fn a_status_error_reads_as_route_status_code_and_message() {
        let e = Error::from(StatusError {
            route: "POST /runs".into(),
            status: 422,
            code: Some(ErrorCode::UnknownAgent),
            message: "agent \"x\" is not one of the manifest's agents".into(),
            retry_after: None,
        });
        assert_eq!(
            e.to_string(),
            "POST /runs answered 422 unknown_agent: agent \"x\" is not one of the manifest's agents"
        );
        assert!(e.has_status(422));
        assert_eq!(e.code(), Some(ErrorCode::UnknownAgent));
    }

    #[test]
    fn live_control_waits_past_the_hosts_own_limit() {
        assert!(LIVE_CONTROL_TIMEOUT > REQUEST_TIMEOUT);
        assert!(LIVE_CONTROL_TIMEOUT > TIMEOUT);
    }
}
