//! A small world for request-level tests: two chats of one project, the `cogtest` plugin of
//! `examples/manifests/full.json`, each chat's instance and token Secret, filled into reflector
//! stores directly; a writer that records every write; a clock moved by hand; the Secrets that
//! secret settings are read from live, changed by hand.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode};
use futures::future::BoxFuture;
use jiff::Timestamp;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::runtime::reflector::store::Writer as StoreWriter;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::calls::metrics::CallMetrics;
use crate::calls::{CallSettings, Calls};
use crate::clock::{Clock, ManualClock};
use crate::http::RequestMetrics;
use crate::index::{Index, InstanceKey, TokenIndex};
use crate::live::{ChatRef, ControlError, LiveSessions};
use crate::plugin_api::metrics::Metrics;
use crate::plugin_api::secrets::{SecretReadError, SecretReader, SecretSettings};
use crate::plugin_api::state::{ApiConfig, PluginApiState};
use crate::plugin_api::writes::{DataPatch, WriteError, Writer};
use crate::plugin_api::{PREFIX, router};
use crate::status::RecordingWriter as StatusRecorder;
use model::manifest::Capability;
use model::names;
use model::resources::{
    AgentRun, AgentRunSpec, App, Channel, ChannelKind, ChannelSpec, HostConfig, HostConfigSpec,
    HostPlugins, Plugin, PluginInstance, PluginInstanceSpec, PluginManifestSpec, PluginSpec,
    Project, ProjectSpec, ProjectTrust, WorkingTree,
};

pub const NS: &str = "team";
pub const PLUGIN: &str = "cogtest";
pub const PROJECT: &str = "proj";
pub const TOKEN_A: &str = "token-of-chat-a-0123456789abcdef";
pub const TOKEN_B: &str = "token-of-chat-b-0123456789abcdef";
/// A fixed start for the clock.
pub const T0: &str = "2026-03-01T12:00:00Z";
/// The API server's own namespace, where HostConfig's Secret references point.
pub const RELEASE_NS: &str = "loop-plugins";
/// The Secret the project's config references for the secret setting `api_token`, its key
/// and the value it holds.
pub const CREDS: &str = "cogtest-creds";
pub const CREDS_KEY: &str = "token";
pub const CREDS_VALUE: &str = "ghp_project-token-0123";

const FULL: &str = include_str!("../../../../../examples/manifests/full.json");

/// A temporary folder, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> Self {
        let n: u64 = rand::random();
        let dir = std::env::temp_dir().join(format!(
            "loop-plugins-{prefix}-{}-{n:x}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("a temp dir");
        Self(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn owner(kind: &str, name: &str, uid: &str) -> OwnerReference {
    OwnerReference {
        api_version: "plugins.loop.dev/v1alpha1".into(),
        kind: kind.into(),
        name: name.into(),
        uid: uid.into(),
        controller: Some(true),
        block_owner_deletion: Some(true),
    }
}

/// The token Secret the controller makes for an instance.
pub fn token_secret(
    ns: &str,
    instance: &str,
    uid: &str,
    plugin: &str,
    channel: &str,
    token: &str,
) -> Secret {
    let mut labels = names::labels(plugin, PROJECT, channel, "token");
    labels.insert(names::LABEL_INSTANCE.into(), instance.into());
    let mut s = Secret::default();
    s.metadata.name = Some(names::secret_name(instance));
    s.metadata.namespace = Some(ns.into());
    s.metadata.labels = Some(labels);
    s.metadata.owner_references = Some(vec![owner("PluginInstance", instance, uid)]);
    s.data = Some(BTreeMap::from([
        ("token".to_string(), ByteString(token.as_bytes().to_vec())),
        ("secret".to_string(), ByteString(b"plugin-secret".to_vec())),
    ]));
    s
}

fn meta<K: Resource>(object: &mut K, ns: Option<&str>, uid: &str) {
    let m = object.meta_mut();
    m.namespace = ns.map(Into::into);
    m.uid = Some(uid.into());
    m.resource_version = Some("1".into());
}

/// A chat of the project, with a working tree on claim `repo`.
pub fn channel(name: &str) -> Channel {
    let mut c = Channel::new(
        name,
        ChannelSpec {
            project: PROJECT.into(),
            kind: ChannelKind::Channel,
            parent: None,
            app: App::Desktop,
            hidden: false,
            working_tree: Some(WorkingTree {
                claim_name: "repo".into(),
                sub_path: Some(format!("trees/{name}")),
            }),
        },
    );
    meta(&mut c, Some(NS), &format!("uid-channel-{name}"));
    c
}

pub fn instance(chat: &str) -> PluginInstance {
    let name = names::instance_name(PLUGIN, chat);
    let mut i = PluginInstance::new(
        &name,
        PluginInstanceSpec {
            plugin: PLUGIN.into(),
            channel: chat.into(),
            project: PROJECT.into(),
        },
    );
    meta(&mut i, Some(NS), &format!("uid-instance-{chat}"));
    i.metadata.labels = Some(names::labels(PLUGIN, PROJECT, chat, "instance"));
    i
}

pub fn plugin(approved: &[Capability]) -> Plugin {
    let manifest: Value = json5::from_str(FULL).expect("full.json parses");
    let manifest: PluginManifestSpec = serde_json::from_value(manifest).expect("a manifest spec");
    let mut p = Plugin::new(
        PLUGIN,
        PluginSpec {
            image: format!("registry.local/cogtest@sha256:{}", "0".repeat(64)),
            command: vec![],
            manifest,
            approved_capabilities: approved.iter().map(|c| c.as_str().to_string()).collect(),
            signature: None,
            purge_on_delete: false,
        },
    );
    meta(&mut p, None, "uid-plugin");
    p
}

/// The project, with a config that enables the plugin (or not).
pub fn project(enabled: bool) -> Project {
    let mut p = Project::new(
        PROJECT,
        ProjectSpec {
            plugins: project_config(enabled),
        },
    );
    meta(&mut p, Some(NS), "uid-project");
    p
}

/// The owner's trust of the config [`project`] has.
pub fn trust(enabled: bool) -> ProjectTrust {
    let mut t = ProjectTrust::of(PROJECT, &project_config(enabled));
    meta(&mut t, Some(NS), "uid-project-trust");
    t
}

fn project_config(enabled: bool) -> model::config::PluginsConfig {
    serde_json::from_value(json!({
        PLUGIN: {
            "enabled": enabled,
            "settings": { "question_count": 8, "language": "xx" },
            "secretSettings": {
                "api_token": { "secretKeyRef": { "name": CREDS, "key": CREDS_KEY } },
            },
        }
    }))
    .unwrap()
}

/// A Secret of `ns` holding `data`, at resourceVersion `1`.
pub fn opaque_secret(ns: &str, name: &str, data: &[(&str, &str)]) -> Secret {
    let mut s = Secret::default();
    s.metadata.name = Some(name.into());
    s.metadata.namespace = Some(ns.into());
    s.metadata.resource_version = Some("1".into());
    s.data = Some(
        data.iter()
            .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
            .collect(),
    );
    s
}

pub fn host(enabled: bool) -> HostConfig {
    let defaults =
        serde_json::from_value(json!({ PLUGIN: { "settings": { "pass_mark": 0.5 } } })).unwrap();
    let mut h = HostConfig::new(
        "default",
        HostConfigSpec {
            plugins: HostPlugins {
                enabled,
                defaults,
                ..Default::default()
            },
            ..Default::default()
        },
    );
    meta(&mut h, None, "uid-host");
    h
}

/// A run of the plugin in `chat`, created at `at`.
pub fn run(name: &str, chat: &str, at: Timestamp) -> AgentRun {
    let mut r = AgentRun::new(
        name,
        AgentRunSpec {
            plugin: PLUGIN.into(),
            channel: chat.into(),
            thread: format!("plugin:{PLUGIN}"),
            agent: "quiz".into(),
            read_only: true,
            tools: vec!["plugin_ask".into()],
            prompt: "go".into(),
        },
    );
    meta(&mut r, Some(NS), &format!("uid-run-{name}"));
    r.metadata.creation_timestamp = Some(Time(
        k8s_openapi::jiff::Timestamp::from_second(at.as_second()).unwrap(),
    ));
    r
}

/// One write the recorder saw.
#[derive(Clone, Debug)]
pub enum Write {
    Run(Box<AgentRun>),
    ConfigMap { name: String, data: DataPatch },
}

/// Records every write and answers as the API server would.
pub struct RecordingWriter {
    pub writes: Mutex<Vec<Write>>,
    pub fail: AtomicBool,
    version: AtomicU64,
    clock: Arc<ManualClock>,
    maps: Mutex<HashMap<(String, String), ConfigMap>>,
}

impl RecordingWriter {
    fn new(clock: Arc<ManualClock>) -> Self {
        Self {
            writes: Mutex::new(vec![]),
            fail: AtomicBool::new(false),
            version: AtomicU64::new(1000),
            clock,
            maps: Mutex::new(HashMap::new()),
        }
    }

    fn next_version(&self) -> String {
        (self.version.fetch_add(1, Ordering::SeqCst) + 1).to_string()
    }

    fn check(&self) -> Result<(), WriteError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(WriteError::Failed("the API server is down (test)".into()));
        }
        Ok(())
    }

    pub fn all(&self) -> Vec<Write> {
        self.writes.lock().unwrap().clone()
    }

    pub fn runs(&self) -> Vec<AgentRun> {
        self.all()
            .into_iter()
            .filter_map(|w| match w {
                Write::Run(r) => Some(*r),
                _ => None,
            })
            .collect()
    }

    pub fn maps(&self) -> Vec<(String, DataPatch)> {
        self.all()
            .into_iter()
            .filter_map(|w| match w {
                Write::ConfigMap { name, data, .. } => Some((name, data)),
                _ => None,
            })
            .collect()
    }
}

impl Writer for RecordingWriter {
    fn create_run<'a>(&'a self, run: &'a AgentRun) -> BoxFuture<'a, Result<AgentRun, WriteError>> {
        Box::pin(async move {
            self.check()?;
            self.writes
                .lock()
                .unwrap()
                .push(Write::Run(Box::new(run.clone())));
            let mut created = run.clone();
            created.metadata.uid = Some(format!("uid-{}", run.name_any()));
            created.metadata.resource_version = Some(self.next_version());
            let now =
                k8s_openapi::jiff::Timestamp::from_second(self.clock.now().as_second()).unwrap();
            created.metadata.creation_timestamp = Some(Time(now));
            Ok(created)
        })
    }

    fn merge_config_map<'a>(
        &'a self,
        template: &'a ConfigMap,
        data: &'a DataPatch,
    ) -> BoxFuture<'a, Result<ConfigMap, WriteError>> {
        Box::pin(async move {
            self.check()?;
            let key = (template.namespace().unwrap(), template.name_any());
            self.writes.lock().unwrap().push(Write::ConfigMap {
                name: key.1.clone(),
                data: data.clone(),
            });
            let mut maps = self.maps.lock().unwrap();
            let map = maps.entry(key).or_insert_with(|| template.clone());
            let d = map.data.get_or_insert_with(BTreeMap::new);
            for (k, v) in data {
                match v {
                    Some(v) => d.insert(k.clone(), v.clone()),
                    None => d.remove(k),
                };
            }
            map.metadata.resource_version = Some(self.next_version());
            Ok(map.clone())
        })
    }
}

/// The Secrets as the Kubernetes API holds them now, read by the secret settings route; each
/// read recorded (a cached answer would read fewer).
#[derive(Default)]
pub struct FakeSecrets {
    secrets: Mutex<HashMap<(String, String), Secret>>,
    pub reads: Mutex<Vec<(String, String)>>,
    /// Every read fails so, while set.
    pub failure: Mutex<Option<SecretReadError>>,
}

impl FakeSecrets {
    /// Writes the Secret as the API server would: its resourceVersion one past the last.
    pub fn put(&self, mut secret: Secret) {
        let key = (secret.namespace().unwrap(), secret.name_any());
        let mut secrets = self.secrets.lock().unwrap();
        let last = secrets
            .get(&key)
            .and_then(|s| s.metadata.resource_version.as_deref()?.parse::<u64>().ok());
        if let Some(last) = last {
            secret.metadata.resource_version = Some((last + 1).to_string());
        }
        secrets.insert(key, secret);
    }

    pub fn delete(&self, ns: &str, name: &str) {
        self.secrets
            .lock()
            .unwrap()
            .remove(&(ns.to_string(), name.to_string()));
    }

    pub fn reads(&self) -> Vec<(String, String)> {
        self.reads.lock().unwrap().clone()
    }
}

impl SecretReader for FakeSecrets {
    fn read<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<Option<Secret>, SecretReadError>> {
        Box::pin(async move {
            self.reads
                .lock()
                .unwrap()
                .push((namespace.to_string(), name.to_string()));
            if let Some(failure) = self.failure.lock().unwrap().clone() {
                return Err(failure);
            }
            let key = (namespace.to_string(), name.to_string());
            Ok(self.secrets.lock().unwrap().get(&key).cloned())
        })
    }
}

/// An app following every chat's UI commands through the real (in-memory) UI commands' hub,
/// as the console does, answering each with its `answer` (every step ran, until a test says
/// otherwise), or not at all while `silent`.
#[derive(Default)]
pub struct FakeApp {
    pub seen: Mutex<Vec<crate::ui_commands::UiCommand>>,
    pub answer: Mutex<Option<sdk::api::ui_command::AppAnswer>>,
    pub silent: std::sync::atomic::AtomicBool,
}

impl FakeApp {
    fn start(ui: &Arc<crate::ui_commands::UiCommands>) -> Arc<Self> {
        let app = Arc::new(Self::default());
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return app;
        };
        let mut commands = ui.hub().subscribe();
        let (ui, me) = (ui.clone(), app.clone());
        runtime.spawn(async move {
            while let Ok(for_app) = commands.recv().await {
                let command = for_app.request;
                me.seen.lock().unwrap().push(command.clone());
                if me.silent.load(std::sync::atomic::Ordering::SeqCst) {
                    continue;
                }
                let answer = me.answer.lock().unwrap().clone().unwrap_or_else(|| {
                    sdk::api::ui_command::AppAnswer {
                        steps: command
                            .steps
                            .iter()
                            .map(|_| sdk::api::ui_command::StepResult {
                                status: sdk::api::ui_command::StepStatus::Ran,
                                error: None,
                            })
                            .collect(),
                    }
                });
                let _ = ui
                    .answer(&for_app.namespace, &command.chat, &command.id, &answer)
                    .await;
            }
        });
        app
    }
}

/// Live sessions with canned answers by subtype.
#[derive(Default)]
pub struct FakeLive {
    pub responses: Mutex<HashMap<String, Value>>,
    pub requests: Mutex<Vec<(ChatRef, String, Value)>>,
}

impl LiveSessions for FakeLive {
    fn control<'a>(
        &'a self,
        chat: &'a ChatRef,
        _plugin: &'a str,
        subtype: &'a str,
        request: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ControlError>> {
        Box::pin(async move {
            self.requests.lock().unwrap().push((
                chat.clone(),
                subtype.to_string(),
                request.clone(),
            ));
            self.responses
                .lock()
                .unwrap()
                .get(subtype)
                .cloned()
                .ok_or_else(|| ControlError::NotLive {
                    chat: chat.channel.clone(),
                })
        })
    }
}

/// Chat `chat`'s quality ConfigMap holding a scan of commit `3f2c1a9e` stored at `T0`, of
/// `functions` functions `f0`, `f1`, ... scoring 0, 1, ... (the worst last listed), with
/// totals `files: 3`, `functions: functions + 10` and `lines: 1234`.
pub fn scan_map(chat: &str, functions: usize) -> ConfigMap {
    use crate::quality::scan;
    let listed: Vec<Value> = (0..functions)
        .map(|i| {
            json!({"file": format!("src/f{i}.rs"), "name": format!("f{i}"), "line": i + 1,
                   "complexity": i % 7, "lines": 10 + i, "score": i})
        })
        .collect();
    let body = json!({"commit": "3f2c1a9e",
                      "totals": {"files": 3, "functions": functions + 10, "lines": 1234},
                      "functions": listed});
    let posted = scan::parse(body.to_string().as_bytes()).expect("a scan");
    let stored = scan::Scan::of(posted, T0.parse().unwrap());
    let mut map = scan::config_map(&channel(chat));
    for (k, v) in scan::write(&stored) {
        map.data.get_or_insert_default().insert(k, v.unwrap());
    }
    map.metadata.resource_version = Some("1".into());
    map
}

/// The objects of a world, before it runs.
pub struct World {
    pub host: HostConfig,
    pub plugin: Plugin,
    pub project: Project,
    /// The project's trust; None: never trusted.
    pub trust: Option<ProjectTrust>,
    pub channels: Vec<Channel>,
    pub instances: Vec<PluginInstance>,
    pub secrets: Vec<Secret>,
    /// The Secrets secret settings are read from (live, not through the index).
    pub settings_secrets: Vec<Secret>,
    pub runs: Vec<AgentRun>,
    pub maps: Vec<ConfigMap>,
    pub config: ApiConfig,
}

impl World {
    /// Chats `a` and `b`, the plugin enabled and every capability approved.
    pub fn new() -> Self {
        let chats = ["a", "b"];
        let instances: Vec<PluginInstance> = chats.iter().map(|c| instance(c)).collect();
        let secrets = chats
            .iter()
            .zip([TOKEN_A, TOKEN_B])
            .map(|(c, t)| {
                token_secret(
                    NS,
                    &names::instance_name(PLUGIN, c),
                    &format!("uid-instance-{c}"),
                    PLUGIN,
                    c,
                    t,
                )
            })
            .collect();
        Self {
            host: host(true),
            plugin: plugin(&Capability::ALL),
            project: project(true),
            trust: Some(trust(true)),
            channels: chats.iter().map(|c| channel(c)).collect(),
            instances,
            secrets,
            settings_secrets: vec![opaque_secret(NS, CREDS, &[(CREDS_KEY, CREDS_VALUE)])],
            runs: vec![],
            maps: vec![],
            config: ApiConfig::default(),
        }
    }

    /// A project whose trusted config enables the plugin, or not.
    pub fn trusting(mut self, enabled: bool) -> Self {
        self.project = project(enabled);
        self.trust = Some(trust(enabled));
        self
    }

    /// Approves exactly these capabilities.
    pub fn approve(mut self, caps: &[Capability]) -> Self {
        self.plugin.spec.approved_capabilities =
            caps.iter().map(|c| c.as_str().to_string()).collect();
        self
    }

    pub fn build(self) -> Harness {
        let clock = Arc::new(ManualClock::at(T0.parse().unwrap()));
        let writer = Arc::new(RecordingWriter::new(clock.clone()));
        let live = Arc::new(FakeLive::default());
        let secrets = Arc::new(FakeSecrets::default());
        for s in self.settings_secrets {
            secrets.put(s);
        }
        let status = Arc::new(StatusRecorder::with_instances(&self.instances));
        let (index, mut writers) = Index::in_memory();
        apply(&mut writers.host, [self.host]);
        apply(&mut writers.plugins, [self.plugin]);
        apply(&mut writers.projects, [self.project]);
        apply(&mut writers.project_trusts, self.trust);
        apply(&mut writers.channels, self.channels);
        apply(&mut writers.instances, self.instances);
        apply(&mut writers.runs, self.runs);
        apply(&mut writers.config_maps, self.maps);
        let tokens = index.tokens.clone();
        for s in self.secrets {
            tokens.apply_watcher_event(&watcher::Event::Apply(s));
        }
        // The test binary's TLS provider for reqwest, before Calls builds its client (the API
        // server's main installs it).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let calls = Calls::new(
            CallSettings::default(),
            index,
            status.clone(),
            Arc::new(CallMetrics::unregistered()),
        );
        let ui = Arc::new(crate::ui_commands::UiCommands::in_memory(
            calls.index().clone(),
        ));
        let app = FakeApp::start(&ui);
        let mut state = PluginApiState::new(
            self.config,
            calls,
            writer.clone(),
            SecretSettings {
                reader: secrets.clone(),
                release_namespace: RELEASE_NS.into(),
            },
            status.clone(),
            clock.clone(),
            live.clone(),
            Arc::new(Metrics::unregistered()),
        );
        state.ui_commands = Some(ui);
        let state = Arc::new(state);
        let requests = Arc::new(RequestMetrics::unregistered());
        Harness {
            router: crate::http::stack(router(state.clone()), requests.clone()),
            state,
            requests,
            writer,
            status,
            clock,
            live,
            app,
            secrets,
            tokens,
            writers,
        }
    }
}

fn apply<K>(writer: &mut StoreWriter<K>, objects: impl IntoIterator<Item = K>)
where
    K: Resource<DynamicType = ()> + Clone,
{
    for o in objects {
        writer.apply_watcher_event(&watcher::Event::Apply(o));
    }
}

/// A running world.
pub struct Harness {
    pub router: Router,
    pub state: Arc<PluginApiState>,
    /// The server's request metrics.
    pub requests: Arc<RequestMetrics>,
    pub writer: Arc<RecordingWriter>,
    /// The instances' status writes (switches, live hold, activity).
    pub status: Arc<StatusRecorder>,
    pub clock: Arc<ManualClock>,
    pub live: Arc<FakeLive>,
    /// The app showing the chats: answers their UI commands.
    pub app: Arc<FakeApp>,
    /// The Secrets secret settings are read from.
    pub secrets: Arc<FakeSecrets>,
    pub tokens: Arc<TokenIndex>,
    /// The stores' writers: a test that writes one calls [`Harness::changed`] after, as the
    /// watches count each event they store.
    pub writers: crate::index::Writers,
}

/// The instance of `chat`.
pub fn key(chat: &str) -> InstanceKey {
    InstanceKey::new(NS, &names::instance_name(PLUGIN, chat))
}

/// The URI of `path`: relative to the prefix unless it starts with `//`.
pub fn uri(path: &str) -> String {
    match path.strip_prefix("//") {
        Some(raw) => format!("/{raw}"),
        None => format!("{PREFIX}{path}"),
    }
}

/// An answer.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub bytes: Vec<u8>,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.bytes)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.bytes)))
    }

    /// The error code of an error answer.
    pub fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    }
}

impl Harness {
    /// Counts a write of the test's to a store, as the watches do for each event (the Plugin
    /// API decides a token's caller again after it).
    pub fn changed(&self) {
        self.state.index.callers_epoch.bump();
    }

    /// Makes every write fail (the API server is down), or succeed again.
    pub fn api_down(&self, down: bool) {
        self.writer.fail.store(down, Ordering::SeqCst);
        self.status.fail.store(down, Ordering::SeqCst);
    }

    /// Calls `method path` (relative to the prefix unless it starts with `//`) with the token
    /// and a JSON body.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> Answer {
        let mut req = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).unwrap())
            .uri(uri(path));
        if let Some(token) = token {
            req = req.header("authorization", format!("Bearer {token}"));
        }
        let body = match body {
            Some(v) => {
                req = req.header("content-type", "application/json");
                Body::from(v.to_string())
            }
            None => Body::empty(),
        };
        self.send(req.body(body).unwrap()).await
    }

    pub async fn send(&self, req: Request<Body>) -> Answer {
        let res = self.router.clone().oneshot(req).await.unwrap();
        let status = res.status();
        let headers = res.headers().clone();
        let bytes = axum::body::to_bytes(res.into_body(), usize::MAX)
            .await
            .unwrap()
            .to_vec();
        Answer {
            status,
            headers,
            bytes,
        }
    }
}
