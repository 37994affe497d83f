//! A run's MCP endpoint: `POST /mcp/namespaces/{namespace}/runs/{run}`
//! (`model::run_contract::mcp_path`), what the run's runner calls the plugin's tools through
//! (docs/runner.md). It lists exactly the tools the manifest gives the run's agent, named
//! `plugin_<tool>`, and a call goes the way a host API tool call goes
//! ([`crate::tool_calls::ToolCalls::call`]: input validation, breaker, scale from zero, time
//! limits, output schema), as the run's agent in its hidden thread.
//!
//! - [`caller`] decides who calls (the run's own token while it runs, else 401 or 403);
//! - [`protocol`] reads each message and shapes each answer (MCP over streamable HTTP,
//!   without sessions: one JSON answer per POST, 202 for a notification, 405 for GET);
//! - [`record`] writes the calls on the run's status; `crate::transcript` records each
//!   call's input and answer;
//! - this file is the handler, thin.

pub mod caller;
pub mod protocol;
pub mod record;

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use kube::runtime::reflector::ObjectRef;
use serde_json::{Value, json};

use crate::delivery::target;
use crate::host_api::error::{ErrorCode, HostError};
use crate::tool_calls::{ToolCall, ToolCalls, ToolResult};
use crate::transcript::entry::Call;
use crate::transcript::store::TranscriptStore;
use caller::Refusal;
use model::resources::ApprovalVia;
use protocol::{Body, Message, RunCaller, code};
use record::ToolCallLog;

/// The route, as `model::run_contract::mcp_path` makes it.
pub const ROUTE: &str = "/mcp/namespaces/{namespace}/runs/{run}";

/// The largest message taken: a tool's input is held to the Plugin API's body limit.
pub const MAX_BODY: usize = sdk::api::limits::MAX_BODY_BYTES;

/// What the endpoint's handler shares.
#[derive(Clone)]
pub struct McpState {
    /// The one path of a tool call (and, through its calls, the index it reads).
    pub tools: ToolCalls,
    pub ledger: Arc<ToolCallLog>,
    /// Where each call's input and answer go (the run's transcript).
    pub transcripts: Arc<dyn TranscriptStore>,
}

/// The endpoint's routes.
pub fn router(state: McpState) -> Router {
    Router::new()
        .route(
            ROUTE,
            post(handle)
                .get(no_stream)
                .delete(no_stream)
                .layer(DefaultBodyLimit::max(MAX_BODY)),
        )
        .with_state(state)
}

/// GET (a stream the server would open) and DELETE (a session's end): neither is served,
/// as a server without sessions or server-sent messages answers.
async fn no_stream() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, HeaderValue::from_static("POST"))],
    )
        .into_response()
}

async fn handle(
    State(s): State<McpState>,
    Path((namespace, name)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let version = headers.get("mcp-protocol-version");
    if let Some(version) = version
        && !protocol::SUPPORTED
            .iter()
            .any(|v| v.as_bytes() == version.as_bytes())
    {
        let message = format!(
            "MCP-Protocol-Version {version:?} is not spoken here; these are: {}",
            protocol::SUPPORTED.join(", ")
        );
        return rpc(
            StatusCode::BAD_REQUEST,
            protocol::error(&protocol::id_of(&body), code::INVALID_REQUEST, &message),
        );
    }
    let text = |name: header::HeaderName| headers.get(name).and_then(|v| v.to_str().ok());
    if !protocol::origin_allowed(text(header::ORIGIN), text(header::HOST)) {
        let message =
            "the request's Origin is not this server's: a browser page may not call a run's tools";
        return rpc(
            StatusCode::FORBIDDEN,
            protocol::error(&Value::Null, code::ORIGIN_REFUSED, message),
        );
    }
    let token = caller::bearer(text(header::AUTHORIZATION));
    let (run, view) = match caller_of(&s, &namespace, &name, token).await {
        Ok(found) => found,
        Err(refusal) => return refused(&refusal, &protocol::id_of(&body)),
    };
    let version = version.and_then(|v| v.to_str().ok());
    match protocol::read_body(&body, version) {
        Body::One(message) => match answer(&s, &run, &view, message).await {
            Some(answer) => rpc(StatusCode::OK, answer),
            None => StatusCode::ACCEPTED.into_response(),
        },
        Body::Batch(messages) => {
            let mut answers = Vec::new();
            for message in messages {
                answers.extend(answer(&s, &run, &view, message).await);
            }
            if answers.is_empty() {
                StatusCode::ACCEPTED.into_response()
            } else {
                rpc(StatusCode::OK, Value::Array(answers))
            }
        }
    }
}

/// The answer to one message (none to a notification or a response).
async fn answer(
    s: &McpState,
    run: &model::resources::AgentRun,
    view: &RunCaller,
    message: Message,
) -> Option<Value> {
    Some(match message {
        Message::NoAnswer => return None,
        Message::Refused { id, code, message } => protocol::error(&id, code, &message),
        Message::Initialize { id, version } => {
            protocol::answer(&id, protocol::initialize(view, version.as_deref()))
        }
        Message::Ping { id } => protocol::answer(&id, json!({})),
        Message::ListTools { id } => {
            // The installed plugin's manifest is enough: the chat's instance may not be made
            // yet (a call waits for it, or says so).
            let index = s.tools.calls().index();
            match crate::delivery::target::installed(index, &index.host_config().spec, &view.plugin)
            {
                Ok((_, compiled)) => protocol::answer(
                    &id,
                    json!({ "tools": protocol::tools(&compiled.manifest, view) }),
                ),
                Err(e) => protocol::error(&id, code::INTERNAL, &e.to_string()),
            }
        }
        Message::CallTool {
            id,
            tool,
            arguments,
        } => match call(s, run, view, &tool, arguments).await {
            Ok(result) => protocol::answer(&id, protocol::call_result(&result)),
            Err(message) => protocol::error(&id, code::INVALID_PARAMS, &message),
        },
    })
}

/// How long a caller waits for this replica's index to show its run started: the runner may
/// call as soon as its Pod runs, before the watch brings the status the controller wrote with
/// the token's hash.
pub const STARTING: std::time::Duration = std::time::Duration::from_secs(5);

/// The run `name` and who calls it, from the index; a run the index does not show started yet
/// (no token hash, not running) is looked at again until [`STARTING`] has passed.
async fn caller_of(
    s: &McpState,
    namespace: &str,
    name: &str,
    token: Option<&str>,
) -> Result<(std::sync::Arc<model::resources::AgentRun>, RunCaller), Refusal> {
    let deadline = tokio::time::Instant::now() + STARTING;
    loop {
        let run = s
            .tools
            .calls()
            .index()
            .runs
            .get(&ObjectRef::new(name).within(namespace));
        let checked = caller::check(run.as_deref(), name, token);
        let starting = token.is_some() && caller::not_started(run.as_deref());
        match (checked, run) {
            (Ok(view), Some(run)) => return Ok((run, view)),
            (Ok(_), None) => unreachable!("a caller is taken only for a run the index has"),
            (Err(_), _) if starting && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            (Err(refusal), _) => return Err(refusal),
        }
    }
}

/// Calls `name` for the run: an error for a tool the run was not given, else the tool's
/// result (a failure to reach the plugin is an `isError` result, as for any caller).
async fn call(
    s: &McpState,
    run: &model::resources::AgentRun,
    view: &RunCaller,
    name: &str,
    arguments: Value,
) -> Result<ToolResult, String> {
    let namespace = kube::ResourceExt::namespace(run).unwrap_or_default();
    let target = match target::resolve(
        s.tools.calls().index(),
        &namespace,
        &run.spec.channel,
        &view.plugin,
    ) {
        Ok(target) => target,
        Err(e) => {
            // Told as the host API tells it: the chat, plugin or instance cannot be called.
            let e = HostError::from(e);
            return Ok(ToolResult::host_error(e.code.as_str(), e.message));
        }
    };
    let manifest = &target.compiled.manifest;
    let Some(tool) = protocol::given_tool(manifest, view, name) else {
        return Err(protocol::unknown_tool(manifest, view, name));
    };
    let (at, started) = (jiff::Timestamp::now(), std::time::Instant::now());
    let request = ToolCall {
        input: arguments.clone(),
        agent: view.agent.clone(),
        thread_id: view.thread.clone(),
        run_id: view.run.clone(),
        timeout_seconds: None,
    };
    use kube::Resource;
    let owner = run.controller_owner_ref(&()).unwrap_or_default();
    let result = s
        .tools
        .call(&target, tool, request, ApprovalVia::Mcp, owner)
        .await
        .unwrap_or_else(|e| ToolResult::host_error(e.code(), e.to_string()));
    let seq = s.ledger.record(run, tool, result.is_error).await;
    let call = Call {
        tool: name,
        input: &arguments,
        result: &result,
        at,
        took: started.elapsed(),
    };
    crate::transcript::record(s.transcripts.as_ref(), run, seq, &call).await;
    Ok(result)
}

/// A caller refused, answering the request's id when it had one.
fn refused(refusal: &Refusal, id: &Value) -> Response {
    let mut response = rpc(
        refusal.status(),
        protocol::error(id, refusal.code(), &refusal.to_string()),
    );
    if refusal.status() == StatusCode::UNAUTHORIZED {
        response.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"loop-plugins run\""),
        );
    }
    response
}

fn rpc(status: StatusCode, body: Value) -> Response {
    (status, axum::Json(body)).into_response()
}
