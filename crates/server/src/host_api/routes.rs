//! The host API's handlers and the table that mounts them under `/api/host/v1`. Each handler
//! checks the caller first (401, then 403), then finds the chat, plugin and instance (404,
//! 409, 503), then reads its body (400), then calls the plugin.

use axum::Json;
use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{DefaultBodyLimit, OriginalUri, Path, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::actions::{self, ActionCall};
use super::auth::Permission;
use super::error::{Code, HostError, HostResult};
use super::events;
use super::state::{HostState, call_error, json_body, plugin_error, what};
use super::switches::{self, Click};
use super::tools::{self, ToolCall, ToolResult};
use crate::calls::client::PluginRequest;
use crate::calls::{CallError, CallKind, Target};
use crate::http::Passthrough;
use crate::status::{SwitchChange, SwitchEdit};
use model::manifest::Capability;
use model::names;

/// Where the routes live.
pub const PREFIX: &str = "/api/host/v1";

const INSTANCE: &str = "/namespaces/{namespace}/channels/{channel}/plugins/{plugin}";

/// Every (method, path) served under [`PREFIX`], as the spec lists them.
pub const ROUTES: [(&str, &str); 10] = [
    (
        "POST",
        "/namespaces/{namespace}/channels/{channel}/plugins/{plugin}/actions/{action}",
    ),
    (
        "POST",
        "/namespaces/{namespace}/channels/{channel}/plugins/{plugin}/tools/{tool}",
    ),
    (
        "GET",
        "/namespaces/{namespace}/channels/{channel}/plugins/{plugin}/switches",
    ),
    (
        "POST",
        "/namespaces/{namespace}/channels/{channel}/plugins/{plugin}/switches/{switch}",
    ),
    (
        "GET",
        "/namespaces/{namespace}/channels/{channel}/plugins/{plugin}/x/{path}",
    ),
    (
        "POST",
        "/namespaces/{namespace}/channels/{channel}/plugins/{plugin}/x/{path}",
    ),
    (
        "PUT",
        "/namespaces/{namespace}/channels/{channel}/plugins/{plugin}/x/{path}",
    ),
    (
        "PATCH",
        "/namespaces/{namespace}/channels/{channel}/plugins/{plugin}/x/{path}",
    ),
    (
        "DELETE",
        "/namespaces/{namespace}/channels/{channel}/plugins/{plugin}/x/{path}",
    ),
    ("POST", "/namespaces/{namespace}/channels/{channel}/events"),
];

/// The routes, relative to [`PREFIX`], with their body limits.
pub fn routes(state: &HostState) -> Router<HostState> {
    let limits = state.calls.limits();
    let small = DefaultBodyLimit::max(limits.body);
    let x = DefaultBodyLimit::max(limits.x_body);
    let x_methods = axum::routing::get(proxy)
        .post(proxy)
        .put(proxy)
        .patch(proxy)
        .delete(proxy)
        .layer(x);
    Router::new()
        .route(
            &format!("{INSTANCE}/actions/{{action}}"),
            post(action).layer(small),
        )
        .route(
            &format!("{INSTANCE}/tools/{{tool}}"),
            post(tool).layer(small),
        )
        .route(&format!("{INSTANCE}/switches"), get(list_switches))
        .route(
            &format!("{INSTANCE}/switches/{{switch}}"),
            post(click).layer(small),
        )
        .route(&format!("{INSTANCE}/x/{{*path}}"), x_methods)
        .route(
            "/namespaces/{namespace}/channels/{channel}/events",
            post(events::post).layer(small),
        )
}

type InstancePath = (String, String, String);

/// Checks the caller (401, 403) for `permission` on the plugin's instance in the chat, then
/// finds the instance (404, 409, 503).
async fn authorized_target(
    s: &HostState,
    headers: &HeaderMap,
    (ns, chat, plugin): (&str, &str, &str),
    permission: impl FnOnce(&str, &str) -> Permission,
) -> HostResult<Target> {
    let instance = names::instance_name(plugin, chat);
    s.authorize(headers, &permission(ns, &instance)).await?;
    s.resolve(ns, chat, plugin)
}

/// Calls the target (starting it), and answers its 2xx answer or the error.
async fn call_accepted(
    s: &HostState,
    target: &Target,
    request: &PluginRequest,
    what: &str,
) -> HostResult<crate::calls::client::PluginAnswer> {
    let answer = s
        .call_target(target, request)
        .await
        .map_err(|e| call_error(target, what, e))?;
    if !answer.status.is_success() {
        return Err(plugin_error(what, &answer));
    }
    Ok(answer)
}

async fn action(
    State(s): State<HostState>,
    Path((ns, chat, plugin, action)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HostError> {
    let target = authorized_target(&s, &headers, (&ns, &chat, &plugin), Permission::action).await?;
    let call: ActionCall = json_body(&body)?;
    actions::check(&target.compiled.manifest, &action, &call)?;
    let limits = s.calls.limits();
    let request = PluginRequest::json(
        CallKind::Action,
        format!("/actions/{action}"),
        &actions::plugin_body(&call, target.thread_id.as_deref()),
        limits.action,
        limits.body,
    );
    call_accepted(
        &s,
        &target,
        &request,
        &what(&target, &format!("action {action}")),
    )
    .await?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "accepted": true }))).into_response())
}

async fn tool(
    State(s): State<HostState>,
    Path((ns, chat, plugin, tool)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HostError> {
    let target = authorized_target(&s, &headers, (&ns, &chat, &plugin), Permission::tool).await?;
    let call: ToolCall = json_body(&body)?;
    let limits = s.calls.limits();
    let (_, limit) = tools::check_call(&target.compiled.manifest, &tool, &call, limits)?;
    let result = match tools::check_input(&target.compiled.inputs[&tool], &call.input) {
        Err(refused) => refused,
        Ok(()) => {
            let request = PluginRequest::json(
                CallKind::Tool,
                format!("/tools/{tool}"),
                &tools::plugin_body(&call),
                limit,
                limits.tool_answer,
            );
            match s.call_target(&target, &request).await {
                Err(CallError::Start(e)) => {
                    ToolResult::from_error(&super::state::start_error(&target, &e))
                }
                Err(CallError::Plugin(failure)) => {
                    tools::result_of(&tool, Err(failure), target.compiled.outputs.get(&tool))
                }
                Ok(answer) => {
                    tools::result_of(&tool, Ok(answer), target.compiled.outputs.get(&tool))
                }
            }
        }
    };
    Ok(Json(result).into_response())
}

/// A switch the plugin declares and may show (`ui.composer_switch` approved).
fn declared_switch<'a>(
    target: &'a Target,
    id: &str,
) -> HostResult<&'a model::manifest::ComposerSwitch> {
    target
        .compiled
        .manifest
        .composer_switch(id)
        .filter(|_| target.approved.contains(&Capability::UiComposerSwitch))
        .ok_or_else(|| {
            HostError::new(
                Code::SwitchNotFound,
                format!(
                    "plugin {} shows no composer switch {id:?} (declared in ui.composer_switches, with ui.composer_switch approved)",
                    target.plugin_name()
                ),
            )
        })
}

async fn list_switches(
    State(s): State<HostState>,
    Path((ns, chat, plugin)): Path<InstancePath>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    let target = authorized_target(&s, &headers, (&ns, &chat, &plugin), |ns, i| {
        Permission::switch("get", ns, i)
    })
    .await?;
    let kept = target
        .instance
        .status
        .as_ref()
        .map(|st| st.switches.clone())
        .unwrap_or_default();
    let shown = target.approved.contains(&Capability::UiComposerSwitch);
    let list: Vec<Value> = target
        .compiled
        .manifest
        .ui
        .composer_switches
        .iter()
        .filter(|_| shown)
        .map(|m| {
            let state = kept.iter().find(|k| k.id == m.id);
            json!({
                "id": m.id,
                "label": m.label,
                "icon": m.icon,
                "on": state.is_some_and(|k| k.on),
                "title": state.and_then(|k| k.title.clone()).or_else(|| m.title.clone()),
                "error": state.is_some_and(|k| k.error),
                "busy": state.is_some_and(|k| k.busy),
            })
        })
        .collect();
    Ok(Json(json!({ "switches": list })).into_response())
}

async fn click(
    State(s): State<HostState>,
    Path((ns, chat, plugin, switch)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HostError> {
    let target = authorized_target(&s, &headers, (&ns, &chat, &plugin), |ns, i| {
        Permission::switch("create", ns, i)
    })
    .await?;
    declared_switch(&target, &switch)?;
    let click: Click = json_body(&body)?;
    let mut sent = json!({ "on": click.on });
    if let Some(t) = &target.thread_id {
        sent["thread_id"] = json!(t);
    }
    let limits = s.calls.limits();
    let request = PluginRequest::json(
        CallKind::Switch,
        format!("/switches/{switch}"),
        &sent,
        limits.switch,
        limits.body,
    );
    let what = what(&target, &format!("switch {switch}"));
    let answer = call_accepted(&s, &target, &request, &what).await?;
    let current = target
        .instance
        .status
        .as_ref()
        .and_then(|st| st.switches.iter().find(|k| k.id == switch));
    let state = switches::state_after(&switch, current, &answer.body)
        .map_err(|why| HostError::new(Code::InvalidAnswer, format!("{what}: {why}")))?;
    let edit = SwitchEdit::for_plugin(
        SwitchChange::Set(state.clone()),
        &target.compiled.manifest,
        &target.approved,
    );
    s.status.switches(&target.key, &edit).await.map_err(|e| {
        HostError::new(
            Code::Unavailable,
            format!("{what} took the click but its state could not be kept: {e}"),
        )
        .retry_after(1)
    })?;
    Ok(Json(switches::to_json(&state)).into_response())
}

async fn proxy(
    State(s): State<HostState>,
    Path((ns, chat, plugin, path)): Path<(String, String, String, String)>,
    method: Method,
    OriginalUri(uri): OriginalUri,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HostError> {
    let target = authorized_target(&s, &headers, (&ns, &chat, &plugin), |ns, i| {
        Permission::x(&method, ns, i)
    })
    .await?;
    let rest = x_rest(uri.path(), &ns, &chat, &plugin, &path);
    let mut forward = format!("/x/{rest}");
    if let Some(q) = uri.query() {
        forward.push('?');
        forward.push_str(q);
    }
    let limits = s.calls.limits();
    let request = PluginRequest {
        kind: CallKind::X,
        method,
        path: forward,
        content_type: headers.get(header::CONTENT_TYPE).cloned(),
        body,
        timeout: limits.x,
        answer_cap: limits.x_body,
    };
    let what = what(&target, &format!("/x/{rest}"));
    let answer = s
        .call_target(&target, &request)
        .await
        .map_err(|e| call_error(&target, &what, e))?;
    let mut response = Response::new(Body::from(answer.body));
    *response.status_mut() = answer.status;
    if let Some(ct) = answer.content_type {
        response.headers_mut().insert(header::CONTENT_TYPE, ct);
    }
    response.extensions_mut().insert(Passthrough);
    Ok(response)
}

/// The part of the request's path after `.../x/`, as it came (still percent-encoded); from the
/// decoded `{path}` when the request spelt the names before it otherwise.
fn x_rest(raw: &str, ns: &str, chat: &str, plugin: &str, decoded: &str) -> String {
    let prefix = format!("{PREFIX}/namespaces/{ns}/channels/{chat}/plugins/{plugin}/x/");
    match raw.strip_prefix(&prefix) {
        Some(rest) => rest.to_string(),
        None => decoded
            .replace('%', "%25")
            .replace(' ', "%20")
            .replace('?', "%3F")
            .replace('#', "%23"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_x_path_is_forwarded_as_it_came() {
        let raw = "/api/host/v1/namespaces/x/channels/x/plugins/echo/x/a/x/b%20c";
        assert_eq!(x_rest(raw, "x", "x", "echo", "a/x/b c"), "a/x/b%20c");
        // Names spelt otherwise: from the decoded path.
        let raw = "/api/host/v1/namespaces/%78/channels/x/plugins/echo/x/a b";
        assert_eq!(x_rest(raw, "x", "x", "echo", "a b?"), "a%20b%3F");
    }
}
