//! An object the controller cannot read is left out of its index, named, and stops nothing
//! else of its kind (issue 41; kube-rs#774: kube's watcher fails a whole list when one object
//! does not parse). Each watched CRD family gets an object the API server takes and our types
//! refuse, made without changing the suite's CRDs where a field allows it:
//!
//! | family | how it is made unreadable |
//! |---|---|
//! | Plugin | `spec.manifest` (any JSON) nested 200 levels: serde_json stops at 128 |
//! | Project, ProjectTrust | a setting's value (any JSON) nested 200 levels |
//! | PluginInstance | a refused setting's value (any JSON) in its status, nested 200 levels |
//! | AgentRun | `status.doneAttempts` past a u32 (its schema has a minimum, no maximum) |
//! | HostConfig | `spec.plugins.dailyRuns` past a u32; the one HostConfig, so the test runs alone |
//! | Channel | every field of its schema is as narrow as its type: made through a second served version of the CRD whose `spec.kind` takes any string, as a newer CRD would |
//!
//! Each test sees the object named (a Warning Event `Unreadable` on it; on the local control
//! plane, `loop_plugins_controller_unreadable_objects` counting it), an object of the same
//! kind made after it reconciled within 10 s, and the object reconciled once fixed. A cold
//! start with unreadable objects present starts, and reconciles the rest.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use model::config::config_hash;
use model::names;
use model::resources::{
    AgentRun, AgentRunPhase, AgentRunSpec, Channel, ChannelKind, InstancePhase, Plugin,
    PluginInstance, Project, ProjectStatus,
};
use serde_json::{Value, json};

use crate::controller::{instance_name, world};
use crate::controller_support::{
    WAIT, apply, apply_host, apply_trusted, channel, controller_metrics_addr, echo_plugin,
    exclusive, host_spec, install, plugin_id, project, restart_controller, setup, shared,
};
use crate::support::{E2eTest, Ns, Target, target, test, wait};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "unreadable::a_plugin_nested_past_the_parser_is_named_and_stops_no_other_plugin",
            plugin,
        ),
        test(
            "unreadable::a_project_nested_past_the_parser_is_named_and_stops_no_other_project",
            project_family,
        ),
        test(
            "unreadable::a_project_trust_nested_past_the_parser_is_named_and_stops_no_other_trust",
            project_trust,
        ),
        test(
            "unreadable::a_channel_of_a_newer_version_is_named_and_stops_no_other_channel",
            channel_family,
        ),
        test(
            "unreadable::an_instance_nested_past_the_parser_is_named_and_stops_no_other_instance",
            instance,
        ),
        test(
            "unreadable::a_run_past_its_types_range_is_named_and_stops_no_other_run",
            run,
        ),
        test(
            "unreadable::an_unreadable_host_config_is_named_and_left_out_until_fixed",
            host_config,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "unreadable::a_cold_start_with_unreadable_objects_reconciles_the_rest",
            cold_start,
        )
        .timeout(Duration::from_secs(240)),
    ]
}

/// How deep the objects nest: past serde_json's recursion limit of 128.
const DEPTH: usize = 200;
/// How soon an object made after an unreadable one of its kind is reconciled.
const PROMPT: Duration = Duration::from_secs(10);
/// A u32 can't hold it; the schema of a u32 field sets no maximum.
const PAST_U32: u64 = 1 << 32;
const GROUP_VERSION: &str = "plugins.loop.dev/v1alpha1";

/// `{"a": {"a": ... 1}}`, `levels` deep.
fn deep(levels: usize) -> Value {
    (0..levels).fold(json!(1), |inner, _| json!({ "a": inner }))
}

/// Where an object of ours is, for requests that neither send nor read it as its type (the
/// test's own kube client stops at the recursion limit too).
struct At {
    plural: &'static str,
    version: &'static str,
    namespace: Option<String>,
    name: String,
}

impl At {
    fn cluster(plural: &'static str, name: &str) -> Self {
        Self {
            plural,
            version: "v1alpha1",
            namespace: None,
            name: name.into(),
        }
    }

    fn namespaced(plural: &'static str, ns: &Ns, name: &str) -> Self {
        Self {
            namespace: Some(ns.name().into()),
            ..Self::cluster(plural, name)
        }
    }

    fn collection(&self) -> String {
        let version = self.version;
        match &self.namespace {
            Some(ns) => format!(
                "/apis/plugins.loop.dev/{version}/namespaces/{ns}/{}",
                self.plural
            ),
            None => format!("/apis/plugins.loop.dev/{version}/{}", self.plural),
        }
    }

    fn path(&self) -> String {
        format!("{}/{}", self.collection(), self.name)
    }

    /// Creates `body` here.
    async fn create(&self, client: &Client, body: &Value) -> anyhow::Result<()> {
        let uri = self.collection();
        send(client, http::Method::POST, &uri, "application/json", body).await
    }

    /// Merge-patches the object, or its status.
    async fn merge(&self, client: &Client, status: bool, patch: &Value) -> anyhow::Result<()> {
        let mut uri = self.path();
        if status {
            uri.push_str("/status");
        }
        let json = "application/merge-patch+json";
        send(client, http::Method::PATCH, &uri, json, patch).await
    }
}

async fn send(
    client: &Client,
    method: http::Method,
    uri: &str,
    content_type: &str,
    body: &Value,
) -> anyhow::Result<()> {
    let request = http::Request::builder()
        .method(method.clone())
        .uri(uri)
        .header(http::header::CONTENT_TYPE, content_type)
        .body(serde_json::to_vec(body)?)?;
    client
        .request_text(request)
        .await
        .with_context(|| format!("{method} {uri}"))?;
    Ok(())
}

/// Waits until the controller names the object: a Warning Event `Unreadable` on it whose note
/// has `word`, and (on the local control plane) its kind's count of unreadable objects at
/// least 1.
async fn named(
    ns: &Ns,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
    word: &str,
) -> anyhow::Result<()> {
    let events: Api<Event> = Api::all(ns.client());
    let deadline = Instant::now() + WAIT;
    loop {
        let about: Vec<Event> = events
            .list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|e| {
                e.regarding.as_ref().is_some_and(|r| {
                    r.kind.as_deref() == Some(kind)
                        && r.name.as_deref() == Some(name)
                        && r.namespace.as_deref() == namespace
                })
            })
            .collect();
        let told = about.iter().any(|e| {
            e.reason.as_deref() == Some("Unreadable")
                && e.type_.as_deref() == Some("Warning")
                && e.note.as_deref().is_some_and(|n| n.contains(word))
        });
        if told {
            break;
        }
        if Instant::now() > deadline {
            let seen: Vec<_> = about.iter().map(|e| (&e.reason, &e.note)).collect();
            bail!("no Unreadable Event on {kind} {name} saying {word:?}; saw {seen:?}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    counted(kind, "at least one", |n| n >= 1).await
}

/// The controller's count of unreadable objects of `kind`; `None` on an existing cluster,
/// whose controller's metrics the suite does not reach.
async fn unreadable_count(kind: &str) -> anyhow::Result<Option<i64>> {
    if !matches!(target(), Target::Local) {
        return Ok(None);
    }
    let http = reqwest::Client::builder().no_proxy().build()?;
    let text = http
        .get(format!("http://{}/metrics", controller_metrics_addr()))
        .send()
        .await?
        .text()
        .await?;
    let series = format!("loop_plugins_controller_unreadable_objects{{kind=\"{kind}\"}} ");
    let value = text
        .lines()
        .find_map(|l| l.strip_prefix(&series))
        .map(|v| v.trim().parse::<i64>())
        .transpose()?;
    Ok(Some(value.unwrap_or(0)))
}

/// Waits until the controller's count of unreadable `kind`s holds `cond` (on the local
/// control plane).
async fn counted(kind: &str, what: &str, cond: impl Fn(i64) -> bool) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT;
    loop {
        let Some(count) = unreadable_count(kind).await? else {
            return Ok(());
        };
        if cond(count) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("the controller counts {count} unreadable {kind}s, not {what}");
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

/// A Plugin of the test's own, published, as JSON.
async fn published_plugin(ns: &Ns, id: &str) -> anyhow::Result<Value> {
    let mut plugin = echo_plugin(id)?;
    ns.cluster()
        .plugin_images()
        .publish_as(testkit::images::ECHO, &mut plugin)
        .await?;
    Ok(serde_json::to_value(&plugin)?)
}

fn stage(p: &Plugin) -> Option<String> {
    p.status
        .as_ref()
        .filter(|s| s.observed_generation == p.metadata.generation)
        .and_then(|s| s.stage.clone())
}

fn admitted(p: &Plugin) -> bool {
    stage(p).as_deref() == Some("Admitted")
}

async fn plugin(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    setup(&ns).await?;
    let plugins: Api<Plugin> = Api::all(ns.client());
    let bad_id = plugin_id(&ns, "ub");
    let mut bad = published_plugin(&ns, &bad_id).await?;
    bad["spec"]["manifest"]["deep"] = deep(DEPTH);
    let at = At::cluster("plugins", &bad_id);
    at.create(&ns.client(), &bad).await?;

    let good_id = plugin_id(&ns, "ug");
    install(&ns, &echo_plugin(&good_id)?).await?;
    wait::matches(&plugins, &good_id, "admitted", PROMPT, admitted).await?;
    named(&ns, "Plugin", None, &bad_id, "recursion limit").await?;

    at.merge(
        &ns.client(),
        false,
        &json!({"spec": {"manifest": {"deep": null}}}),
    )
    .await?;
    wait::matches(&plugins, &bad_id, "admitted once fixed", WAIT, admitted).await?;
    counted("Plugin", "none", |n| n == 0).await?;
    for id in [&bad_id, &good_id] {
        plugins.delete(id, &DeleteParams::default()).await?;
    }
    Ok(())
}

fn reconciled(p: &Project) -> bool {
    p.status.is_some()
}

fn trusted(p: &Project) -> bool {
    p.status.as_ref().is_some_and(|s: &ProjectStatus| {
        s.conditions
            .iter()
            .any(|c| c.r#type == "Trusted" && c.reason == "Trusted")
    })
}

async fn project_family(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    setup(&ns).await?;
    let projects = ns.api::<Project>();
    let at = At::namespaced("projects", &ns, "bad");
    let bad = json!({
        "apiVersion": GROUP_VERSION, "kind": "Project", "metadata": {"name": "bad"},
        "spec": {"plugins": {"some": {"settings": {"deep": deep(DEPTH)}}}}
    });
    at.create(&ns.client(), &bad).await?;

    apply(&ns, &project("good", BTreeMap::new())).await?;
    wait::matches(&projects, "good", "reconciled", PROMPT, reconciled).await?;
    named(&ns, "Project", Some(ns.name()), "bad", "recursion limit").await?;

    let fix = json!({"spec": {"plugins": {"some": {"settings": null}}}});
    at.merge(&ns.client(), false, &fix).await?;
    wait::matches(&projects, "bad", "reconciled once fixed", WAIT, reconciled).await?;
    counted("Project", "none", |n| n == 0).await
}

async fn project_trust(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    setup(&ns).await?;
    let projects = ns.api::<Project>();
    // A project with no plugin config, and a trust of that config that nests too deep.
    apply(&ns, &project("bad", BTreeMap::new())).await?;
    let at = At::namespaced("projecttrusts", &ns, "bad");
    let bad = json!({
        "apiVersion": GROUP_VERSION, "kind": "ProjectTrust", "metadata": {"name": "bad"},
        "spec": {
            "hash": config_hash(&BTreeMap::new()),
            "plugins": {"some": {"settings": {"deep": deep(DEPTH)}}}
        }
    });
    at.create(&ns.client(), &bad).await?;

    apply_trusted(&ns, "good", BTreeMap::new()).await?;
    wait::matches(&projects, "good", "trusted", PROMPT, trusted).await?;
    named(
        &ns,
        "ProjectTrust",
        Some(ns.name()),
        "bad",
        "recursion limit",
    )
    .await?;
    // Left out, it trusts nothing.
    let untrusted = |p: &Project| reconciled(p) && !trusted(p);
    wait::matches(&projects, "bad", "not trusted", WAIT, untrusted).await?;

    // Fixed, it trusts its project's config (the hash is of no plugin config).
    at.merge(&ns.client(), false, &json!({"spec": {"plugins": null}}))
        .await?;
    wait::matches(&projects, "bad", "trusted once fixed", WAIT, trusted).await?;
    counted("ProjectTrust", "none", |n| n == 0).await
}

/// The Channel CRD as applied, and the field manager that applied it (kubectl's).
struct ChannelCrd {
    api: Api<CustomResourceDefinition>,
    applied: CustomResourceDefinition,
    manager: String,
}

const CHANNEL_CRD: &str = "channels.plugins.loop.dev";

impl ChannelCrd {
    async fn get(client: &Client) -> anyhow::Result<Self> {
        let api: Api<CustomResourceDefinition> = Api::all(client.clone());
        let live = api.get(CHANNEL_CRD).await?;
        let manager = live
            .managed_fields()
            .iter()
            .find(|m| m.operation.as_deref() == Some("Apply"))
            .and_then(|m| m.manager.clone())
            .context("no field manager applied the Channel CRD")?;
        let mut applied = live;
        applied.metadata = kube::api::ObjectMeta {
            name: Some(CHANNEL_CRD.into()),
            ..Default::default()
        };
        applied.status = None;
        Ok(Self {
            api,
            applied,
            manager,
        })
    }

    /// Applies `crd` under the manager that applied crds/, so a later `kubectl apply
    /// --server-side` of crds/ by another test puts it back without a conflict.
    async fn apply(&self, crd: &CustomResourceDefinition) -> anyhow::Result<()> {
        let params = PatchParams::apply(&self.manager).force();
        self.api
            .patch(CHANNEL_CRD, &params, &Patch::Apply(crd))
            .await?;
        Ok(())
    }

    /// Serves a second version, `v1alpha2`, whose `spec.kind` takes any string (as a newer
    /// CRD's might). A Channel made through it is stored as `v1alpha1`, the storage version,
    /// as it was sent.
    async fn loosen(&self) -> anyhow::Result<()> {
        let mut crd = self.applied.clone();
        let mut loose = crd.spec.versions[0].clone();
        loose.name = "v1alpha2".into();
        loose.storage = false;
        let spec = loose
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
            .and_then(|s| s.properties.as_mut())
            .and_then(|p| p.get_mut("spec"))
            .context("the Channel CRD has no spec schema")?;
        spec.x_kubernetes_validations = None;
        spec.properties
            .as_mut()
            .and_then(|p| p.get_mut("kind"))
            .context("the Channel CRD has no spec.kind")?
            .enum_ = None;
        crd.spec.versions.push(loose);
        self.apply(&crd).await
    }

    /// Serves `v1alpha1` alone again.
    async fn restore(&self) -> anyhow::Result<()> {
        self.apply(&self.applied).await
    }
}

/// Makes `body` at `at` once the API server serves `at`'s version (a moment after the CRD
/// says so).
async fn create_when_served(client: &Client, at: &At, body: &Value) -> anyhow::Result<()> {
    let deadline = Instant::now() + WAIT;
    loop {
        match at.create(client, body).await {
            Ok(()) => return Ok(()),
            Err(e) if Instant::now() < deadline => {
                tracing::debug!("not served yet: {e:#}");
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            Err(e) => return Err(e),
        }
    }
}

async fn channel_family(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    setup(&ns).await?;
    let client = ns.client();
    let chats = ns.api::<Channel>();
    apply_trusted(&ns, "proj", BTreeMap::new()).await?;
    let mut at = At::namespaced("channels", &ns, "bad");
    at.version = "v1alpha2";
    let bad = json!({
        "apiVersion": "plugins.loop.dev/v1alpha2", "kind": "Channel", "metadata": {"name": "bad"},
        "spec": {"project": "proj", "kind": "forum"}
    });
    let crd = ChannelCrd::get(&client).await?;
    crd.loosen().await?;
    let made = create_when_served(&client, &at, &bad).await;
    crd.restore().await?;
    made?;
    at.version = "v1alpha1";

    let good = channel("good", "proj", ChannelKind::Channel, None);
    apply(&ns, &good).await?;
    let has_status = |c: &Channel| c.status.is_some();
    wait::matches(&chats, "good", "reconciled", PROMPT, has_status).await?;
    named(&ns, "Channel", Some(ns.name()), "bad", "forum").await?;

    at.merge(&client, false, &json!({"spec": {"kind": "channel"}}))
        .await?;
    wait::matches(&chats, "bad", "reconciled once fixed", WAIT, has_status).await?;
    counted("Channel", "none", |n| n == 0).await
}

fn stopped(i: &PluginInstance) -> bool {
    i.status.as_ref().and_then(|s| s.phase) == Some(InstancePhase::Stopped)
}

async fn instance(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let id = world(&ns, "ui", &[]).await?;
    let instances = ns.api::<PluginInstance>();
    let bad = instance_name(&id, "general");
    wait::matches(&instances, &bad, "phase Stopped", WAIT, stopped).await?;
    let at = At::namespaced("plugininstances", &ns, &bad);
    let refused = json!({"status": {"refusedSettings": [{
        "setting": "deep", "source": "project", "reason": "nested too deep", "value": deep(DEPTH)
    }]}});
    at.merge(&ns.client(), true, &refused).await?;

    apply(&ns, &channel("second", "proj", ChannelKind::Channel, None)).await?;
    let good = instance_name(&id, "second");
    wait::matches(&instances, &good, "phase Stopped", PROMPT, stopped).await?;
    named(
        &ns,
        "PluginInstance",
        Some(ns.name()),
        &bad,
        "recursion limit",
    )
    .await?;

    let fix = json!({"status": {"refusedSettings": null, "phase": null}});
    at.merge(&ns.client(), true, &fix).await?;
    wait::matches(&instances, &bad, "Stopped once fixed", WAIT, stopped).await?;
    counted("PluginInstance", "none", |n| n == 0).await
}

/// An agent run as the API server makes them (labelled: the controller watches only those),
/// in a thread of its own.
fn labelled_run(name: &str, thread: &str) -> AgentRun {
    let mut run = AgentRun::new(
        name,
        AgentRunSpec {
            plugin: "some".into(),
            channel: "general".into(),
            thread: thread.into(),
            agent: "helper".into(),
            read_only: true,
            tools: vec![],
            prompt: "wait".into(),
        },
    );
    run.metadata.labels = Some(names::labels("some", "proj", "general", "run"));
    run
}

fn queued(r: &AgentRun) -> bool {
    r.status.as_ref().and_then(|s| s.phase) == Some(AgentRunPhase::Queued)
}

/// A labelled run, reconciled (queued: the suite's HostConfig names no runner), then its
/// status made unreadable: `doneAttempts` past a u32.
async fn unreadable_run(ns: &Ns, name: &str) -> anyhow::Result<At> {
    let runs = ns.api::<AgentRun>();
    let thread = format!("plugin:{name}");
    runs.create(&PostParams::default(), &labelled_run(name, &thread))
        .await?;
    wait::matches(&runs, name, "queued", WAIT, queued).await?;
    let at = At::namespaced("agentruns", ns, name);
    let past = json!({"status": {"doneAttempts": PAST_U32}});
    at.merge(&ns.client(), true, &past).await?;
    Ok(at)
}

async fn run(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    setup(&ns).await?;
    let runs = ns.api::<AgentRun>();
    let at = unreadable_run(&ns, "bad").await?;

    runs.create(&PostParams::default(), &labelled_run("good", "plugin:good"))
        .await?;
    wait::matches(&runs, "good", "queued", PROMPT, queued).await?;
    named(&ns, "AgentRun", Some(ns.name()), "bad", "u32").await?;

    let fix = json!({"status": {"doneAttempts": 0, "phase": null}});
    at.merge(&ns.client(), true, &fix).await?;
    wait::matches(&runs, "bad", "queued once fixed", WAIT, queued).await?;
    counted("AgentRun", "none", |n| n == 0).await
}

/// There is one HostConfig (its CRD refuses any other name), so no other of its kind can be
/// made after it: while it is left out, the controller reads the defaults (the host gate
/// shut), and a plugin admitted before is refused at the Host stage until it is fixed.
async fn host_config(ns: Ns) -> anyhow::Result<()> {
    let _exclusive = exclusive().await;
    setup(&ns).await?;
    let id = plugin_id(&ns, "uh");
    let outcome = host_config_left_out(&ns, &id).await;
    // Whatever happened, the suite's HostConfig again.
    let at = At::cluster("hostconfigs", model::resources::HOST_CONFIG_NAME);
    let restore = json!({"spec": {"plugins": {"dailyRuns": host_spec(true).plugins.daily_runs}}});
    at.merge(&ns.client(), false, &restore).await?;
    apply_host(ns.client(), host_spec(true)).await?;
    let _ = Api::<Plugin>::all(ns.client())
        .delete(&id, &DeleteParams::default())
        .await;
    outcome
}

async fn host_config_left_out(ns: &Ns, id: &str) -> anyhow::Result<()> {
    let plugins: Api<Plugin> = Api::all(ns.client());
    install(ns, &echo_plugin(id)?).await?;
    wait::matches(&plugins, id, "admitted", WAIT, admitted).await?;

    let at = At::cluster("hostconfigs", model::resources::HOST_CONFIG_NAME);
    let past = json!({"spec": {"plugins": {"dailyRuns": PAST_U32}}});
    at.merge(&ns.client(), false, &past).await?;
    named(
        ns,
        "HostConfig",
        None,
        model::resources::HOST_CONFIG_NAME,
        "u32",
    )
    .await?;
    let host_stage = |p: &Plugin| stage(p).as_deref() == Some("Host");
    wait::matches(&plugins, id, "refused at Host", WAIT, host_stage).await?;

    let fix = json!({"spec": {"plugins": {"dailyRuns": host_spec(true).plugins.daily_runs}}});
    at.merge(&ns.client(), false, &fix).await?;
    wait::matches(&plugins, id, "admitted once fixed", WAIT, admitted).await?;
    counted("HostConfig", "none", |n| n == 0).await
}

/// Unreadable objects of three kinds in the cluster when the controller starts: it starts,
/// names them, and reconciles objects of their kinds made after.
async fn cold_start(ns: Ns) -> anyhow::Result<()> {
    let _exclusive = exclusive().await;
    setup(&ns).await?;
    let client = ns.client();
    let plugins: Api<Plugin> = Api::all(client.clone());
    let projects = ns.api::<Project>();
    let runs = ns.api::<AgentRun>();

    let bad_id = plugin_id(&ns, "cb");
    let mut bad_plugin = published_plugin(&ns, &bad_id).await?;
    bad_plugin["spec"]["manifest"]["deep"] = deep(DEPTH);
    let plugin_at = At::cluster("plugins", &bad_id);
    plugin_at.create(&client, &bad_plugin).await?;
    let project_at = At::namespaced("projects", &ns, "bad");
    let bad_project = json!({
        "apiVersion": GROUP_VERSION, "kind": "Project", "metadata": {"name": "bad"},
        "spec": {"plugins": {"some": {"settings": {"deep": deep(DEPTH)}}}}
    });
    project_at.create(&client, &bad_project).await?;
    let run_at = unreadable_run(&ns, "bad").await?;

    restart_controller(&ns, async {}).await?;
    let restarted = Instant::now();
    let good_id = plugin_id(&ns, "cg");
    install(&ns, &echo_plugin(&good_id)?).await?;
    apply(&ns, &project("good", BTreeMap::new())).await?;
    runs.create(&PostParams::default(), &labelled_run("good", "plugin:good"))
        .await?;
    let soon = Duration::from_secs(30);
    wait::matches(&plugins, &good_id, "admitted", soon, admitted).await?;
    wait::matches(&projects, "good", "reconciled", soon, reconciled).await?;
    wait::matches(&runs, "good", "queued", soon, queued).await?;
    let took = restarted.elapsed();
    println!("after a restart with 3 unreadable objects, 3 new ones reconciled in {took:?}");
    for (kind, ns_of, name) in [
        ("Plugin", None, bad_id.as_str()),
        ("Project", Some(ns.name()), "bad"),
        ("AgentRun", Some(ns.name()), "bad"),
    ] {
        let word = if kind == "AgentRun" {
            "u32"
        } else {
            "recursion limit"
        };
        named(&ns, kind, ns_of, name, word).await?;
    }

    // Gone, they are no longer counted.
    plugins.delete(&bad_id, &DeleteParams::default()).await?;
    plugins.delete(&good_id, &DeleteParams::default()).await?;
    for at in [&project_at, &run_at] {
        let uri = at.path();
        let request = http::Request::delete(&uri).body(Vec::new())?;
        client.request_text(request).await.context(uri)?;
    }
    for kind in ["Plugin", "Project", "AgentRun"] {
        counted(kind, "none", |n| n == 0).await?;
    }
    ensure!(took < soon);
    Ok(())
}
