//! The stand-in for the host's side of a panel, on a loopback port: the bundle's files under
//! `/ui/v1/<link>/...` with the API server's own headers (`ui_policy`: the same content
//! security policy, type, CORS and caching), a console page per panel or card that frames it
//! (`/host/<link>`, host.js with the console's bridge code beside it), and `/plugin/x/...`,
//! where the page's `api.request` reaches the plugin's `/x` with its secret. Thin: what the
//! page did is judged in `pages`.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path as UrlPath, RawQuery, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::json;

use super::pages::Page;
use crate::probe;

/// The console's host end of the bridge, served as it is (crates/server/src/console/assets):
/// the check answers a page with the very code the console does.
const CONSOLE: [(&str, &str); 4] = [
    (
        "bridge.js",
        include_str!("../../../server/src/console/assets/bridge.js"),
    ),
    (
        "frames.js",
        include_str!("../../../server/src/console/assets/frames.js"),
    ),
    (
        "api.js",
        include_str!("../../../server/src/console/assets/api.js"),
    ),
    (
        "theme.js",
        include_str!("../../../server/src/console/assets/theme.js"),
    ),
];
const HOST_JS: &str = include_str!("host.js");

/// How long a page's `api.request` may take at the plugin: the host API's limit for `/x`.
const X_LIMIT: Duration = Duration::from_secs(30);

/// The plugin `api.request` reaches, when there is one.
#[derive(Clone)]
pub struct PluginAt {
    pub url: String,
    pub secret: String,
}

struct Shared {
    /// `http://127.0.0.1:<port>`.
    url: String,
    bundle: PathBuf,
    /// Link → the page's host page config.
    configs: BTreeMap<String, String>,
    plugin: Option<PluginAt>,
    client: reqwest::Client,
    /// Link → the paths asked for that the bundle does not have, in order.
    missing: Mutex<BTreeMap<String, Vec<String>>>,
}

/// The running stand-in; stops when dropped.
pub struct StandIn {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    shared: Arc<Shared>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl StandIn {
    /// Serves `bundle` and a host page for each of `pages` (`context` and `settings` are what
    /// the bridge's `context.get` and `settings.get` answer, per page and for all); without
    /// `bridge` (`NoBridge`), the host pages post no port.
    pub async fn start(
        bundle: &Path,
        pages: &[(Page, serde_json::Value)],
        settings: &serde_json::Value,
        bridge: bool,
        plugin: Option<PluginAt>,
    ) -> std::io::Result<StandIn> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let configs = pages
            .iter()
            .map(|(page, context)| {
                let config = json!({
                    "src": format!("{url}/ui/v1/{}/{}", page.link(), page.path()),
                    "title": page.name(),
                    "context": context,
                    "settings": settings,
                    "bridge": bridge,
                });
                (page.link(), config.to_string())
            })
            .collect();
        let client =
            probe::client(reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()))
                .map_err(std::io::Error::other)?;
        let shared = Arc::new(Shared {
            url: url.clone(),
            bundle: bundle.to_path_buf(),
            configs,
            plugin,
            client,
            missing: Mutex::default(),
        });
        let app = Router::new()
            .route("/host/{name}", get(host))
            .route("/ui/v1/{link}/{*path}", get(file))
            .route("/plugin/x/{*rest}", any(x))
            .with_state(shared.clone());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(StandIn { url, shared, task })
    }

    /// `http://127.0.0.1:<port>/ui/v1/<link>/`.
    pub fn bundle_url(&self, page: &Page) -> String {
        format!("{}/ui/v1/{}/", self.url, page.link())
    }

    /// The console page that frames `page`.
    pub fn host_url(&self, page: &Page) -> String {
        format!("{}/host/{}", self.url, page.link())
    }

    /// The paths `page` asked for that the bundle does not have.
    pub fn missing(&self, page: &Page) -> Vec<String> {
        let missing = self.shared.missing.lock().expect("never poisoned");
        missing.get(&page.link()).cloned().unwrap_or_default()
    }
}

/// `/host/<link>`: the page; `/host/<name>.js`: host.js and the console's modules.
async fn host(State(shared): State<Arc<Shared>>, UrlPath(name): UrlPath<String>) -> Response {
    let script = |text: &'static str| {
        (
            [(header::CONTENT_TYPE, "text/javascript; charset=utf-8")],
            text,
        )
            .into_response()
    };
    if name == "host.js" {
        return script(HOST_JS);
    }
    if let Some((_, text)) = CONSOLE.iter().find(|(file, _)| *file == name) {
        return script(text);
    }
    let Some(config) = shared.configs.get(&name) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    // A JSON data block is not run; `<` is escaped so the config cannot close it.
    let config = config.replace('<', "\\u003c");
    let page = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>conformance</title>\
         <style>body{{margin:0}}iframe{{border:0;width:100vw;height:100vh}}</style>\
         <script type=\"application/json\" id=\"config\">{config}</script>\
         <script type=\"module\" src=\"/host/host.js\"></script></head><body></body></html>"
    );
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8")], page).into_response()
}

/// A file of the bundle, with the headers the API server serves it with; a path that is not
/// a file of the bundle is a 404 (with the server's refusal headers), and is kept.
async fn file(
    State(shared): State<Arc<Shared>>,
    UrlPath((link, path)): UrlPath<(String, String)>,
) -> Response {
    let bytes = match resolve(&shared.bundle, &path) {
        Some(file) => tokio::fs::read(&file).await.ok(),
        None => None,
    };
    let Some(bytes) = bytes else {
        let mut missing = shared.missing.lock().expect("never poisoned");
        missing.entry(link).or_default().push(path);
        return (
            StatusCode::NOT_FOUND,
            ui_policy::refusal_headers(),
            "not found",
        )
            .into_response();
    };
    let bundle_url = format!("{}/ui/v1/{link}/", shared.url);
    let answer = ui_policy::Answer {
        bundle_url: &bundle_url,
        path: &path,
        digest: "conformance",
        max_age: 0,
    };
    (ui_policy::headers(&answer), bytes).into_response()
}

/// `path` under `bundle` when it is a regular file there: no `..`, `.` or empty segments, and
/// (links followed) still inside the bundle.
fn resolve(bundle: &Path, path: &str) -> Option<PathBuf> {
    let relative = Path::new(path);
    if path.is_empty()
        || path
            .split('/')
            .any(|s| s.is_empty() || s == "." || s == "..")
        || !relative
            .components()
            .all(|c| matches!(c, Component::Normal(_)))
    {
        return None;
    }
    let root = bundle.canonicalize().ok()?;
    let file = root.join(relative).canonicalize().ok()?;
    (file.starts_with(&root) && file.is_file()).then_some(file)
}

/// `api.request`'s call, on to the plugin's `/x` with its secret; the answer as it came. No
/// plugin, or none that answers: the host API's `plugin_unreachable`.
async fn x(
    State(shared): State<Arc<Shared>>,
    method: Method,
    UrlPath(rest): UrlPath<String>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let unreachable = |message: String| {
        let body = json!({"error": {"code": "plugin_unreachable", "message": message}});
        (StatusCode::BAD_GATEWAY, axum::Json(body)).into_response()
    };
    let Some(plugin) = &shared.plugin else {
        return unreachable("no plugin to call: give --url or the plugin's command".into());
    };
    let mut url = format!("{}/x/{rest}", plugin.url.trim_end_matches('/'));
    if let Some(query) = query {
        url = format!("{url}?{query}");
    }
    let mut request = shared
        .client
        .request(method, &url)
        .bearer_auth(&plugin.secret)
        .timeout(X_LIMIT)
        .body(body);
    if let Some(kind) = headers.get(header::CONTENT_TYPE) {
        request = request.header(header::CONTENT_TYPE, kind);
    }
    let answer = match request.send().await {
        Ok(answer) => answer,
        Err(e) => return unreachable(format!("{url}: {e}")),
    };
    let status = answer.status();
    let kind = answer.headers().get(header::CONTENT_TYPE).cloned();
    let bytes = match answer.bytes().await {
        Ok(bytes) => bytes,
        Err(e) => return unreachable(format!("{url}: {e}")),
    };
    let mut response = (status, bytes).into_response();
    if let Some(kind) = kind {
        response.headers_mut().insert(header::CONTENT_TYPE, kind);
    }
    response
}
