//! A small world for request-level tests: stores filled by hand (a HostConfig, the echo-like
//! plugin, a trusted project enabling it, a channel with a thread and a hidden thread, their
//! instances and Secrets), a fake plugin served on a loopback port that records what reached
//! it, and Pods pointing at it that a test adds when it wants the container "Ready".

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Method, Request, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use futures::future::BoxFuture;
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, ContainerPort, ContainerStatus, Pod, PodCondition, PodSpec, PodStatus,
    Secret,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::runtime::reflector::store::Writer;
use kube::runtime::watcher;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::calls::breaker::BreakerConfig;
use crate::calls::metrics::CallMetrics;
use crate::calls::{CallSettings, Calls, Limits};
use crate::cards::inbox::{self, Entry, Kind};
use crate::cards::marks::RecordingMarks;
use crate::host_api::auth::{Permission, Reviewer, User};
use crate::host_api::metrics::HostMetrics;
use crate::host_api::state::{HostState, REVIEW_TTL};
use crate::index::{Index, InstanceKey, PodIndex, Writers};
use crate::status::RecordingWriter;
use crate::tool_calls::approval::{ApprovalDesk, ApprovalMetrics, StoreApprovals};
use model::config::PluginConfig;
use model::names::{self, LABEL_INSTANCE};
use model::resources::{
    AgentRun, AgentRunSpec, App, ApprovalSettings, Channel, ChannelKind, ChannelSpec,
    HOST_CONFIG_NAME, HostConfig, HostConfigSpec, HostPlugins, Plugin, PluginInstance,
    PluginInstanceSpec, Project, ProjectSpec, ProjectTrust, RiskProfile,
};

pub const NS: &str = "ns";
pub const SECRET: &str = "s3cret";
/// The token the test reviewer accepts; `limited` may only run actions.
pub const TOKEN: &str = "good";
pub const LIMITED: &str = "limited";

/// The echo plugin's manifest, plus a tool without an output schema, `both` thread events, a
/// card and the `quality.scanned` event.
pub const MANIFEST: &str = r#"{
  "id": "echo", "name": "Echo", "version": "0.1.0", "api": "1",
  "capabilities": ["agent.readonly", "schedule", "ui.composer_switch", "events.subscribe", "ui.panel",
                   "ui.notification.card"],
  "agents": [{ "id": "say", "read_only": true, "tools": ["echo"] }],
  "tools": [
    { "name": "echo", "description": "Returns its input text",
      "input_schema": { "type": "object", "properties": { "text": { "type": "string" } },
                        "required": ["text"], "additionalProperties": false },
      "output_schema": { "type": "object", "properties": { "echo": { "type": "string" } },
                         "required": ["echo"] } },
    { "name": "raw", "description": "Anything", "input_schema": { "type": "object" } }
  ],
  "actions": [{ "id": "ping" },
              { "id": "tick", "default_schedule": { "type": "cron", "schedule": "*/5 * * * *" } }],
  "events": ["message.created", "settings.changed", "quality.scanned"],
  "settings": { "verbose": { "type": "boolean", "default": false } },
  "ui": { "composer_switches": [{ "id": "mode", "label": "Mode", "icon": "ui/mode.svg", "title": "Mode is off" }],
          "panels": [{ "id": "main", "label": "Echo", "entry": "ui/main/index.html", "singleton": true }],
          "cards": [{ "id": "score", "entry": "ui/score.html" }] }
}"#;

/// What the fake plugin received.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: Method,
    pub path: String,
    pub body: Value,
}

/// How the fake plugin behaves.
#[derive(Default)]
pub struct Behaviour {
    /// The next `hangs` calls sleep this long first.
    pub hang: Duration,
    pub hangs: usize,
    /// The tool's answer (status, body) instead of the echo.
    pub tool_answer: Option<(u16, Value)>,
    /// `/x/big` answers this many bytes.
    pub big: usize,
}

/// A plugin on a loopback port: checks the secret, records each request, answers per route.
#[derive(Clone)]
pub struct FakePlugin {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    pub behaviour: Arc<Mutex<Behaviour>>,
}

impl FakePlugin {
    pub async fn start() -> Self {
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let behaviour: Arc<Mutex<Behaviour>> = Arc::default();
        let (s, b) = (seen.clone(), behaviour.clone());
        let app = Router::new().fallback(move |method, uri, headers, body| {
            let (s, b) = (s.clone(), b.clone());
            answer(s, b, method, uri, headers, body)
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Self {
            addr,
            seen,
            behaviour,
        }
    }

    /// The requests to `prefix...`.
    pub fn seen(&self, prefix: &str) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.path.starts_with(prefix))
            .cloned()
            .collect()
    }

    pub fn hang(&self, hangs: usize, hang: Duration) {
        let mut b = self.behaviour.lock().unwrap();
        b.hangs = hangs;
        b.hang = hang;
    }
}

async fn answer(
    seen: Arc<Mutex<Vec<Seen>>>,
    behaviour: Arc<Mutex<Behaviour>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let auth = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    if auth != Some(&format!("Bearer {SECRET}")) {
        return (StatusCode::UNAUTHORIZED, "wrong secret").into_response();
    }
    let path = uri
        .path_and_query()
        .map(|p| p.as_str().to_string())
        .unwrap_or_default();
    let parsed: Value = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    seen.lock().unwrap().push(Seen {
        method: method.clone(),
        path: path.clone(),
        body: parsed.clone(),
    });
    let (hang, tool_answer, big) = {
        let mut b = behaviour.lock().unwrap();
        let hang = if b.hangs > 0 {
            b.hangs -= 1;
            b.hang
        } else {
            Duration::ZERO
        };
        (hang, b.tool_answer.clone(), b.big)
    };
    tokio::time::sleep(hang).await;
    let json = |status: u16, v: Value| {
        (StatusCode::from_u16(status).unwrap(), axum::Json(v)).into_response()
    };
    match path.as_str() {
        p if p.starts_with("/actions/") => json(202, json!({ "accepted": true })),
        p if p.starts_with("/tools/") => match tool_answer {
            Some((status, v)) => json(status, v),
            None => {
                let text = parsed["input"]["text"].as_str().unwrap_or("").to_string();
                json(
                    200,
                    json!({ "content": [{ "type": "text", "text": text }],
                            "structured_content": { "echo": text }, "is_error": false }),
                )
            }
        },
        p if p.starts_with("/switches/") => {
            let on = parsed["on"].as_bool().unwrap_or(false);
            let title = if on { "Mode is on" } else { "Mode is off" };
            json(200, json!({ "on": on, "title": title }))
        }
        "/events" => StatusCode::NO_CONTENT.into_response(),
        "/x/missing" => (StatusCode::NOT_FOUND, "nope").into_response(),
        "/x/big" => Response::new(Body::from(vec![b'x'; big])),
        // Headers and a first chunk at once, then nothing for a minute.
        "/x/stall" => {
            let chunks =
                futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"partial"))])
                    .chain(futures::stream::once(async {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                        Ok(Bytes::from_static(b"rest"))
                    }));
            Response::new(Body::from_stream(chunks))
        }
        _ => {
            let mut r = Response::new(Body::from(body));
            if let Some(ct) = headers.get(header::CONTENT_TYPE) {
                r.headers_mut().insert(header::CONTENT_TYPE, ct.clone());
            }
            r.headers_mut()
                .insert("x-echo-method", method.as_str().parse().unwrap());
            r
        }
    }
}

/// Accepts `TOKEN` for everything and `LIMITED` for actions only.
pub struct TestReviewer;

impl Reviewer for TestReviewer {
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<User>, String>> {
        Box::pin(async move {
            Ok([TOKEN, LIMITED].contains(&token).then(|| User {
                username: token.to_string(),
                ..Default::default()
            }))
        })
    }

    fn authorize<'a>(
        &'a self,
        user: &'a User,
        permission: &'a Permission,
    ) -> BoxFuture<'a, Result<Result<(), String>, String>> {
        Box::pin(async move {
            Ok(
                if user.username == TOKEN || permission.subresource == "actions" {
                    Ok(())
                } else {
                    Err("no RBAC rule allows it".into())
                },
            )
        })
    }
}

/// A default risk profile that pre-approves every tool: the tests of other things call tools
/// as agents without waiting for a person (`approvals` tests set their own).
pub fn pre_approve_all() -> RiskProfile {
    RiskProfile {
        auto_approve: vec!["*".into()],
        ..Default::default()
    }
}

/// The HostConfig: plugins on, `default` the given risk profile, calls waiting `wait`.
pub fn host_config(default: RiskProfile, wait: &str) -> HostConfig {
    let mut hc = HostConfig::new(
        HOST_CONFIG_NAME,
        HostConfigSpec {
            plugins: HostPlugins {
                enabled: true,
                ..Default::default()
            },
            approval: ApprovalSettings { wait: wait.into() },
            risk_profiles: BTreeMap::from([("default".to_string(), default)]),
            ..Default::default()
        },
    );
    hc.metadata = meta(HOST_CONFIG_NAME, None);
    hc
}

/// Short limits, so tests of time limits and the breaker take milliseconds.
pub fn settings() -> CallSettings {
    CallSettings {
        limits: Limits {
            action: Duration::from_millis(300),
            tool: Duration::from_millis(300),
            run_done: Duration::from_millis(300),
            event: Duration::from_millis(300),
            switch: Duration::from_millis(300),
            x: Duration::from_millis(300),
            workflow_tool_max: Duration::from_secs(3600),
            tool_answer: 2048,
            x_body: 4096,
            body: 2048,
        },
        breaker: BreakerConfig {
            threshold: 3,
            open_for: Duration::from_millis(500),
        },
        start_timeout: Duration::from_millis(800),
        max_waiting: 3,
        activity_every: Duration::from_secs(5),
    }
}

/// The world: the state, its writers, the plugin process and the recorded writes.
pub struct World {
    pub state: HostState,
    pub writers: Writers,
    pub pods: Arc<PodIndex>,
    pub plugin: FakePlugin,
    pub recorded: Arc<RecordingWriter>,
    /// The read marks written.
    pub marks: Arc<RecordingMarks>,
    /// Chats' live sessions, in memory.
    pub live: Arc<crate::live::Live>,
    /// Chats' UI commands, in memory.
    pub ui_commands: Arc<crate::ui_commands::UiCommands>,
    /// A person's writes, recorded.
    pub person: Arc<crate::person::Recorded>,
    /// The CronJobs the Tasks panel lists.
    pub tasks: Arc<crate::host_api::cronjobs::TaskList>,
    /// The approvals the desk made and decided, in the index's store.
    pub approvals: Arc<StoreApprovals>,
    /// Agent runs' transcripts, in memory.
    pub transcripts: Arc<crate::transcript::store::MemoryTranscripts>,
}

fn meta(name: &str, ns: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: ns.map(Into::into),
        uid: Some(format!("uid-{name}")),
        generation: Some(1),
        resource_version: Some("1".into()),
        ..Default::default()
    }
}

pub fn chat(name: &str, kind: ChannelKind, parent: Option<&str>, hidden: bool) -> Channel {
    let mut c = Channel::new(
        name,
        ChannelSpec {
            project: "proj".into(),
            kind,
            parent: parent.map(Into::into),
            app: App::Desktop,
            hidden,
            working_tree: None,
        },
    );
    c.metadata = meta(name, Some(NS));
    c
}

pub fn instance(chat: &str) -> PluginInstance {
    let name = names::instance_name("echo", chat);
    let mut i = PluginInstance::new(
        &name,
        PluginInstanceSpec {
            plugin: "echo".into(),
            channel: chat.into(),
            project: "proj".into(),
        },
    );
    i.metadata = meta(&name, Some(NS));
    i
}

/// The Pod of `chat`'s instance, Ready, pointing at `addr`.
pub fn pod(chat: &str, addr: SocketAddr, uid: &str) -> Pod {
    let instance = names::instance_name("echo", chat);
    let mut metadata = meta(&format!("{instance}-pod"), Some(NS));
    metadata.uid = Some(uid.into());
    metadata.labels = Some([(LABEL_INSTANCE.to_string(), instance)].into());
    metadata.creation_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
    Pod {
        metadata,
        spec: Some(PodSpec {
            containers: vec![Container {
                name: "plugin".into(),
                ports: Some(vec![ContainerPort {
                    name: Some("http".into()),
                    container_port: i32::from(addr.port()),
                    ..Default::default()
                }]),
                ..Default::default()
            }],
            ..Default::default()
        }),
        status: Some(PodStatus {
            pod_ip: Some(addr.ip().to_string()),
            conditions: Some(vec![PodCondition {
                type_: "Ready".into(),
                status: "True".into(),
                ..Default::default()
            }]),
            container_statuses: Some(vec![ContainerStatus {
                name: "plugin".into(),
                ..Default::default()
            }]),
            ..Default::default()
        }),
    }
}

pub fn apply<K>(writer: &mut Writer<K>, object: K)
where
    K: kube::Resource + Clone,
    K::DynamicType: Clone + Eq + std::hash::Hash + Default,
{
    writer.apply_watcher_event(&watcher::Event::Apply(object));
}

impl World {
    /// Everything in place, every container stopped.
    pub async fn new() -> Self {
        Self::with_settings(settings()).await
    }

    pub async fn with_settings(settings: CallSettings) -> Self {
        Self::with(settings, Arc::new(TestReviewer)).await
    }

    pub async fn with_reviewer(reviewer: Arc<dyn Reviewer>) -> Self {
        Self::with(settings(), reviewer).await
    }

    pub async fn with(settings: CallSettings, reviewer: Arc<dyn Reviewer>) -> Self {
        let (index, mut writers) = Index::in_memory();

        apply(&mut writers.host, host_config(pre_approve_all(), "5m"));

        let mut plugin = Plugin::from_manifest(
            MANIFEST,
            &format!("e2e.local/echo@sha256:{}", "0".repeat(64)),
            vec![],
            true,
        )
        .unwrap();
        plugin.metadata = meta("echo", None);
        // The image admission read: what the UI's links name.
        plugin.status = Some(model::resources::PluginStatus {
            image: Some(model::resources::ImageStatus {
                digest: format!("sha256:{}", "0".repeat(64)),
                ..Default::default()
            }),
            ..Default::default()
        });
        apply(&mut writers.plugins, plugin);

        let plugins_config = BTreeMap::from([(
            "echo".to_string(),
            PluginConfig {
                enabled: Some(true),
                ..Default::default()
            },
        )]);
        let mut trust = ProjectTrust::of("proj", &plugins_config);
        trust.metadata = meta("proj", Some(NS));
        apply(&mut writers.project_trusts, trust);
        let mut project = Project::new(
            "proj",
            ProjectSpec {
                plugins: plugins_config,
            },
        );
        project.metadata = meta("proj", Some(NS));
        apply(&mut writers.projects, project);

        for c in [
            chat("general", ChannelKind::Channel, None, false),
            chat("general-t1", ChannelKind::Thread, Some("general"), false),
            chat("general-h", ChannelKind::Thread, Some("general"), true),
        ] {
            apply(&mut writers.channels, c);
        }
        for c in ["general", "general-t1"] {
            apply(&mut writers.instances, instance(c));
            let name = names::secret_name(&names::instance_name("echo", c));
            apply(
                &mut writers.secrets,
                Secret {
                    metadata: meta(&name, Some(NS)),
                    data: Some(
                        [(
                            "secret".to_string(),
                            ByteString(format!("{SECRET}\n").into_bytes()),
                        )]
                        .into(),
                    ),
                    ..Default::default()
                },
            );
        }

        let pods = index.pods.clone();
        let recorded = Arc::new(RecordingWriter::default());
        // The approvals' store is written by the desk's writer, as the watch would.
        let approvals_store =
            std::mem::replace(&mut writers.approvals, kube::runtime::reflector::store().1);
        let approvals = Arc::new(StoreApprovals::new(index.clone(), approvals_store));
        // The test binary's TLS provider for reqwest, before Calls builds its client (the API
        // server's main installs it).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let calls = Calls::new(
            settings,
            index.clone(),
            recorded.clone(),
            Arc::new(CallMetrics::unregistered()),
        );
        let marks = Arc::new(RecordingMarks::default());
        let mut state = HostState::new(
            calls,
            recorded.clone(),
            marks.clone(),
            reviewer,
            REVIEW_TTL,
            Arc::new(HostMetrics::unregistered()),
            ApprovalDesk::new(
                index.clone(),
                approvals.clone(),
                Arc::new(ApprovalMetrics::unregistered()),
            ),
        );
        let live = Arc::new(crate::live::Live::in_memory(
            state.index().clone(),
            Duration::from_secs(2),
        ));
        state.live = Some(live.clone());
        let ui_commands = Arc::new(crate::ui_commands::UiCommands::in_memory(
            state.index().clone(),
        ));
        state.ui_commands = Some(ui_commands.clone());
        let person = Arc::new(crate::person::Recorded::default());
        state.person = Some(person.clone());
        let tasks = Arc::new(crate::host_api::cronjobs::TaskList::default());
        state.tasks = Some(tasks.clone());
        let transcripts = Arc::new(crate::transcript::store::MemoryTranscripts::default());
        state.transcripts = Some(transcripts.clone());
        state.links = tokio::sync::watch::channel(Some(crate::ui::link::LinkKeys {
            current: crate::ui::link::LinkKey {
                id: "k".into(),
                secret: b"the tests' link key".to_vec(),
            },
            previous: None,
        }))
        .1;
        Self {
            state,
            writers,
            pods,
            plugin: FakePlugin::start().await,
            recorded,
            marks,
            live,
            ui_commands,
            person,
            tasks,
            approvals,
            transcripts,
        }
    }

    /// An agent run `id` of echo's `say` agent in `chat`, made at `created`, in the index.
    pub fn run(&mut self, id: &str, chat: &str, created: &str) -> AgentRun {
        let run = agent_run(id, chat, created);
        apply(&mut self.writers.runs, run.clone());
        run
    }

    /// A plugin's UI command `id` of `steps` to `chat`, waiting for the app (an hour): the
    /// plugin's call, answered once the app answers.
    pub async fn waiting_command(
        &self,
        chat: &str,
        id: &str,
        steps: serde_json::Value,
    ) -> tokio::task::JoinHandle<
        Result<sdk::api::ui_command::UiCommandAnswer, crate::ui_commands::CommandError>,
    > {
        let steps: Vec<sdk::api::ui_command::Step> = serde_json::from_value(steps).unwrap();
        let (ui, chat_name, id_owned) =
            (self.ui_commands.clone(), chat.to_string(), id.to_string());
        let call = tokio::spawn(async move {
            ui.send_as(
                id_owned,
                NS,
                &chat_name,
                "echo",
                steps,
                Duration::from_secs(3600),
            )
            .await
        });
        while !self
            .ui_commands
            .pending(NS, chat, jiff::Timestamp::now())
            .iter()
            .any(|c| c.id == id)
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        call
    }

    /// A plugin's control request `id` to `chat`'s live session, waiting for the app.
    pub async fn waiting_request(&self, chat: &str, id: &str) {
        let request = crate::live::request::ControlRequest::new(
            id.into(),
            chat,
            "echo",
            "interrupt",
            json!({}),
            jiff::Timestamp::now(),
            Duration::from_secs(3600),
        );
        let map = crate::live::session::config_map(NS, chat, "proj", None);
        let store = self.live.store();
        store.ensure(&map).await.unwrap();
        let name = crate::live::session::name(chat);
        store
            .merge(NS, &name, crate::asks::record::add(&request))
            .await
            .unwrap();
    }

    /// A pending approval named `name` of a call in `chat`, as the desk would have made it.
    pub async fn approval(&self, name: &str, chat: &str) {
        use crate::tool_calls::approval::{ApprovalWriter, Asked, approval_of};
        let input = serde_json::json!({ "text": "hi" });
        let asked = Asked {
            namespace: NS,
            chat,
            plugin: "echo",
            tool: "plugin_echo",
            agent: "say",
            run: "run-1",
            via: model::resources::ApprovalVia::Mcp,
            input: &input,
            owner: Default::default(),
        };
        let now = jiff::Timestamp::now();
        let mut a = approval_of(
            &asked,
            "default",
            now,
            now + std::time::Duration::from_secs(300),
        );
        a.metadata.name = Some(name.to_string());
        let made = self.approvals.create(&a).await.expect("made");
        let pending = model::resources::ToolCallApprovalStatus {
            decision: Some(model::resources::Decision::Pending),
            ..Default::default()
        };
        self.approvals
            .decide(&made, &pending)
            .await
            .expect("pending");
    }

    /// Sets the `default` risk profile and the wait (HostConfig, as an operator would).
    pub fn risk(&mut self, default: RiskProfile, wait: &str) {
        apply(&mut self.writers.host, host_config(default, wait));
    }

    /// Makes `chat`'s container Ready (a Pod with this uid, at the fake plugin).
    pub fn start(&mut self, chat: &str, uid: &str) {
        apply(&mut self.writers.pods, pod(chat, self.plugin.addr, uid));
        self.pods.refresh(&key(chat));
    }

    /// Sends requests through the router, from any task.
    pub fn sender(&self) -> Sender {
        Sender {
            state: self.state.clone(),
        }
    }

    /// Sends a request through the router.
    pub async fn send(&self, method: &str, path: &str, token: Option<&str>, body: &str) -> Answer {
        self.sender().send(method, path, token, body).await
    }

    pub async fn send_with(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &str,
        content_type: &str,
    ) -> Answer {
        self.sender()
            .send_with(method, path, token, body, content_type)
            .await
    }
}

/// Sends requests through the router.
#[derive(Clone)]
pub struct Sender {
    state: HostState,
}

impl Sender {
    /// Sends a request through the router.
    pub async fn send(&self, method: &str, path: &str, token: Option<&str>, body: &str) -> Answer {
        self.send_with(method, path, token, body, "application/json")
            .await
    }

    pub async fn send_with(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: &str,
        content_type: &str,
    ) -> Answer {
        // `//...` is a route of every namespace, under the prefix alone.
        let uri = match path.strip_prefix("//") {
            Some(raw) => format!("/api/host/v1/{raw}"),
            None => format!("/api/host/v1/namespaces/{NS}{path}"),
        };
        let mut request = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::CONTENT_TYPE, content_type);
        if let Some(t) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {t}"));
        }
        let response = crate::host_api::router(self.state.clone())
            .oneshot(request.body(Body::from(body.to_string())).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        Answer {
            status,
            headers,
            json: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            bytes,
        }
    }
}

/// Echo's inbox in `chat`, holding a card `id` (of the manifest's card
/// `score`) posted at `created` for each of `cards`.
pub fn inbox(chat: &str, cards: &[(&str, &str)]) -> ConfigMap {
    let instance = names::instance_name("echo", chat);
    let mut map = inbox::template(NS, &instance, "echo", "proj", chat, None);
    map.metadata.resource_version = Some("1".into());
    let data = map.data.get_or_insert_default();
    for (id, created) in cards {
        let entry = Entry {
            id: id.to_string(),
            kind: Kind::Card,
            card: Some("score".into()),
            title: format!("Score {id}"),
            data: Some(json!({ "score": 3 })),
            body: None,
            level: None,
            created: created.to_string(),
        };
        data.insert(id.to_string(), serde_json::to_string(&entry).unwrap());
    }
    map
}

/// A quality scan body of `n` functions `f0`, `f1`, ... scoring 0, 1, ... (the worst listed
/// last), with totals `files: 3`, `functions: n + 10` and `lines: 1234`.
pub fn scan_body(n: usize) -> Value {
    let functions: Vec<Value> = (0..n)
        .map(|i| {
            json!({"file": format!("src/f{i}.rs"), "name": format!("f{i}"), "line": i + 1,
                   "complexity": i % 7, "lines": 10 + i, "score": i})
        })
        .collect();
    json!({"commit": "3f2c1a9e", "totals": {"files": 3, "functions": n + 10, "lines": 1234},
           "functions": functions})
}

/// `chat`'s quality ConfigMap holding [`scan_body`]`(n)`, as the host stores it.
pub fn scan_map(chat_name: &str, n: usize) -> ConfigMap {
    use crate::quality::scan;
    let posted = scan::parse(scan_body(n).to_string().as_bytes()).expect("a scan");
    let stored = scan::Scan::of(posted, "2026-12-05T09:00:00Z".parse().unwrap());
    let mut map = scan::config_map(&chat(chat_name, ChannelKind::Channel, None, false));
    for (k, v) in scan::write(&stored) {
        map.data.get_or_insert_default().insert(k, v.unwrap());
    }
    map.metadata.resource_version = Some("1".into());
    map
}

/// An agent run `id` of echo's `say` agent in `chat`, made at `created`, queued.
pub fn agent_run(id: &str, chat: &str, created: &str) -> AgentRun {
    let mut run = AgentRun::new(
        id,
        AgentRunSpec {
            plugin: "echo".into(),
            channel: chat.into(),
            thread: "plugin:echo".into(),
            agent: "say".into(),
            read_only: true,
            tools: vec!["plugin_echo".into()],
            prompt: "Say hi, then echo it".into(),
        },
    );
    run.metadata = meta(id, Some(NS));
    run.metadata.labels = Some(names::labels("echo", "proj", chat, "run"));
    run.metadata.creation_timestamp = Some(Time(created.parse().expect("a time")));
    run
}

/// The instance key of echo in `chat`.
pub fn key(chat: &str) -> InstanceKey {
    InstanceKey::new(NS, &names::instance_name("echo", chat))
}

/// An answer of the router.
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub json: Value,
    pub bytes: Bytes,
}

impl Answer {
    /// The error code of an error answer.
    pub fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or("")
    }

    /// The message of an error answer.
    pub fn message(&self) -> &str {
        self.json["error"]["message"].as_str().unwrap_or("")
    }
}

/// Paths of echo's routes in a chat.
pub fn at(chat: &str, rest: &str) -> String {
    format!("/channels/{chat}/plugins/echo{rest}")
}
