//! A request-level test as a row of a table: one request ([`Row`]) in a world of its own, made
//! for the row from [`World::new`] (the capability, trust or working-tree situation a
//! [`Setup`] names), and what it must answer: the status, the error code, a part of the
//! message, and where they matter the answer's shape, bytes and headers. [`check`] runs every
//! row of a table and fails naming each row that failed, with what it answered.

use std::fmt;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use serde_json::{Value, json};

use super::fixtures::*;
use crate::cards::inbox;
use model::manifest::Capability;

fn all_but(cap: Capability) -> Vec<Capability> {
    Capability::ALL.into_iter().filter(|c| *c != cap).collect()
}

/// The world a row's request meets: [`World::new`], changed so.
#[derive(Clone, Copy, Debug)]
pub enum Setup {
    /// Chats `a` and `b` of the project, the plugin enabled, every capability approved.
    Default,
    /// Every capability approved but this one.
    AllBut(Capability),
    /// Only these capabilities approved.
    Only(&'static [Capability]),
    /// The project's trusted config does not enable the plugin.
    NotEnabled,
    /// The project's config enables the plugin, but the owner trusted one that does not.
    Untrusted,
    /// The project's config was never trusted.
    NeverTrusted,
    /// `plugins.enabled` is off in the global config.
    PluginsOff,
    /// Every capability approved, but the manifest declares only `ui.panel` and
    /// `agent.readonly` (and the agent `quiz`).
    FewDeclared,
    /// Chat `b` has a run and a card; another plugin has a run in chat `a`.
    OthersThings,
    /// Chat `a`'s working tree under a root, with a file, a folder, a symlink out of the tree,
    /// an absolute one, a FIFO and a file over the 1024-byte cap; chat `b` is a thread of `a`
    /// without a tree of its own.
    WorkingTree,
    /// Chat `a` has a quality scan of 25 functions ([`scan_map`]); chat `b` is a thread of `a`
    /// without a tree or a scan of its own.
    Scanned,
}

impl Setup {
    /// The running world, and the folder it reads files from when it has one.
    fn build(self) -> (Harness, Option<TempDir>) {
        let mut folder = None;
        let world = match self {
            Setup::Default => World::new(),
            Setup::AllBut(cap) => World::new().approve(&all_but(cap)),
            Setup::Only(caps) => World::new().approve(caps),
            Setup::NotEnabled => World::new().trusting(false),
            Setup::Untrusted => World {
                trust: Some(trust(false)),
                ..World::new()
            },
            Setup::NeverTrusted => World {
                trust: None,
                ..World::new()
            },
            Setup::PluginsOff => World {
                host: host(false),
                ..World::new()
            },
            Setup::FewDeclared => few_declared(),
            Setup::OthersThings => others_things(),
            Setup::WorkingTree => {
                let (world, dir) = working_tree();
                folder = Some(dir);
                world
            }
            Setup::Scanned => {
                let mut w = World::new();
                w.maps.push(scan_map("a", 25));
                w.channels[1].spec.kind = model::resources::ChannelKind::Thread;
                w.channels[1].spec.parent = Some("a".into());
                w.channels[1].spec.working_tree = None;
                w
            }
        };
        (world.build(), folder)
    }
}

fn few_declared() -> World {
    let mut w = World::new();
    let mut manifest: Value = serde_json::to_value(&w.plugin.spec.manifest).unwrap();
    manifest["capabilities"] = json!(["ui.panel", "agent.readonly"]);
    manifest["agents"] = json!([{ "id": "quiz", "read_only": true, "tools": ["ask"] }]);
    for key in ["ui", "live", "events", "events_start", "actions", "egress"] {
        manifest.as_object_mut().unwrap().remove(key);
    }
    // A secret setting needs secrets.read.
    manifest["settings"]
        .as_object_mut()
        .unwrap()
        .remove("api_token");
    w.plugin.spec.manifest = serde_json::from_value(manifest).unwrap();
    w
}

fn others_things() -> World {
    let mut w = World::new();
    let t0 = T0.parse().unwrap();
    w.runs.push(run("run-of-b", "b", t0));
    let mut other_plugin = run("run-of-other", "a", t0);
    other_plugin.spec.plugin = "other".into();
    w.runs.push(other_plugin);
    let mut inbox_b = inbox::template(NS, "cogtest-b", PLUGIN, PROJECT, "b", None);
    let card =
        json!({ "id": "card-b", "kind": "card", "card": "score", "title": "B's", "created": T0 });
    inbox_b
        .data
        .as_mut()
        .unwrap()
        .insert("card-b".into(), card.to_string());
    inbox_b.metadata.resource_version = Some("1".into());
    w.maps.push(inbox_b);
    w
}

fn working_tree() -> (World, TempDir) {
    let dir = TempDir::new("api-files");
    let tree = dir.path().join("team/repo/trees/a");
    std::fs::create_dir_all(tree.join("src")).unwrap();
    std::fs::write(tree.join("src/lib.rs"), "pub fn f() {}").unwrap();
    std::fs::write(dir.path().join("team/repo/secret"), "not yours").unwrap();
    std::os::unix::fs::symlink("../../secret", tree.join("out")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", tree.join("abs")).unwrap();
    let fifo = std::ffi::CString::new(tree.join("pipe").as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    std::fs::write(tree.join("big"), vec![0u8; 2048]).unwrap();

    let mut w = World::new();
    w.config.worktree_root = Some(dir.path().to_path_buf());
    w.config.max_file_bytes = 1024;
    // Chat b is a thread of a, without a tree of its own: it reads a's.
    w.channels[1].spec.kind = model::resources::ChannelKind::Thread;
    w.channels[1].spec.parent = Some("a".into());
    w.channels[1].spec.working_tree = None;
    (w, dir)
}

/// How a row's request says who calls.
#[derive(Clone, Copy, Debug)]
pub enum Auth {
    /// `Authorization: Bearer <token>`.
    Token(&'static str),
    /// This `Authorization` header as it is.
    Header(&'static str),
    None,
}

/// What a row's request carries.
#[derive(Clone, Debug)]
pub enum Sent {
    Nothing,
    Json(Value),
    /// These bytes as they are, with no content type.
    Raw(&'static str),
}

/// One request, in a world of its own, and what it must answer.
pub struct Row {
    setup: Setup,
    method: &'static str,
    /// Relative to the prefix unless it starts with `//`.
    path: &'static str,
    auth: Auth,
    body: Sent,
    status: StatusCode,
    /// The error's code; empty for an answer that is no error.
    code: &'static str,
    /// A part of the error's message.
    says: &'static str,
    /// Fields the answer has, with these values (objects compared field by field, the rest
    /// whole).
    shape: Option<Value>,
    /// Fields the answer does not have.
    absent: Vec<&'static str>,
    /// The answer's bytes, when they are no JSON.
    bytes: Option<&'static [u8]>,
    headers: Vec<(&'static str, &'static str)>,
}

impl Row {
    /// `method path` by chat `a`'s token in the [`Setup::Default`] world, answering 200.
    pub fn new(method: &'static str, path: &'static str) -> Self {
        Self {
            setup: Setup::Default,
            method,
            path,
            auth: Auth::Token(TOKEN_A),
            body: Sent::Nothing,
            status: StatusCode::OK,
            code: "",
            says: "",
            shape: None,
            absent: vec![],
            bytes: None,
            headers: vec![],
        }
    }

    pub fn on(mut self, setup: Setup) -> Self {
        self.setup = setup;
        self
    }

    pub fn token(mut self, token: &'static str) -> Self {
        self.auth = Auth::Token(token);
        self
    }

    pub fn authorization(mut self, auth: Auth) -> Self {
        self.auth = auth;
        self
    }

    pub fn json(mut self, body: Value) -> Self {
        self.body = Sent::Json(body);
        self
    }

    pub fn raw(mut self, body: &'static str) -> Self {
        self.body = Sent::Raw(body);
        self
    }

    /// Answers `status`, no error.
    pub fn answers(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// Answers the error `code` with `status`, its message saying `says`.
    pub fn fails(mut self, status: StatusCode, code: &'static str, says: &'static str) -> Self {
        self.status = status;
        self.code = code;
        self.says = says;
        self
    }

    pub fn shape(mut self, shape: Value) -> Self {
        self.shape = Some(shape);
        self
    }

    pub fn absent(mut self, field: &'static str) -> Self {
        self.absent.push(field);
        self
    }

    pub fn bytes(mut self, bytes: &'static [u8]) -> Self {
        self.bytes = Some(bytes);
        self
    }

    pub fn header(mut self, name: &'static str, value: &'static str) -> Self {
        self.headers.push((name, value));
        self
    }

    fn request(&self) -> Request<Body> {
        let mut req = Request::builder()
            .method(Method::from_bytes(self.method.as_bytes()).unwrap())
            .uri(uri(self.path));
        match self.auth {
            Auth::Token(token) => req = req.header("authorization", format!("Bearer {token}")),
            Auth::Header(header) => req = req.header("authorization", header),
            Auth::None => {}
        }
        let body = match &self.body {
            Sent::Nothing => Body::empty(),
            Sent::Json(v) => Body::from(v.to_string()),
            Sent::Raw(text) => Body::from(*text),
        };
        if matches!(self.body, Sent::Json(_)) {
            req = req.header("content-type", "application/json");
        }
        req.body(body).unwrap()
    }

    /// Sends the request in a new world; every way the answer differs from the row's.
    async fn run(&self) -> Result<(), String> {
        let (h, _folder) = self.setup.build();
        let a = h.send(self.request()).await;
        let json: Option<Value> = serde_json::from_slice(&a.bytes).ok();
        let error = |field: &str| {
            json.as_ref()
                .and_then(|j| j["error"][field].as_str())
                .unwrap_or_default()
                .to_string()
        };
        let (code, message) = (error("code"), error("message"));
        let mut wrong = vec![];
        if (a.status, code.as_str()) != (self.status, self.code) {
            wrong.push(format!(
                "answered {} {code:?}, not {} {:?}",
                a.status, self.status, self.code
            ));
        }
        if !message.contains(self.says) {
            wrong.push(format!("the message does not say {:?}", self.says));
        }
        if let Some(shape) = &self.shape
            && !json.as_ref().is_some_and(|j| has_shape(j, shape))
        {
            wrong.push(format!("the answer is not of the shape {shape}"));
        }
        for field in &self.absent {
            let object = json.as_ref().and_then(Value::as_object);
            if object.is_none_or(|o| o.contains_key(*field)) {
                wrong.push(format!("the answer has {field:?}, or is no JSON object"));
            }
        }
        if let Some(bytes) = self.bytes
            && a.bytes != bytes
        {
            wrong.push(format!(
                "the answer is not {:?}",
                String::from_utf8_lossy(bytes)
            ));
        }
        for (name, value) in &self.headers {
            let got = a.headers.get(*name).and_then(|v| v.to_str().ok());
            if got != Some(*value) {
                wrong.push(format!("header {name} is {got:?}, not {value:?}"));
            }
        }
        if wrong.is_empty() {
            return Ok(());
        }
        let answer: String = String::from_utf8_lossy(&a.bytes)
            .chars()
            .take(300)
            .collect();
        Err(format!("{}; it answered: {answer}", wrong.join("; ")))
    }
}

impl fmt::Display for Row {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} ({:?}", self.method, self.path, self.setup)?;
        match self.auth {
            Auth::Token(TOKEN_A) => write!(f, ")"),
            auth => write!(f, ", {auth:?})"),
        }
    }
}

/// Whether `answer` has every field of `shape`, with its value (objects field by field).
fn has_shape(answer: &Value, shape: &Value) -> bool {
    match (answer, shape) {
        (Value::Object(a), Value::Object(s)) => s
            .iter()
            .all(|(k, v)| a.get(k).is_some_and(|got| has_shape(got, v))),
        _ => answer == shape,
    }
}

/// Runs every row, each in a world of its own, and fails naming every row that failed.
pub async fn check(rows: Vec<Row>) {
    let mut failed = vec![];
    for row in &rows {
        if let Err(why) = row.run().await {
            failed.push(format!("{row}: {why}"));
        }
    }
    assert!(
        failed.is_empty(),
        "{} of {} rows failed:\n{}",
        failed.len(),
        rows.len(),
        failed.join("\n")
    );
}
