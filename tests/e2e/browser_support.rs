//! What the browser tests stand on: the probe plugin (`tests/e2e/fixtures/probe-panel`) installed
//! from an image that carries its bundle, another plugin's panel link, a stand-in for the
//! console (a page on a port of the test's own that frames the panel from its signed link as
//! the console will, `<iframe sandbox="allow-scripts">`, and answers the bridge), and headless
//! Chromium loading it. The stand-in also serves an "other" origin the probe aims at, so a
//! refusal is the policy's and not a dead address, and it keeps every request it got.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, ensure};
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use kube::Api;
use kube::api::{Patch, PatchParams};
use model::resources::Plugin;
use serde_json::{Value, json};
use server::ui::link::{self, Link, Page};
use testkit::browser::{Browser, ConsoleEntry, Frame};
use testkit::images::{ECHO_ENTRYPOINT, ImageContent};

use crate::controller_support::*;
use crate::host::{HostServer, host};
use crate::support::Ns;

/// The probe's files: `probe/` is the bundle (`/loop-plugin/ui/probe/` of its image), `host.js`
/// the stand-in console's end of the bridge.
pub const FIXTURE: &str = "tests/e2e/fixtures/probe-panel";
/// How long a page may take to load and probe.
const LOAD: Duration = Duration::from_secs(60);

/// The probe plugin's world, served and ready to load.
pub struct ProbeWorld {
    /// The API server: the bundles and the host API.
    pub host: HostServer,
    pub plugin: String,
    /// `http://.../ui/v1/<link>/`: the probe bundle's prefix, the only source its policy names.
    pub bundle: String,
    /// The probe's page at its signed link, with the query naming what it aims at.
    pub panel: String,
    /// Another plugin's panel, at its own signed link.
    pub peer: String,
    /// A host API route.
    pub api: String,
    pub stand_in: StandIn,
    pub browser: Browser,
    /// The cluster's shared state, held for reading: a test that kills the release's leading
    /// Pod or changes the HostConfig waits until this test is done (dropped last).
    _shared: tokio::sync::RwLockReadGuard<'static, ()>,
}

/// What one load of the probe showed, from the browser's own reports.
pub struct Probed {
    /// `window.probe` in the panel's frame: `results` by probe name (`outcome`, `detail`), and
    /// the bridge's `context` (or what failed: `bridge`).
    pub probe: Value,
    /// The `securitypolicyviolation` events of the panel's document.
    pub violations: Vec<Violation>,
    /// What the browser reported: console, Log, uncaught exceptions.
    pub console: Vec<ConsoleEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub directive: String,
    pub blocked: String,
}

impl Probed {
    /// The probe's outcome for `name`: `allowed`, `blocked`, `tried`, ...
    pub fn outcome(&self, name: &str) -> &str {
        self.probe["results"][name]["outcome"]
            .as_str()
            .unwrap_or("missing")
    }

    pub fn detail(&self, name: &str) -> &str {
        self.probe["results"][name]["detail"].as_str().unwrap_or("")
    }

    /// The browser's report that names `subject` and `directive` as a content security policy
    /// refusal, whatever words this Chromium puts around them ("Refused to load ... because it
    /// violates the following Content Security Policy directive: ..." in older ones, "Loading
    /// ... violates the following ..." in newer).
    pub fn refusal(&self, subject: &str, directive: &str) -> Option<&ConsoleEntry> {
        self.console.iter().find(|e| {
            e.text.contains("Content Security Policy directive")
                && e.text.contains(subject)
                && (e.text.contains(&format!("{directive} "))
                    || e.text.contains(&format!("{directive}'")))
        })
    }

    /// The browser's report whose text holds every one of `words`.
    pub fn report(&self, words: &[&str]) -> Option<&ConsoleEntry> {
        self.console
            .iter()
            .find(|e| words.iter().all(|w| e.text.contains(w)))
    }

    pub fn violated(&self, directive: &str, blocked: &str) -> bool {
        self.violations
            .iter()
            .any(|v| v.directive == directive && v.blocked == blocked)
    }

    /// Everything the browser reported, for a failure's message.
    pub fn dump(&self) -> String {
        let console: Vec<String> = self
            .console
            .iter()
            .map(|e| format!("[{} {}] {}", e.source, e.level, e.text.trim()))
            .collect();
        format!(
            "probe: {:#}\nviolations: {:?}\nconsole:\n  {}",
            self.probe,
            self.violations,
            console.join("\n  ")
        )
    }
}

/// The probe plugin's manifest: the echo plugin's, its one panel the probe.
fn probe_plugin(id: &str) -> anyhow::Result<Plugin> {
    let mut plugin = echo_plugin(id)?;
    plugin
        .spec
        .manifest
        .rest
        .get_mut("ui")
        .context("the manifest's ui")?["panels"] =
        json!([{ "id": "probe", "label": "Probe", "entry": "ui/probe/index.html" }]);
    Ok(plugin)
}

/// The probe's bundle: the fixture's `probe/` files, and the bridge module beside them as
/// `probe/loop-plugin-ui.js` (as an author copies it in), by their path under `ui/`.
pub fn probe_bundle() -> anyhow::Result<BTreeMap<String, Vec<u8>>> {
    let root = testkit::repo_root();
    let dir = root.join(FIXTURE).join("probe");
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("reading {}", dir.display()))? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        files.insert(format!("probe/{name}"), std::fs::read(entry.path())?);
    }
    let module = root.join("packages/loop-plugin-ui/index.js");
    files.insert(
        "probe/loop-plugin-ui.js".into(),
        std::fs::read(&module).with_context(|| format!("reading {}", module.display()))?,
    );
    Ok(files)
}

/// The digest a pinned image reference names.
fn digest_of(image: &str) -> anyhow::Result<String> {
    Ok(image
        .rsplit_once('@')
        .with_context(|| format!("{image} is not pinned"))?
        .1
        .to_string())
}

impl ProbeWorld {
    /// Installs the probe plugin (its image carrying the bundle) and the echo plugin as its
    /// peer, signs a link to each one's panel, waits until the API server serves both, starts
    /// the stand-in and the browser.
    pub async fn start(ns: &Ns) -> anyhow::Result<ProbeWorld> {
        let shared = shared().await;
        let host = host(ns).await?;
        let id = plugin_id(ns, "probe");
        let peer_id = plugin_id(ns, "peer");

        let mut plugin = probe_plugin(&id)?;
        let mut content = ImageContent::for_plugin(&plugin);
        content.files.extend(
            probe_bundle()?
                .into_iter()
                .map(|(path, bytes)| (format!("ui/{path}"), bytes)),
        );
        plugin.spec.image = ns.cluster().plugin_images().push(&id, &content).await?;
        plugin.spec.command = vec![ECHO_ENTRYPOINT.into()];
        Api::<Plugin>::all(ns.client())
            .patch(
                &id,
                &PatchParams::apply("e2e").force(),
                &Patch::Apply(&plugin),
            )
            .await?;
        let peer = install(ns, &echo_plugin(&peer_id)?).await?;

        let keys = crate::ui::link_keys(ns).await?;
        let expires = jiff::Timestamp::now().as_second() + 3600;
        let chat = format!("{}/general", ns.name());
        let sign = |plugin: &str, image: &str, panel: &str| -> anyhow::Result<String> {
            let token = link::sign(
                &keys,
                &Link {
                    plugin: plugin.to_string(),
                    digest: digest_of(image)?,
                    chat: chat.clone(),
                    page: Page::Panel(panel.into()),
                    expires,
                },
            )?;
            Ok(format!(
                "{}{}/{token}/",
                host.url,
                server::ui::route::PREFIX
            ))
        };
        let bundle = sign(&id, &plugin.spec.image, "probe")?;
        let peer = format!(
            "{}main/index.html",
            sign(&peer_id, &peer.spec.image, "main")?
        );
        // Served once admission read each image and the server's stores caught up.
        for url in [format!("{bundle}probe/index.html"), peer.clone()] {
            served(&url).await?;
        }

        let api = format!(
            "{}{}/namespaces/{}/channels/general/plugins/{id}/panels",
            host.url,
            server::host_api::PREFIX,
            ns.name()
        );
        let context = json!({
            "namespace": ns.name(), "chat": "general", "kind": "channel",
            "plugin": id, "panel": "probe",
        });
        let stand_in = StandIn::start(context).await?;
        let panel = reqwest::Url::parse_with_params(
            &format!("{bundle}probe/index.html"),
            [
                ("other", stand_in.url.as_str()),
                ("peer", peer.as_str()),
                ("api", api.as_str()),
            ],
        )?
        .to_string();
        stand_in.frame(&panel);
        let browser = Browser::launch(
            ns.cluster()
                .run_dir()
                .join(format!("chromium-{}.log", ns.name())),
        )
        .await?;
        Ok(ProbeWorld {
            host,
            plugin: id,
            bundle,
            panel,
            peer,
            api,
            stand_in,
            browser,
            _shared: shared,
        })
    }

    /// Loads the stand-in console, which frames the panel, and waits until the probe is done.
    pub async fn load_framed(&self) -> anyhow::Result<(testkit::browser::Page, Probed)> {
        let page = self.browser.new_page().await?;
        page.navigate(&format!("{}/", self.stand_in.url)).await?;
        let frame = page.wait_for_frame(&self.panel, LOAD).await?;
        let probed = probed(&page, &frame).await?;
        Ok((page, probed))
    }

    /// Loads the panel's link alone in a tab (no frame around it: only its own headers).
    pub async fn load_alone(&self) -> anyhow::Result<(testkit::browser::Page, Probed)> {
        let page = self.browser.new_page().await?;
        page.navigate(&self.panel).await?;
        let frame = page.wait_for_frame(&self.panel, LOAD).await?;
        let probed = probed(&page, &frame).await?;
        Ok((page, probed))
    }

    /// Where the run keeps this test's screenshots.
    pub fn screenshot_path(ns: &Ns, what: &str) -> PathBuf {
        ns.cluster()
            .run_dir()
            .join("screenshots")
            .join(format!("{}-{what}.png", ns.name()))
    }
}

/// Waits until the probe says it is done, then reads what the browser and the page report.
pub async fn probed(page: &testkit::browser::Page, frame: &Frame) -> anyhow::Result<Probed> {
    if let Err(e) = frame.wait_for("window.probeDone === true", LOAD).await {
        let console: Vec<String> = page.console().iter().map(|e| e.text.clone()).collect();
        anyhow::bail!(
            "the probe never finished ({e}); the browser said:\n  {}",
            console.join("\n  ")
        );
    }
    // The uncaught eval runs from a timer the probe set: let its report arrive.
    page.wait_for_console("the uncaught eval's report", Duration::from_secs(5), |e| {
        e.source == "exception" && e.text.contains("EvalError")
    })
    .await?;
    let probe = frame.evaluate("window.probe").await?;
    let violations = frame
        .evaluate("window.violations")
        .await?
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| Violation {
            directive: v["directive"].as_str().unwrap_or("").into(),
            blocked: v["blocked"].as_str().unwrap_or("").into(),
        })
        .collect();
    Ok(Probed {
        probe,
        violations,
        console: page.console(),
    })
}

/// Waits until `url` answers 200.
async fn served(url: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::builder().no_proxy().build()?;
    let until = std::time::Instant::now() + WAIT;
    loop {
        let status = http.get(url).send().await?.status();
        if status == StatusCode::OK {
            return Ok(());
        }
        ensure!(
            std::time::Instant::now() < until,
            "{url} still answers {status}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// The test's stand-in for the console, on 127.0.0.1 (another origin than the API server's):
/// `/` frames the panel and `/host.js` answers its bridge; `/other.*` and `/form-target` are
/// what the probe aims at; `/unsandboxed/probe/...` serves the probe's bundle under the
/// server's own policy without its `sandbox` directive. Every request is kept.
pub struct StandIn {
    pub url: String,
    state: Arc<StandInState>,
    serve: tokio::task::JoinHandle<()>,
}

struct StandInState {
    context: Value,
    url: String,
    frame: Mutex<String>,
    requests: Mutex<Vec<String>>,
}

impl StandIn {
    async fn start(context: Value) -> anyhow::Result<StandIn> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("http://{}", listener.local_addr()?);
        let state = Arc::new(StandInState {
            context,
            url: url.clone(),
            frame: Mutex::new(String::new()),
            requests: Mutex::new(Vec::new()),
        });
        let app = axum::Router::new()
            .fallback(answer)
            .with_state(state.clone());
        let serve = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(StandIn { url, state, serve })
    }

    /// The page `/` frames.
    fn frame(&self, src: &str) {
        *self.state.frame.lock().expect("never poisoned") = src.to_string();
    }

    /// Every request so far, as `METHOD /path?query`.
    pub fn requests(&self) -> Vec<String> {
        self.state.requests.lock().expect("never poisoned").clone()
    }

    /// The URL of the probe's page served under the policy without its sandbox.
    pub fn unsandboxed(&self) -> String {
        format!(
            "{}/unsandboxed/probe/index.html?other={}",
            self.url, self.url
        )
    }
}

impl Drop for StandIn {
    fn drop(&mut self) {
        self.serve.abort();
    }
}

async fn answer(State(state): State<Arc<StandInState>>, request: Request) -> Response {
    let path = request.uri().path().to_string();
    state.requests.lock().expect("never poisoned").push(format!(
        "{} {}",
        request.method(),
        request.uri()
    ));
    let file = |content_type: &'static str, body: Vec<u8>| {
        ([(header::CONTENT_TYPE, content_type)], body).into_response()
    };
    match path.as_str() {
        "/" => {
            let src = state
                .frame
                .lock()
                .expect("never poisoned")
                .replace('&', "&amp;")
                .replace('"', "&quot;");
            let context = state.context.to_string().replace('<', "\\u003c");
            let page = format!(
                r#"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Stand-in console</title>
<style>body {{ margin: 0; font: 14px sans-serif; }} header {{ height: 18px; padding: 6px 12px; background: #333; color: #eee; }}
iframe {{ display: block; width: 100%; height: calc(100vh - 30px); border: 0; }}</style></head>
<body><header>Stand-in console: the probe panel, framed from its signed link</header>
<iframe id="pane" sandbox="allow-scripts" title="Probe" src="{src}"></iframe>
<script type="application/json" id="context">{context}</script>
<script src="/host.js"></script></body></html>"#
            );
            file("text/html; charset=utf-8", page.into_bytes())
        }
        "/host.js" => match std::fs::read(testkit::repo_root().join(FIXTURE).join("host.js")) {
            Ok(bytes) => file("text/javascript; charset=utf-8", bytes),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        },
        "/other.svg" => file(
            "image/svg+xml",
            br#"<svg xmlns="http://www.w3.org/2000/svg" width="24" height="24"><rect width="24" height="24" fill="red"/></svg>"#.to_vec(),
        ),
        "/other.js" => file(
            "text/javascript; charset=utf-8",
            b"window.otherScriptRan = true;".to_vec(),
        ),
        _ => match path.strip_prefix("/unsandboxed/") {
            Some(rest) => unsandboxed(&state.url, rest),
            None => file("application/octet-stream", b"from the other origin".to_vec()),
        },
    }
}

/// A file of the probe's bundle under the server's own policy (`server::ui::policy`) for the
/// prefix `/unsandboxed/`, less its `sandbox` directive: what the directives the sandbox
/// makes moot would do alone.
fn unsandboxed(origin: &str, path: &str) -> Response {
    let Ok(files) = probe_bundle() else {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    };
    let Some(bytes) = files.get(path) else {
        return StatusCode::NOT_FOUND.into_response();
    };
    let policy = server::ui::policy::content_security_policy(&format!("{origin}/unsandboxed/"))
        .split(';')
        .map(str::trim)
        .filter(|d| !d.starts_with("sandbox"))
        .collect::<Vec<_>>()
        .join("; ");
    let mut headers = HeaderMap::new();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(server::ui::policy::content_type(path)),
    );
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_str(&policy).expect("the policy is a header value"),
    );
    (headers, bytes.clone()).into_response()
}
