//! The Plugin API server on the real control plane: `loop-plugins api` runs as a process of
//! the test, the controller issues the instances and their tokens, and the tests call the API
//! with those tokens: the chat and its settings, agent runs kubectl sees, 401 for a token
//! whose instance is gone, 409 once the project stops enabling the plugin, 403 for each route
//! whose capability is not approved, 404 across chats and plugins, and schemathesis against
//! the live server.

#[path = "api_support.rs"]
pub mod api_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use model::names;
use model::resources::{AgentRun, ChannelKind, Plugin, PluginInstance};
use serde_json::{Value, json};
use server::plugin_api::{PREFIX, ROUTES, shared_runs};

use crate::controller_support::{WAIT, apply_trusted, plugin_id, shared};
use crate::support::{E2eTest, Ns, test, wait};
use api_support::*;

/// Why a test runs on the local control plane only: the chart's API finds no working trees of
/// the test's chats on an existing cluster.
const TREES: &str = "reads a chat's working tree, which the test writes where its own API \
                     server process finds it";

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "api::get_channel_answers_the_chat_and_its_resolved_settings",
            channel,
        )
        .local_only(TREES),
        test(
            "api::post_runs_creates_an_agent_run_that_kubectl_sees",
            runs,
        ),
        test(
            "api::two_replicas_take_no_more_than_daily_runs_together",
            two_replicas_share_the_quota,
        )
        .local_only("starts two API server processes of its own"),
        test("api::a_run_the_cluster_refuses_does_not_count", refused_run),
        test(
            "api::a_token_whose_instance_was_removed_answers_401",
            removed_instance,
        ),
        test(
            "api::a_project_that_stops_enabling_the_plugin_answers_409",
            stops_enabling,
        ),
        test(
            "api::each_route_without_its_capability_answers_403",
            capabilities,
        )
        .local_only(TREES),
        test(
            "api::a_token_reaches_only_its_own_chat_and_plugin",
            isolation,
        ),
        test("api::schemathesis_finds_no_failures", schemathesis)
            .timeout(Duration::from_secs(420))
            .local_only(TREES),
    ]
}

fn instance_name(plugin: &str, chat: &str) -> String {
    names::instance_name(plugin, chat)
}

async fn channel(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let world = full_world(
        &ns,
        "ch",
        &[
            chat("general", ChannelKind::Channel, None),
            chat("general-t1", ChannelKind::Thread, Some("general")),
        ],
    )
    .await?;
    let api = ApiServer::start(&ns).await?;

    let answer = api
        .call("GET", "/channel", Some(world.token("general")), None)
        .await?;
    answer.expect(200, None)?;
    let expected = json!({
        "id": "general",
        "kind": "channel",
        "project": PROJECT,
        "app": "desktop",
        "settings": full_settings(),
    });
    ensure!(answer.json()? == expected, "GET /channel answered {answer}");

    let answer = api
        .call("GET", "/channel", Some(world.token("general-t1")), None)
        .await?;
    answer.expect(200, None)?;
    let mut expected_thread = expected.clone();
    expected_thread["id"] = json!("general-t1");
    expected_thread["kind"] = json!("thread");
    expected_thread["parent"] = json!("general");
    ensure!(
        answer.json()? == expected_thread,
        "GET /channel of the thread answered {answer}"
    );

    // A thread reads its channel's working tree.
    std::fs::write(api.tree(&ns, "general")?.join("README.md"), "hello tree\n")?;
    let answer = api
        .call(
            "GET",
            "/files/README.md",
            Some(world.token("general-t1")),
            None,
        )
        .await?;
    answer.expect(200, None)?;
    ensure!(
        answer.body == b"hello tree\n",
        "GET /files answered {answer}"
    );

    // The project's settings apply without the owner trusting them, as soon as they change.
    let patch = json!({ "spec": { "plugins": { world.plugin.clone(): {
        "settings": { "question_count": 12, "pass_mark": 0.9 }
    } } } });
    ns.api::<model::resources::Project>()
        .patch(PROJECT, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let answer = api
            .call("GET", "/channel", Some(world.token("general")), None)
            .await?;
        answer.expect(200, None)?;
        let settings = answer.json()?["settings"].clone();
        if settings["question_count"] == 12 && settings["pass_mark"] == 0.9 {
            break;
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the settings did not follow the project: {answer}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Two API servers (as the chart's two replicas) take 60 runs of one plugin at once, 30 each:
/// exactly `plugins.daily_runs` (50) start, whichever server each lands on.
async fn two_replicas_share_the_quota(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let world = full_world(&ns, "q2", &[chat("general", ChannelKind::Channel, None)]).await?;
    let id = world.plugin.clone();
    let token = world.token("general");
    let (a, b) = tokio::try_join!(ApiServer::start(&ns), ApiServer::start(&ns))?;
    // Both see the token before the race starts.
    a.until(200, "GET", "/channel", Some(token), None).await?;
    b.until(200, "GET", "/channel", Some(token), None).await?;
    let body = json!({ "agent": "quiz", "prompt": "one more" });
    let calls = (0..60).map(|i| {
        let server = if i % 2 == 0 { &a } else { &b };
        server.call("POST", "/runs", Some(token), Some(&body))
    });
    let answers = futures::future::join_all(calls).await;
    let mut by_status: BTreeMap<u16, usize> = BTreeMap::new();
    for answer in &answers {
        let answer = answer.as_ref().map_err(|e| anyhow::anyhow!("{e:#}"))?;
        *by_status.entry(answer.status).or_default() += 1;
        if answer.status == 429 {
            answer.expect(429, Some("daily_runs_exceeded"))?;
        }
    }
    ensure!(
        by_status.get(&202) == Some(&50) && by_status.get(&429) == Some(&10),
        "60 runs over two servers answered {by_status:?}, not 50 started and 10 refused"
    );
    let listed = kubectl_runs(&ns, &id).await?;
    ensure!(
        listed.lines().count() == 50,
        "{} AgentRuns exist, not 50",
        listed.lines().count()
    );
    Ok(())
}

/// A run whose AgentRun the cluster refuses answers 503 and is taken out of the replicas'
/// record again: it never started, so it takes none of the plugin's daily runs.
async fn refused_run(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let result = refused_run_while_refusing(&ns).await;
    lift(&ns, "runs").await;
    result
}

async fn refused_run_while_refusing(ns: &Ns) -> anyhow::Result<()> {
    let world = full_world(ns, "rr", &[chat("general", ChannelKind::Channel, None)]).await?;
    let token = world.token("general");
    let api = ApiServer::start(ns).await?;
    api.until(200, "GET", "/channel", Some(token), None).await?;
    let body = json!({ "agent": "quiz", "prompt": "refused" });

    refuse(ns, "runs", "CREATE", "agentruns").await?;
    let answer = api
        .until(503, "POST", "/runs", Some(token), Some(&body))
        .await?;
    ensure!(
        String::from_utf8_lossy(&answer.body).contains(REFUSED),
        "the 503 does not say why: {answer}"
    );
    let runs = ns.api::<AgentRun>().list(&Default::default()).await?;
    let started = runs.items.len();
    ensure!(
        recorded_runs(ns, &world.plugin).await? == started,
        "the record counts the refused runs: {started} AgentRuns exist"
    );

    lift(ns, "runs").await;
    let created = api
        .until(202, "POST", "/runs", Some(token), Some(&body))
        .await?;
    let runs = ns.api::<AgentRun>().list(&Default::default()).await?;
    ensure!(
        recorded_runs(ns, &world.plugin).await? == runs.items.len(),
        "after {created}, the record does not hold the {} AgentRuns that exist",
        runs.items.len()
    );
    Ok(())
}

/// How many runs the replicas' record holds for the plugin.
async fn recorded_runs(ns: &Ns, plugin: &str) -> anyhow::Result<usize> {
    let records: Api<ConfigMap> = Api::namespaced(ns.client(), &replicas_namespace(ns));
    let Some(record) = records.get_opt(&shared_runs::record_name(plugin)).await? else {
        return Ok(0);
    };
    let text = record
        .data
        .unwrap_or_default()
        .remove("started")
        .context("the record has no started key")?;
    let runs: Vec<Value> = serde_json::from_str(&text)?;
    Ok(runs.len())
}

/// The plugin's AgentRuns as `kubectl get -o name` lists them, one a line.
async fn kubectl_runs(ns: &Ns, plugin: &str) -> anyhow::Result<String> {
    ns.kubectl([
        "get",
        "agentruns.plugins.loop.dev",
        "-l",
        &format!("plugins.loop.dev/plugin={plugin}"),
        "-o",
        "name",
    ])
    .await
}

async fn runs(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let world = full_world(&ns, "ru", &[chat("general", ChannelKind::Channel, None)]).await?;
    let id = world.plugin.clone();
    let token = world.token("general");
    let api = ApiServer::start(&ns).await?;
    // The server's stores follow the cluster: it knows the token and the HostConfig is on.
    api.until(200, "GET", "/channel", Some(token), None).await?;

    let prompt = "Ask me three questions about Rust lifetimes.";
    let answer = api
        .call(
            "POST",
            "/runs",
            Some(token),
            Some(&json!({ "agent": "quiz", "prompt": prompt })),
        )
        .await?;
    answer.expect(202, None)?;
    let run = answer.json()?;
    let run_id = run["id"].as_str().context("the run has no id")?.to_string();
    ensure!(
        answer.header("location") == Some(&format!("{PREFIX}/runs/{run_id}")),
        "Location is {:?}",
        answer.header("location")
    );
    let thread = format!("plugin:{id}");
    ensure!(
        run["agent"] == "quiz"
            && run["thread"] == thread.as_str()
            && run["read_only"] == true
            && run["tools"]
                == json!([
                    format!("plugin_{}", tool("ask", &id)),
                    format!("plugin_{}", tool("score", &id))
                ])
            && run["status"] == "queued"
            && run["done_delivered"] == false,
        "POST /runs answered {answer}"
    );

    // kubectl sees the AgentRun, in the chat, owned by it.
    let text = ns
        .kubectl(["get", "agentruns.plugins.loop.dev", &run_id, "-o", "json"])
        .await?;
    let object: Value = serde_json::from_str(&text)?;
    let spec = &object["spec"];
    ensure!(
        spec["plugin"] == id.as_str()
            && spec["channel"] == "general"
            && spec["thread"] == thread.as_str()
            && spec["agent"] == "quiz"
            && spec["prompt"] == prompt
            && spec["tools"]
                == json!([
                    format!("plugin_{}", tool("ask", &id)),
                    format!("plugin_{}", tool("score", &id))
                ]),
        "kubectl shows {object}"
    );
    let owners = &object["metadata"]["ownerReferences"];
    ensure!(
        owners[0]["kind"] == "Channel" && owners[0]["name"] == "general",
        "the run's owners are {owners}"
    );

    let answer = api
        .call("GET", &format!("/runs/{run_id}"), Some(token), None)
        .await?;
    answer.expect(200, None)?;
    ensure!(
        answer.json()?["id"] == run_id.as_str(),
        "GET answered {answer}"
    );

    // A write agent (agent.write is approved) runs with its own tools, not read-only.
    let answer = api
        .call(
            "POST",
            "/runs",
            Some(token),
            Some(&json!({ "agent": "fixer", "prompt": "fix it" })),
        )
        .await?;
    answer.expect(202, None)?;
    let fixer = answer.json()?;
    ensure!(
        fixer["read_only"] == false
            && fixer["tools"] == json!([format!("plugin_{}", tool("score", &id))]),
        "the fixer run is {fixer}"
    );

    // Refused: an agent the manifest does not have, an empty prompt, a body that is not JSON.
    api.call(
        "POST",
        "/runs",
        Some(token),
        Some(&json!({ "agent": "nosuch", "prompt": "x" })),
    )
    .await?
    .expect(422, Some("unknown_agent"))?;
    api.call(
        "POST",
        "/runs",
        Some(token),
        Some(&json!({ "agent": "quiz", "prompt": "" })),
    )
    .await?
    .expect(400, Some("invalid_body"))?;
    api.call("POST", "/runs", Some(token), Some(&json!("quiz")))
        .await?
        .expect(400, Some("invalid_body"))?;

    let listed = kubectl_runs(&ns, &id).await?;
    ensure!(
        listed.lines().count() == 2,
        "kubectl lists these runs:\n{listed}"
    );
    Ok(())
}

async fn removed_instance(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let world = full_world(&ns, "rm", &[chat("general", ChannelKind::Channel, None)]).await?;
    let old = world.token("general").to_string();
    let api = ApiServer::start(&ns).await?;
    api.until(200, "GET", "/channel", Some(&old), None)
        .await
        .context("the first instance's token")?;

    // No token, a malformed one, one nobody issued.
    let answer = api.call("GET", "/channel", None, None).await?;
    answer.expect(401, Some("missing_token"))?;
    ensure!(
        answer.header("www-authenticate") == Some("Bearer"),
        "WWW-Authenticate is {:?}",
        answer.header("www-authenticate")
    );
    let target = format!("{PREFIX}/channel");
    let long = format!("Bearer {}", "a".repeat(600));
    for header in ["Basic dXNlcjpwYXNz", "Bearer", "Bearer two tokens", &long] {
        let headers = [("Authorization".to_string(), header.to_string())];
        request(api.addr(), "GET", &target, &headers, None)
            .await?
            .expect(401, Some("malformed_token"))?;
    }
    api.call("GET", "/channel", Some(&"0".repeat(64)), None)
        .await?
        .expect(401, Some("invalid_token"))?;

    // The instance goes: its token stops working.
    let instance = instance_name(&world.plugin, "general");
    let instances = ns.api::<PluginInstance>();
    let uid = instances.get(&instance).await?.uid();
    instances
        .delete(&instance, &DeleteParams::default())
        .await?;
    api.until(401, "GET", "/channel", Some(&old), None)
        .await
        .context("the removed instance's token")?
        .expect(401, Some("invalid_token"))?;

    // The chat still enables the plugin: the controller makes a new instance with a new
    // token, which works; the old one stays refused.
    wait::matches(&instances, &instance, "a new instance", WAIT, |i| {
        i.uid() != uid && i.metadata.deletion_timestamp.is_none()
    })
    .await?;
    let secret = names::secret_name(&instance);
    let fresh = wait::matches(
        &ns.api::<Secret>(),
        &secret,
        "a Secret with a new token",
        WAIT,
        |s: &Secret| {
            s.metadata.deletion_timestamp.is_none()
                && s.data
                    .as_ref()
                    .and_then(|d| d.get("token"))
                    .is_some_and(|t| t.0 != old.as_bytes())
        },
    )
    .await?;
    let new = String::from_utf8(fresh.data.unwrap_or_default()["token"].0.clone())?;
    api.until(200, "GET", "/channel", Some(new.trim()), None)
        .await
        .context("the new instance's token")?;
    api.call("GET", "/channel", Some(&old), None)
        .await?
        .expect(401, Some("invalid_token"))?;
    Ok(())
}

/// The message of every refusal a test sets up.
const REFUSED: &str = "refused by an e2e test";

/// The name of the cluster-scoped policy and binding refusing `what` in the namespace.
fn refusal_name(ns: &Ns, what: &str) -> String {
    format!("e2e-refuse-{what}-{}", ns.name())
}

/// Refuses every `operation` on `resource` (of plugins.loop.dev) in the namespace, with a
/// ValidatingAdmissionPolicy and its binding named after `what`.
async fn refuse(ns: &Ns, what: &str, operation: &str, resource: &str) -> anyhow::Result<()> {
    let name = refusal_name(ns, what);
    let client = ns.client();
    let params = PatchParams::apply("e2e-api").force();
    let policy: ValidatingAdmissionPolicy = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": { "name": name },
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [{
                    "apiGroups": ["plugins.loop.dev"],
                    "apiVersions": ["*"],
                    "operations": [operation],
                    "resources": [resource],
                }],
            },
            "validations": [{
                "expression": "false",
                "message": REFUSED,
            }],
        },
    }))?;
    Api::<ValidatingAdmissionPolicy>::all(client.clone())
        .patch(&name, &params, &Patch::Apply(&policy))
        .await?;
    let binding: ValidatingAdmissionPolicyBinding = serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": { "name": name },
        "spec": {
            "policyName": name,
            "validationActions": ["Deny"],
            "matchResources": {
                "namespaceSelector": {
                    "matchLabels": { "kubernetes.io/metadata.name": ns.name() },
                },
            },
        },
    }))?;
    Api::<ValidatingAdmissionPolicyBinding>::all(client)
        .patch(&name, &params, &Patch::Apply(&binding))
        .await?;
    Ok(())
}

/// Takes the refusal named after `what` away.
async fn lift(ns: &Ns, what: &str) {
    let name = refusal_name(ns, what);
    let client = ns.client();
    let _ = Api::<ValidatingAdmissionPolicyBinding>::all(client.clone())
        .delete(&name, &DeleteParams::default())
        .await;
    let _ = Api::<ValidatingAdmissionPolicy>::all(client)
        .delete(&name, &DeleteParams::default())
        .await;
}

/// Refuses every deletion of a PluginInstance in the namespace, so a test can see the API
/// between a project's change and the controller's answer to it.
async fn hold_instances(ns: &Ns) -> anyhow::Result<()> {
    refuse(ns, "instances", "DELETE", "plugininstances").await
}

async fn release_instances(ns: &Ns) {
    lift(ns, "instances").await
}

/// Waits until a dry-run deletion of `instance` is refused (the policy is in force).
async fn held(ns: &Ns, instance: &str) -> anyhow::Result<()> {
    let instances = ns.api::<PluginInstance>();
    let dry_run = DeleteParams {
        dry_run: true,
        ..Default::default()
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        match instances.delete(instance, &dry_run).await {
            Err(kube::Error::Api(status)) if status.message.contains(REFUSED) => {
                return Ok(());
            }
            other => {
                if tokio::time::Instant::now() > deadline {
                    bail!("the hold on instances is not in force: {other:?}");
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn stops_enabling(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let result = stops_enabling_held(&ns).await;
    release_instances(&ns).await;
    result
}

async fn stops_enabling_held(ns: &Ns) -> anyhow::Result<()> {
    let world = full_world(ns, "ne", &[chat("general", ChannelKind::Channel, None)]).await?;
    let token = world.token("general").to_string();
    let instance = instance_name(&world.plugin, "general");
    let api = ApiServer::start(ns).await?;
    api.until(200, "GET", "/channel", Some(&token), None)
        .await?;

    // The controller deletes the instance as soon as the project stops enabling the plugin;
    // the hold keeps it, so the API's own check is what answers.
    hold_instances(ns).await?;
    held(ns, &instance).await?;
    let off = BTreeMap::from([(world.plugin.clone(), full_entry(false))]);
    apply_trusted(ns, PROJECT, off).await?;
    let answer = api
        .until(409, "GET", "/channel", Some(&token), None)
        .await?;
    answer.expect(409, Some("plugin_not_enabled"))?;
    let message = answer.json()?["error"]["message"].clone();
    ensure!(
        message
            .as_str()
            .is_some_and(|m| m.contains(PROJECT) && m.contains(&world.plugin)),
        "the message does not name the project and the plugin: {message}"
    );
    // 409 comes before 403 and before the body is read.
    api.call(
        "POST",
        "/runs",
        Some(&token),
        Some(&json!({ "agent": "nosuch" })),
    )
    .await?
    .expect(409, Some("plugin_not_enabled"))?;
    api.call("GET", "/memory/k", Some(&token), None)
        .await?
        .expect(409, Some("plugin_not_enabled"))?;
    ensure!(
        ns.api::<PluginInstance>()
            .get_opt(&instance)
            .await?
            .is_some(),
        "the instance is gone: the 409 was not the API's own check"
    );

    // Released, the controller removes the instance, and the token is refused outright.
    release_instances(ns).await;
    api.until(401, "GET", "/channel", Some(&token), None)
        .await?
        .expect(401, Some("invalid_token"))?;
    wait::deleted(&ns.api::<PluginInstance>(), &instance, WAIT).await?;
    Ok(())
}

/// A capability-gated call: the route as the spec names it, the call and its capability.
struct Gated {
    method: &'static str,
    route: &'static str,
    path: &'static str,
    body: Option<Value>,
    capability: &'static str,
    /// What it answers once every capability is approved.
    approved: (u16, Option<&'static str>),
}

fn gated() -> Vec<Gated> {
    let g = |method, route, path, body, capability, approved| Gated {
        method,
        route,
        path,
        body,
        capability,
        approved,
    };
    vec![
        g(
            "POST",
            "/runs",
            "/runs",
            Some(json!({ "agent": "fixer", "prompt": "fix it" })),
            "agent.write",
            (202, None),
        ),
        g(
            "PUT",
            "/composer/switches/{id}",
            "/composer/switches/sync",
            Some(json!({ "on": true, "title": "Syncing" })),
            "ui.composer_switch",
            (200, None),
        ),
        g(
            "DELETE",
            "/composer/switches/{id}",
            "/composer/switches/sync",
            None,
            "ui.composer_switch",
            (200, None),
        ),
        g(
            "POST",
            "/cards",
            "/cards",
            Some(json!({ "card": "score", "title": "Quiz: 3 of 4", "data": { "score": 3 } })),
            "ui.notification.card",
            (201, None),
        ),
        g(
            "GET",
            "/cards/{id}",
            "/cards/card-0123456789abcdef",
            None,
            "ui.notification.card",
            (404, Some("card_not_found")),
        ),
        g(
            "POST",
            "/notifications",
            "/notifications",
            Some(json!({ "title": "Synced", "level": "success" })),
            "notifications.send",
            (201, None),
        ),
        g(
            "POST",
            "/channel/live/control",
            "/channel/live/control",
            Some(json!({ "subtype": "set_permission_mode", "request": { "mode": "plan" } })),
            "live.control",
            (409, Some("not_live")),
        ),
        g(
            "PUT",
            "/channel/live/hold",
            "/channel/live/hold",
            Some(json!({ "hold": true })),
            "live.control",
            (200, None),
        ),
        g(
            "GET",
            "/files/{path}",
            "/files/README.md",
            None,
            "files.read",
            (200, None),
        ),
        g(
            "POST",
            "/ui/commands",
            "/ui/commands",
            Some(json!({ "steps": [{ "type": "select_chat" }], "timeout_seconds": 1 })),
            "ui.command",
            // No app follows the chat: the plugin is told so at the command's timeout.
            (504, Some("timeout")),
        ),
        g(
            "GET",
            "/hotspots",
            "/hotspots",
            None,
            "files.read",
            (404, Some("scan_not_found")),
        ),
        g(
            "GET",
            "/hotspots/page",
            "/hotspots/page?offset=0&limit=5",
            None,
            "files.read",
            (404, Some("scan_not_found")),
        ),
        g(
            "GET",
            "/memory/{key}",
            "/memory/last-quiz",
            None,
            "memory.read",
            (404, Some("memory_not_found")),
        ),
        g(
            "PUT",
            "/memory/{key}",
            "/memory/last-quiz",
            Some(json!({ "value": { "score": 3 } })),
            "memory.write",
            (200, None),
        ),
        g(
            "GET",
            "/settings/secrets/{name}",
            "/settings/secrets/api_token",
            None,
            "secrets.read",
            (404, Some("secret_not_set")),
        ),
    ]
}

async fn capabilities(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let table = gated();
    // Every route is here, or needs no capability beyond agent.readonly.
    let mut covered: BTreeSet<(&str, &str)> = table.iter().map(|g| (g.method, g.route)).collect();
    covered.extend([
        ("GET", "/channel"),
        ("POST", "/runs"),
        ("GET", "/runs/{run_id}"),
    ]);
    let served: BTreeSet<(&str, &str)> = ROUTES.iter().copied().collect();
    ensure!(
        covered == served,
        "the table does not cover the routes: {served:?}"
    );

    // The full manifest declares every capability; the owner approved only agent.readonly.
    let id = plugin_id(&ns, "ca");
    let plugin = full_plugin(&id, Some(&["agent.readonly"]))?;
    let world = world(
        &ns,
        &[plugin],
        &[chat("general", ChannelKind::Channel, None)],
    )
    .await?;
    let token = world.token("general");
    let api = ApiServer::start(&ns).await?;
    std::fs::write(api.tree(&ns, "general")?.join("README.md"), "hello\n")?;

    api.call("GET", "/channel", Some(token), None)
        .await?
        .expect(200, None)?;
    api.call(
        "POST",
        "/runs",
        Some(token),
        Some(&json!({ "agent": "quiz", "prompt": "go" })),
    )
    .await?
    .expect(202, None)?;
    api.call("GET", "/runs/nosuch", Some(token), None)
        .await?
        .expect(404, Some("run_not_found"))?;
    let mut failures = Vec::new();
    for g in &table {
        let answer = api
            .call(g.method, g.path, Some(token), g.body.as_ref())
            .await?;
        let named = answer.json().ok().and_then(|b| {
            b["error"]["message"]
                .as_str()
                .map(|m| m.contains(g.capability))
        });
        if answer.status != 403
            || answer.code().as_deref() != Some("capability_not_approved")
            || named != Some(true)
        {
            failures.push(format!(
                "{} {} without {}: {answer}",
                g.method, g.path, g.capability
            ));
        }
    }
    ensure!(failures.is_empty(), "{}", failures.join("\n"));

    // The owner approves everything: the same calls go through, as soon as the Plugin says so.
    let all: Vec<String> = model::manifest::Capability::ALL
        .iter()
        .map(|c| c.to_string())
        .collect();
    let patch = json!({ "spec": { "approvedCapabilities": all } });
    Api::<Plugin>::all(ns.client())
        .patch(&id, &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let first = &table[0];
    api.until(
        first.approved.0,
        first.method,
        first.path,
        Some(token),
        first.body.as_ref(),
    )
    .await?;
    for g in &table[1..] {
        let answer = api
            .call(g.method, g.path, Some(token), g.body.as_ref())
            .await?;
        if answer.status != g.approved.0
            || (g.approved.1.is_some() && answer.code().as_deref() != g.approved.1)
        {
            failures.push(format!(
                "{} {} with {} approved: expected {:?}, got {answer}",
                g.method, g.path, g.capability, g.approved
            ));
        }
    }
    ensure!(failures.is_empty(), "{}", failures.join("\n"));
    Ok(())
}

async fn isolation(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let one = plugin_id(&ns, "i1");
    let two = plugin_id(&ns, "i2");
    let world = world(
        &ns,
        &[full_plugin(&one, None)?, full_plugin(&two, None)?],
        &[
            chat("chat-a", ChannelKind::Channel, None),
            chat("chat-b", ChannelKind::Channel, None),
        ],
    )
    .await?;
    let a = world.token_of(&one, "chat-a");
    let b = world.token_of(&one, "chat-b");
    let other_plugin_b = world.token_of(&two, "chat-b");
    let api = ApiServer::start(&ns).await?;
    for token in [a, b, other_plugin_b] {
        api.until(200, "GET", "/channel", Some(token), None).await?;
    }

    // Chat B's run and card.
    let answer = api
        .call(
            "POST",
            "/runs",
            Some(b),
            Some(&json!({ "agent": "quiz", "prompt": "go" })),
        )
        .await?;
    answer.expect(202, None)?;
    let run = format!(
        "/runs/{}",
        answer.json()?["id"].as_str().unwrap_or_default()
    );
    let answer = api
        .call(
            "POST",
            "/cards",
            Some(b),
            Some(&json!({ "card": "score", "title": "B's card" })),
        )
        .await?;
    answer.expect(201, None)?;
    let card = format!(
        "/cards/{}",
        answer.json()?["id"].as_str().unwrap_or_default()
    );

    api.call("GET", &run, Some(b), None)
        .await?
        .expect(200, None)?;
    api.call("GET", &card, Some(b), None)
        .await?
        .expect(200, None)?;
    // Chat A's token, and another plugin's token in chat B, find neither.
    for (who, token) in [("chat A", a), ("another plugin in chat B", other_plugin_b)] {
        api.call("GET", &run, Some(token), None)
            .await?
            .expect(404, Some("run_not_found"))
            .with_context(|| format!("{who} reading chat B's run"))?;
        api.call("GET", &card, Some(token), None)
            .await?
            .expect(404, Some("card_not_found"))
            .with_context(|| format!("{who} reading chat B's card"))?;
    }
    // A switch the manifest does not declare is found nowhere.
    api.call(
        "PUT",
        "/composer/switches/nosuch",
        Some(a),
        Some(&json!({ "on": true })),
    )
    .await?
    .expect(404, Some("switch_not_found"))?;
    // Switch states are per chat: B's switch on leaves A's off.
    let on = api
        .call(
            "PUT",
            "/composer/switches/sync",
            Some(b),
            Some(&json!({ "on": true, "title": "B syncs" })),
        )
        .await?;
    on.expect(200, None)?;
    ensure!(on.json()?["on"] == true, "B's switch: {on}");
    let sync_on = |i: &PluginInstance| {
        i.status
            .as_ref()
            .is_some_and(|s| s.switches.iter().any(|w| w.id == "sync" && w.on))
    };
    let instances = ns.api::<PluginInstance>();
    wait::matches(
        &instances,
        &instance_name(&one, "chat-b"),
        "chat B's switch on",
        WAIT,
        sync_on,
    )
    .await?;
    let seen = instances.get(&instance_name(&one, "chat-a")).await?;
    ensure!(
        !sync_on(&seen),
        "chat A's instance shows B's switch: {:?}",
        seen.status
    );
    Ok(())
}

async fn schemathesis(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let world = full_world(&ns, "st", &[chat("general", ChannelKind::Channel, None)]).await?;
    let api = ApiServer::start(&ns).await?;
    let tree = api.tree(&ns, "general")?;
    std::fs::create_dir_all(tree.join("docs"))?;
    std::fs::write(tree.join("README.md"), "# a working tree\n")?;
    std::fs::write(tree.join("docs/guide.md"), "guide\n")?;
    std::os::unix::fs::symlink("/etc/hostname", tree.join("escape"))?;
    let fifo = std::ffi::CString::new(tree.join("pipe").into_os_string().into_encoded_bytes())?;
    // SAFETY: mkfifo reads a NUL-terminated path that lives across the call.
    ensure!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) } == 0, "mkfifo");
    // A quality scan of the chat, as the host API stores the app's, so the hotspots routes
    // have something to page through.
    {
        use server::quality::scan;
        let functions: Vec<Value> = (0..40)
            .map(|i| {
                json!({"file": format!("src/f{i}.rs"), "name": format!("f{i}"), "line": 1,
                       "complexity": i, "lines": 20, "score": i})
            })
            .collect();
        let body = json!({"totals": {"files": 5, "functions": 40}, "functions": functions});
        let posted = scan::parse(body.to_string().as_bytes()).map_err(anyhow::Error::msg)?;
        let stored = scan::Scan::of(posted, jiff::Timestamp::now());
        let chat: model::resources::Channel = ns.get("general").await?;
        let mut map = scan::config_map(&chat);
        for (k, v) in scan::write(&stored) {
            map.data
                .get_or_insert_default()
                .insert(k, v.unwrap_or_default());
        }
        ns.api::<ConfigMap>()
            .create(&Default::default(), &map)
            .await?;
    }

    // An app follows the chat and answers every UI command, as the console does, so a valid
    // command is answered at once rather than at its timeout.
    let app_token = crate::host::caller_token(&ns, "st-app", crate::host::Grant::All).await?;
    let _app = crate::ui_commands::answer_every_command(
        format!("http://{}", api.addr()),
        ns.name().to_string(),
        "general".into(),
        app_token,
    );

    let run_dir = ns.cluster().run_dir();
    let script = devcluster::binaries::repo_root().join("hack/schemathesis.sh");
    let started = std::time::Instant::now();
    let output = tokio::process::Command::new(&script)
        .arg("run")
        .env("API_URL", api.base_url())
        .env("API_TOKEN", world.token("general"))
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(360), output)
        .await
        .context("schemathesis ran longer than 6 minutes")??;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let saved = run_dir.join(format!("schemathesis-{}.log", ns.name()));
    std::fs::write(&saved, &text)?;
    // The summary: from schemathesis's SUMMARY banner on, else the last lines.
    let lines: Vec<&str> = text.lines().collect();
    let from = lines
        .iter()
        .rposition(|l| l.contains("SUMMARY"))
        .unwrap_or(lines.len().saturating_sub(60));
    let summary = lines[from..].join("\n");
    eprintln!(
        "api::schemathesis: {} in {:.0}s (output {}, API log {})\n{summary}",
        output.status,
        started.elapsed().as_secs_f64(),
        saved.display(),
        api.log()?.display()
    );
    ensure!(
        output.status.success(),
        "schemathesis failed ({}); its summary is above, its output in {}",
        output.status,
        saved.display()
    );
    // The server's own count agrees: it answered many requests, none with a 5xx.
    let by_status = api.requests_by_status().await?;
    eprintln!("api::schemathesis: the server's answers by status: {by_status:?}");
    ensure!(
        by_status.values().sum::<u64>() > 100,
        "the server saw few requests: {by_status:?}"
    );
    ensure!(
        by_status.keys().all(|s| *s < 500),
        "the server answered 5xx: {by_status:?}"
    );
    let log = std::fs::read_to_string(api.log()?).unwrap_or_default();
    ensure!(
        !log.contains("panicked"),
        "the API server panicked; see {}",
        api.log()?.display()
    );
    Ok(())
}
