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
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{PolicyRule, Role, RoleBinding, RoleRef, Subject};
use kube::Api;
use kube::ResourceExt;
use kube::api::PostParams;
use model::config::{PluginConfig, ScheduleEntry};
use model::names;
use model::resources::{ChannelKind, InstancePhase, Plugin, PluginInstance};
use model::schedule::{ScheduleType, ticks};
use prometheus_client::registry::Registry;
use reqwest::StatusCode;
use serde_json::{Value, json};
use server::calls::CallSettings;
use server::host_api::PREFIX;
use server::serve::{Options, Server};

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
            "host::the_echo_plugin_runs_under_the_gate_with_no_denial_in_normal_use",
            gated,
        )
        .timeout(Duration::from_secs(180))
        .not_on_rehearsal("the gate refuses to run a plugin as root"),
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
            "host::a_posted_quality_scan_is_read_as_hotspots_and_sent_as_quality_scanned",
            quality_scan,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "host::a_click_and_the_plugins_put_that_arrive_together_both_survive",
            switch_race,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "host::a_settings_only_edit_and_a_trust_are_told_to_clients_as_plugins_changed",
            config_writes_reach_clients,
        ),
        test(
            "host::a_switch_state_is_forgotten_when_the_plugin_stops_declaring_it_or_loses_the_capability",
            switch_state_forgotten,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "host::two_replicas_send_one_settings_changed_per_config_write",
            settings_changed_once,
        )
        .local_only("starts two host APIs of its own"),
        test(
            "host::a_config_write_while_nobody_leads_the_fanout_is_sent_by_the_next_leader",
            |ns| settings_changed_across_a_handover(ns, Duration::ZERO),
        )
        .timeout(Duration::from_secs(180)),
        test(
            "host::a_config_write_older_than_any_replicas_backlog_is_sent_by_the_next_leader",
            |ns| {
                settings_changed_across_a_handover(
                    ns,
                    runtime::leader::HANDOVER_WINDOW + Duration::from_secs(3),
                )
            },
        )
        .timeout(Duration::from_secs(240)),
        test(
            "host::a_cronjob_every_minute_runs_its_action_with_trigger_schedule",
            cronjob,
        )
        .timeout(Duration::from_secs(240)),
        test(
            "host::a_90m_interval_task_runs_its_action_on_the_tick_that_completes_it",
            interval_cronjob,
        )
        .timeout(Duration::from_secs(240)),
        test("host::a_plugins_data_outlives_its_pod", data_outlives_pod)
            .timeout(Duration::from_secs(180)),
        test(
            "host::the_charts_network_policy_lets_a_plugin_pod_reach_only_the_api_dns_and_its_approved_egress",
            network_policy,
        )
        .timeout(Duration::from_secs(420))
        .cluster_only("the kubelet stand-in's Pods share this machine's network: no NetworkPolicy"),
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
    /// Its watches and fan-out stop when it is dropped.
    _server: Server,
    serve: tokio::task::JoinHandle<()>,
}

/// A server of the test's own, as the chart runs them: every server of the local suite (these,
/// the API server processes and the suite's fan-out replica) elects the one that does the
/// fan-out on the same Lease.
fn local_options(calls: CallSettings, person: kube::Config) -> Options {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    Options {
        api: Default::default(),
        calls,
        review_ttl: server::host_api::state::REVIEW_TTL,
        ui: Default::default(),
        person: Some(person),
        lease: Some((
            crate::controller_support::CONTROLLER_NAMESPACE.to_string(),
            crate::controller_support::FANOUT_LEASE.to_string(),
            format!("e2e-host-{}-{n}", std::process::id()),
        )),
    }
}

/// Starts the suite's own fan-out replica on the local control plane, with the controller
/// (before any test's server, so it takes the fan-out Lease first); the cluster keeps it for
/// the whole run. The Lease stays with it as with a settled Deployment's replica, instead of
/// changing hands whenever a test's server stops. Every server can reach every container, so
/// it sends what the tests' own servers would; the tests that move the Lease do so on purpose.
pub async fn start_fanout_replica(ns: &Ns) -> anyhow::Result<()> {
    ns.cluster()
        .keep_fanout_replica(Server::start(
            ns.client(),
            local_options(CallSettings::default(), ns.cluster().config()),
        ))
        .await
}

/// Starts a host API (after the controller and the CRDs).
pub async fn host(ns: &Ns) -> anyhow::Result<HostServer> {
    host_with(ns, CallSettings::default()).await
}

/// Starts a host API with `settings` (on an existing cluster: the chart's, whatever they are).
pub async fn host_with(ns: &Ns, settings: CallSettings) -> anyhow::Result<HostServer> {
    setup(ns).await?;
    if let Some(existing) = ns.cluster().existing() {
        return Ok(HostServer {
            url: format!("http://{}", existing.api_addr),
            url_for_pods: existing.plugin_api_url.clone(),
            local: None,
        });
    }
    let server = Server::start(ns.client(), local_options(settings, ns.cluster().config())).await?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let app = server.router.clone();
    let serve = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(HostServer {
        url: url.clone(),
        url_for_pods: Some(url),
        local: Some(LocalHost {
            registry: server.registry.clone(),
            _server: server,
            serve,
        }),
    })
}

impl HostServer {
    /// The stores of the server in this process (None on an existing cluster).
    pub fn index(&self) -> Option<Arc<server::index::Index>> {
        self.local.as_ref().map(|l| l._server.index.clone())
    }

    /// Its metrics: the registry of the server in this process, or what every API Pod of the
    /// chart's release serves on `/metrics`.
    /// Serves the metrics of the server in this process on a loopback port of their own, as
    /// the chart's `api-metrics` port does (None on an existing cluster): the address, and
    /// the task serving it.
    pub async fn serve_metrics(
        &self,
    ) -> anyhow::Result<Option<(std::net::SocketAddr, tokio::task::JoinHandle<()>)>> {
        let Some(local) = &self.local else {
            return Ok(None);
        };
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let app = runtime::metrics::router(local.registry.clone());
        let serve = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Some((addr, serve)))
    }

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
    let resources: &[&str] = match grant {
        Grant::All => &[
            "plugininstances/actions",
            "plugininstances/tools",
            "plugininstances/switches",
            "plugininstances/panels",
            "plugininstances/x",
            "channels/events",
            "channels/cards",
            "channels/notifications",
            "channels/live",
            "channels/uicommands",
            "channels/tasks",
            "channels/quality",
        ],
        Grant::Actions => &["plugininstances/actions"],
        Grant::None => &[],
    };
    token_with(ns, name, resources).await
}

/// A ServiceAccount of the test's namespace allowed every verb on `resources` of group
/// `plugins.loop.dev`, and a token for it.
pub async fn token_with(ns: &Ns, name: &str, resources: &[&str]) -> anyhow::Result<String> {
    let accounts = ns.api::<ServiceAccount>();
    let mut account = ServiceAccount::default();
    account.metadata.name = Some(name.into());
    apply(ns, &account).await?;
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
            verbs: [
                "create", "get", "list", "update", "patch", "delete", "watch",
            ]
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

    /// Starts the plugin's container in `chat` (any call does; this one asks the echo plugin
    /// for nothing), waiting out the stores catching up.
    pub async fn warm(&self, chat: &str, plugin: &str) -> anyhow::Result<()> {
        let path = format!("/channels/{chat}/plugins/{plugin}/x/warm");
        let warm = self.send_ready("GET", &path, None).await?;
        ensure!(warm.status == StatusCode::OK, "GET {path}: {warm:?}");
        Ok(())
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
pub(crate) async fn world(
    ns: &Ns,
    plugins: &[(Plugin, PluginConfig)],
    chats: &[(&str, ChannelKind, Option<&str>, bool)],
) -> anyhow::Result<()> {
    for (p, _) in plugins {
        install(ns, p).await?;
    }
    let config: BTreeMap<String, PluginConfig> = plugins
        .iter()
        .map(|(p, e)| (p.name_any(), e.clone()))
        .collect();
    apply_trusted(ns, "proj", config).await?;
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

pub(crate) fn enabled() -> PluginConfig {
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

/// HostConfig `gates.agentgate.enabled`: the echo plugin's Pod installs the gate from our image
/// (init container `install-gate`) and runs its command under it (Landlock, seccomp, the audit
/// on the container log); the instance says so (`Gated`), and normal use, a tool call and the
/// journal the plugin keeps in /data, goes through with no denial. On kind, in a real
/// container under the `restricted` Pod Security level, the container log is read for denials.
async fn gated(ns: Ns) -> anyhow::Result<()> {
    let _alone = exclusive().await;
    setup(&ns).await?;
    let _echo = claim_echo_tool(&ns).await?;
    let host = host(&ns).await?;
    let mut spec = host_spec(true);
    spec.gates.agentgate.enabled = true;
    spec.gates.audit.destination = "stdout".into();
    apply_host(ns.client(), spec).await?;
    let result = gated_use(&ns, &host).await;
    apply_host(ns.client(), host_spec(true)).await?;
    result
}

async fn gated_use(ns: &Ns, host: &HostServer) -> anyhow::Result<()> {
    let id = plugin_id(ns, "hg");
    world(
        ns,
        &[(echo_tool_plugin(&id)?, enabled())],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    let instance = names::instance_name(&id, "general");
    let caller = Caller::new(host, ns, Some(caller_token(ns, "app", Grant::All).await?));
    let tool = format!("/channels/general/plugins/{id}/tools/echo");
    let a = caller.send_ready("POST", &tool, Some(say_hello())).await?;
    ensure!(a.status == StatusCode::OK, "{a:?}");
    ensure!(
        a.json["structured_content"] == json!({"echo": "hello"}),
        "{a:?}"
    );
    let calls = caller.journal("general", &id, "/tools/echo").await?;
    ensure!(calls.len() == 1, "the journal in /data: {calls:?}");

    let shown = wait::matches(
        &ns.api::<PluginInstance>(),
        &instance,
        "Gated True on the instance, which names its Pod",
        WAIT,
        |i: &PluginInstance| {
            // The tool call is answered once the API server sees the Pod Ready; the
            // controller's status naming the Pod may come a moment later.
            i.status.as_ref().is_some_and(|s| {
                s.pod.is_some()
                    && s.conditions.iter().any(|c| {
                        c.r#type == "Gated"
                            && c.status == model::resources::ConditionStatus::True
                            && c.reason == "GateOn"
                    })
            })
        },
    )
    .await?;
    let pod_name = shown
        .status
        .and_then(|s| s.pod)
        .context("the instance names its Pod")?;
    let pod: Pod = ns.get(&pod_name).await?;
    let spec = pod.spec.context("the Pod's spec")?;
    let command = spec.containers[0].command.clone().unwrap_or_default();
    ensure!(
        command.first().map(String::as_str) == Some("/loop-gate/loop-plugins")
            && command.get(1).map(String::as_str) == Some("gate")
            && command.last().map(String::as_str) == Some("/echo-plugin"),
        "the plugin's command runs under the gate: {command:?}"
    );
    let init = spec.init_containers.unwrap_or_default();
    ensure!(
        init.iter().any(|c| c.name == "install-gate"),
        "the gate's init container: {init:?}"
    );
    // The audit, on the plugin container's log: the gate's start line, and no denial.
    let log = match ns.cluster().existing() {
        Some(existing) if existing.real_containers => {
            Some(ns.kubectl(["logs", &pod_name, "-c", "plugin"]).await?)
        }
        Some(_) => None,
        None => {
            let file = ns
                .cluster()
                .dev()?
                .run_dir()
                .join("kubelet/logs")
                .join(ns.name())
                .join(&pod_name)
                .join("plugin.log");
            Some(std::fs::read_to_string(&file).with_context(|| file.display().to_string())?)
        }
    };
    if let Some(log) = log {
        ensure!(
            log.contains("\"event\":\"start\""),
            "the gate's audit is not on the log:\n{log}"
        );
        ensure!(
            !log.contains("\"decision\":\"deny\""),
            "a denial in normal use:\n{log}"
        );
    }
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

/// The breaker an instance shows.
/// Makes the echo plugin `id` in chat `general` hang its next 3 actions past the 10 s limit,
/// and calls `ping` 3 times at once: the answers, which trip its breaker.
pub(crate) async fn hang_three_actions(caller: &Caller, id: &str) -> anyhow::Result<Vec<Answer>> {
    let at = |rest: &str| format!("/channels/general/plugins/{id}{rest}");
    let hang = caller
        .send_ready(
            "POST",
            &at("/x/hang"),
            Some(json!({"count": 3, "seconds": 13, "kinds": ["actions"]})),
        )
        .await?;
    ensure!(hang.status == StatusCode::OK, "{hang:?}");
    let ping = at("/actions/ping");
    let manual = json!({"trigger": "manual"});
    futures::future::join_all((0..3).map(|_| caller.post(&ping, manual.clone())))
        .await
        .into_iter()
        .collect()
}

fn breaker_of(i: &PluginInstance) -> Option<&model::resources::BreakerState> {
    i.status.as_ref().and_then(|s| s.breaker.as_ref())
}

async fn breaker(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let _echo = claim_echo_tool(&ns).await?;
    let host = host(&ns).await?;
    // On the local control plane, a second host API stands for the chart's second replica
    // (an existing cluster's release runs one).
    let replica = match ns.cluster().existing() {
        None => Some(host_with(&ns, CallSettings::default()).await?),
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
    let instances = ns.api::<PluginInstance>();
    let caller = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "app", Grant::All).await?),
    );
    let at = |rest: &str| format!("/channels/general/plugins/{id}{rest}");

    // Activity keeps the container up through the breaker's 30 s, as a chat in use would (a
    // switch that is on starts it only when the controller starts, then idle applies).
    let _active = keep_active(&ns, &instance);
    let a = caller
        .send_ready("POST", &at("/switches/mode"), Some(json!({"on": true})))
        .await?;
    ensure!(a.status == StatusCode::OK && a.json["on"] == true, "{a:?}");
    ensure!(a.json["title"] == "Mode is on", "{a:?}");

    // The next 3 actions hang past the 10 s limit.
    let manual = json!({"trigger": "manual"});
    let ping = at("/actions/ping");
    for a in hang_three_actions(&caller, &id).await? {
        ensure!(
            a.status == StatusCode::GATEWAY_TIMEOUT && a.code() == "plugin_timeout",
            "{a:?}"
        );
        // A lower bound: the host waited out the 10 s limit (load only makes it longer).
        ensure!(a.took >= Duration::from_secs(9), "{a:?}");
    }

    // The 4th fails without reaching the plugin (its journal, read once the breaker closed,
    // shows no call between the hung ones and the trial), and so does a tool call.
    let a = caller.post(&ping, manual.clone()).await?;
    ensure!(
        a.status == StatusCode::SERVICE_UNAVAILABLE && a.code() == "breaker_open",
        "the 4th call: {a:?}"
    );
    let t = caller.post(&at("/tools/echo"), say_hello()).await?;
    ensure!(t.json["error_code"] == "breaker_open", "{t:?}");
    let shown = wait::matches(
        &instances,
        &instance,
        "the breaker Open on the instance",
        WAIT,
        |i: &PluginInstance| {
            breaker_of(i).is_some_and(|b| b.state == "Open" && b.open_until.is_some())
        },
    )
    .await?;
    let shown = breaker_of(&shown).cloned().context("the breaker")?;
    // From here until it closes, every breaker the instance shows: the other replica must
    // not change it, and the host shows only its own trial on the way to Closed.
    let history = {
        let instances = instances.clone();
        let instance = instance.clone();
        tokio::spawn(async move {
            let seen = std::sync::Mutex::new(Vec::new());
            let closed = wait::matches(
                &instances,
                &instance,
                "the breaker Closed on the instance",
                Duration::from_secs(120),
                |i: &PluginInstance| {
                    let b = breaker_of(i).cloned();
                    let closed = b.as_ref().is_some_and(|b| b.state == "Closed");
                    seen.lock().unwrap().push(b);
                    closed
                },
            )
            .await;
            (closed, seen.into_inner().unwrap())
        })
    };
    if let Some(replica) = &replica {
        // The other replica never called the container, yet fails at once too once its
        // store has the status.
        let index = replica.index().context("the replica's index")?;
        let key = server::index::InstanceKey::new(ns.name(), &instance);
        let until = Instant::now() + WAIT;
        while index
            .instance(&key)
            .and_then(|i| breaker_of(&i).cloned())
            .as_ref()
            != Some(&shown)
        {
            ensure!(
                Instant::now() < until,
                "the replica's store never showed {shown:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let via_replica = Caller::new(replica, &ns, caller.token.clone());
        let a = via_replica.post(&ping, manual.clone()).await?;
        ensure!(
            a.status == StatusCode::SERVICE_UNAVAILABLE && a.code() == "breaker_open",
            "the other replica: {a:?}"
        );
    }
    let metrics = host.metrics(&ns).await?;
    let gauge = format!(
        "loop_plugins_host_breaker_state{{instance_namespace=\"{}\",plugin_instance=\"{instance}\"}} 1",
        ns.name()
    );
    ensure!(metrics.contains(&gauge), "{gauge} in\n{metrics}");

    // Once the time the breaker shows has passed, one trial call goes through and its answer
    // closes it; until then each call is refused without reaching the plugin.
    let open_until = shown
        .open_until
        .as_deref()
        .and_then(model::time::parse)
        .context("the breaker's openUntil")?;
    let left = open_until.duration_since(jiff::Timestamp::now());
    tokio::time::sleep(Duration::try_from(left).unwrap_or_default()).await;
    let until = Instant::now() + WAIT;
    let trial = loop {
        let a = caller.post(&ping, manual.clone()).await?;
        if a.code() != "breaker_open" || Instant::now() > until {
            break a;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    ensure!(trial.status == StatusCode::ACCEPTED, "the trial: {trial:?}");
    let a = caller.post(&ping, manual).await?;
    ensure!(a.status == StatusCode::ACCEPTED, "after the trial: {a:?}");
    let (closed, seen) = history.await?;
    let closed = closed?;
    for b in seen.iter().flatten() {
        ensure!(
            *b == shown || b.state != "Open",
            "the breaker shown changed from {shown:?} to {b:?} while open: {seen:#?}"
        );
    }
    // One container throughout: the one that hung is the one the trial closed.
    let closed = breaker_of(&closed).cloned().context("the breaker")?;
    ensure!(
        closed.container == shown.container,
        "the breaker closed on {:?}, not on {:?}, the container that hung",
        closed.container,
        shown.container
    );
    // What reached the plugin: the 3 that hung, the trial and the one after; no refused call,
    // and no tool call.
    let pings = caller.journal("general", &id, "/actions/ping").await?;
    ensure!(pings.len() == 5, "{pings:#?}");
    let tools = caller.journal("general", &id, "/tools/echo").await?;
    ensure!(tools.is_empty(), "{tools:#?}");
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
    caller.warm("general", &b).await?;

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
    // (event type, thread id) in the order a container got them.
    type Events = Vec<(String, Option<String>)>;
    let events_of = |entries: Vec<Value>| -> Events {
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
    let expect: [(&str, &str, Events); 5] = [
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

    // A config write sends settings.changed by itself: c's project turns verbose off (settings
    // apply without the owner's trust).
    let config: BTreeMap<String, PluginConfig> = [&a, &b, &c, &d]
        .into_iter()
        .map(|id| (id.clone(), enabled()))
        .collect();
    apply(&ns, &project("proj", config)).await?;
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

/// The app posts a chat's quality scan through the host API (RBAC `channels/quality`); the
/// chat's plugin, approved for `files.read` and subscribed to `quality.scanned`, gets the
/// event in its running container (its journal shows it), and with its own token reads the
/// worst functions and a page of them through the SDK's client; the app reads the scan back.
async fn quality_scan(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let host = host(&ns).await?;
    let id = plugin_id(&ns, "hq");
    let mut plugin = plugin_with(&id, |m| {
        if let Some(Value::Array(caps)) = m.get_mut("capabilities") {
            caps.push(json!("files.read"));
        }
        m.insert(
            "events".into(),
            json!(["message.created", "quality.scanned"]),
        );
    })?;
    // The owner approves it too (the list was approved before the edit).
    plugin.spec.approved_capabilities.push("files.read".into());
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
    caller.warm("general", &id).await?;

    let none = caller
        .send_ready("GET", "/channels/general/quality", None)
        .await?;
    ensure!(
        none.status == StatusCode::NOT_FOUND && none.code() == "scan_not_found",
        "{none:?}"
    );
    // 30 functions f0..f29 scoring 0..29, listed best first.
    let functions: Vec<Value> = (0..30)
        .map(|i| {
            json!({"file": format!("src/f{i}.rs"), "name": format!("f{i}"), "line": i + 1,
                   "complexity": i, "lines": 10, "score": f64::from(i) / 2.0})
        })
        .collect();
    let totals = json!({"files": 7, "functions": 120, "lines": 4000});
    let scan = json!({"commit": "3f2c1a9e", "totals": totals, "functions": functions});
    let put = caller
        .send_ready("PUT", "/channels/general/quality", Some(scan))
        .await?;
    ensure!(put.status == StatusCode::OK, "{put:?}");
    ensure!(
        put.json["listed"] == 30 && put.json["kept"] == 30 && put.json["totals"] == totals,
        "{}",
        put.json
    );
    let deliveries = put.json["event"]["deliveries"]
        .as_array()
        .context("the event's deliveries")?;
    ensure!(
        deliveries.len() == 1
            && deliveries[0]["plugin"] == id.as_str()
            && deliveries[0]["chat"] == "general"
            && deliveries[0]["delivered"] == true,
        "{}",
        put.json
    );
    let scanned_at = put.json["scanned_at"].clone();

    // The plugin got it, with the commit, the totals and when it was stored.
    let events = caller.journal("general", &id, "/events").await?;
    let got: Vec<&Value> = events
        .iter()
        .map(|e| &e["body"])
        .filter(|b| b["type"] == "quality.scanned")
        .collect();
    ensure!(
        got.len() == 1
            && got[0]["data"]
                == json!({"commit": "3f2c1a9e", "totals": totals, "scanned_at": scanned_at}),
        "the plugin's events: {events:#?}"
    );

    // The plugin reads the hotspots with its own token, through the SDK's client.
    let instance = names::instance_name(&id, "general");
    let token = instance_token(&ns, &instance).await?;
    let plugin_api = sdk::api::Client::with_token(&host.url, token)?;
    let worst = plugin_api
        .hotspots(3)
        .await?
        .context("the chat's hotspots")?;
    let names_of = |fs: &[sdk::api::wire::Hotspot]| -> Vec<String> {
        fs.iter().map(|f| f.name.clone()).collect()
    };
    ensure!(
        names_of(&worst.functions) == ["f29", "f28", "f27"]
            && worst.commit.as_deref() == Some("3f2c1a9e")
            && json!(worst.scanned_at) == scanned_at,
        "{worst:?}"
    );
    let page = plugin_api
        .hotspots_page(25, 10)
        .await?
        .context("a page of the chat's hotspots")?;
    ensure!(
        names_of(&page.functions) == ["f4", "f3", "f2", "f1", "f0"]
            && page.total == 30
            && (page.totals.files, page.totals.functions) == (7, 120)
            && page.totals.other.get("lines").map(ToString::to_string) == Some("4000".into()),
        "{page:?}"
    );
    let refused = plugin_api.hotspots(101).await.unwrap_err();
    ensure!(
        refused.code() == Some(sdk::api::ErrorCode::InvalidQuery),
        "{refused}"
    );

    // The app reads it back, worst first.
    let back = caller
        .send("GET", "/channels/general/quality", None)
        .await?;
    ensure!(
        back.status == StatusCode::OK
            && back.json["functions"][0]["name"] == "f29"
            && back.json["scanned_at"] == scanned_at,
        "{back:?}"
    );
    Ok(())
}

/// Two host APIs (as the chart's two replicas, electing the fan-out on one Lease) both see
/// the project's config write; the running container gets one `settings.changed`.
async fn settings_changed_once(ns: Ns) -> anyhow::Result<()> {
    // Alone, and the project trusted before the two start: no other test's write comes in
    // between, and the trust (a write the fan-out answers with settings.changed, with the
    // settings as they are when it sends it) is in the first list, so no write but the test's
    // own reaches the container. Whichever replica leads (these two, or the suite's), one
    // sends.
    let _exclusive = exclusive().await;
    setup(&ns).await?;
    let plugin = plugin_id(&ns, "hw");
    world(
        &ns,
        &[(echo_plugin(&plugin)?, enabled())],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    let (one, two) = tokio::try_join!(
        host_with(&ns, CallSettings::default()),
        host_with(&ns, CallSettings::default())
    )?;
    let token = caller_token(&ns, "app", Grant::All).await?;
    let (via_one, via_two) = (
        Caller::new(&one, &ns, Some(token.clone())),
        Caller::new(&two, &ns, Some(token)),
    );
    // The container runs (settings.changed goes only to running ones), and both replicas
    // know it.
    for caller in [&via_one, &via_two] {
        caller.warm("general", &plugin).await?;
    }

    // Settings edits: they apply without the owner's trust, so each is one write. The second
    // is a marker: once its event arrived, the first's from the other replica, were it to
    // send one too, would have (each replica sends the writes in order).
    let write = |verbose: bool| {
        let mut entry = enabled();
        entry.settings.insert("verbose".into(), json!(verbose));
        project("proj", BTreeMap::from([(plugin.clone(), entry)]))
    };
    let changed = |entries: &[Value]| -> Vec<bool> {
        entries
            .iter()
            .filter(|e| e["body"]["type"] == "settings.changed")
            .map(|e| e["body"]["data"]["settings"]["verbose"] == true)
            .collect()
    };
    let mut sent = Vec::new();
    for verbose in [true, false] {
        apply(&ns, &write(verbose)).await?;
        let until = Instant::now() + WAIT;
        loop {
            sent = changed(&via_two.journal("general", &plugin, "/events").await?);
            if sent.contains(&verbose) {
                break;
            }
            ensure!(
                Instant::now() < until,
                "no settings.changed with verbose {verbose} after its write: {sent:?}"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    ensure!(
        sent == [true, false],
        "the container got {} settings.changed (verbose each), not one per write: {sent:?}",
        sent.len()
    );
    Ok(())
}

/// A config write that lands while nobody leads the fan-out (the holder was killed or is
/// releasing the Lease at a rolling update; here a stand-in holds the Lease and sends
/// nothing): the replica that takes over next sends its `settings.changed`. Every replica saw
/// the write while not leading; were they to drop it, no one would send it.
/// The stand-in holds the Lease while the project's config is written, and `longer` after it:
/// with nothing more, a replica that saw the write sends it on taking over (its backlog); past
/// the handover window none has it kept, and only the holders' mark of what they sent shows it
/// unsent (`server::fanout::sent`), as for a write no running replica saw.
async fn settings_changed_across_a_handover(ns: Ns, longer: Duration) -> anyhow::Result<()> {
    // Alone: while the stand-in holds the Lease, no test's fan-out sends anything.
    let _exclusive = exclusive().await;
    setup(&ns).await?;
    let plugin = plugin_id(&ns, "hh");
    world(
        &ns,
        &[(echo_plugin(&plugin)?, enabled())],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    let host = host(&ns).await?;
    let caller = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "app", Grant::All).await?),
    );
    caller.warm("general", &plugin).await?;

    let (lease_ns, lease_name) = match ns.cluster().existing() {
        Some(existing) => (existing.namespace.clone(), existing.fanout_lease()),
        None => (CONTROLLER_NAMESPACE.to_string(), FANOUT_LEASE.to_string()),
    };
    let leases: kube::Api<Lease> = kube::Api::namespaced(ns.client(), &lease_ns);
    wait::matches(
        &leases,
        &lease_name,
        "a host API to lead the fan-out",
        WAIT,
        |l| lease_holder(l).is_some(),
    )
    .await?;
    // The stand-in takes the Lease; the holder sees it at its next renewal and stops.
    let stand_in = format!("e2e-stand-in-{}", ns.name());
    set_lease_holder(&leases, &lease_name, Some(&stand_in)).await?;
    tokio::time::sleep(runtime::leader::RENEW_EVERY + runtime::leader::RETRY_EVERY).await;

    let verbose = |entries: &[Value]| {
        entries
            .iter()
            .filter(|e| e["body"]["type"] == "settings.changed")
            .map(|e| e["body"]["data"]["settings"]["verbose"] == true)
            .collect::<Vec<_>>()
    };
    let mut entry = enabled();
    entry.settings.insert("verbose".into(), json!(true));
    apply(
        &ns,
        &project("proj", BTreeMap::from([(plugin.clone(), entry)])),
    )
    .await?;
    // Nobody sends while the stand-in holds the Lease (the replicas see the write meanwhile);
    // it holds on for `longer`, renewing as a holder does.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let held_until = Instant::now() + longer;
    while let Some(left) = held_until.checked_duration_since(Instant::now()) {
        tokio::time::sleep(left.min(runtime::leader::RENEW_EVERY)).await;
        set_lease_holder(&leases, &lease_name, Some(&stand_in)).await?;
    }
    let before = verbose(&caller.journal("general", &plugin, "/events").await?);
    ensure!(
        !before.contains(&true),
        "settings.changed arrived while the stand-in held the Lease: was another replica \
         leading? {before:?}"
    );

    // The stand-in goes as a releasing holder does; a replica takes over and sends.
    set_lease_holder(&leases, &lease_name, None).await?;
    let until = Instant::now() + WAIT;
    loop {
        let sent = verbose(&caller.journal("general", &plugin, "/events").await?);
        if sent.contains(&true) {
            break;
        }
        let lease = leases.get(&lease_name).await?;
        ensure!(
            Instant::now() < until,
            "no settings.changed after the Lease went to {:?}: {sent:?}",
            lease_holder(&lease)
        );
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    Ok(())
}

async fn cronjob(ns: Ns) -> anyhow::Result<()> {
    with_trigger_host(ns, run_cronjob).await
}

/// Runs `scenario` with a host API that a CronJob's `trigger` reaches at the HostConfig's
/// apiUrl, and the HostConfig as it was afterwards.
pub(crate) async fn with_trigger_host<F>(ns: Ns, scenario: F) -> anyhow::Result<()>
where
    F: AsyncFnOnce(&Ns, &HostServer) -> anyhow::Result<()>,
{
    let _exclusive = exclusive().await;
    let host = host(&ns).await?;
    let mut spec = host_spec(true);
    spec.api_url = host.url_for_pods.clone();
    apply_host(ns.client(), spec).await?;
    let result = scenario(&ns, &host).await;
    apply_host(ns.client(), host_spec(true)).await?;
    result
}

/// The ServiceAccount CronJobs run as, with the one grant `trigger` needs.
async fn trigger_account(ns: &Ns) -> anyhow::Result<()> {
    let account = model::names::TRIGGER_SERVICE_ACCOUNT;
    let mut sa = ServiceAccount::default();
    sa.metadata.name = Some(account.into());
    apply(ns, &sa).await?;
    grant_role(ns, account, &["plugininstances/actions"]).await
}

async fn run_cronjob(ns: &Ns, host: &HostServer) -> anyhow::Result<()> {
    trigger_account(ns).await?;

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

async fn interval_cronjob(ns: Ns) -> anyhow::Result<()> {
    with_trigger_host(ns, run_interval_cronjob).await
}

/// A task every 90 minutes, which cron cannot match: its CronJob ticks every 30 minutes and
/// only the tick that completes an interval since the anchor calls the action.
///
/// Real: the controller's CronJob (schedule, args, anchor), the Job controller, the Pods on
/// the kubelet stand-in running `loop-plugins trigger` with the CronJob's command, args and
/// downward-API env, the host API and the plugin. Made by this test instead of the CronJob
/// controller: the Jobs of the ticks 60, 90 and 120 minutes after the anchor, named as the
/// CronJob controller names them (`<cronjob>-<minutes since the epoch>`) from the CronJob's
/// own template, now rather than at those times; the trigger reads no clock.
async fn run_interval_cronjob(ns: &Ns, host: &HostServer) -> anyhow::Result<()> {
    trigger_account(ns).await?;
    let id = plugin_id(ns, "hi");
    let every_90m = ScheduleEntry {
        enabled: Some(true),
        kind: Some(ScheduleType::Interval),
        schedule: Some("90m".into()),
    };
    world(
        ns,
        &[(echo_plugin(&id)?, entry(true, &[("tick", every_90m)]))],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    let task = names::cronjob_name(&id, "general", "tick");
    let cj = wait::exists(&ns.api::<CronJob>(), &task, WAIT).await?;
    ensure!(cj.spec.schedule == "*/30 * * * *", "{:?}", cj.spec.schedule);
    let template = cj.spec.job_template.clone();
    let container = template
        .spec
        .as_ref()
        .and_then(|job| job.template.spec.as_ref())
        .map(|pod| pod.containers[0].clone())
        .context("the CronJob's container")?;
    let args = container.args.clone().unwrap_or_default();
    ensure!(args.contains(&"--interval=1h30m".to_string()), "{args:?}");
    let anchor: jiff::Timestamp = args
        .iter()
        .find_map(|a| a.strip_prefix("--anchor="))
        .context("the CronJob gives the trigger an anchor")?
        .parse()?;
    ensure!(
        anchor.as_second() % 1800 == 0,
        "the anchor is a tick: {anchor}"
    );

    // The Jobs of three ticks, made from the CronJob's template as the CronJob controller
    // makes them: only the one 90 minutes after the anchor completes an interval.
    let jobs = ns.api::<Job>();
    let job_name = |after: i64| format!("{task}-{}", anchor.as_second() / 60 + after);
    for after in [120, 60, 90] {
        let job = Job {
            metadata: kube::api::ObjectMeta {
                name: Some(job_name(after)),
                labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
                ..Default::default()
            },
            spec: template.spec.clone(),
            status: None,
        };
        jobs.create(&PostParams::default(), &job).await?;
    }
    let label = format!("{}={id}", names::LABEL_PLUGIN);
    let finished = |j: &Job| {
        j.status
            .as_ref()
            .is_some_and(|s| s.succeeded.unwrap_or(0) > 0 || s.failed.unwrap_or(0) > 0)
    };
    let ours = |j: &Job| [60, 90, 120].map(job_name).contains(&j.name_any());
    let done = list_until(
        &jobs,
        Some(&label),
        "the three Jobs to finish",
        Duration::from_secs(150),
        |all: &[Job]| all.iter().filter(|j| ours(j) && finished(j)).count() == 3,
    )
    .await?;
    let pods = ns
        .api::<Pod>()
        .list(&kube::api::ListParams::default().labels(&label))
        .await?;
    let mut logs = BTreeMap::new();
    for pod in &pods.items {
        let job = pod.labels().get(ticks::JOB_NAME_LABEL).cloned();
        logs.insert(job, ns.pod_log(&pod.name_any(), "trigger").await);
    }
    let succeeded = |j: &Job| j.status.as_ref().and_then(|s| s.succeeded).unwrap_or(0) > 0;
    ensure!(
        done.iter().filter(|j| ours(j)).all(succeeded),
        "a Job failed: {logs:#?}"
    );
    let log = |after: i64| {
        logs.get(&Some(job_name(after)))
            .cloned()
            .unwrap_or_default()
    };
    ensure!(
        log(90).contains("completes the interval"),
        "the third tick's Job calls: {logs:#?}"
    );
    for after in [60, 120] {
        ensure!(
            log(after).contains("completes no interval"),
            "the Job of +{after}m does not call: {logs:#?}"
        );
    }
    // The plugin saw the one call, from this task.
    let caller = Caller::new(host, ns, Some(caller_token(ns, "app", Grant::All).await?));
    let ticks = caller.journal("general", &id, "/actions/tick").await?;
    ensure!(ticks.len() == 1, "one call: {ticks:#?}");
    ensure!(
        ticks[0]["body"]["trigger"] == "schedule" && ticks[0]["body"]["task_id"] == task.as_str(),
        "{ticks:#?}"
    );
    Ok(())
}

/// The echo plugin with a second composer switch, `sync`, that only the plugin sets (its own
/// `mode` is what a click reaches).
fn two_switch_plugin(id: &str) -> anyhow::Result<Plugin> {
    let text = include_str!("../../examples/echo-plugin/plugin.json")
        .replacen("\"id\": \"echo\"", &format!("\"id\": \"{id}\""), 1)
        .replacen(
            r#""composer_switches": [{"#,
            r#""composer_switches": [{ "id": "sync", "label": "Sync", "icon": "ui/mode.svg" }, {"#,
            1,
        );
    let mut plugin = Plugin::from_manifest(&text, &unpublished(id), vec![], true)?;
    rename_tools(&mut plugin, |t| format!("{id}-{t}"));
    Ok(plugin)
}

/// A click on `mode` (the host API, which records the plugin's answer) and the plugin's own
/// `PUT /composer/switches/sync` (the Plugin API), sent together round after round: each
/// round, both states are on the instance. Both write the one switch list; were either to
/// write a list it read before the other's write, one state would be lost.
async fn switch_race(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let host = host(&ns).await?;
    let id = plugin_id(&ns, "hs");
    world(
        &ns,
        &[(two_switch_plugin(&id)?, enabled())],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    let instance = names::instance_name(&id, "general");
    let caller = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "app", Grant::All).await?),
    );
    let click = format!("/channels/general/plugins/{id}/switches/mode");
    let warm = caller
        .send_ready("POST", &click, Some(json!({"on": false})))
        .await?;
    ensure!(warm.status == StatusCode::OK, "{warm:?}");
    // The plugin's token, as its Pod reads it.
    let token = instance_token(&ns, &instance).await?;
    let plugin_api = reqwest::Client::builder().no_proxy().build()?;
    let put = format!("{}/api/plugin/v1/composer/switches/sync", host.url);
    let instances = ns.api::<PluginInstance>();
    for round in 0..8 {
        let on = round % 2 == 0;
        let title = format!("round {round}");
        let (clicked, put) = tokio::join!(
            caller.post(&click, json!({ "on": on })),
            plugin_api
                .put(&put)
                .bearer_auth(&token)
                .json(&json!({ "on": true, "title": title }))
                .send()
        );
        let clicked = clicked?;
        ensure!(
            clicked.status == StatusCode::OK,
            "round {round}: {clicked:?}"
        );
        let put = put?;
        ensure!(
            put.status().is_success(),
            "round {round}: the plugin's PUT answered {}",
            put.status()
        );
        let now = instances.get_status(&instance).await?;
        let switches = now.status.map(|s| s.switches).unwrap_or_default();
        let mode = switches.iter().find(|s| s.id == "mode");
        let sync = switches.iter().find(|s| s.id == "sync");
        ensure!(
            mode.is_some_and(|m| m.on == on)
                && sync.is_some_and(|s| s.title.as_deref() == Some(title.as_str())),
            "round {round}: the instance shows {switches:?}"
        );
    }
    Ok(())
}

/// The chart's NetworkPolicy for plugin pods, enforced by the cluster's CNI: a plugin pod
/// reaches the API Service by its DNS name, but neither another plugin pod nor the Kubernetes
/// API, and the API still reaches it; a plugin whose approved egress names a server outside
/// the plugin pods reaches it through the policy the controller makes for it, and the first
/// plugin still does not. Each probe is a real plugin pod: the echo plugin's `ping`
/// action calls `GET $LOOP_API_URL/api/plugin/v1/channel` and journals the answer's status or
/// the error, and HostConfig `apiUrl` (read when a Pod is made) aims each probe's
/// `LOOP_API_URL`. The peer is a Pod of the echo plugin's image with a plugin pod's labels
/// (HostConfig changes replace instances' Pods, not it). Without the policy a probe reaches the
/// peer (which answers 401: not its secret), so the policy is what stops it.
async fn network_policy(ns: Ns) -> anyhow::Result<()> {
    // HostConfig `apiUrl` is cluster-wide.
    let _alone = exclusive().await;
    let existing = ns.cluster().existing().context("an existing cluster")?;
    let host = host(&ns).await?;
    let id = plugin_id(&ns, "np");
    let chats: Vec<(&str, ChannelKind, Option<&str>, bool)> = ["open", "peer", "kube", "api"]
        .into_iter()
        .map(|c| (c, ChannelKind::Channel, None, false))
        .collect();
    world(&ns, &[(echo_plugin(&id)?, enabled())], &chats).await?;
    let caller = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "app", Grant::All).await?),
    );
    // The peer runs the plugin's own image, as another plugin's Pod would.
    let image = kube::Api::<Plugin>::all(ns.client())
        .get(&id)
        .await?
        .spec
        .image;
    let peer_url = peer_pod(&ns, &image).await?;
    let probes = async {
        let open = ping_via(&ns, &caller, &id, "open", Some(&peer_url)).await?;
        ensure!(
            open["status"] == 401,
            "without a policy the peer answers: {open}"
        );

        let docs = crate::chart::render(
            &existing.release,
            &existing.namespace,
            &[&format!("projectNamespaces={{{}}}", ns.name())],
        )
        .await?;
        let policies: Vec<Value> = docs
            .into_iter()
            .filter(|d| d["kind"] == "NetworkPolicy" && d["metadata"]["namespace"] == ns.name())
            .collect();
        ensure!(
            policies.len() == 1,
            "the chart's policy for {}: {policies:?}",
            ns.name()
        );
        crate::chart::apply(ns.cluster(), &policies, false).await?;
        // The CNI's policy engine applies it within seconds.
        tokio::time::sleep(Duration::from_secs(10)).await;

        let peer = ping_via(&ns, &caller, &id, "peer", Some(&peer_url)).await?;
        ensure!(
            peer["status"].is_null() && peer["error"].is_string(),
            "a plugin pod reached another plugin pod: {peer}"
        );
        // Plain HTTP to the HTTPS port: answered (400) if reached at all.
        let kube = ping_via(
            &ns,
            &caller,
            &id,
            "kube",
            Some("http://kubernetes.default.svc:443"),
        )
        .await?;
        ensure!(
            kube["status"].is_null() && kube["error"].is_string(),
            "a plugin pod reached the Kubernetes API: {kube}"
        );
        let api = ping_via(&ns, &caller, &id, "api", None).await?;
        ensure!(
            api["status"] == 200,
            "a plugin pod did not reach the API Service: {api}"
        );

        // A plugin whose approved egress names a server outside (`network.egress`) reaches
        // it: the controller opens it with the plugin's own policy, beside the chart's. The
        // first plugin, in the same chat, still does not. (Not the peer: the chart's policy
        // lets only the API into plugin pods, whatever lets a plugin out.)
        let outside_url = serving_pod(&ns, &image, "outside", json!({ "app": "outside" })).await?;
        let outside_ip = outside_url
            .trim_start_matches("http://")
            .split(':')
            .next()
            .context("the outside server's address")?
            .to_string();
        let egress_id = plugin_id(&ns, "npe");
        let mut with_egress = plugin_with(&egress_id, |m| {
            if let Some(Value::Array(caps)) = m.get_mut("capabilities") {
                caps.push(json!("network.egress"));
            }
            m.insert(
                "egress".into(),
                json!([{ "cidr": format!("{outside_ip}/32"), "ports": [8080] }]),
            );
        })?;
        // The owner approves it (the list was approved before the edit).
        with_egress
            .spec
            .approved_capabilities
            .push("network.egress".into());
        install(&ns, &with_egress).await?;
        apply_trusted(
            &ns,
            "proj",
            BTreeMap::from([(id.clone(), enabled()), (egress_id.clone(), enabled())]),
        )
        .await?;
        apply(&ns, &channel("egress", "proj", ChannelKind::Channel, None)).await?;
        let instance = names::instance_name(&egress_id, "egress");
        wait::exists(&ns.api::<Secret>(), &names::secret_name(&instance), WAIT).await?;
        let opened = ping_via(&ns, &caller, &egress_id, "egress", Some(&outside_url)).await?;
        ensure!(
            opened["status"] == 401,
            "the approved egress did not reach the server outside: {opened}"
        );
        let closed = ping_via(&ns, &caller, &id, "egress", Some(&outside_url)).await?;
        ensure!(
            closed["status"].is_null() && closed["error"].is_string(),
            "another plugin's egress let this one reach the server outside: {closed}"
        );
        anyhow::Ok(())
    }
    .await;
    // The other tests' HostConfig, whatever happened.
    apply_host(ns.client(), host_spec(true)).await?;
    probes
}

/// A Pod of the echo plugin's image labelled as a plugin pod, serving on 8080 with a secret
/// of its own; returns its URL once it runs.
async fn peer_pod(ns: &Ns, image: &str) -> anyhow::Result<String> {
    serving_pod(
        ns,
        image,
        "peer",
        json!({ "app.kubernetes.io/name": "loop-plugin" }),
    )
    .await
}

/// A Pod `name` of the echo plugin's image with `labels`, serving on 8080 with a secret of
/// its own; returns its URL once it runs.
async fn serving_pod(ns: &Ns, image: &str, name: &str, labels: Value) -> anyhow::Result<String> {
    let secret: Secret = serde_json::from_value(json!({
        "metadata": { "name": name },
        "stringData": { "secret": format!("{name}-secret") }
    }))?;
    ns.api::<Secret>()
        .create(&PostParams::default(), &secret)
        .await?;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": { "name": name, "labels": labels },
        "spec": {
            "automountServiceAccountToken": false,
            "securityContext": {
                "runAsNonRoot": true,
                "seccompProfile": { "type": "RuntimeDefault" }
            },
            "containers": [{
                "name": "plugin",
                "image": image,
                "env": [
                    { "name": "LOOP_PLUGIN_SECRET_FILE", "value": "/secret/secret" },
                    { "name": "LOOP_PLUGIN_PORT", "value": "8080" }
                ],
                "ports": [{ "containerPort": 8080 }],
                "readinessProbe": { "tcpSocket": { "port": 8080 }, "periodSeconds": 1 },
                "securityContext": {
                    "allowPrivilegeEscalation": false,
                    "capabilities": { "drop": ["ALL"] }
                },
                "volumeMounts": [{ "name": "secret", "mountPath": "/secret", "readOnly": true }]
            }],
            "volumes": [{ "name": "secret", "secret": { "secretName": name } }]
        }
    }))?;
    ns.api::<Pod>().create(&PostParams::default(), &pod).await?;
    let pod = wait::matches(&ns.api::<Pod>(), name, "the pod Ready", WAIT, |p: &Pod| {
        p.status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
    })
    .await?;
    let ip = pod.status.and_then(|s| s.pod_ip).context("the pod's IP")?;
    Ok(format!("http://{ip}:8080"))
}

/// Aims `LOOP_API_URL` of the next plugin pods at `api_url` (None: the run's own), starts the
/// chat's pod (its switch keeps it up), checks the Pod got that URL, and returns the Pod.
async fn switch_on(
    ns: &Ns,
    caller: &Caller,
    plugin: &str,
    chat: &str,
    api_url: Option<&str>,
) -> anyhow::Result<Pod> {
    let spec = model::resources::HostConfigSpec {
        api_url: api_url.map(String::from),
        ..host_spec(true)
    };
    let want = spec.api_url.clone();
    apply_host(ns.client(), spec).await?;
    // The controller makes the Pod from its cached HostConfig.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let a = caller
        .send_ready(
            "POST",
            &format!("/channels/{chat}/plugins/{plugin}/switches/mode"),
            Some(json!({"on": true})),
        )
        .await?;
    ensure!(
        a.status == StatusCode::OK,
        "turning {chat}'s switch on: {a:?}"
    );
    let pod = pods_of(ns, &names::instance_name(plugin, chat))
        .await?
        .into_iter()
        .find(|p| p.metadata.deletion_timestamp.is_none())
        .with_context(|| format!("{chat}'s Pod"))?;
    if let Some(want) = want {
        let got = pod
            .spec
            .iter()
            .flat_map(|s| &s.containers)
            .flat_map(|c| c.env.iter().flatten())
            .find(|e| e.name == "LOOP_API_URL")
            .and_then(|e| e.value.clone());
        ensure!(
            got.as_deref() == Some(want.as_str()),
            "{chat}'s Pod has LOOP_API_URL {got:?}, not {want}"
        );
    }
    Ok(pod)
}

/// Runs `ping` in the chat's pod, its `LOOP_API_URL` aimed at `api_url`, and returns the
/// journal's `loop_api` entry: `status` when something answered, `error` when not.
async fn ping_via(
    ns: &Ns,
    caller: &Caller,
    plugin: &str,
    chat: &str,
    api_url: Option<&str>,
) -> anyhow::Result<Value> {
    switch_on(ns, caller, plugin, chat, api_url).await?;
    // The policy engine (kube-router) programs a new Pod's rules a moment after it starts;
    // until then its traffic is not filtered.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let at = |rest: &str| format!("/channels/{chat}/plugins/{plugin}{rest}");
    let a = caller
        .post(&at("/actions/ping"), json!({"trigger": "manual"}))
        .await?;
    ensure!(a.status == StatusCode::ACCEPTED, "ping in {chat}: {a:?}");
    // The plugin's own call gives up after 10 s.
    let until = Instant::now() + Duration::from_secs(30);
    loop {
        let a = caller.send_ready("GET", &at("/x/journal"), None).await?;
        ensure!(a.status == StatusCode::OK, "{chat}'s journal: {a:?}");
        let entry = a.json["entries"]
            .as_array()
            .context("a journal")?
            .iter()
            .find(|e| e["kind"] == "loop_api")
            .cloned();
        if let Some(entry) = entry {
            // Its Pod may go once idle.
            caller
                .post(&at("/switches/mode"), json!({"on": false}))
                .await?;
            return Ok(entry);
        }
        ensure!(
            Instant::now() < until,
            "no ping answer in {chat}'s journal: {}",
            a.json
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// `/data` is the instance's PersistentVolumeClaim (on kind bound by local-path, the default
/// StorageClass): what the plugin wrote there (its journal) is there again when its Pod is
/// deleted and the next call starts a new one.
async fn data_outlives_pod(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let host = host(&ns).await?;
    let id = plugin_id(&ns, "hd");
    world(
        &ns,
        &[(echo_plugin(&id)?, enabled())],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    let instance = names::instance_name(&id, "general");
    let caller = Caller::new(
        &host,
        &ns,
        Some(caller_token(&ns, "app", Grant::All).await?),
    );
    let ping = format!("/channels/general/plugins/{id}/actions/ping");
    let a = caller
        .send_ready("POST", &ping, Some(json!({"trigger": "manual"})))
        .await?;
    ensure!(a.status == StatusCode::ACCEPTED, "{a:?}");
    let before = caller.journal("general", &id, "/actions/ping").await?;
    ensure!(before.len() == 1, "one ping in the journal: {before:?}");
    let claim = ns
        .api::<k8s_openapi::api::core::v1::PersistentVolumeClaim>()
        .get(&format!("data-{instance}"))
        .await?;
    ensure!(
        claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound"),
        "the instance's claim: {:?}",
        claim.status
    );
    let old = pods_of(&ns, &instance).await?;
    ensure!(old.len() == 1, "one Pod: {}", old.len());
    let old_uid = old[0].metadata.uid.clone();
    ns.api::<Pod>()
        .delete(&old[0].name_any(), &kube::api::DeleteParams::default())
        .await?;
    let until = Instant::now() + WAIT;
    while pods_of(&ns, &instance)
        .await?
        .iter()
        .any(|p| p.metadata.uid == old_uid)
    {
        ensure!(Instant::now() < until, "the old Pod is still there");
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // The next call starts a new Pod on the same claim.
    let after = caller.journal("general", &id, "/actions/ping").await?;
    let now = pods_of(&ns, &instance).await?;
    ensure!(
        now.iter().all(|p| p.metadata.uid != old_uid) && !now.is_empty(),
        "a new Pod: {:?}",
        now.iter().map(|p| &p.metadata.uid).collect::<Vec<_>>()
    );
    ensure!(
        after.first() == before.first(),
        "the journal after the restart: {after:?}, before: {before:?}"
    );
    Ok(())
}

/// The reference: "every config write Loop makes, trusting a project config" send
/// `plugins.changed` to every client, so open panes and Settings → Plugins list again. A
/// settings-only edit starts and stops nothing, and is told all the same; so is its trust.
async fn config_writes_reach_clients(ns: Ns) -> anyhow::Result<()> {
    use futures::StreamExt;
    let host = host(&ns).await?;
    let plugin = plugin_id(&ns, "cw");
    world(
        &ns,
        &[(echo_plugin(&plugin)?, enabled())],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    // `watch plugininstances`: what the stream asks of a client.
    let token = caller_token(&ns, "app", Grant::None).await?;
    grant_role(&ns, "app", &["plugininstances"]).await?;
    let response = reqwest::Client::builder()
        .no_proxy()
        .build()?
        .get(format!(
            "{}{PREFIX}/namespaces/{}/plugins/changes",
            host.url,
            ns.name()
        ))
        .bearer_auth(&token)
        .send()
        .await?;
    ensure!(response.status() == StatusCode::OK, "{response:?}");
    let mut body = response.bytes_stream();
    let mut text = String::new();
    let mut read_until = async |text: &mut String, needle: &str| -> anyhow::Result<()> {
        let until = Instant::now() + WAIT;
        while !text.contains(needle) {
            let left = until.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, body.next())
                .await
                .map_err(|_| anyhow::anyhow!("no {needle} in the stream: {text}"))?
                .context("the stream ended")??;
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
        Ok(())
    };
    read_until(&mut text, ": following plugins.changed").await?;

    let mut entry = enabled();
    entry.settings.insert("verbose".into(), json!(true));
    let edited = BTreeMap::from([(plugin.clone(), entry)]);
    apply(&ns, &project("proj", edited.clone())).await?;
    read_until(&mut text, r#""scope":"project""#).await?;
    ensure!(text.contains(r#""project":"proj""#), "{text}");
    let expected = model::config::config_hash(&edited);
    operator::trust_project(ns.client(), ns.name(), "proj", Some(&expected)).await?;
    read_until(&mut text, r#""change":"trusted""#).await?;
    Ok(())
}

/// The reference: "Loop keeps each switch's state per chat, and forgets it when ... the plugin
/// ... loses ui.composer_switch, stops declaring the switch ...": the state goes from the
/// instance, so it does not come back with the switch.
async fn switch_state_forgotten(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let host = host(&ns).await?;
    let id = plugin_id(&ns, "sf");
    world(
        &ns,
        &[(two_switch_plugin(&id)?, enabled())],
        &[("general", ChannelKind::Channel, None, false)],
    )
    .await?;
    let instance = names::instance_name(&id, "general");
    let token = instance_token(&ns, &instance).await?;
    let plugin_api = reqwest::Client::builder().no_proxy().build()?;
    for switch in ["sync", "mode"] {
        let put = format!("{}/api/plugin/v1/composer/switches/{switch}", host.url);
        let until = Instant::now() + WAIT;
        loop {
            let answer = plugin_api
                .put(&put)
                .bearer_auth(&token)
                .json(&json!({ "on": true, "title": format!("{switch} is on") }))
                .send()
                .await?;
            if answer.status().is_success() {
                break;
            }
            ensure!(
                Instant::now() < until,
                "PUT {put}: {} {}",
                answer.status(),
                answer.text().await?
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
        }
    }
    let instances = ns.api::<PluginInstance>();
    let shows = |ids: &'static [&'static str]| {
        move |i: &PluginInstance| {
            let on: Vec<&str> = i
                .status
                .iter()
                .flat_map(|s| &s.switches)
                .map(|s| s.id.as_str())
                .collect();
            on == ids
        }
    };
    wait::matches(
        &instances,
        &instance,
        "both switches on",
        WAIT,
        shows(&["sync", "mode"]),
    )
    .await?;

    // An upgrade whose manifest declares `mode` alone: `sync`'s state goes.
    install(&ns, &echo_plugin(&id)?).await?;
    wait::matches(
        &instances,
        &instance,
        "sync forgotten",
        WAIT,
        shows(&["mode"]),
    )
    .await?;

    // The owner takes ui.composer_switch back: every switch's state goes.
    let mut without = two_switch_plugin(&id)?;
    without
        .spec
        .approved_capabilities
        .retain(|c| c != "ui.composer_switch");
    install(&ns, &without).await?;
    wait::matches(
        &instances,
        &instance,
        "every switch forgotten",
        WAIT,
        shows(&[]),
    )
    .await?;

    // Both switches declared and approved again: neither comes back on.
    install(&ns, &two_switch_plugin(&id)?).await?;
    let plugin = wait::matches(
        &Api::<Plugin>::all(ns.client()),
        &id,
        "the switches approved again",
        WAIT,
        |p: &Plugin| p.status.as_ref().and_then(|s| s.observed_generation) == p.metadata.generation,
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let now = instances.get_status(&instance).await?;
    ensure!(
        shows(&[])(&now),
        "the switch state came back once Plugin generation {:?} declared it again: {:?}",
        plugin.metadata.generation,
        now.status.map(|s| s.switches)
    );
    Ok(())
}

/// The plugin's token in `instance`, as its Pod reads it from the instance's Secret.
async fn instance_token(ns: &Ns, instance: &str) -> anyhow::Result<String> {
    let secret: Secret = ns.get(&names::secret_name(instance)).await?;
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(model::contract::TOKEN_KEY))
        .map(|t| String::from_utf8_lossy(&t.0).trim().to_string())
        .context("the instance's token")
}
