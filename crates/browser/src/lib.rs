//! Headless Chromium, spoken to over the Chrome DevTools Protocol directly (a websocket and
//! JSON; chromiumoxide's generated bindings would cost more to build than the dozen methods
//! used here). `loop-plugins conformance` draws a plugin's panels and cards in it
//! (`crates/conformance`, `ui`), and the browser tests drive the console with it (through
//! `testkit::browser`, which re-exports this crate).
//!
//! [`Browser::launch`] starts Chromium (the binary [`find`] names: `$LOOP_PLUGINS_CHROMIUM`,
//! else Debian's `/usr/bin/chromium`; `hack/chromium.sh` installs it) headless, with a profile
//! folder of its own, in its own process group ([`process`]: it dies with us, and dropping the
//! [`Browser`] kills it and removes the profile); [`Browser::launch_binary`] starts a binary the
//! caller names. Its DevTools address is read from the `DevToolsActivePort` file Chromium
//! writes into the profile (the same address it prints on stderr, which goes to the log file
//! the caller names).
//!
//! A [`Page`] is one tab. It records what the browser reports about it, in every frame, as
//! [`ConsoleEntry`]s: the page's own `console.*` calls (`Runtime.consoleAPICalled`), uncaught
//! exceptions (`Runtime.exceptionThrown`) and the browser's own messages (`Log.entryAdded`),
//! which is where a content security policy's "Refused to ..." and a sandbox's "Blocked ..."
//! land. Frames in another renderer process (out-of-process iframes) are attached
//! automatically (`Target.setAutoAttach`, flattened) and report into the same page, so a
//! sandboxed iframe's refusals are read the same way wherever Chromium puts it. Scripts run in
//! the top frame ([`Page::evaluate`]) or in a frame found by its URL ([`Page::frame`]).

mod process;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine;
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio_tungstenite::tungstenite::Message;

/// Names the Chromium binary; `hack/chromium.sh` prints it.
pub const CHROMIUM_ENV: &str = "LOOP_PLUGINS_CHROMIUM";
/// Debian's `chromium` package's binary.
pub const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";

/// The Chromium binary to start: `$LOOP_PLUGINS_CHROMIUM` when set, else
/// [`DEFAULT_CHROMIUM`] (which may not exist: [`Browser::launch`] then says so).
pub fn find() -> PathBuf {
    std::env::var_os(CHROMIUM_ENV)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(DEFAULT_CHROMIUM))
}
/// The window, and so every page's viewport and screenshot: the console's target size.
pub const WINDOW: (u32, u32) = (1280, 800);

const START_TIMEOUT: Duration = Duration::from_secs(30);
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(100);

/// What went wrong talking to the browser, with what was being done.
#[derive(Debug, thiserror::Error)]
pub enum BrowserError {
    #[error("making chromium's profile folder: {0}")]
    Profile(#[source] std::io::Error),
    #[error("starting {binary} (set {CHROMIUM_ENV}, or run hack/chromium.sh): {source}")]
    Spawn {
        binary: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("chromium gave no DevTools address within {timeout:?}; its log ({log}) ends:\n{tail}")]
    NoDevTools {
        timeout: Duration,
        log: PathBuf,
        tail: String,
    },
    #[error("connecting to chromium's DevTools at {url}: {source}")]
    Connect {
        url: String,
        #[source]
        source: Box<tokio_tungstenite::tungstenite::Error>,
    },
    #[error("{method}: the browser refused it: {message} ({code})")]
    Protocol {
        method: String,
        code: i64,
        message: String,
    },
    #[error("{method}: the connection to the browser closed")]
    Closed { method: String },
    #[error("{method}: no answer from the browser within {COMMAND_TIMEOUT:?}")]
    NoAnswer { method: String },
    #[error("navigating to {url}: {reason}")]
    Navigation { url: String, reason: String },
    #[error("the page threw evaluating `{expression}`: {message}")]
    Script { expression: String, message: String },
    #[error("no frame of the page has a URL starting with {prefix} (frames: {frames:?})")]
    NoFrame { prefix: String, frames: Vec<String> },
    #[error("waited {timeout:?} for {what}; last: {last}")]
    WaitTimedOut {
        what: String,
        timeout: Duration,
        last: String,
    },
    #[error("no element of the page matches {selector} (or it has no box to click)")]
    NoElement { selector: String },
    #[error("the screenshot: {reason}")]
    Screenshot { reason: String },
    #[error("writing the screenshot {path}: {source}")]
    ScreenshotWrite {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

pub type Result<T, E = BrowserError> = std::result::Result<T, E>;

/// One thing the browser reported about a page, in any of its frames.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsoleEntry {
    /// `console-api` (the page called `console.*`), `exception` (uncaught), or the source
    /// `Log.entryAdded` names (`security` for a policy's refusals, `javascript`, `network`, ...).
    pub source: String,
    /// `log`, `info`, `warning`, `error`, ...
    pub level: String,
    pub text: String,
    /// The document or script it came from, when the browser says.
    pub url: Option<String>,
}

/// Headless Chromium, killed (its whole process group) when dropped.
pub struct Browser {
    connection: Arc<Connection>,
    tasks: Vec<JoinHandle<()>>,
    /// Dropped before `profile` (fields drop in order): killed, and waited for.
    _process: process::Group,
    /// Removed once the process is gone.
    _profile: tempfile::TempDir,
}

impl Browser {
    /// Starts the Chromium [`find`] names headless with a fresh profile, its output to `log`,
    /// and connects.
    pub async fn launch(log: impl Into<PathBuf>) -> Result<Browser> {
        Self::launch_binary(&find(), log).await
    }

    /// [`Browser::launch`] with the Chromium (or Chrome) at `binary`.
    pub async fn launch_binary(binary: &Path, log: impl Into<PathBuf>) -> Result<Browser> {
        let log = log.into();
        let binary = binary.to_path_buf();
        let profile = tempfile::Builder::new()
            .prefix("loop-plugins-chromium-")
            .tempdir()
            .map_err(BrowserError::Profile)?;
        let args = [
            "--headless=new".to_string(),
            // Root in a container has no user namespaces for Chromium's own sandbox; the
            // pages' sandbox (the one under test) is Blink's and stays on.
            "--no-sandbox".to_string(),
            "--remote-debugging-port=0".to_string(),
            format!("--user-data-dir={}", profile.path().display()),
            format!("--window-size={},{}", WINDOW.0, WINDOW.1),
            "--no-first-run".to_string(),
            "--no-default-browser-check".to_string(),
            "--no-proxy-server".to_string(),
            "--disable-gpu".to_string(),
            "--disable-dev-shm-usage".to_string(),
            "--disable-extensions".to_string(),
            "--disable-background-networking".to_string(),
            "--disable-component-update".to_string(),
            "--disable-sync".to_string(),
            "--mute-audio".to_string(),
            "--hide-scrollbars".to_string(),
            "about:blank".to_string(),
        ];
        let mut process =
            process::Group::spawn(&binary, &args, &log).map_err(|source| BrowserError::Spawn {
                binary: binary.clone(),
                source,
            })?;
        let url = match devtools_url(profile.path(), &mut process).await {
            Some(url) => url,
            None => {
                return Err(BrowserError::NoDevTools {
                    timeout: START_TIMEOUT,
                    tail: process::tail(&log, 20),
                    log,
                });
            }
        };
        let (socket, _) = tokio_tungstenite::connect_async(url.as_str())
            .await
            .map_err(|source| BrowserError::Connect {
                url: url.clone(),
                source: Box::new(source),
            })?;
        let (sink, stream) = socket.split();
        let (send, outgoing) = mpsc::unbounded_channel();
        let connection = Arc::new(Connection {
            send,
            next_id: AtomicU64::new(1),
            waiting: Mutex::new(HashMap::new()),
            sessions: Mutex::new(HashMap::new()),
        });
        let tasks = vec![
            tokio::spawn(write(sink, outgoing)),
            tokio::spawn(read(connection.clone(), stream)),
        ];
        Ok(Browser {
            connection,
            tasks,
            _process: process,
            _profile: profile,
        })
    }

    /// A new tab at `about:blank`, reporting from every frame.
    pub async fn new_page(&self) -> Result<Page> {
        let created = self
            .connection
            .call(None, "Target.createTarget", json!({ "url": "about:blank" }))
            .await?;
        let target = created["targetId"].as_str().unwrap_or_default().to_string();
        let attached = self
            .connection
            .call(
                None,
                "Target.attachToTarget",
                json!({ "targetId": target, "flatten": true }),
            )
            .await?;
        let session = attached["sessionId"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let record = Arc::new(Mutex::new(PageRecord::default()));
        self.connection
            .sessions
            .lock()
            .expect("never poisoned")
            .insert(session.clone(), record.clone());
        self.connection.enable(&session).await?;
        // Headless windows lose some height to a pretend frame: the viewport is set outright.
        self.connection
            .call(
                Some(&session),
                "Emulation.setDeviceMetricsOverride",
                json!({
                    "width": WINDOW.0, "height": WINDOW.1,
                    "deviceScaleFactor": 1, "mobile": false,
                }),
            )
            .await?;
        Ok(Page {
            connection: self.connection.clone(),
            session,
            target,
            record,
        })
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        // Then the fields go in their order: the process group is killed and waited for,
        // and only then the profile nothing writes to any more.
    }
}

/// `ws://...` from the `DevToolsActivePort` file Chromium writes once it listens (the port on
/// the first line, the browser's path on the second); None when it ended or took too long.
async fn devtools_url(profile: &Path, process: &mut process::Group) -> Option<String> {
    let file = profile.join("DevToolsActivePort");
    let until = Instant::now() + START_TIMEOUT;
    while Instant::now() < until {
        if let Ok(text) = std::fs::read_to_string(&file) {
            let mut lines = text.lines();
            if let (Some(port), Some(path)) = (lines.next(), lines.next()) {
                return Some(format!("ws://127.0.0.1:{}{}", port.trim(), path.trim()));
            }
        }
        if process.ended() {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

/// One tab; closed when dropped.
pub struct Page {
    connection: Arc<Connection>,
    session: String,
    target: String,
    record: Arc<Mutex<PageRecord>>,
}

impl Page {
    /// Loads `url` in the tab and waits for its `load` event (`document.readyState`).
    pub async fn navigate(&self, url: &str) -> Result<()> {
        let answer = self
            .connection
            .call(Some(&self.session), "Page.navigate", json!({ "url": url }))
            .await?;
        if let Some(reason) = answer["errorText"].as_str().filter(|e| !e.is_empty()) {
            return Err(BrowserError::Navigation {
                url: url.to_string(),
                reason: reason.to_string(),
            });
        }
        self.wait_for("document.readyState === 'complete'", COMMAND_TIMEOUT)
            .await
    }

    /// The value of `expression` in the top frame (a promise awaited), as JSON.
    pub async fn evaluate(&self, expression: &str) -> Result<Value> {
        self.top().evaluate(expression).await
    }

    /// Waits until `expression` is truthy in the top frame.
    pub async fn wait_for(&self, expression: &str, timeout: Duration) -> Result<()> {
        self.top().wait_for(expression, timeout).await
    }

    /// The frame (the top one or any iframe, in any process) whose URL starts with `prefix`.
    pub fn frame(&self, prefix: &str) -> Result<Frame> {
        let record = self.record.lock().expect("never poisoned");
        let found = record
            .frames
            .iter()
            .filter(|(_, url)| url.starts_with(prefix))
            .find_map(|(id, _)| record.contexts.get(id));
        match found {
            Some(context) => Ok(Frame {
                connection: self.connection.clone(),
                session: context.session.clone(),
                context: Some(context.id),
            }),
            None => Err(BrowserError::NoFrame {
                prefix: prefix.to_string(),
                frames: record.frames.values().cloned().collect(),
            }),
        }
    }

    /// [`Page::frame`], once the frame is there and has run its first script.
    pub async fn wait_for_frame(&self, prefix: &str, timeout: Duration) -> Result<Frame> {
        let until = Instant::now() + timeout;
        loop {
            match self.frame(prefix) {
                Ok(frame) => return Ok(frame),
                Err(e) if Instant::now() >= until => {
                    return Err(BrowserError::WaitTimedOut {
                        what: format!("a frame at {prefix}"),
                        timeout,
                        last: e.to_string(),
                    });
                }
                Err(_) => tokio::time::sleep(POLL).await,
            }
        }
    }

    /// Everything the browser reported about the page so far, oldest first.
    pub fn console(&self) -> Vec<ConsoleEntry> {
        self.record.lock().expect("never poisoned").console.clone()
    }

    /// The first report `matches` takes, waiting for it up to `timeout`.
    pub async fn wait_for_console(
        &self,
        what: &str,
        timeout: Duration,
        matches: impl Fn(&ConsoleEntry) -> bool,
    ) -> Result<ConsoleEntry> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(entry) = self.console().into_iter().find(|e| matches(e)) {
                return Ok(entry);
            }
            if Instant::now() >= until {
                return Err(BrowserError::WaitTimedOut {
                    what: what.to_string(),
                    timeout,
                    last: format!("{:#?}", self.console()),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// A PNG of the viewport, written to `path` (its folder made).
    pub async fn screenshot(&self, path: &Path) -> Result<()> {
        let answer = self
            .connection
            .call(
                Some(&self.session),
                "Page.captureScreenshot",
                json!({ "format": "png" }),
            )
            .await?;
        let data = answer["data"]
            .as_str()
            .ok_or_else(|| BrowserError::Screenshot {
                reason: format!("no data in {answer}"),
            })?;
        let png = base64::engine::general_purpose::STANDARD
            .decode(data)
            .map_err(|e| BrowserError::Screenshot {
                reason: e.to_string(),
            })?;
        let write = |path: &Path| -> std::io::Result<()> {
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir)?;
            }
            std::fs::write(path, &png)
        };
        write(path).map_err(|source| BrowserError::ScreenshotWrite {
            path: path.to_path_buf(),
            source,
        })
    }

    /// Clicks the element `selector` names in the top frame as a person would: scrolled into
    /// view, then the mouse pressed and released at its centre (so the click lands on what
    /// is drawn there, and focus moves as a real click moves it). A page that redraws between
    /// finding the centre and pressing (a list that grew above it) would put something else
    /// under the pointer: with the pointer there, what it is over is checked and the centre
    /// found again, a few times, before the press.
    pub async fn click(&self, selector: &str) -> Result<()> {
        let quoted = serde_json::to_string(selector).expect("a string serializes");
        let centre_of = format!(
            "(() => {{ const e = document.querySelector({quoted}); if (!e) return null; \
             e.scrollIntoView({{block: 'center', inline: 'center'}}); \
             const r = e.getBoundingClientRect(); \
             return r.width && r.height ? [r.x + r.width / 2, r.y + r.height / 2] : null; }})()"
        );
        let mut point = None;
        for _ in 0..5 {
            let centre = self.evaluate(&centre_of).await?;
            let (Some(x), Some(y)) = (centre[0].as_f64(), centre[1].as_f64()) else {
                return Err(BrowserError::NoElement {
                    selector: selector.to_string(),
                });
            };
            self.command(
                "Input.dispatchMouseEvent",
                json!({ "type": "mouseMoved", "x": x, "y": y, "button": "left", "clickCount": 1 }),
            )
            .await?;
            let over = self
                .evaluate(&format!(
                    "(() => {{ const e = document.querySelector({quoted}); \
                     const at = document.elementFromPoint({x}, {y}); \
                     return Boolean(e && at && (e === at || e.contains(at))); }})()"
                ))
                .await?;
            if over.as_bool() == Some(true) {
                point = Some((x, y));
                break;
            }
        }
        let Some((x, y)) = point else {
            return Err(BrowserError::NoElement {
                selector: format!("{selector} (something else is drawn over its centre)"),
            });
        };
        for kind in ["mousePressed", "mouseReleased"] {
            self.command(
                "Input.dispatchMouseEvent",
                json!({ "type": kind, "x": x, "y": y, "button": "left", "clickCount": 1 }),
            )
            .await?;
        }
        Ok(())
    }

    /// Presses and releases a key as the keyboard would (`Tab`, `Enter`, `Escape`, ` `;
    /// `shift` for Shift+key): focus moves, buttons press, across frames.
    pub async fn press(&self, key: &str, shift: bool) -> Result<()> {
        let (code, text, vk) = match key {
            "Tab" => ("Tab", "", 9),
            "Enter" => ("Enter", "\r", 13),
            "Escape" => ("Escape", "", 27),
            " " => ("Space", " ", 32),
            other => (other, other, 0),
        };
        let modifiers = if shift { 8 } else { 0 };
        let down = if text.is_empty() {
            "rawKeyDown"
        } else {
            "keyDown"
        };
        for kind in [down, "keyUp"] {
            let mut params = json!({
                "type": kind, "key": key, "code": code, "modifiers": modifiers,
                "windowsVirtualKeyCode": vk, "nativeVirtualKeyCode": vk,
            });
            if kind == "keyDown" {
                params["text"] = json!(text);
            }
            self.command("Input.dispatchKeyEvent", params).await?;
        }
        Ok(())
    }

    /// Types `text` into whatever has the focus, as an input method would.
    pub async fn type_text(&self, text: &str) -> Result<()> {
        self.command("Input.insertText", json!({ "text": text }))
            .await
            .map(|_| ())
    }

    /// Any other DevTools method on this tab (`Page.getAppManifest`, `Input.dispatchKeyEvent`,
    /// ...): its result.
    pub async fn command(&self, method: &str, params: Value) -> Result<Value> {
        self.connection
            .call(Some(&self.session), method, params)
            .await
    }

    fn top(&self) -> Frame {
        Frame {
            connection: self.connection.clone(),
            session: self.session.clone(),
            context: None,
        }
    }
}

impl Drop for Page {
    fn drop(&mut self) {
        self.connection
            .forget(&self.session, json!({ "targetId": self.target }));
    }
}

/// Where scripts run: one frame's main world.
pub struct Frame {
    connection: Arc<Connection>,
    session: String,
    /// None: the session's top frame.
    context: Option<i64>,
}

impl Frame {
    /// The value of `expression` in this frame (a promise awaited), as JSON; `undefined` is
    /// `null`.
    pub async fn evaluate(&self, expression: &str) -> Result<Value> {
        let mut params = json!({
            "expression": expression,
            "awaitPromise": true,
            "returnByValue": true,
        });
        if let Some(context) = self.context {
            params["contextId"] = context.into();
        }
        let answer = self
            .connection
            .call(Some(&self.session), "Runtime.evaluate", params)
            .await?;
        if let Some(details) = answer.get("exceptionDetails") {
            let message = details["exception"]["description"]
                .as_str()
                .or(details["text"].as_str())
                .unwrap_or("an exception")
                .to_string();
            return Err(BrowserError::Script {
                expression: expression.to_string(),
                message,
            });
        }
        Ok(answer["result"]["value"].clone())
    }

    /// Waits until `expression` is truthy in this frame (a throw counts as not yet).
    pub async fn wait_for(&self, expression: &str, timeout: Duration) -> Result<()> {
        let until = Instant::now() + timeout;
        let check = format!("!!({expression})");
        loop {
            let last = match self.evaluate(&check).await {
                Ok(Value::Bool(true)) => return Ok(()),
                Ok(value) => value.to_string(),
                Err(e) => e.to_string(),
            };
            if Instant::now() >= until {
                return Err(BrowserError::WaitTimedOut {
                    what: expression.to_string(),
                    timeout,
                    last,
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }
}

/// What the browser told about one page: its frames, their scripts' contexts, its reports.
#[derive(Default)]
struct PageRecord {
    console: Vec<ConsoleEntry>,
    /// Frame id → its URL.
    frames: HashMap<String, String>,
    /// Frame id → its main world.
    contexts: HashMap<String, Context>,
}

struct Context {
    session: String,
    id: i64,
}

type Answer = std::result::Result<Value, (i64, String)>;

/// The one websocket to the browser: commands out, answers matched by id, events recorded
/// into the page whose session (or child session) they came on.
struct Connection {
    send: mpsc::UnboundedSender<Message>,
    next_id: AtomicU64,
    waiting: Mutex<HashMap<u64, oneshot::Sender<Answer>>>,
    /// Session id → the page it reports for (a tab's own, or an iframe's attached to it).
    sessions: Mutex<HashMap<String, Arc<Mutex<PageRecord>>>>,
}

impl Connection {
    async fn call(&self, session: Option<&str>, method: &str, params: Value) -> Result<Value> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (answer, answered) = oneshot::channel();
        self.waiting
            .lock()
            .expect("never poisoned")
            .insert(id, answer);
        let mut message = json!({ "id": id, "method": method, "params": params });
        if let Some(session) = session {
            message["sessionId"] = session.into();
        }
        let closed = || BrowserError::Closed {
            method: method.to_string(),
        };
        self.send
            .send(Message::Text(message.to_string().into()))
            .map_err(|_| closed())?;
        match tokio::time::timeout(COMMAND_TIMEOUT, answered).await {
            Err(_) => {
                self.waiting.lock().expect("never poisoned").remove(&id);
                Err(BrowserError::NoAnswer {
                    method: method.to_string(),
                })
            }
            Ok(Err(_)) => Err(closed()),
            Ok(Ok(Err((code, message)))) => Err(BrowserError::Protocol {
                method: method.to_string(),
                code,
                message,
            }),
            Ok(Ok(Ok(value))) => Ok(value),
        }
    }

    /// Closes a tab without waiting for the answer, and forgets its sessions.
    fn forget(&self, session: &str, target: Value) {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let message = json!({ "id": id, "method": "Target.closeTarget", "params": target });
        let _ = self.send.send(Message::Text(message.to_string().into()));
        let mut sessions = self.sessions.lock().expect("never poisoned");
        if let Some(record) = sessions.get(session).cloned() {
            sessions.retain(|_, r| !Arc::ptr_eq(r, &record));
        }
    }

    /// Turns on the reports of a tab's or an iframe's session, attaches its own out-of-process
    /// frames (paused until they report too), and lets it run.
    async fn enable(&self, session: &str) -> Result<()> {
        for method in ["Page.enable", "Runtime.enable", "Log.enable"] {
            self.call(Some(session), method, json!({})).await?;
        }
        self.call(
            Some(session),
            "Target.setAutoAttach",
            json!({ "autoAttach": true, "waitForDebuggerOnStart": true, "flatten": true }),
        )
        .await?;
        resume(self, session).await;
        // The frames that were there before Page.enable: their URLs.
        let tree = self
            .call(Some(session), "Page.getFrameTree", json!({}))
            .await?;
        if let Some(record) = self.record_of(session) {
            let mut record = record.lock().expect("never poisoned");
            let mut todo = vec![&tree["frameTree"]];
            while let Some(node) = todo.pop() {
                if let (Some(id), Some(url)) =
                    (node["frame"]["id"].as_str(), node["frame"]["url"].as_str())
                {
                    record.frames.insert(id.to_string(), url.to_string());
                }
                todo.extend(node["childFrames"].as_array().into_iter().flatten());
            }
        }
        Ok(())
    }

    fn record_of(&self, session: &str) -> Option<Arc<Mutex<PageRecord>>> {
        self.sessions
            .lock()
            .expect("never poisoned")
            .get(session)
            .cloned()
    }

    fn answer(&self, id: u64, message: &Value) {
        let Some(waiting) = self.waiting.lock().expect("never poisoned").remove(&id) else {
            return;
        };
        let answer = match message.get("error") {
            Some(error) => Err((
                error["code"].as_i64().unwrap_or_default(),
                error["message"].as_str().unwrap_or_default().to_string(),
            )),
            None => Ok(message["result"].clone()),
        };
        let _ = waiting.send(answer);
    }

    /// Records an event into its page; attaches an out-of-process frame to its parent's page.
    fn event(self: &Arc<Self>, session: &str, method: &str, params: &Value) {
        let Some(record) = self.record_of(session) else {
            return;
        };
        let mut page = record.lock().expect("never poisoned");
        match method {
            "Runtime.consoleAPICalled" => {
                let text = params["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|arg| match &arg["value"] {
                        Value::String(s) => s.clone(),
                        Value::Null => arg["description"].as_str().unwrap_or("").to_string(),
                        other => other.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(" ");
                page.console.push(ConsoleEntry {
                    source: "console-api".into(),
                    level: params["type"].as_str().unwrap_or("log").into(),
                    text,
                    url: params["stackTrace"]["callFrames"][0]["url"]
                        .as_str()
                        .map(str::to_string),
                });
            }
            "Runtime.exceptionThrown" => {
                let details = &params["exceptionDetails"];
                page.console.push(ConsoleEntry {
                    source: "exception".into(),
                    level: "error".into(),
                    text: details["exception"]["description"]
                        .as_str()
                        .or(details["text"].as_str())
                        .unwrap_or("")
                        .into(),
                    url: details["url"].as_str().map(str::to_string),
                });
            }
            "Log.entryAdded" => {
                let entry = &params["entry"];
                page.console.push(ConsoleEntry {
                    source: entry["source"].as_str().unwrap_or("other").into(),
                    level: entry["level"].as_str().unwrap_or("info").into(),
                    text: entry["text"].as_str().unwrap_or("").into(),
                    url: entry["url"].as_str().map(str::to_string),
                });
            }
            "Page.frameNavigated" => {
                let frame = &params["frame"];
                if let (Some(id), Some(url)) = (frame["id"].as_str(), frame["url"].as_str()) {
                    page.frames.insert(id.into(), url.into());
                }
            }
            "Runtime.executionContextCreated" => {
                let context = &params["context"];
                let aux = &context["auxData"];
                if let (Some(frame), Some(id), true) = (
                    aux["frameId"].as_str(),
                    context["id"].as_i64(),
                    aux["isDefault"] == true,
                ) {
                    page.contexts.insert(
                        frame.into(),
                        Context {
                            session: session.into(),
                            id,
                        },
                    );
                }
            }
            "Runtime.executionContextDestroyed" => {
                let id = params["executionContextId"].as_i64();
                page.contexts
                    .retain(|_, c| !(c.session == session && Some(c.id) == id));
            }
            "Runtime.executionContextsCleared" => {
                page.contexts.retain(|_, c| c.session != session);
            }
            "Target.attachedToTarget" => {
                let Some(child) = params["sessionId"].as_str().map(str::to_string) else {
                    return;
                };
                let frame = params["targetInfo"]["type"] == "iframe";
                if frame {
                    self.sessions
                        .lock()
                        .expect("never poisoned")
                        .insert(child.clone(), record.clone());
                }
                let connection = self.clone();
                tokio::spawn(async move {
                    // A worker or anything else is let run without reports; an iframe reports.
                    if !frame || connection.enable(&child).await.is_err() {
                        resume(&connection, &child).await;
                    }
                });
            }
            "Target.detachedFromTarget" => {
                if let Some(child) = params["sessionId"].as_str() {
                    self.sessions.lock().expect("never poisoned").remove(child);
                }
            }
            _ => {}
        }
    }
}

/// Lets a target that waits for the debugger (auto-attached) run; one that does not wait
/// answers with an error, which changes nothing.
async fn resume(connection: &Connection, session: &str) {
    let _ = connection
        .call(Some(session), "Runtime.runIfWaitingForDebugger", json!({}))
        .await;
}

async fn write(
    mut sink: impl futures::Sink<Message> + Unpin,
    mut outgoing: mpsc::UnboundedReceiver<Message>,
) {
    while let Some(message) = outgoing.recv().await {
        if sink.send(message).await.is_err() {
            return;
        }
    }
}

async fn read<S, E>(connection: Arc<Connection>, mut stream: S)
where
    S: futures::Stream<Item = std::result::Result<Message, E>> + Unpin,
{
    while let Some(Ok(message)) = stream.next().await {
        let Message::Text(text) = message else {
            continue;
        };
        let Ok(message) = serde_json::from_str::<Value>(text.as_str()) else {
            continue;
        };
        if let Some(id) = message["id"].as_u64() {
            connection.answer(id, &message);
        } else if let (Some(method), Some(session)) =
            (message["method"].as_str(), message["sessionId"].as_str())
        {
            connection.event(session, method, &message["params"]);
        }
    }
    // The browser is gone: every call still waiting learns it.
    connection.waiting.lock().expect("never poisoned").clear();
}
