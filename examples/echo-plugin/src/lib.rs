//! The echo plugin, on the SDK: every route of the plugin contract, answered for whatever
//! manifest the image carries, with a journal of what reached it and a hang tests arm to
//! trip the host's time limits. README.md has the routes and the journal's format.
//!
//! | manifest | handler |
//! |---|---|
//! | every action | `ping` reads `GET /channel` (its settings too) and journals the answer; `tick` and the rest only log |
//! | every tool | `echo` answers its `text` as text and as `{"echo": text}`; another is an `is_error` result |
//! | every composer switch | on or off per chat, kept in `/data/switches.json`; the title says which |
//! | events | `settings.changed` updates `verbose` (log every request) |
//! | run ends | logged |
//!
//! Around every route, once the secret is checked ([`Plugin::middleware`]): the request goes
//! to the journal ([`journal`]), then sleeps if a hang is armed for it ([`hang`]). Under `/x`:
//! `GET`/`DELETE /x/journal`, `POST /x/hang`, and an echo of any other request.

pub mod hang;
pub mod journal;
pub mod switches;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{OriginalUri, Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use loop_plugin_sdk::api::{Client, Error as ApiError};
use loop_plugin_sdk::manifest::Manifest;
use loop_plugin_sdk::{
    ActionContext, ActionRequest, Background, Event, Plugin, RunDone, SwitchRequest, SwitchState,
    ToolError, ToolRequest, ToolResult,
};
use serde_json::{Map, Value, json};

use hang::{Hang, HangRequest, Kind};
use journal::{Entry, Journal, MAX_BODY};
use switches::Switches;

/// `plugin.json` as shipped in this crate: the manifest when the image has none.
pub const BUILTIN: &str = include_str!("../plugin.json");

/// What the handlers share.
struct Echo {
    journal: Journal,
    hang: Hang,
    switches: Switches,
    /// The `verbose` setting: log every request.
    verbose: AtomicBool,
    api: Option<Client>,
}

/// The plugin: `api` is the Plugin API (none when run by hand), `data` its volume, where the
/// journal and the switches are kept.
pub fn plugin(manifest: Manifest, api: Option<Client>, data: &Path) -> std::io::Result<Plugin> {
    let verbose = manifest
        .settings
        .get("verbose")
        .and_then(|s| s.get("default"));
    let echo = Arc::new(Echo {
        journal: Journal::open(data)?,
        hang: Hang::default(),
        switches: Switches::open(data),
        verbose: AtomicBool::new(verbose.and_then(Value::as_bool).unwrap_or(false)),
        api,
    });
    let mut plugin = Plugin::new(manifest.clone());
    for action in &manifest.actions {
        let echo = echo.clone();
        plugin = plugin.action(&action.id, move |req, cx| {
            let echo = echo.clone();
            async move { echo.act(req, cx).await }
        });
    }
    for tool in &manifest.tools {
        let name = tool.name.clone();
        plugin = plugin.tool(&tool.name, move |req: ToolRequest| {
            let name = name.clone();
            tracing::info!(
                tool = name,
                agent = req.agent,
                thread_id = req.thread_id,
                run_id = req.run_id,
                "tool call"
            );
            async move {
                match name.as_str() {
                    "echo" => echo_tool(&req.input),
                    _ => Err(ToolError::new(format!(
                        "{name}: declared in the manifest but not implemented"
                    ))),
                }
            }
        });
    }
    for switch in &manifest.ui.composer_switches {
        let (echo, id, label) = (echo.clone(), switch.id.clone(), switch.label.clone());
        plugin = plugin.switch(&switch.id, move |req: SwitchRequest| {
            let thread = req.thread_id.unwrap_or_default();
            tracing::info!(switch = id, thread, on = req.on, "switch set");
            let state = echo.switches.set(&id, &label, &thread, req.on);
            async move {
                state.unwrap_or_else(|e| SwitchState {
                    on: req.on,
                    error: Some(format!("saving the switch: {e}")),
                    ..Default::default()
                })
            }
        });
    }
    let (events, around) = (echo.clone(), echo.clone());
    let background = plugin.background();
    let x = Router::new()
        .route("/journal", get(read_journal).delete(clear_journal))
        .route("/hang", post(arm_hang))
        .route("/{*path}", any(echo_back))
        .with_state(echo);
    Ok(plugin
        .on_event(move |event: Event| {
            if event.kind == "settings.changed" {
                events.update_settings(&event.data["settings"]);
            }
            tracing::debug!(event = event.kind, thread_id = ?event.thread_id, "event taken");
            async {}
        })
        .on_run_done(run_ended)
        .middleware(move |req, next| {
            journal_and_hang(around.clone(), background.clone(), req, next)
        })
        .x(x))
}

async fn run_ended(run_id: String, done: RunDone) {
    let (status, result, error) = (done.status, done.result, done.error);
    tracing::info!(run_id, ?status, ?result, ?error, "agent run ended");
}

/// `echo`: `{"text": s}` answers `s` as text and `{"echo": s}` as structured content.
pub fn echo_tool(input: &Map<String, Value>) -> Result<ToolResult, ToolError> {
    match input.get("text") {
        Some(Value::String(text)) => Ok(ToolResult {
            structured_content: Some(Map::from_iter([("echo".into(), json!(text))])),
            ..ToolResult::text(text)
        }),
        Some(_) => Err(ToolError::new("input.text: expected a string")),
        None => Err(ToolError::new("input.text: missing")),
    }
}

impl Echo {
    async fn act(&self, req: ActionRequest, cx: ActionContext) {
        let action = cx.action.as_str();
        let (trigger, task_id, run_id) = (req.trigger, req.task_id, req.run_id);
        tracing::info!(action, ?trigger, ?task_id, ?run_id, "action accepted");
        tokio::select! {
            () = cx.cancelled.cancelled() => tracing::warn!(action, "action cut short by shutdown"),
            () = async {
                match action {
                    "ping" => self.ping().await,
                    "tick" => tracing::info!("tick"),
                    _ => tracing::info!(action, "nothing to do"),
                }
            } => {}
        }
    }

    /// Reads the channel and its settings, and journals the answer as a `loop_api` entry:
    /// its status (and body), or the error when nothing answered.
    async fn ping(&self) {
        let Some(api) = &self.api else {
            tracing::debug!("no Plugin API configured; ping does nothing more");
            return;
        };
        let mut entry = Entry::new("loop_api", "GET", "/api/plugin/v1/channel", None, b"");
        match api.channel().await {
            Ok(channel) => {
                self.update_settings(&Value::Object(channel.settings.clone()));
                entry = entry.answered(200, &serde_json::to_vec(&channel).unwrap_or_default());
            }
            Err(ApiError::Status(e)) => {
                let body = json!({ "error": { "code": e.code, "message": e.message } });
                entry = entry.answered(e.status, &serde_json::to_vec(&body).unwrap_or_default());
            }
            Err(e) => entry.error = Some(e.to_string()),
        }
        if let Err(e) = self.journal.append(&entry) {
            tracing::error!(error = %e, "writing the journal");
        }
    }

    /// Takes `{"verbose": bool, ...}`; a setting absent or of another type keeps its value.
    fn update_settings(&self, settings: &Value) {
        if let Some(v) = settings.get("verbose").and_then(Value::as_bool) {
            self.verbose.store(v, Ordering::Relaxed);
        }
    }
}

/// Journals the request (up to [`MAX_BODY`], 413 past it; reading the journal isn't
/// journaled), then sleeps when a hang is armed for it: until the hang ends or shutdown
/// begins.
async fn journal_and_hang(
    echo: Arc<Echo>,
    background: Background,
    req: Request,
    next: Next,
) -> Response {
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, MAX_BODY).await else {
        return error(StatusCode::PAYLOAD_TOO_LARGE, "body: over 8 MB");
    };
    let route = parts.uri.path();
    if !(parts.method == Method::GET && route == "/x/journal") {
        let entry = Entry::new(
            "request",
            parts.method.as_str(),
            route,
            parts.uri.query(),
            &bytes,
        );
        if echo.verbose.load(Ordering::Relaxed) {
            tracing::info!(method = %parts.method, route, size = bytes.len(), "request");
        }
        if let Err(e) = echo.journal.append(&entry) {
            tracing::error!(error = %e, "writing the journal");
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("writing the journal: {e}"),
            );
        }
    }
    if let Some(sleep) = Kind::of(route).and_then(|kind| echo.hang.take(kind)) {
        tracing::info!(route, ?sleep, "hanging as asked");
        tokio::select! {
            () = tokio::time::sleep(sleep) => {}
            () = background.shutting_down() => {}
        }
    }
    next.run(Request::from_parts(parts, Body::from(bytes)))
        .await
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    (status, axum::Json(json!({ "error": message.into() }))).into_response()
}

/// `GET /x/journal`: `{"entries": [...]}`.
async fn read_journal(State(echo): State<Arc<Echo>>) -> Response {
    match echo.journal.entries() {
        Ok(entries) => axum::Json(json!({ "entries": entries })).into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `DELETE /x/journal`: empties it.
async fn clear_journal(State(echo): State<Arc<Echo>>) -> Response {
    match echo.journal.clear() {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => error(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
    }
}

/// `POST /x/hang`: arms the hang (an empty body takes every default); answers what is armed.
async fn arm_hang(State(echo): State<Arc<Echo>>, body: Bytes) -> Response {
    let body: &[u8] = if body.is_empty() { b"{}" } else { &body };
    let armed = serde_json::from_slice::<HangRequest>(body)
        .map_err(|e| format!("body: {e}"))
        .and_then(|req| echo.hang.arm(&req));
    match armed {
        Ok(armed) => {
            tracing::info!(?armed, "hang armed");
            axum::Json(armed).into_response()
        }
        Err(why) => error(StatusCode::BAD_REQUEST, why),
    }
}

/// Any other `/x` request: its body and `Content-Type` back, with `x-echo-method` and
/// `x-echo-path` (the whole path, `/x/...`).
async fn echo_back(
    method: Method,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let mut res = Response::new(Body::from(body));
    let h = res.headers_mut();
    if let Some(ct) = headers.get(header::CONTENT_TYPE) {
        h.insert(header::CONTENT_TYPE, ct.clone());
    }
    for (name, value) in [
        ("x-echo-method", method.as_str()),
        ("x-echo-path", uri.path()),
    ] {
        if let Ok(v) = HeaderValue::from_str(value) {
            h.insert(name, v);
        }
    }
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn echo_answers_text_and_structured_content() {
        let r = echo_tool(&input(json!({"text": "hi"}))).unwrap();
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"content": [{"type": "text", "text": "hi"}], "structured_content": {"echo": "hi"}, "is_error": false})
        );
        let err = |v| echo_tool(&input(v)).unwrap_err().to_string();
        assert_eq!(err(json!({"text": 3})), "input.text: expected a string");
        assert_eq!(err(json!({})), "input.text: missing");
    }

    #[test]
    fn the_builtin_manifest_is_the_crates() {
        let m = loop_plugin_sdk::manifest::parse_str(BUILTIN).unwrap();
        assert_eq!(m.id, "echo");
        assert_eq!(
            m.version,
            env!("CARGO_PKG_VERSION"),
            "manifest and crate versions differ"
        );
        for s in &m.ui.composer_switches {
            let icon = Path::new(env!("CARGO_MANIFEST_DIR")).join(&s.icon);
            assert!(icon.exists(), "{}", icon.display());
        }
    }
}
