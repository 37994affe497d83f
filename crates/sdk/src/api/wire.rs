//! The bodies of the Plugin API (`openapi/plugin-api-v1.yaml`), as serde types. Written by
//! hand like the contract's ([`crate::wire`]) and held to the spec the same way:
//! `tests/api_drift.rs` compares every schema's properties and required fields, and the error
//! codes with their statuses, both ways.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// `GET /channel`: the chat the token is held to, and the plugin's settings in its project.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Channel {
    /// The chat's name.
    pub id: String,
    pub kind: ChatKind,
    /// A thread's or worktree thread's channel; `None` for a channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    pub project: String,
    pub app: App,
    /// Each setting that has a value, by name.
    pub settings: Map<String, Value>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ChatKind {
    Channel,
    Thread,
    Worktree,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum App {
    Desktop,
    Slack,
    Discord,
}

/// `POST /runs`'s body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRequest {
    /// An agent `id` of the manifest.
    pub agent: String,
    /// The whole prompt, at most [`MAX_PROMPT`](super::limits::MAX_PROMPT) bytes.
    pub prompt: String,
}

/// A run as `POST /runs` and `GET /runs/{run_id}` answer it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub id: String,
    pub agent: String,
    /// `plugin:<id>`, the chat's hidden thread.
    pub thread: String,
    pub read_only: bool,
    /// The MCP tools the agent gets, `plugin_<tool>`.
    pub tools: Vec<String>,
    pub status: RunState,
    /// The final answer or error, once the run ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// `POST /runs/{run_id}/done` reached the plugin.
    pub done_delivered: bool,
    /// RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunState {
    Queued,
    Running,
    Succeeded,
    Failed,
}

impl RunState {
    pub fn ended(self) -> bool {
        matches!(self, RunState::Succeeded | RunState::Failed)
    }
}

/// `PUT /composer/switches/{id}`'s body.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SwitchRequest {
    pub on: bool,
    /// The tooltip; the manifest's title without one.
    #[serde(default)]
    pub title: Option<String>,
    /// Shows the pill red.
    #[serde(default)]
    pub error: bool,
    /// Shows the pill with a dashed border.
    #[serde(default)]
    pub busy: bool,
}

/// A switch's pill as the chat shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Switch {
    pub id: String,
    pub on: bool,
    pub title: Option<String>,
    pub error: bool,
    pub busy: bool,
}

/// `POST /cards`'s body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CardRequest {
    /// A card `id` from the manifest's `ui.cards`.
    pub card: String,
    pub title: String,
    /// Any JSON value; the page reads it with `context.get`. `{}` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

/// `POST /notifications`'s body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct NotificationRequest {
    pub title: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<Level>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Level {
    #[default]
    Info,
    Success,
    Warning,
    Error,
}

/// A card or a notification, as answered.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InboxEntry {
    /// `card-<16 hex>` or `note-<16 hex>`.
    pub id: String,
    pub kind: InboxKind,
    /// The manifest's card id (cards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub card: Option<String>,
    pub title: String,
    /// The card's data (cards).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// The notification's text (notifications).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<Level>,
    /// RFC 3339.
    pub created: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InboxKind {
    Card,
    Notification,
}

/// `POST /channel/live/control`'s body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LiveControlRequest {
    /// One of the manifest's `live.control`.
    pub subtype: String,
    /// The control request's own fields; `{}` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<Map<String, Value>>,
}

/// The live session's response to a control request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LiveControlAnswer {
    pub subtype: String,
    pub response: Value,
}

/// `PUT /channel/live/hold`'s body and answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hold {
    pub hold: bool,
}

/// `PUT /memory/{key}`'s body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryWrite {
    /// Any JSON value, `null` included.
    pub value: Value,
}

/// A memory key's value.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemoryEntry {
    pub key: String,
    pub value: Value,
}

/// `GET /settings/secrets/{name}`: a secret setting's value, as read from its Secret by this
/// call.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct SecretSetting {
    /// The setting's name.
    pub name: String,
    pub value: String,
    /// The Secret's `resourceVersion` the value was read at: another one means it was
    /// rotated.
    pub revision: String,
}

impl std::fmt::Debug for SecretSetting {
    /// Without the value, so a debug print or a log line does not show it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SecretSetting")
            .field("name", &self.name)
            .field("value", &"<not shown>")
            .field("revision", &self.revision)
            .finish()
    }
}

/// A function of the chat's latest quality scan, as the app measured it. `score` orders them:
/// the higher, the worse ([`Hotspot::worst_first`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hotspot {
    /// Its file, relative to the chat's working tree (what `GET /files/{path}` reads).
    pub file: String,
    pub name: String,
    /// The line it starts on, from 1.
    pub line: u32,
    /// Its cyclomatic complexity.
    pub complexity: u32,
    /// How many lines it spans.
    pub lines: u32,
    /// How bad it is, as the app's scanner scores it: the higher, the worse.
    pub score: f64,
}

impl Hotspot {
    /// The order hotspots are kept and answered in: the highest score first, then the most
    /// complex, the longest, then by file, name and line (a total order, so a page never
    /// depends on the order the app listed them in).
    pub fn worst_first(a: &Hotspot, b: &Hotspot) -> std::cmp::Ordering {
        b.score
            .total_cmp(&a.score)
            .then(b.complexity.cmp(&a.complexity))
            .then(b.lines.cmp(&a.lines))
            .then_with(|| a.file.cmp(&b.file))
            .then_with(|| a.name.cmp(&b.name))
            .then(a.line.cmp(&b.line))
    }
}

/// A quality scan's totals: the files and functions it measured, and any other number the
/// app's scanner reports (`lines`, `average_complexity`, ...), by name.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ScanTotals {
    pub files: u64,
    /// Every function the scan measured (the scan's hotspots are the worst of them).
    pub functions: u64,
    #[serde(flatten)]
    pub other: std::collections::BTreeMap<String, serde_json::Number>,
}

/// `GET /hotspots`: the worst functions of the chat's latest quality scan, worst first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hotspots {
    pub functions: Vec<Hotspot>,
    /// The commit the scan measured, when the app named one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// When the host stored the scan, RFC 3339.
    pub scanned_at: String,
}

impl Hotspots {
    /// The worst `limit` of `functions` (kept worst first).
    pub fn worst(
        functions: &[Hotspot],
        limit: usize,
        commit: Option<String>,
        scanned_at: String,
    ) -> Self {
        Hotspots {
            functions: functions.iter().take(limit).cloned().collect(),
            commit,
            scanned_at,
        }
    }
}

/// `GET /hotspots/page`: a page of the chat's latest quality scan's functions, worst first,
/// with the scan's totals.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HotspotsPage {
    pub functions: Vec<Hotspot>,
    pub offset: u64,
    pub limit: u32,
    /// How many functions the host holds of the scan (the worst; `totals.functions` says how
    /// many it measured): a page past it is empty.
    pub total: u64,
    pub totals: ScanTotals,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// When the host stored the scan, RFC 3339.
    pub scanned_at: String,
}

impl HotspotsPage {
    /// The page of `functions` (kept worst first) that `query` asks for.
    pub fn of(
        functions: &[Hotspot],
        query: super::limits::HotspotsQuery,
        totals: ScanTotals,
        commit: Option<String>,
        scanned_at: String,
    ) -> Self {
        let start = usize::try_from(query.offset).unwrap_or(usize::MAX);
        HotspotsPage {
            functions: functions
                .iter()
                .skip(start)
                .take(query.limit as usize)
                .cloned()
                .collect(),
            offset: query.offset,
            limit: query.limit,
            total: functions.len() as u64,
            totals,
            commit,
            scanned_at,
        }
    }
}

/// Every error answer: `{"error": {"code", "message"}}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorDetail {
    pub code: ErrorCode,
    /// Names the field and the reason.
    pub message: String,
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            error: ErrorDetail {
                code,
                message: message.into(),
            },
        }
    }
}

macro_rules! error_codes {
    ($($variant:ident = $name:literal => $status:literal,)*) => {
        /// A machine-readable reason; each code comes with one status.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum ErrorCode {
            $($variant,)*
        }

        impl ErrorCode {
            pub const ALL: &[ErrorCode] = &[$(ErrorCode::$variant,)*];

            /// The wire name.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(ErrorCode::$variant => $name,)*
                }
            }

            /// The one HTTP status this code comes with.
            pub const fn status(self) -> u16 {
                match self {
                    $(ErrorCode::$variant => $status,)*
                }
            }
        }
    };
}

error_codes! {
    InvalidBody = "invalid_body" => 400,
    InvalidPath = "invalid_path" => 400,
    InvalidKey = "invalid_key" => 400,
    InvalidQuery = "invalid_query" => 400,
    MissingToken = "missing_token" => 401,
    MalformedToken = "malformed_token" => 401,
    InvalidToken = "invalid_token" => 401,
    CapabilityNotApproved = "capability_not_approved" => 403,
    OutsideWorkingTree = "outside_working_tree" => 403,
    SubtypeNotDeclared = "subtype_not_declared" => 403,
    NotFound = "not_found" => 404,
    RunNotFound = "run_not_found" => 404,
    CardNotFound = "card_not_found" => 404,
    SwitchNotFound = "switch_not_found" => 404,
    FileNotFound = "file_not_found" => 404,
    MemoryNotFound = "memory_not_found" => 404,
    NoWorkingTree = "no_working_tree" => 404,
    SettingNotFound = "setting_not_found" => 404,
    SecretNotSet = "secret_not_set" => 404,
    ScanNotFound = "scan_not_found" => 404,
    MethodNotAllowed = "method_not_allowed" => 405,
    PluginNotEnabled = "plugin_not_enabled" => 409,
    NotLive = "not_live" => 409,
    SecretUnavailable = "secret_unavailable" => 409,
    BodyTooLarge = "body_too_large" => 413,
    FileTooLarge = "file_too_large" => 413,
    MemoryFull = "memory_full" => 413,
    UnknownAgent = "unknown_agent" => 422,
    UnknownCard = "unknown_card" => 422,
    InvalidStep = "invalid_step" => 422,
    NotARegularFile = "not_a_regular_file" => 422,
    DailyRunsExceeded = "daily_runs_exceeded" => 429,
    Unavailable = "unavailable" => 503,
    Timeout = "timeout" => 504,
    Internal = "internal" => 500,
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
