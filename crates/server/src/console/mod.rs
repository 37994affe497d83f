//! The console: the page a person (and the browser tests) uses where the reference has its
//! desktop app. It shows a namespace's chats, each chat's plugins with their instances, the
//! panes and the card drawer as sandboxed frames of the bundles' signed links, the composer
//! switches and the agent runs, and it is the host end of the bridge (docs/bridge.md). It is
//! static files, plain ES modules with no build step, embedded in the binary and served under
//! [`PREFIX`] on the API server, never under the bundles' `/ui/v1/`: the page signs in with a
//! Kubernetes token and calls the host API with it, so everything it does is the user's RBAC.
//!
//! - [`policy`]: the console's own strict content security policy and headers (pure);
//! - this module: the route and the table of files ([`ASSETS`]).
//!
//! The files, under `assets/`: `index.html` (the skeleton), `console.css`, `app.js` (the
//! page: sign-in, lists, panes, drawer), `api.js` (the host API with the token, and its
//! server-sent events over `fetch`), `bridge.js` (the host end of the bridge: the port per
//! frame load and the JSON-RPC dispatch), `frames.js` (what each method answers for a pane or
//! a card), `commands.js` (carrying out a plugin's UI command, a result per step),
//! `agent_view.js` (a pane's agent label and its run's chat beside it), `layout.js` (the
//! add-pane menu, a singleton once per layout, the layout kept per user and
//! chat), `settings_form.js` (Settings → Plugins: a field per setting's schema, the edit
//! sent), `plugin_upgrade.js` (Upgrade and Remove there: the capability review's rows, the
//! upgrade sent), `switches.js` (what a composer switch shows while its click is out),
//! `task_options.js` (a task's own options: the form's values checked, a row's words), `theme.js`
//! (the reference's ten variables, light and dark), `dom.js` (building elements).

pub mod policy;

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

/// Where the console lives.
pub const PREFIX: &str = "/console";

/// Every file the console serves: its name under [`PREFIX`], its content type and its text.
pub const ASSETS: [(&str, &str, &str); 16] = [
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("assets/index.html"),
    ),
    (
        "console.css",
        "text/css; charset=utf-8",
        include_str!("assets/console.css"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/app.js"),
    ),
    (
        "api.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/api.js"),
    ),
    (
        "bridge.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/bridge.js"),
    ),
    (
        "frames.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/frames.js"),
    ),
    (
        "agent_view.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/agent_view.js"),
    ),
    (
        "approvals.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/approvals.js"),
    ),
    (
        "commands.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/commands.js"),
    ),
    (
        "layout.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/layout.js"),
    ),
    (
        "settings_form.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/settings_form.js"),
    ),
    (
        "switches.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/switches.js"),
    ),
    (
        "plugin_upgrade.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/plugin_upgrade.js"),
    ),
    (
        "task_options.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/task_options.js"),
    ),
    (
        "theme.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/theme.js"),
    ),
    (
        "dom.js",
        "text/javascript; charset=utf-8",
        include_str!("assets/dom.js"),
    ),
];

/// The console's routes: `/console` (to `/console/`), `/console/` (the page) and its files.
pub fn router() -> Router {
    Router::new()
        .route(PREFIX, get(|| async { Redirect::permanent("/console/") }))
        .route(&format!("{PREFIX}/"), get(page))
        .route(&format!("{PREFIX}/{{file}}"), get(file))
}

async fn page(headers: HeaderMap) -> Response {
    serve("index.html", &headers)
}

async fn file(Path(name): Path<String>, headers: HeaderMap) -> Response {
    serve(&name, &headers)
}

fn serve(name: &str, request: &HeaderMap) -> Response {
    let bundles = bundles_url(request);
    match ASSETS.iter().find(|(n, _, _)| *n == name) {
        Some((_, content_type, text)) => {
            (policy::headers(&bundles, content_type), *text).into_response()
        }
        None => (
            StatusCode::NOT_FOUND,
            policy::headers(&bundles, "text/plain; charset=utf-8"),
            "no such file in the console",
        )
            .into_response(),
    }
}

/// The bundles' URL prefix on the origin the request came to, as the bundles' own policy
/// names it (`crate::ui::route`).
pub fn bundles_url(request: &HeaderMap) -> String {
    let host = request
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .filter(|h| {
            !h.is_empty()
                && h.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c))
        })
        .unwrap_or("localhost");
    format!("http://{host}{}/", crate::ui::route::PREFIX)
}

#[cfg(test)]
mod tests {
    use axum::body::Body;
    use axum::http::Request;
    use tower::ServiceExt;

    use super::*;

    async fn get(path: &str) -> Response {
        router()
            .oneshot(
                Request::builder()
                    .uri(path)
                    .header(header::HOST, "api.test:8080")
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn the_page_and_its_files_carry_the_consoles_policy() {
        for (path, kind) in [
            ("/console/", "text/html"),
            ("/console/app.js", "text/javascript"),
            ("/console/console.css", "text/css"),
        ] {
            let r = get(path).await;
            assert_eq!(r.status(), StatusCode::OK, "{path}");
            let h = r.headers();
            assert!(h[header::CONTENT_TYPE].to_str().unwrap().starts_with(kind));
            let csp = h[header::CONTENT_SECURITY_POLICY].to_str().unwrap();
            assert!(
                csp.contains("frame-src http://api.test:8080/ui/v1/;"),
                "{csp}"
            );
        }
        let r = get("/console").await;
        assert_eq!(r.status(), StatusCode::PERMANENT_REDIRECT);
        assert_eq!(r.headers()[header::LOCATION], "/console/");
    }

    #[tokio::test]
    async fn a_file_not_in_the_table_is_not_served() {
        for path in [
            "/console/secret.rs",
            "/console/..%2Fmod.rs",
            "/console/mod.rs",
        ] {
            let r = get(path).await;
            assert_eq!(r.status(), StatusCode::NOT_FOUND, "{path}");
            assert!(r.headers().contains_key(header::CONTENT_SECURITY_POLICY));
        }
    }

    /// api.js tells the host API's own errors by their codes: every code the host API answers.
    #[test]
    fn the_pages_host_codes_are_the_host_apis() {
        use crate::http::ErrorCode;
        let api = ASSETS.iter().find(|(n, _, _)| *n == "api.js").unwrap().2;
        let set = api
            .split_once("HOST_CODES = new Set([")
            .and_then(|(_, rest)| rest.split_once("]);"))
            .expect("HOST_CODES in api.js")
            .0;
        let listed: std::collections::BTreeSet<&str> = set
            .split(',')
            .map(|c| c.trim().trim_matches('"'))
            .filter(|c| !c.is_empty())
            .collect();
        let served: std::collections::BTreeSet<&str> = crate::host_api::Code::ALL
            .iter()
            .map(|c| c.as_str())
            .collect();
        assert_eq!(listed, served);
    }

    #[test]
    fn the_page_loads_only_files_of_the_table_and_runs_no_inline_script() {
        let html = ASSETS[0].2;
        assert!(!html.contains("<script>"), "an inline script");
        assert!(!html.contains("style="), "a style attribute");
        for (name, _, text) in ASSETS {
            for import in text
                .split(['"', '\''])
                .filter(|s| s.starts_with("./") && s.ends_with(".js"))
            {
                let file = import.trim_start_matches("./");
                assert!(
                    ASSETS.iter().any(|(n, _, _)| *n == file),
                    "{name} imports {import}, which the console does not serve"
                );
            }
        }
    }
}
