//! The host API's route table: every (method, path) under [`PREFIX`](super::PREFIX), the
//! handler of each (in the module of its route) and its body limit. Each handler checks the
//! caller first (401, then 403), then finds the chat, plugin and instance (404, 409, 503),
//! then reads its body (400), then calls the plugin.

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::{get, patch, post, put};

use super::state::HostState;
use super::{
    actions, approvals, cards, changes, chats, config, events, live, notifications, panels, proxy,
    quality, runs, settings, stop, switches, tasks, tools, ui_commands, upgrade,
};

const INSTANCE: &str = "/namespaces/{namespace}/channels/{channel}/plugins/{plugin}";

/// Every (method, path) served under the prefix, as the spec lists them.
pub const ROUTES: [(&str, &str); 44] = [
    ("GET", "/approvals"),
    ("GET", "/namespaces/{namespace}/approvals"),
    ("GET", "/namespaces/{namespace}/approvals/watch"),
    (
        "POST",
        "/namespaces/{namespace}/channels/{channel}/approvals/{name}",
    ),
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
        "GET",
        "/namespaces/{namespace}/channels/{channel}/plugins/{plugin}/panels",
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
    ("GET", "/namespaces/{namespace}/channels/{channel}/cards"),
    (
        "GET",
        "/namespaces/{namespace}/channels/{channel}/notifications",
    ),
    (
        "POST",
        "/namespaces/{namespace}/channels/{channel}/notifications/read",
    ),
    (
        "POST",
        "/namespaces/{namespace}/channels/{channel}/cards/read",
    ),
    ("GET", "/namespaces/{namespace}/cards/unread"),
    ("GET", "/namespaces/{namespace}/channels/{channel}/quality"),
    ("PUT", "/namespaces/{namespace}/channels/{channel}/quality"),
    ("GET", "/namespaces/{namespace}/channels/{channel}/live"),
    ("PUT", "/namespaces/{namespace}/channels/{channel}/live"),
    ("DELETE", "/namespaces/{namespace}/channels/{channel}/live"),
    (
        "GET",
        "/namespaces/{namespace}/channels/{channel}/live/requests",
    ),
    (
        "POST",
        "/namespaces/{namespace}/channels/{channel}/live/requests/{id}",
    ),
    (
        "GET",
        "/namespaces/{namespace}/channels/{channel}/ui/commands",
    ),
    (
        "POST",
        "/namespaces/{namespace}/channels/{channel}/ui/commands/{id}",
    ),
    ("GET", "/namespaces/{namespace}/chats"),
    ("GET", "/namespaces/{namespace}/channels/{channel}/tasks"),
    (
        "PUT",
        "/namespaces/{namespace}/channels/{channel}/tasks/{task}/options",
    ),
    ("GET", "/namespaces/{namespace}/projects/{project}/plugins"),
    (
        "PATCH",
        "/namespaces/{namespace}/projects/{project}/plugins/{plugin}",
    ),
    ("POST", "/namespaces/{namespace}/projects/{project}/trust"),
    ("PATCH", "/global/plugins/{plugin}"),
    ("PUT", "/global/plugins/{plugin}"),
    ("DELETE", "/global/plugins/{plugin}"),
    ("POST", "/global/plugins/{plugin}/review"),
    ("GET", "/namespaces/{namespace}/plugins/changes"),
    ("GET", "/namespaces/{namespace}/channels/{channel}/runs"),
    (
        "GET",
        "/namespaces/{namespace}/channels/{channel}/runs/{run}",
    ),
    (
        "GET",
        "/namespaces/{namespace}/channels/{channel}/plugins/{plugin}/settings",
    ),
    (
        "POST",
        "/namespaces/{namespace}/channels/{channel}/plugins/{plugin}/stop",
    ),
];

/// The routes, relative to the prefix, with their body limits.
pub fn routes(state: &HostState) -> Router<HostState> {
    let limits = state.calls.limits();
    let small = DefaultBodyLimit::max(limits.body);
    let x = DefaultBodyLimit::max(limits.x_body);
    let x_methods = get(proxy::forward)
        .post(proxy::forward)
        .put(proxy::forward)
        .patch(proxy::forward)
        .delete(proxy::forward)
        .layer(x);
    Router::new()
        .route(
            &format!("{INSTANCE}/actions/{{action}}"),
            post(actions::post).layer(small),
        )
        .route(
            &format!("{INSTANCE}/tools/{{tool}}"),
            post(tools::post).layer(small),
        )
        .route(&format!("{INSTANCE}/switches"), get(switches::list))
        .route(&format!("{INSTANCE}/panels"), get(panels::list))
        .route(
            &format!("{INSTANCE}/switches/{{switch}}"),
            post(switches::click).layer(small),
        )
        .route(&format!("{INSTANCE}/x/{{*path}}"), x_methods)
        .route(
            "/namespaces/{namespace}/channels/{channel}/events",
            post(events::post).layer(small),
        )
        .route(
            "/namespaces/{namespace}/channels/{channel}/cards",
            get(cards::list),
        )
        .route(
            "/namespaces/{namespace}/channels/{channel}/cards/read",
            post(cards::mark_read).layer(small),
        )
        .route(
            "/namespaces/{namespace}/channels/{channel}/notifications",
            get(notifications::list),
        )
        .route(
            "/namespaces/{namespace}/channels/{channel}/notifications/read",
            post(notifications::mark_read).layer(small),
        )
        .route("/namespaces/{namespace}/cards/unread", get(cards::unread))
        .route(
            "/namespaces/{namespace}/channels/{channel}/quality",
            get(quality::get)
                .put(quality::put)
                .layer(DefaultBodyLimit::max(crate::quality::scan::MAX_BODY_BYTES)),
        )
        .route(
            "/namespaces/{namespace}/channels/{channel}/live",
            get(live::get)
                .put(live::put)
                .delete(live::delete)
                .layer(small),
        )
        .route(
            "/namespaces/{namespace}/channels/{channel}/live/requests",
            get(live::requests),
        )
        .route(
            "/namespaces/{namespace}/channels/{channel}/live/requests/{id}",
            post(live::answer).layer(small),
        )
        .route(
            "/namespaces/{namespace}/channels/{channel}/ui/commands",
            get(ui_commands::stream),
        )
        .route(
            "/namespaces/{namespace}/channels/{channel}/ui/commands/{id}",
            post(ui_commands::answer).layer(small),
        )
        .route("/namespaces/{namespace}/chats", get(chats::list))
        .route(
            "/namespaces/{namespace}/channels/{channel}/tasks",
            get(tasks::list),
        )
        .route(
            "/namespaces/{namespace}/channels/{channel}/tasks/{task}/options",
            put(tasks::set_options).layer(small),
        )
        .route(
            "/namespaces/{namespace}/projects/{project}/plugins",
            get(config::view),
        )
        .route(
            "/namespaces/{namespace}/projects/{project}/plugins/{plugin}",
            patch(config::edit_project).layer(small),
        )
        .route(
            "/namespaces/{namespace}/projects/{project}/trust",
            post(config::trust).layer(small),
        )
        .route(
            "/global/plugins/{plugin}",
            patch(config::edit_global)
                .put(upgrade::upgrade)
                .delete(upgrade::remove)
                .layer(small),
        )
        .route(
            "/global/plugins/{plugin}/review",
            post(upgrade::review).layer(small),
        )
        .route("/approvals", get(approvals::list_all))
        .route("/namespaces/{namespace}/approvals", get(approvals::list))
        .route(
            "/namespaces/{namespace}/approvals/watch",
            get(approvals::watch),
        )
        .route(
            "/namespaces/{namespace}/channels/{channel}/approvals/{name}",
            post(approvals::decide).layer(small),
        )
        .route(
            "/namespaces/{namespace}/plugins/changes",
            get(changes::follow),
        )
        .route(
            "/namespaces/{namespace}/channels/{channel}/runs",
            get(runs::list),
        )
        .route(
            "/namespaces/{namespace}/channels/{channel}/runs/{run}",
            get(runs::get),
        )
        .route(&format!("{INSTANCE}/settings"), get(settings::get))
        .route(&format!("{INSTANCE}/stop"), post(stop::post).layer(small))
}
