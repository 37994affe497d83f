//! The fake host's routes: [`ROUTES`] is the table of what each needs (held to the spec's
//! `x-loop-capability` by `tests/api_drift.rs`), and one handler checks every call in the
//! spec's order (401, 409, 403, then the route's own answers) before the route runs.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use manifest::Capability;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{Refusal, Shared, StartedRun, StoredScan};
use crate::api::limits::{self, check_length};
use crate::api::ui_command::{self, UiCommandAnswer, UiCommandRequest};
use crate::api::wire::{
    CardRequest, ErrorBody, ErrorCode, Hold, Hotspots, HotspotsPage, InboxEntry, InboxKind,
    LiveControlAnswer, LiveControlRequest, MemoryEntry, MemoryWrite, NotificationRequest, Run,
    RunRequest, RunState, Switch, SwitchRequest,
};

/// What a route needs approved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs {
    Nothing,
    One(Capability),
    /// Either one (`POST /runs`: then the agent decides which).
    Either(Capability, Capability),
}

/// A route of the Plugin API: its method, its path as the spec writes it, what it needs.
#[derive(Clone, Copy, Debug)]
pub struct Route {
    pub method: &'static str,
    pub path: &'static str,
    pub needs: Needs,
}

const AGENT: Needs = Needs::Either(Capability::AgentReadonly, Capability::AgentWrite);

/// Every route the Plugin API serves.
pub const ROUTES: &[Route] = &[
    route("GET", "/channel", Needs::Nothing),
    route("POST", "/runs", AGENT),
    route("GET", "/runs/{run_id}", AGENT),
    route(
        "PUT",
        "/composer/switches/{id}",
        Needs::One(Capability::UiComposerSwitch),
    ),
    route(
        "DELETE",
        "/composer/switches/{id}",
        Needs::One(Capability::UiComposerSwitch),
    ),
    route("POST", "/cards", Needs::One(Capability::UiNotificationCard)),
    route(
        "GET",
        "/cards/{id}",
        Needs::One(Capability::UiNotificationCard),
    ),
    route(
        "POST",
        "/notifications",
        Needs::One(Capability::NotificationsSend),
    ),
    route(
        "POST",
        "/channel/live/control",
        Needs::One(Capability::LiveControl),
    ),
    route(
        "PUT",
        "/channel/live/hold",
        Needs::One(Capability::LiveControl),
    ),
    route("GET", "/files/{path}", Needs::One(Capability::FilesRead)),
    route("GET", "/hotspots", Needs::One(Capability::FilesRead)),
    route("GET", "/hotspots/page", Needs::One(Capability::FilesRead)),
    route("GET", "/memory/{key}", Needs::One(Capability::MemoryRead)),
    route("PUT", "/memory/{key}", Needs::One(Capability::MemoryWrite)),
    route(
        "GET",
        "/settings/secrets/{name}",
        Needs::One(Capability::SecretsRead),
    ),
    route("POST", "/ui/commands", Needs::One(Capability::UiCommand)),
];

const fn route(method: &'static str, path: &'static str, needs: Needs) -> Route {
    Route {
        method,
        path,
        needs,
    }
}

const PREFIX: &str = "/api/plugin/v1";

pub(super) fn router(shared: Arc<Shared>) -> Router {
    Router::new().fallback(handle).with_state(shared)
}

/// A refusal: its code (which carries the status) and message.
struct Refused(ErrorCode, String);

type Answer = Result<Response, Refused>;

fn ok<T: Serialize>(value: &T) -> Answer {
    Ok((StatusCode::OK, axum::Json(value)).into_response())
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let route = format!("{method} {}", uri.path());
    match call(&shared, &method, &uri, &headers, body).await {
        Ok(answer) => answer,
        Err(Refused(code, message)) => {
            shared.recorded().refusals.push(Refusal {
                route,
                code,
                message: message.clone(),
            });
            let status = StatusCode::from_u16(code.status()).unwrap_or(StatusCode::BAD_REQUEST);
            let mut res = (status, axum::Json(ErrorBody::new(code, message))).into_response();
            if status == StatusCode::UNAUTHORIZED {
                res.headers_mut()
                    .insert(header::WWW_AUTHENTICATE, "Bearer".parse().unwrap());
            }
            res
        }
    }
}

async fn call(
    shared: &Shared,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: Body,
) -> Answer {
    authenticate(shared, headers)?;
    let rest = uri.path().strip_prefix(PREFIX).unwrap_or("");
    let (route, param) = find(method.as_str(), rest)?;
    let config = &shared.config;
    if !config.enabled {
        return Err(Refused(
            ErrorCode::PluginNotEnabled,
            format!(
                "project {} does not enable plugin {}",
                config.channel.project, config.manifest.id
            ),
        ));
    }
    match route.needs {
        Needs::Nothing => {}
        Needs::One(c) => require(shared, c)?,
        Needs::Either(a, b) => {
            if !config.allows(a) && !config.allows(b) {
                require(shared, a)?;
            }
        }
    }
    let body = axum::body::to_bytes(body, limits::MAX_BODY_BYTES)
        .await
        .map_err(|_| {
            Refused(
                ErrorCode::BodyTooLarge,
                format!("the body is over {} bytes", limits::MAX_BODY_BYTES),
            )
        })?;
    let param = param.as_deref().unwrap_or("");
    match (route.method, route.path) {
        ("GET", "/channel") => ok(&config.channel),
        ("POST", "/runs") => start_run(shared, &body),
        ("GET", "/runs/{run_id}") => get_run(shared, param),
        ("PUT", "/composer/switches/{id}") => set_switch(shared, param, Some(&body)),
        ("DELETE", "/composer/switches/{id}") => set_switch(shared, param, None),
        ("POST", "/cards") => post_card(shared, &body),
        ("GET", "/cards/{id}") => get_card(shared, param),
        ("POST", "/notifications") => notify(shared, &body),
        ("POST", "/channel/live/control") => live_control(shared, &body),
        ("PUT", "/channel/live/hold") => {
            let req: Hold = json_body(&body)?;
            shared.recorded().holds.push(req.hold);
            ok(&req)
        }
        ("GET", "/files/{path}") => read_file(shared, param),
        ("GET", "/hotspots") => hotspots(shared, uri.query(), false),
        ("GET", "/hotspots/page") => hotspots(shared, uri.query(), true),
        ("GET", "/memory/{key}") => get_memory(shared, param),
        ("PUT", "/memory/{key}") => put_memory(shared, param, &body),
        ("GET", "/settings/secrets/{name}") => get_secret(shared, param),
        ("POST", "/ui/commands") => run_ui(shared, &body),
        _ => unreachable!("every route of ROUTES is handled"),
    }
}

fn authenticate(shared: &Shared, headers: &HeaderMap) -> Result<(), Refused> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(Refused(
            ErrorCode::MissingToken,
            "no Authorization: Bearer header".into(),
        ));
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| v.strip_prefix("Bearer "))
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            Refused(
                ErrorCode::MalformedToken,
                "the Authorization header is not Bearer <token>".into(),
            )
        })?;
    if token != shared.token {
        return Err(Refused(
            ErrorCode::InvalidToken,
            "the token is not this chat's".into(),
        ));
    }
    Ok(())
}

/// The route `method rest` names, and its path parameter (percent-decoded).
fn find(method: &str, rest: &str) -> Result<(&'static Route, Option<String>), Refused> {
    let mut allowed = false;
    for route in ROUTES {
        let Some(param) = matches(route.path, rest) else {
            continue;
        };
        if route.method == method {
            return Ok((route, param));
        }
        allowed = true;
    }
    Err(if allowed {
        Refused(
            ErrorCode::MethodNotAllowed,
            format!("{method} is not allowed on {rest}"),
        )
    } else {
        Refused(ErrorCode::NotFound, format!("no route {rest}"))
    })
}

/// `Some(param)` when `path` fits `template`; `{path}` takes the rest, `/`s included.
fn matches(template: &str, path: &str) -> Option<Option<String>> {
    let (fixed, param) = match template.find('{') {
        Some(at) => (&template[..at], true),
        None => (template, false),
    };
    if !param {
        return (path == fixed).then_some(None);
    }
    let value = path.strip_prefix(fixed)?;
    let multi = template.ends_with("{path}");
    if value.is_empty() || (!multi && value.contains('/')) {
        return None;
    }
    Some(Some(percent_decode(value)?))
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn require(shared: &Shared, capability: Capability) -> Result<(), Refused> {
    if shared.config.allows(capability) {
        return Ok(());
    }
    let why = if shared.config.manifest.capabilities.contains(&capability) {
        "the owner did not approve it"
    } else {
        "the manifest does not declare it"
    };
    Err(Refused(
        ErrorCode::CapabilityNotApproved,
        format!(
            "this route needs the capability {}, and {why}",
            capability.as_str()
        ),
    ))
}

fn json_body<T: DeserializeOwned>(body: &Bytes) -> Result<T, Refused> {
    // An optional field sent as `null` counts as absent, as the spec says.
    let mut value: Value = serde_json::from_slice(body)
        .map_err(|e| Refused(ErrorCode::InvalidBody, format!("the body is not JSON: {e}")))?;
    if let Value::Object(map) = &mut value {
        map.retain(|_, v| !v.is_null());
    }
    serde_json::from_value(value).map_err(|e| Refused(ErrorCode::InvalidBody, e.to_string()))
}

fn invalid(reason: String) -> Refused {
    Refused(ErrorCode::InvalidBody, reason)
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// `<prefix>-<16 hex>`, unique in the process.
fn new_id(prefix: &str) -> String {
    format!("{prefix}-{:016x}", NEXT_ID.fetch_add(1, Ordering::Relaxed))
}

fn now() -> String {
    jiff::Timestamp::now().to_string()
}

fn start_run(shared: &Shared, body: &Bytes) -> Answer {
    let req: RunRequest = json_body(body)?;
    check_length("agent", &req.agent, limits::MAX_AGENT, true).map_err(invalid)?;
    check_length("prompt", &req.prompt, limits::MAX_PROMPT, true).map_err(invalid)?;
    let manifest = &shared.config.manifest;
    let Some(agent) = manifest.agents.iter().find(|a| a.id == req.agent) else {
        let known: Vec<&str> = manifest.agents.iter().map(|a| a.id.as_str()).collect();
        return Err(Refused(
            ErrorCode::UnknownAgent,
            format!(
                "agent \"{}\" is not one of the manifest's agents ({})",
                req.agent,
                known.join(", ")
            ),
        ));
    };
    require(
        shared,
        if agent.read_only {
            Capability::AgentReadonly
        } else {
            Capability::AgentWrite
        },
    )?;
    let run = Run {
        id: new_id(&manifest.id),
        agent: agent.id.clone(),
        thread: format!("plugin:{}", manifest.id),
        read_only: agent.read_only,
        tools: agent.tools.iter().map(|t| format!("plugin_{t}")).collect(),
        status: RunState::Queued,
        result: None,
        done_delivered: false,
        created: Some(now()),
    };
    shared.recorded().runs.push(StartedRun {
        run: run.clone(),
        prompt: req.prompt,
    });
    Ok((StatusCode::CREATED, axum::Json(run)).into_response())
}

fn get_run(shared: &Shared, id: &str) -> Answer {
    let recorded = shared.recorded();
    match recorded.runs.iter().find(|r| r.run.id == id) {
        Some(started) => ok(&started.run),
        None => Err(Refused(
            ErrorCode::RunNotFound,
            format!("this chat has no run {id} of this plugin"),
        )),
    }
}

fn set_switch(shared: &Shared, id: &str, body: Option<&Bytes>) -> Answer {
    let manifest = &shared.config.manifest;
    let Some(declared) = manifest.ui.composer_switches.iter().find(|s| s.id == id) else {
        return Err(Refused(
            ErrorCode::SwitchNotFound,
            format!("the manifest's ui.composer_switches has no switch \"{id}\""),
        ));
    };
    let switch = match body {
        Some(body) => {
            let req: SwitchRequest = json_body(body)?;
            if let Some(title) = &req.title {
                check_length("title", title, limits::MAX_TITLE, false).map_err(invalid)?;
            }
            Switch {
                id: id.into(),
                on: req.on,
                title: req.title.or_else(|| declared.title.clone()),
                error: req.error,
                busy: req.busy,
            }
        }
        None => Switch {
            id: id.into(),
            on: false,
            title: declared.title.clone(),
            error: false,
            busy: false,
        },
    };
    let mut recorded = shared.recorded();
    if body.is_some() {
        recorded.switches.insert(id.into(), switch.clone());
    } else {
        recorded.switches.remove(id);
    }
    recorded.switch_changes.push(switch.clone());
    ok(&switch)
}

fn post_card(shared: &Shared, body: &Bytes) -> Answer {
    let req: CardRequest = json_body(body)?;
    check_length("card", &req.card, usize::MAX, true).map_err(invalid)?;
    check_length("title", &req.title, limits::MAX_TITLE, true).map_err(invalid)?;
    let cards = &shared.config.manifest.ui.cards;
    if !cards.iter().any(|c| c.id == req.card) {
        let known: Vec<&str> = cards.iter().map(|c| c.id.as_str()).collect();
        return Err(Refused(
            ErrorCode::UnknownCard,
            format!(
                "card \"{}\" is not one of the manifest's ui.cards ({})",
                req.card,
                known.join(", ")
            ),
        ));
    }
    let entry = InboxEntry {
        id: new_id("card"),
        kind: InboxKind::Card,
        card: Some(req.card),
        title: req.title,
        data: Some(req.data.unwrap_or_else(|| json!({}))),
        body: None,
        level: None,
        created: now(),
    };
    check_entry(&entry)?;
    shared.recorded().cards.push(entry.clone());
    Ok((StatusCode::CREATED, axum::Json(entry)).into_response())
}

/// A stored entry's cap.
fn check_entry(entry: &InboxEntry) -> Result<(), Refused> {
    let size = serde_json::to_vec(entry).map(|v| v.len()).unwrap_or(0);
    if size > limits::MAX_INBOX_ENTRY_BYTES {
        return Err(Refused(
            ErrorCode::BodyTooLarge,
            format!(
                "the entry is {size} bytes as JSON; at most {} are kept",
                limits::MAX_INBOX_ENTRY_BYTES
            ),
        ));
    }
    Ok(())
}

fn get_card(shared: &Shared, id: &str) -> Answer {
    let recorded = shared.recorded();
    match recorded.cards.iter().find(|c| c.id == id) {
        Some(card) => ok(card),
        None => Err(Refused(
            ErrorCode::CardNotFound,
            format!("this chat has no card {id} of this plugin"),
        )),
    }
}

fn notify(shared: &Shared, body: &Bytes) -> Answer {
    let req: NotificationRequest = json_body(body)?;
    check_length("title", &req.title, limits::MAX_TITLE, true).map_err(invalid)?;
    if let Some(text) = &req.body {
        check_length("body", text, limits::MAX_NOTIFICATION_BODY, false).map_err(invalid)?;
    }
    let entry = InboxEntry {
        id: new_id("note"),
        kind: InboxKind::Notification,
        card: None,
        title: req.title,
        data: None,
        body: req.body,
        level: Some(req.level.unwrap_or_default()),
        created: now(),
    };
    check_entry(&entry)?;
    shared.recorded().notifications.push(entry.clone());
    Ok((StatusCode::CREATED, axum::Json(entry)).into_response())
}

fn live_control(shared: &Shared, body: &Bytes) -> Answer {
    let req: LiveControlRequest = json_body(body)?;
    check_length("subtype", &req.subtype, limits::MAX_SUBTYPE, true).map_err(invalid)?;
    limits::check_live_subtype(shared.config.manifest.live.as_ref(), &req.subtype)
        .map_err(|why| Refused(ErrorCode::SubtypeNotDeclared, why))?;
    shared.recorded().live_controls.push(req.clone());
    match shared.config.live_responses.get(&req.subtype) {
        Some(response) => ok(&LiveControlAnswer {
            subtype: req.subtype,
            response: response.clone(),
        }),
        None => Err(Refused(
            ErrorCode::NotLive,
            format!("chat {} has no live session", shared.config.channel.id),
        )),
    }
}

/// A UI command, checked as the host checks it, recorded, and answered as if every step ran.
fn run_ui(shared: &Shared, body: &Bytes) -> Answer {
    let command: UiCommandRequest = json_body(body)?;
    let config = &shared.config;
    let approved: Vec<Capability> = Capability::ALL
        .into_iter()
        .filter(|c| config.allows(*c))
        .collect();
    ui_command::check(&command, &config.manifest, &approved)
        .map_err(|r| Refused(r.code(), r.message().to_string()))?;
    let mut recorded = shared.recorded();
    recorded.ui_commands.push(command.clone());
    let id = format!("ui-{}", recorded.ui_commands.len());
    ok(&UiCommandAnswer::all_ran(&id, &command.steps))
}

fn read_file(shared: &Shared, path: &str) -> Answer {
    limits::check_file_path(path).map_err(|why| Refused(ErrorCode::InvalidPath, why))?;
    let Some(files) = &shared.config.files else {
        return Err(Refused(
            ErrorCode::NoWorkingTree,
            format!("chat {} has no working tree", shared.config.channel.id),
        ));
    };
    shared.recorded().files_read.push(path.into());
    let Some(bytes) = files.get(path) else {
        return Err(Refused(
            ErrorCode::FileNotFound,
            format!("the working tree has no file {path}"),
        ));
    };
    if bytes.len() as u64 > limits::MAX_FILE_BYTES {
        return Err(Refused(
            ErrorCode::FileTooLarge,
            format!(
                "{path} is {} bytes; at most {} are answered",
                bytes.len(),
                limits::MAX_FILE_BYTES
            ),
        ));
    }
    Ok((
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/octet-stream")],
        bytes.clone(),
    )
        .into_response())
}

/// `GET /hotspots` (`paged: false`) and `GET /hotspots/page`.
fn hotspots(shared: &Shared, query: Option<&str>, paged: bool) -> Answer {
    let query = limits::parse_hotspots_query(query, paged)
        .map_err(|why| Refused(ErrorCode::InvalidQuery, why))?;
    let Some(stored) = shared.scan().clone() else {
        return Err(Refused(
            ErrorCode::ScanNotFound,
            format!("chat {} has no quality scan yet", shared.config.channel.id),
        ));
    };
    shared.recorded().hotspots_read.push(query);
    let StoredScan { scan, scanned_at } = stored;
    if paged {
        ok(&HotspotsPage::of(
            &scan.functions,
            query,
            scan.totals,
            scan.commit,
            scanned_at,
        ))
    } else {
        ok(&Hotspots::worst(
            &scan.functions,
            query.limit as usize,
            scan.commit,
            scanned_at,
        ))
    }
}

fn get_memory(shared: &Shared, key: &str) -> Answer {
    limits::check_memory_key(key).map_err(|why| Refused(ErrorCode::InvalidKey, why))?;
    let recorded = shared.recorded();
    match recorded.memory.get(key) {
        Some(value) => ok(&MemoryEntry {
            key: key.into(),
            value: value.clone(),
        }),
        None => Err(Refused(
            ErrorCode::MemoryNotFound,
            format!("memory has no key {key}"),
        )),
    }
}

fn put_memory(shared: &Shared, key: &str, body: &Bytes) -> Answer {
    limits::check_memory_key(key).map_err(|why| Refused(ErrorCode::InvalidKey, why))?;
    let value: Value = serde_json::from_slice(body)
        .map_err(|e| Refused(ErrorCode::InvalidBody, format!("the body is not JSON: {e}")))?;
    let Some(value) = value.as_object().and_then(|o| o.get("value")).cloned() else {
        return Err(invalid("value is missing".into()));
    };
    let req = MemoryWrite { value };
    let size = serde_json::to_vec(&req.value).map(|v| v.len()).unwrap_or(0);
    if size > limits::MAX_MEMORY_VALUE_BYTES {
        return Err(Refused(
            ErrorCode::BodyTooLarge,
            format!(
                "value is {size} bytes as JSON; at most {} are allowed",
                limits::MAX_MEMORY_VALUE_BYTES
            ),
        ));
    }
    let mut recorded = shared.recorded();
    if !recorded.memory.contains_key(key) && recorded.memory.len() >= limits::MAX_MEMORY_KEYS {
        return Err(Refused(
            ErrorCode::MemoryFull,
            format!(
                "memory holds {} keys already; overwrite one instead",
                limits::MAX_MEMORY_KEYS
            ),
        ));
    }
    recorded.memory.insert(key.into(), req.value.clone());
    ok(&MemoryEntry {
        key: key.into(),
        value: req.value,
    })
}

fn get_secret(shared: &Shared, name: &str) -> Answer {
    let manifest = &shared.config.manifest;
    if !manifest.is_secret_setting(name) {
        return Err(Refused(
            ErrorCode::SettingNotFound,
            format!("the manifest declares no secret setting \"{name}\""),
        ));
    }
    let secret = shared.secrets().get(name).cloned();
    let Some(secret) = secret else {
        return Err(Refused(
            ErrorCode::SecretNotSet,
            format!("secret setting \"{name}\" has no Secret reference"),
        ));
    };
    shared.recorded().secrets_read.push(name.into());
    let mut res = ok(&secret)?;
    res.headers_mut()
        .insert(header::CACHE_CONTROL, "no-store".parse().unwrap());
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_find_their_route_and_parameter() {
        let (r, p) = find("GET", "/files/src/a%20b.rs").ok().unwrap();
        assert_eq!(
            (r.path, p.as_deref()),
            ("/files/{path}", Some("src/a b.rs"))
        );
        let (r, p) = find("PUT", "/memory/last-quiz").ok().unwrap();
        assert_eq!((r.path, p.as_deref()), ("/memory/{key}", Some("last-quiz")));
        assert!(matches!(
            find("GET", "/memory/a/b"),
            Err(Refused(ErrorCode::NotFound, _))
        ));
        assert!(matches!(
            find("POST", "/channel"),
            Err(Refused(ErrorCode::MethodNotAllowed, _))
        ));
        assert!(matches!(
            find("GET", "/nothing"),
            Err(Refused(ErrorCode::NotFound, _))
        ));
    }
}
