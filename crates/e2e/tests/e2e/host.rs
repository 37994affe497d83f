//! The host API on the real control plane: the controller process runs the instances' Pods
//! (the echo plugin, through the kubelet stand-in), the host API runs in this process on a
//! loopback port with the admin client, and callers use ServiceAccount tokens that RBAC
//! grants (or does not). On an existing cluster the chart's API Service is the host API.
//! Each test reads what reached the plugin from its journal (`GET /x/journal`, through the
//! host API).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::ResourceExt;
use kube::api::PostParams;
use model::config::{PluginConfig, ScheduleEntry};
use model::names;
use model::resources::{ChannelKind, InstancePhase, Plugin, PluginInstance};
use model::schedule::ScheduleType;
use prometheus_client::registry::Registry;
use reqwest::StatusCode;
use serde_json::{Value, json};
use server::host_api::{HostSettings, HostState, PREFIX};

use crate::controller_support::*;
use crate::support::{E2eTest, Ns, test, wait};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "host::a_tool_call_to_a_stopped_instance_starts_its_pod_and_returns_the_echo",
            tool_from_zero,
        ),
        test(
            "host::input_and_output_schema_violations_give_is_error",
            schemas,
        ),
        test("host::a_caller_without_the_rbac_grant_gets_403", rbac),
        test(
            "host::a_hanging_plugin_trips_the_breaker_and_one_trial_closes_it",
            breaker,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "host::events_reach_exactly_the_containers_the_rules_name",
            events,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "host::two_replicas_send_one_settings_changed_per_config_write",
            settings_changed_once,
        )
        .local_only("starts two host APIs of its own"),
        test(
            "host::a_cronjob_every_minute_runs_its_action_with_trigger_schedule",
            cronjob,
        )
        .timeout(Duration::from_secs(240)),
    ]
}

/// The host API a test calls: on the local control plane one of the test's own, in this
/// process, on a loopback port, with the admin client (dropping it stops the server and its
/// watches); on an existing cluster the chart's API Service.
pub struct HostServer {
    /// Where this process reaches it.
    pub url: String,
    /// What HostConfig `apiUrl` says for Pods to reach it (None: the chart's own).
    pub url_for_pods: Option<String>,
    local: Option<LocalHost>,
}

struct LocalHost {
    registry: Arc<Registry>,
    serve: tokio::task::JoinHandle<()>,
}

/// Starts a host API (after the controller and the CRDs).
pub async fn host(ns: &Ns) -> anyhow::Result<HostServer> {
    host_with(ns, HostSettings::default()).await
}

/// Starts a host API with `settings` (on an existing cluster: the chart's, whatever they are).
pub async fn host_with(ns: &Ns, settings: HostSettings) -> anyhow::Result<HostServer> {
    setup(ns).await?;
    if let Some(existing) = ns.cluster().existing() {
        return Ok(HostServer {
            url: format!("http://{}", existing.api_addr),
            url_for_pods: existing.plugin_api_url.clone(),
            local: None,
        });
    }
    let mut registry = Registry::default();
    let state = HostState::new(ns.client(), settings, &mut registry).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let app = server::host_api::router(state);
    let serve = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(HostServer {
        url: url.clone(),
        url_for_pods: Some(url),
        local: Some(LocalHost {
            registry: Arc::new(registry),
            serve,
        }),
    })
}

impl HostServer {
    /// Its metrics: the registry of the server in this process, or what every API Pod of the
    /// chart's release serves on `/metrics`.
    pub async fn metrics(&self, ns: &Ns) -> anyhow::Result<String> {
        match (&self.local, ns.cluster().existing()) {
            (Some(local), _) => Ok(runtime::metrics::encode(&local.registry)),
            (None, Some(existing)) => in_cluster::api_metrics(ns.client(), existing).await,
            (None, None) => bail!("a host API with no metrics"),
        }
    }
}

impl Drop for HostServer {
    fn drop(&mut self) {
        if let Some(local) = &self.local {
            local.serve.abort();
        }
    }
}

/// What a caller may do: everything the host API offers, only running actions, or nothing.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Grant {
    All,
    Actions,
    None,
}

/// A ServiceAccount of the test's namespace with `grant`, and a token for it.
pub async fn caller_token(ns: &Ns, name: &str, grant: Grant) -> anyhow::Result<String> {
    let accounts = ns.api::<ServiceAccount>();
    let mut account = ServiceAccount::default();
    account.metadata.name = Some(name.into());
    apply(ns, &account).await?;
    let resources: &[&str] = match grant {
        Grant::All => &[
            "plugininstances/actions",
            "plugininstances/tools",
            "plugininstances/switches",
            "plugininstances/x",
            "channels/events",
        ],
        Grant::Actions => &["plugininstances/actions"],
        Grant::None => &[],
    };
    if !resources.is_empty() {
        grant_role(ns, name, resources).await?;
    }
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await?
        .status
        .and_then(|s| s.token)
        .context("the TokenRequest has no token")
}

/// A Role on the host API's resources, bound to the ServiceAccount `account`.
async fn grant_role(ns: &Ns, account: &str, resources: &[&str]) -> anyhow::Result<()> {
    let mut role = Role {
        rules: Some(vec![PolicyRule {
            api_groups: Some(vec!["plugins.loop.dev".into()]),
            resources: Some(resources.iter().map(|r| r.to_string()).collect()),
            verbs: ["create", "get", "update", "patch", "delete"]
                .map(String::from)
                .to_vec(),
            ..Default::default()
        }]),
        ..Default::default()
    };
    role.metadata.name = Some(account.into());
    apply(ns, &role).await?;
    let mut binding = RoleBinding {
        role_ref: RoleRef {
            api_group: Some("rbac.authorization.k8s.io".into()),
            kind: "Role".into(),
            name: account.into(),
        },
        subjects: Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: account.into(),
            namespace: Some(ns.name().into()),
            ..Default::default()
        }]),
        ..Default::default()
    };
    binding.metadata.name = Some(account.into());
    apply(ns, &binding).await?;
    Ok(())
}

/// Calls the host API as one caller, in the test's namespace.
#[derive(Clone)]
pub struct Caller {
    http: reqwest::Client,
    base: String,
    token: Option<String>,
}

/// An answer: status and JSON body (Null when none).
#[derive(Debug)]
pub struct Answer {
    pub status: StatusCode,
    pub json: Value,
    pub took: Duration,
}

impl Answer {
    pub fn code(&self) -> &str {
        self.json["error"]["code"].as_str().unwrap_or("")
    }
}

impl Caller {
    pub fn new(host: &HostServer, ns: &Ns, token: Option<String>) -> Self {
        server::host_api::call::install_crypto_provider();
        Self {
            http: reqwest::Client::builder()
                .no_proxy()
                .timeout(Duration::from_secs(150))
                .build()
                .expect("a client"),
            base: format!("{}{PREFIX}/namespaces/{}", host.url, ns.name()),
            token,
        }
    }

    pub async fn send(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Answer> {
        let mut request = self
            .http
            .request(method.parse()?, format!("{}{path}", self.base));
        if let Some(t) = &self.token {
            request = request.bearer_auth(t);
        }
        if let Some(b) = body {
            request = request.json(&b);
        }
        let started = Instant::now();
        let response = request
            .send()
            .await
            .with_context(|| format!("{method} {path}"))?;
        let status = response.status();
        let bytes = response.bytes().await?;
        Ok(Answer {
            status,
            json: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            took: started.elapsed(),
        })
    }

    pub async fn post(&self, path: &str, body: Value) -> anyhow::Result<Answer> {
        self.send("POST", path, Some(body)).await
    }

    /// Like `send`, but waits out the host's stores catching up with what the test just
    /// made (`channel_not_found`, `plugin_not_found`, `instance_pending`).
    pub async fn send_ready(
        &self,
        method: &str,
        path: &str,
        body: Option<Value>,
    ) -> anyhow::Result<Answer> {
        let until = Instant::now() + WAIT;
        loop {
            let a = self.send(method, path, body.clone()).await?;
            let catching_up = matches!(
                a.code(),
                "instance_pending" | "channel_not_found" | "plugin_not_found"
            );
            if !catching_up || Instant::now() > until {
                return Ok(a);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The `/events` requests the plugin's container in `chat` took, from its journal.
    pub async fn journal(
        &self,
        chat: &str,
        plugin: &str,
        route: &str,
    ) -> anyhow::Result<Vec<Value>> {
        let a = self
            .send_ready(
                "GET",
                &format!("/channels/{chat}/plugins/{plugin}/x/journal"),
                None,
            )
            .await?;
        ensure!(a.status == StatusCode::OK, "reading the journal: {a:?}");
        Ok(a.json["entries"]
            .as_array()
            .context("a journal")?
            .iter()
            .filter(|e| e["kind"] == "request" && e["route"] == route)
            .cloned()
            .collect())
    }
}

/// A plugin of the test's own whose tool is `echo`, with `edit` applied to its manifest.
fn tool_plugin_with(
    id: &str,
    edit: impl FnOnce(&mut BTreeMap<String, Value>),
) -> anyhow::Result<Plugin> {
    let mut plugin = echo_tool_plugin(id)?;
    edit(&mut plugin.spec.manifest.rest);
    Ok(plugin)
}

/// A plugin of the test's own (the echo plugin), with `edit` applied to its manifest.
fn plugin_with(
    id: &str,
    edit: impl FnOnce(&mut BTreeMap<String, Value>),
) -> anyhow::Result<Plugin> {
    let mut plugin = echo_plugin(id)?;
    edit(&mut plugin.spec.manifest.rest);
    Ok(plugin)
}

/// Installs the plugins, a trusted project enabling them (with their entries) and the chats;
/// waits for every instance to be made and its Secret to exist.
async fn world(
    ns: &Ns,
    plugins: &[(Plugin, PluginConfig)],
    chats: &[(&str, ChannelKind, Option<&str>, bool)],
) -> anyhow::Result<()> {
    for (p, _) in plugins {
        install(&ns, p).await?;
    }
    let config: BTreeMap<String, PluginConfig> = plugins
        .iter()
        .map(|(p, e)| (p.name_any(), e.clone()))
        .collect();
    apply(ns, &trusted_project("proj", config)).await?;
    for (name, kind, parent, hidden) in chats {
        let mut c = channel(name, "proj", *kind, *parent);
        c.spec.hidden = *hidden;
        apply(ns, &c).await?;
    }
    for (p, _) in plugins {
        for (chat, _, _, hidden) in chats {
            if *hidden {
                continue;
            }
            let instance = names::instance_name(&p.name_any(), chat);
            wait::matches(
                &ns.api::<PluginInstance>(),
                &instance,
                "a Stopped instance",
                WAIT,
                |i: &PluginInstance| {
                    i.status.as_ref().and_then(|s| s.phase) == Some(InstancePhase::Stopped)
                },
            )
            .await?;
            wait::exists(&ns.api::<Secret>(), &names::secret_name(&instance), WAIT).await?;
        }
    }
    Ok(())
}

fn enabled() -> PluginConfig {
    entry(true, &[])
}

async fn pods_of(ns: &Ns, instance: &str) -> anyhow::Result<Vec<Pod>> {
    let label = format!("{}={instance}", names::LABEL_INSTANCE);
    Ok(ns
        .api::<Pod>()
        .list(&kube::api::ListParams::default().labels(&label))
        .await?
        .items)
}

/// An agent's call of the echo tool.
fn say_hello() -> Value {
    json!({"input": {"text": "hello"}, "agent": "say", "thread_id": "th-1", "run_id": "run-1"})
}

async fn tool_from_zero(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let _echo = claim_echo_tool(&ns).await?;
    let host = host(&ns).await?;
    let id = plugin_id(&ns, "hz");
    world(
        &ns,
        &[(echo_tool_plugin(&id)?, enabled())],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    let instance = names::instance_name(&id, "general");
    ensure!(
        pods_of(&ns, &instance).await?.is_empty(),
        "no Pod before the call"
    );
    let caller = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "app", Grant::All).await?),
    );

    let tool = format!("/channels/general/plugins/{id}/tools/echo");
    let a = caller.send_ready("POST", &tool, Some(say_hello())).await?;
    ensure!(a.status == StatusCode::OK, "{a:?}");
    ensure!(
        a.json
            == json!({"content": [{"type": "text", "text": "hello"}],
                       "structured_content": {"echo": "hello"}, "is_error": false}),
        "{a:?}"
    );
    // The call started the Pod: demand on the instance, a Ready Pod.
    let i: PluginInstance = ns.get(&instance).await?;
    ensure!(
        i.status
            .as_ref()
            .and_then(|s| s.last_activity.as_ref())
            .is_some(),
        "lastActivity recorded: {:?}",
        i.status
    );
    let pods = pods_of(&ns, &instance).await?;
    ensure!(pods.len() == 1, "one Pod: {pods:?}");
    // The plugin got the call as the contract says, with the secret (it refuses any other).
    let calls = caller.journal("general", &id, "/tools/echo").await?;
    ensure!(calls.len() == 1, "{calls:?}");
    ensure!(
        calls[0]["body"]
            == json!({"input": {"text": "hello"}, "agent": "say", "thread_id": "th-1", "run_id": "run-1"}),
        "{calls:?}"
    );
    // A workflow may call with an empty agent and thread, and a longer limit.
    let workflow =
        json!({"input": {"text": "wf"}, "run_id": "workflow:run-1:node-1", "timeout_seconds": 120});
    let a = caller.post(&tool, workflow).await?;
    ensure!(
        a.json["structured_content"] == json!({"echo": "wf"}),
        "{a:?}"
    );
    Ok(())
}

async fn schemas(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let _echo = claim_echo_tool(&ns).await?;
    let host = host(&ns).await?;
    let id = plugin_id(&ns, "hs");
    // The manifest's echo tool promises a score the echo plugin never gives.
    let plugin = tool_plugin_with(&id, |m| {
        m.get_mut("tools").unwrap()[0]["output_schema"] = json!({
            "type": "object",
            "properties": {"score": {"type": "integer"}},
            "required": ["score"],
        });
    })?;
    world(
        &ns,
        &[(plugin, enabled())],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    let caller = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "app", Grant::All).await?),
    );
    let tool = format!("/channels/general/plugins/{id}/tools/echo");

    let a = caller
        .send_ready(
            "POST",
            &tool,
            Some(json!({"input": {"text": 5}, "agent": "say"})),
        )
        .await?;
    ensure!(a.status == StatusCode::OK, "{a:?}");
    ensure!(
        a.json["is_error"] == true && a.json["error_code"] == "input_invalid",
        "{a:?}"
    );

    let a = caller.post(&tool, say_hello()).await?;
    ensure!(
        a.json["is_error"] == true && a.json["error_code"] == "output_invalid",
        "{a:?}"
    );
    ensure!(a.json.get("structured_content").is_none(), "{a:?}");
    // Only the valid input reached the plugin.
    let calls = caller.journal("general", &id, "/tools/echo").await?;
    ensure!(
        calls.len() == 1,
        "the refused input never reached the plugin: {calls:?}"
    );
    ensure!(
        calls[0]["body"]["input"] == json!({"text": "hello"}),
        "{calls:?}"
    );
    Ok(())
}

async fn rbac(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let _echo = claim_echo_tool(&ns).await?;
    let host = host(&ns).await?;
    let id = plugin_id(&ns, "hr");
    world(
        &ns,
        &[(echo_tool_plugin(&id)?, enabled())],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    let tool = format!("/channels/general/plugins/{id}/tools/echo");

    let nobody = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "nobody", Grant::None).await?),
    );
    let a = nobody.post(&tool, say_hello()).await?;
    ensure!(
        a.status == StatusCode::FORBIDDEN && a.code() == "forbidden",
        "{a:?}"
    );
    let message = a.json["error"]["message"].as_str().unwrap_or("");
    ensure!(
        message.contains("create plugininstances/tools"),
        "{message}"
    );

    let anonymous = Caller::new(&host, &ns, None);
    let a = anonymous.post(&tool, say_hello()).await?;
    ensure!(a.status == StatusCode::UNAUTHORIZED, "{a:?}");
    let forged = Caller::new(&host, &ns, Some("not-a-token".into()));
    let a = forged.post(&tool, say_hello()).await?;
    ensure!(
        a.status == StatusCode::UNAUTHORIZED && a.code() == "invalid_token",
        "{a:?}"
    );

    // Granted actions only: the action runs, the tool is refused.
    let runner = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "runner", Grant::Actions).await?),
    );
    let a = runner
        .send_ready(
            "POST",
            &format!("/channels/general/plugins/{id}/actions/ping"),
            Some(json!({"trigger": "manual"})),
        )
        .await?;
    ensure!(a.status == StatusCode::ACCEPTED, "{a:?}");
    let a = runner.post(&tool, say_hello()).await?;
    ensure!(a.status == StatusCode::FORBIDDEN, "{a:?}");
    // Nothing but the action reached the plugin.
    let admin = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "app", Grant::All).await?),
    );
    ensure!(
        admin
            .journal("general", &id, "/tools/echo")
            .await?
            .is_empty()
    );
    Ok(())
}

async fn breaker(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let _echo = claim_echo_tool(&ns).await?;
    let host = host(&ns).await?;
    // On the local control plane, a second host API stands for the chart's second replica
    // (an existing cluster's release runs one).
    let replica = match ns.cluster().existing() {
        None => Some(host_with(&ns, HostSettings::default()).await?),
        Some(_) => None,
    };
    let id = plugin_id(&ns, "hb");
    world(
        &ns,
        &[(echo_tool_plugin(&id)?, enabled())],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    let instance = names::instance_name(&id, "general");
    let caller = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "app", Grant::All).await?),
    );
    let at = |rest: &str| format!("/channels/general/plugins/{id}{rest}");

    // A switch that is on keeps the container up through the breaker's 30 s.
    let a = caller
        .send_ready("POST", &at("/switches/mode"), Some(json!({"on": true})))
        .await?;
    ensure!(a.status == StatusCode::OK && a.json["on"] == true, "{a:?}");
    ensure!(a.json["title"] == "Mode is on", "{a:?}");
    wait::matches(
        &ns.api::<PluginInstance>(),
        &instance,
        "the switch kept on the instance",
        WAIT,
        |i: &PluginInstance| {
            i.status
                .as_ref()
                .is_some_and(|s| s.switches.iter().any(|w| w.id == "mode" && w.on))
        },
    )
    .await?;

    // The next 3 actions hang past the 10 s limit.
    let a = caller
        .post(
            &at("/x/hang"),
            json!({"count": 3, "seconds": 13, "kinds": ["actions"]}),
        )
        .await?;
    ensure!(a.status == StatusCode::OK, "{a:?}");
    let manual = json!({"trigger": "manual"});
    let ping = at("/actions/ping");
    let hung = futures::future::join_all((0..3).map(|_| caller.post(&ping, manual.clone()))).await;
    for a in hung {
        let a = a?;
        ensure!(
            a.status == StatusCode::GATEWAY_TIMEOUT && a.code() == "plugin_timeout",
            "{a:?}"
        );
        ensure!(a.took >= Duration::from_secs(9), "{a:?}");
    }
    let opened = Instant::now();

    // The 4th fails at once.
    let a = caller.post(&at("/actions/ping"), manual.clone()).await?;
    ensure!(
        a.status == StatusCode::SERVICE_UNAVAILABLE && a.code() == "breaker_open",
        "{a:?}"
    );
    ensure!(
        a.took < Duration::from_millis(100),
        "the 4th call took {:?}",
        a.took
    );
    let t = caller.post(&at("/tools/echo"), say_hello()).await?;
    ensure!(t.json["error_code"] == "breaker_open", "{t:?}");
    let shown = wait::matches(
        &ns.api::<PluginInstance>(),
        &instance,
        "the breaker Open on the instance",
        WAIT,
        |i: &PluginInstance| {
            i.status
                .as_ref()
                .and_then(|s| s.breaker.as_ref())
                .is_some_and(|b| b.state == "Open" && b.open_until.is_some())
        },
    )
    .await?
    .status
    .and_then(|s| s.breaker)
    .context("the breaker on the instance")?;
    if let Some(replica) = &replica {
        // The other replica never called the container, yet fails at once too once its
        // store has the status, and leaves the status as it is.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let via_replica = Caller::new(replica, &ns, caller.token.clone());
        let a = via_replica.post(&ping, manual.clone()).await?;
        ensure!(
            a.status == StatusCode::SERVICE_UNAVAILABLE
                && a.code() == "breaker_open"
                && a.took < Duration::from_millis(100),
            "the other replica: {a:?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = ns.api::<PluginInstance>().get(&instance).await?;
        let now = now.status.and_then(|s| s.breaker);
        ensure!(
            now.as_ref() == Some(&shown),
            "the other replica changed the breaker shown from {shown:?} to {now:?}"
        );
    }
    let metrics = host.metrics(&ns).await?;
    let gauge = format!(
        "loop_plugins_host_breaker_state{{namespace=\"{}\",instance=\"{instance}\"}} 1",
        ns.name()
    );
    ensure!(metrics.contains(&gauge), "{gauge} in\n{metrics}");

    // 30 s after it opened, one trial call goes through and its answer closes it.
    let left = Duration::from_millis(30_500).saturating_sub(opened.elapsed());
    tokio::time::sleep(left).await;
    let a = caller.post(&at("/actions/ping"), manual.clone()).await?;
    ensure!(a.status == StatusCode::ACCEPTED, "the trial: {a:?}");
    let a = caller.post(&at("/actions/ping"), manual).await?;
    ensure!(a.status == StatusCode::ACCEPTED, "after the trial: {a:?}");
    wait::matches(
        &ns.api::<PluginInstance>(),
        &instance,
        "the breaker Closed on the instance",
        WAIT,
        |i: &PluginInstance| {
            i.status
                .as_ref()
                .and_then(|s| s.breaker.as_ref())
                .is_some_and(|b| b.state == "Closed" && b.open_until.is_none())
        },
    )
    .await?;
    // What reached the plugin: the 3 that hung, the trial and the one after; nothing between.
    let pings = caller.journal("general", &id, "/actions/ping").await?;
    ensure!(pings.len() == 5, "{pings:#?}");
    Ok(())
}

/// The chats of the events test: a channel, a thread of it, a hidden thread.
const CHATS: [(&str, ChannelKind, Option<&str>, bool); 3] = [
    ("general", ChannelKind::Channel, None, false),
    ("general-t1", ChannelKind::Thread, Some("general"), false),
    ("general-h", ChannelKind::Thread, Some("general"), true),
];

async fn events(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let host = host(&ns).await?;
    // a: the thread's container; b: both, started only while `verbose` is on (it is off);
    // c: the channel's, started by `verbose`, which its project turns on; d: not subscribed.
    let (a, b, c, d) = (
        plugin_id(&ns, "ha"),
        plugin_id(&ns, "hb"),
        plugin_id(&ns, "hc"),
        plugin_id(&ns, "hd"),
    );
    let gated = |thread_events: &'static str| {
        move |m: &mut BTreeMap<String, Value>| {
            m.insert("thread_events".into(), json!(thread_events));
            m.insert("events_start".into(), json!({"settings": ["verbose"]}));
        }
    };
    let mut verbose = enabled();
    verbose.settings.insert("verbose".into(), json!(true));
    world(
        &ns,
        &[
            (echo_plugin(&a)?, enabled()),
            (plugin_with(&b, gated("both"))?, enabled()),
            (plugin_with(&c, gated("channel"))?, verbose),
            (
                plugin_with(&d, |m| {
                    m.insert("events".into(), json!(["agent.status"]));
                })?,
                enabled(),
            ),
        ],
        &CHATS,
    )
    .await?;
    let caller = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "app", Grant::All).await?),
    );

    // b's channel container runs already (a call started it): it gets every event.
    let warm = caller
        .send_ready(
            "GET",
            &format!("/channels/general/plugins/{b}/x/warm"),
            None,
        )
        .await?;
    ensure!(warm.status == StatusCode::OK, "{warm:?}");

    let message = json!({"type": "message.created", "data": {"text": "hi"}});
    let r = caller
        .send_ready("POST", "/channels/general-t1/events", Some(message.clone()))
        .await?;
    ensure!(r.status == StatusCode::OK, "{r:?}");
    let mut got: Vec<(String, String, bool, bool)> = r.json["deliveries"]
        .as_array()
        .context("deliveries")?
        .iter()
        .map(|d| {
            ensure!(d["thread_id"] == "general-t1", "{d}");
            Ok((
                d["plugin"].as_str().unwrap_or("").to_string(),
                d["chat"].as_str().unwrap_or("").to_string(),
                d["start"] == true,
                d["delivered"] == true,
            ))
        })
        .collect::<anyhow::Result<_>>()?;
    got.sort();
    let mut want = vec![
        (a.clone(), "general-t1".to_string(), true, true),
        (b.clone(), "general".to_string(), false, true),
        (c.clone(), "general".to_string(), true, true),
    ];
    want.sort();
    ensure!(got == want, "deliveries {got:?}, want {want:?}\n{}", r.json);
    let skipped = r.json["skipped"].as_array().context("skipped")?;
    ensure!(
        skipped.len() == 1
            && skipped[0]["plugin"] == b.as_str()
            && skipped[0]["chat"] == "general-t1",
        "{}",
        r.json
    );

    // Hidden threads never get events.
    let r = caller.post("/channels/general-h/events", message).await?;
    ensure!(r.json["deliveries"] == json!([]), "{r:?}");
    ensure!(
        r.json["ignored"].as_str().unwrap_or("").contains("hidden"),
        "{r:?}"
    );

    // settings.changed: only the containers already running, without a thread id.
    let r = caller
        .post(
            "/channels/general/events",
            json!({"type": "settings.changed"}),
        )
        .await?;
    let mut got: Vec<String> = r.json["deliveries"]
        .as_array()
        .context("deliveries")?
        .iter()
        .filter(|d| d["delivered"] == true)
        .map(|d| d["plugin"].as_str().unwrap_or("").to_string())
        .collect();
    got.sort();
    let mut want = vec![b.clone(), c.clone()];
    want.sort();
    ensure!(
        got == want,
        "settings.changed went to {got:?}, want {want:?}: {}",
        r.json
    );

    // The journals agree, container by container.
    let events_of = |entries: Vec<Value>| -> Vec<(String, Option<String>)> {
        entries
            .iter()
            .map(|e| {
                (
                    e["body"]["type"].as_str().unwrap_or("").to_string(),
                    e["body"]["thread_id"].as_str().map(String::from),
                )
            })
            .collect()
    };
    let t1 = || Some("general-t1".to_string());
    let expect: [(&str, &str, Vec<(String, Option<String>)>); 5] = [
        (
            a.as_str(),
            "general-t1",
            vec![("message.created".into(), t1())],
        ),
        (a.as_str(), "general", vec![]),
        (
            b.as_str(),
            "general",
            vec![
                ("message.created".into(), t1()),
                ("settings.changed".into(), None),
            ],
        ),
        (b.as_str(), "general-t1", vec![]),
        (
            c.as_str(),
            "general",
            vec![
                ("message.created".into(), t1()),
                ("settings.changed".into(), None),
            ],
        ),
    ];
    for (plugin, chat, want) in expect {
        let entries = caller.journal(chat, plugin, "/events").await?;
        let got = events_of(entries.clone());
        ensure!(got == want, "{plugin} in {chat} got {got:?}, want {want:?}");
        if let Some(settings) = entries
            .iter()
            .find(|e| e["body"]["type"] == "settings.changed")
        {
            let verbose = settings["body"]["data"]["settings"]["verbose"].clone();
            ensure!(verbose == json!(plugin == c), "{plugin}: {settings}");
        }
    }
    // d never had a container started.
    for chat in ["general", "general-t1"] {
        let instance = names::instance_name(&d, chat);
        ensure!(
            pods_of(&ns, &instance).await?.is_empty(),
            "{instance} has a Pod"
        );
    }

    // A config write sends settings.changed by itself: c's project turns verbose off.
    let config: BTreeMap<String, PluginConfig> = [&a, &b, &c, &d]
        .into_iter()
        .map(|id| (id.clone(), enabled()))
        .collect();
    apply(&ns, &trusted_project("proj", config)).await?;
    let until = Instant::now() + WAIT;
    loop {
        let entries = caller.journal("general", &c, "/events").await?;
        let last = entries
            .last()
            .map(|e| e["body"].clone())
            .unwrap_or_default();
        if last["type"] == "settings.changed" && last["data"]["settings"]["verbose"] == false {
            ensure!(last.get("thread_id").is_none(), "{last}");
            break;
        }
        ensure!(
            Instant::now() < until,
            "no settings.changed after the write: {entries:#?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(())
}

/// Two host APIs (as the chart's two replicas, sharing a record in the test's namespace) both
/// see the project's config write; the running container gets one `settings.changed`.
async fn settings_changed_once(ns: Ns) -> anyhow::Result<()> {
    // Alone: every other test's host API (and API server) sends settings.changed for every
    // project it sees, this one's included.
    let _alone = exclusive().await;
    let replicas = HostSettings {
        replicas_namespace: Some(ns.name().to_string()),
        ..HostSettings::default()
    };
    let (one, two) = tokio::try_join!(host_with(&ns, replicas.clone()), host_with(&ns, replicas))?;
    let plugin = plugin_id(&ns, "hw");
    world(
        &ns,
        &[(echo_plugin(&plugin)?, enabled())],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    let token = caller_token(&ns, "app", Grant::All).await?;
    let (via_one, via_two) = (
        Caller::new(&one, &ns, Some(token.clone())),
        Caller::new(&two, &ns, Some(token)),
    );
    // The container runs (settings.changed goes only to running ones), and both replicas
    // know it.
    for caller in [&via_one, &via_two] {
        let warm = caller
            .send_ready(
                "GET",
                &format!("/channels/general/plugins/{plugin}/x/warm"),
                None,
            )
            .await?;
        ensure!(warm.status == StatusCode::OK, "{warm:?}");
    }

    let mut verbose = enabled();
    verbose.settings.insert("verbose".into(), json!(true));
    let project = apply(
        &ns,
        &trusted_project("proj", BTreeMap::from([(plugin.clone(), verbose)])),
    )
    .await?;
    let changed = |entries: &[Value]| -> Vec<Value> {
        entries
            .iter()
            .filter(|e| e["body"]["type"] == "settings.changed")
            .map(|e| e["body"].clone())
            .collect()
    };
    let until = Instant::now() + WAIT;
    loop {
        let entries = via_one.journal("general", &plugin, "/events").await?;
        if !changed(&entries).is_empty() {
            break;
        }
        ensure!(
            Instant::now() < until,
            "no settings.changed after the write: {entries:#?}"
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    // Time for the other replica's, were it to send one too.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sent = changed(&via_two.journal("general", &plugin, "/events").await?);
    ensure!(
        sent.len() == 1 && sent[0]["data"]["settings"]["verbose"] == true,
        "the container got {} settings.changed, not one: {sent:#?}",
        sent.len()
    );

    // The record names the project's write.
    let record = ns
        .api::<k8s_openapi::api::core::v1::ConfigMap>()
        .get(server::host_api::settings_sent::RECORD)
        .await?;
    let (uid, generation) = (
        project.uid().context("the project's uid")?,
        project
            .metadata
            .generation
            .context("the project's generation")?,
    );
    ensure!(
        record.data.as_ref().and_then(|d| d.get(&uid)) == Some(&generation.to_string()),
        "the record holds {:?}, not {uid}: {generation}",
        record.data
    );
    Ok(())
}

async fn cronjob(ns: Ns) -> anyhow::Result<()> {
    let _exclusive = exclusive().await;
    let host = host(&ns).await?;
    // The CronJob's `trigger` reaches the host API at the HostConfig's apiUrl.
    let mut spec = host_spec(true);
    spec.api_url = host.url_for_pods.clone();
    apply_host(ns.client(), spec).await?;
    let result = run_cronjob(&ns, &host).await;
    apply_host(ns.client(), host_spec(true)).await?;
    result
}

async fn run_cronjob(ns: &Ns, host: &HostServer) -> anyhow::Result<()> {
    // The ServiceAccount CronJobs run as, with the one grant `trigger` needs.
    let account = controller::cronjob::TRIGGER_SERVICE_ACCOUNT;
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some(account.into());
    apply(ns, &sa).await?;
    grant_role(ns, account, &["plugininstances/actions"]).await?;

    let id = plugin_id(ns, "hj");
    let every_minute = ScheduleEntry {
        enabled: Some(true),
        kind: Some(ScheduleType::Cron),
        schedule: Some("* * * * *".into()),
    };
    world(
        ns,
        &[(echo_plugin(&id)?, entry(true, &[("tick", every_minute)]))],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    let task = names::cronjob_name(&id, "general", "tick");
    let cj = wait::exists(&ns.api::<CronJob>(), &task, WAIT).await?;
    ensure!(cj.spec.schedule == "* * * * *", "{:?}", cj.spec);

    // The next minute's Job runs `loop-plugins trigger`, which must succeed.
    let label = format!("{}={id}", names::LABEL_PLUGIN);
    let jobs = list_until(
        &ns.api::<Job>(),
        Some(&label),
        "a Job of the CronJob to finish",
        Duration::from_secs(150),
        |jobs: &[Job]| {
            jobs.iter().any(|j| {
                j.status
                    .as_ref()
                    .is_some_and(|s| s.succeeded.unwrap_or(0) > 0 || s.failed.unwrap_or(0) > 0)
            })
        },
    )
    .await?;
    let failed = jobs
        .iter()
        .any(|j| j.status.as_ref().is_some_and(|s| s.failed.unwrap_or(0) > 0));
    if failed {
        let pods = ns
            .api::<Pod>()
            .list(&kube::api::ListParams::default().labels(&label))
            .await?;
        let names: Vec<String> = pods.items.iter().map(|p| p.name_any()).collect();
        let logs = names.iter().map(|name| ns.pod_log(name, "trigger"));
        let logs: Vec<String> = futures::future::join_all(logs).await;
        bail!("the trigger Job failed: {logs:#?}");
    }
    let caller = Caller::new(host, ns, Some(caller_token(ns, "app", Grant::All).await?));
    let ticks = caller.journal("general", &id, "/actions/tick").await?;
    ensure!(!ticks.is_empty(), "the plugin saw no tick");
    ensure!(
        ticks[0]["body"]["trigger"] == "schedule" && ticks[0]["body"]["task_id"] == task.as_str(),
        "{ticks:#?}"
    );
    Ok(())
}
