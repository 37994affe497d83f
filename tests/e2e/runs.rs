//! Agent runs on the real control plane: the controller runs each AgentRun as a Job of
//! HostConfig's runner (crates/controller/src/runs), one at a time per hidden thread, in the
//! order they were made, and the run's status follows its Job.
//!
//! The runner is the real one, `loop-plugins agent` from our image (the kubelet stand-in plays
//! it with the binary under test), against the scripted chat-completions server of
//! crates/testkit, which checks what each run sends it (the prompt, the tools offered, the
//! answer to a tool call it was refused) and fails a run by refusing its request. It runs in
//! the test process; on kind the runner Pods reach it by the kind network's gateway.

use std::time::Duration;

use anyhow::{Context, ensure};
use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::ResourceExt;
use model::contract::SELF_IMAGE_BINARY;
use model::resources::{AgentRun, AgentRunPhase, AgentRunSpec, AgentRunner, ChannelKind, Plugin};
use testkit::chat_model::{ScriptedModel, Step};

use crate::controller::world;
use crate::controller_support::*;
use crate::support::{E2eTest, Ns, test, wait};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "runs::a_thread_runs_its_runs_one_at_a_time_in_order_and_a_failing_runner_fails_its_run",
            in_order,
        )
        .timeout(Duration::from_secs(240)),
        test(
            "runs::a_runs_agent_calls_the_plugins_tools_through_its_mcp_endpoint_only_while_it_runs",
            mcp_tools,
        )
        .timeout(Duration::from_secs(240)),
        test(
            "runs::the_host_records_a_runs_tool_calls_and_the_agent_view_reads_them_until_the_run_goes",
            transcript,
        )
        .timeout(Duration::from_secs(240)),
        test(
            "runs::a_runner_pod_killed_fails_its_run_and_the_plugin_is_told_it_failed",
            killed_runner,
        )
        .timeout(Duration::from_secs(240)),
        test(
            "runs::runs_made_and_ended_while_the_controller_is_down_are_run_and_recorded_once_it_is_back",
            controller_down,
        )
        .timeout(Duration::from_secs(240)),
        test(
            "runs::the_quiz_examples_daily_action_runs_its_agent_and_the_runs_end_is_its_score_card",
            quiz,
        )
        .timeout(Duration::from_secs(240)),
    ]
}

async fn in_order(ns: Ns) -> anyhow::Result<()> {
    // The runner is HostConfig's, for the whole cluster: no other test runs meanwhile.
    let _exclusive = exclusive().await;
    let id = world(&ns, "rn", &[]).await?;
    // The runs come in order: the script answers the first, calls the second's tool with an
    // input its schema refuses and answers once told, and refuses the third.
    let model = start_model(vec![
        Step::answer("summarized")
            .offering(&[&format!("plugin_{id}-echo")])
            .after_message_containing("hello, summarize the chat"),
        Step::call(&format!("plugin_{id}-echo"), "{}").after_message_containing("hello again"),
        Step::answer("done without it")
            .after_message_containing("does not match the tool's input_schema"),
    ])
    .await?;
    // The runs' MCP endpoints are the API server's.
    let _host = runner_for(&ns, &model).await?;
    let result = three_runs(&ns, &id).await;
    put_back(&ns, result).await?;
    let failures = model.failures();
    ensure!(
        model.requests().len() == 4
            && failures.len() == 1
            && failures[0].contains("past the script"),
        "the model saw {} requests and objected to {failures:?}",
        model.requests().len()
    );
    Ok(())
}

async fn three_runs(ns: &Ns, id: &str) -> anyhow::Result<()> {
    // Named in the order they are made: a thread runs by creation time, then name.
    let prompts = [
        ("run-a", "hello, summarize the chat"),
        ("run-b", "hello again"),
        ("run-c", "hello a third time: the model refuses this one"),
    ];
    for (name, prompt) in prompts {
        apply(ns, &run(id, name, prompt)).await?;
    }
    let runs = ns.api::<AgentRun>();
    let mut ended = Vec::new();
    for (name, _) in prompts {
        ended.push(ended_status(&runs, name).await?);
    }
    let phases: Vec<_> = ended
        .iter()
        .map(|s| (s.phase, s.reason.as_deref()))
        .collect();
    ensure!(
        phases
            == [
                (Some(AgentRunPhase::Succeeded), None),
                (Some(AgentRunPhase::Succeeded), None),
                (Some(AgentRunPhase::Failed), Some("BackoffLimitExceeded")),
            ],
        "the runs ended {phases:?}"
    );
    // One at a time, in order: each started once the one before it ended.
    for pair in ended.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        let ended_at = before.end_time.as_ref().context("no end time")?;
        let started_at = after.start_time.as_ref().context("no start time")?;
        ensure!(
            started_at.0 >= ended_at.0,
            "a run started at {started_at:?}, before the one ahead of it ended at {ended_at:?}"
        );
    }
    // A run's result is its runner's final message (its Pod's termination message), or why
    // it failed.
    let results: Vec<Option<&str>> = ended.iter().map(|s| s.result.as_deref()).collect();
    ensure!(
        results
            == [
                Some("summarized"),
                Some("done without it"),
                Some("the runner failed")
            ],
        "the runs' results: {results:?}"
    );
    // The failed one is the host's to tell the chat: a notification in its drawer, in the
    // chat's host inbox (the leading API server's fan-out writes it).
    let told = wait::matches(
        &ns.api::<k8s_openapi::api::core::v1::ConfigMap>(),
        "general-host-inbox",
        "the failed run told in the chat's drawer",
        WAIT,
        |map: &k8s_openapi::api::core::v1::ConfigMap| {
            map.data.iter().flatten().any(|(_, entry)| {
                entry.contains("failed: BackoffLimitExceeded") && entry.contains("run-c")
            })
        },
    )
    .await?;
    ensure!(
        told.data.as_ref().map_or(0, |d| d.len()) == 1,
        "only the failed run is told: {:?}",
        told.data
    );
    // Each ran as a Job of its own, owned by its run.
    let jobs = ns.api::<Job>().list(&Default::default()).await?;
    for (name, _) in prompts {
        let job = jobs
            .items
            .iter()
            .find(|j| j.metadata.name.as_deref() == Some(&format!("run-{name}")))
            .with_context(|| format!("no Job for {name}"))?;
        let owner = job
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.first())
            .context("the Job has no owner")?;
        ensure!(owner.kind == "AgentRun" && owner.name == name, "{owner:?}");
    }
    Ok(())
}

/// A run's agent calls the plugin's tools through the run's MCP endpoint: it is offered
/// exactly its agent's tools with their schemas; an input the schema refuses comes back as an
/// error result, a tool it was not offered is refused by the runner, a good call reaches the
/// plugin and its structured content reaches the model; the calls are on the run's status.
/// Once the run ended its token is refused, and no run's token opens another run's endpoint.
async fn mcp_tools(ns: Ns) -> anyhow::Result<()> {
    let _exclusive = exclusive().await;
    // The echo binary serves its tool as `echo`: the plugin keeps the name.
    let _echo = claim_echo_tool(&ns).await?;
    let id = plugin_id(&ns, "mc");
    install(&ns, &echo_tool_plugin(&id)?).await?;
    apply_trusted(
        &ns,
        "proj",
        BTreeMap::from([(id.clone(), entry(true, &[]))]),
    )
    .await?;
    apply(&ns, &channel("general", "proj", ChannelKind::Channel, None)).await?;
    let schema_offered = |request: &serde_json::Value| {
        let tools = request["tools"].as_array().cloned().unwrap_or_default();
        let parameters = &tools.first().ok_or("no tools offered")?["function"]["parameters"];
        if tools.len() == 1 && parameters["required"] == serde_json::json!(["text"]) {
            Ok(())
        } else {
            Err(format!("offered {tools:?}"))
        }
    };
    let model = start_model(vec![
        Step::call("plugin_echo", r#"{"text": 5}"#)
            .offering(&["plugin_echo"])
            .expecting(schema_offered)
            .after_message_containing("echo something"),
        Step::call("plugin_nope", "{}").after_message_containing("input_schema"),
        Step::call("plugin_echo", r#"{"text": "hello"}"#)
            .after_message_containing("unknown tool plugin_nope"),
        Step::answer("echoed hello").after_message_containing(r#"{"echo":"hello"}"#),
        Step::answer("second").after_message_containing("a second run"),
    ])
    .await?;
    let host = runner_for(&ns, &model).await?;
    let result = match instance_made(&ns, &id, "general").await {
        Ok(()) => mcp_scenario(&ns, &id, &host.url).await,
        Err(e) => Err(e),
    };
    put_back(&ns, result).await?;
    no_objection(&model)
}

async fn mcp_scenario(ns: &Ns, id: &str, api: &str) -> anyhow::Result<()> {
    let runs = ns.api::<AgentRun>();
    apply(ns, &run(id, "run-tools", "echo something")).await?;
    let status = ended_status(&runs, "run-tools").await?;
    ensure!(
        status.phase == Some(AgentRunPhase::Succeeded)
            && status.result.as_deref() == Some("echoed hello"),
        "{status:?}"
    );
    let called: Vec<(&str, bool)> = status
        .tool_calls
        .iter()
        .map(|c| (c.tool.as_str(), c.is_error))
        .collect();
    ensure!(
        status.tool_call_count == 2 && called == [("echo", true), ("echo", false)],
        "the runner refuses the unknown tool itself; the endpoint saw the other two: {status:?}"
    );
    apply(ns, &run(id, "run-other", "a second run")).await?;
    ended_status(&runs, "run-other").await?;

    // The endpoint, called as a runner calls it.
    let secrets = ns.api::<Secret>();
    let token = |name: &str| {
        let secrets = secrets.clone();
        let name = format!("run-{name}");
        async move {
            let secret = secrets.get(&name).await?;
            let bytes = secret
                .data
                .and_then(|d| d.get(model::run_contract::MCP_TOKEN_KEY).cloned())
                .context("no MCP token in the run's Secret")?;
            anyhow::Ok(String::from_utf8(bytes.0)?)
        }
    };
    let (tools_token, other_token) = (token("run-tools").await?, token("run-other").await?);
    ensure!(
        tools_token != other_token,
        "each run has a token of its own"
    );
    let endpoint = |run: &str| format!("{api}{}", model::run_contract::mcp_path(ns.name(), run));
    let http = reqwest::Client::new();
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let ask = |url: String, token: Option<String>| {
        let mut request = http.post(url).json(&list);
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        async move {
            let response = request.send().await?;
            let status = response.status();
            let body: serde_json::Value = response.json().await?;
            anyhow::Ok((status, body))
        }
    };
    let (status, body) = ask(endpoint("run-tools"), Some(tools_token.clone())).await?;
    ensure!(
        status == http::StatusCode::FORBIDDEN && body["error"]["code"] == -32002,
        "an ended run's token: {status} {body}"
    );
    // A refusal names the request's id (JSON-RPC 2.0: null only when it cannot be read).
    ensure!(body["id"] == 1, "the refusal's id: {body}");
    let (status, body) = ask(endpoint("run-tools"), Some(other_token)).await?;
    ensure!(
        status == http::StatusCode::UNAUTHORIZED && body["error"]["code"] == -32001,
        "another run's token: {status} {body}"
    );
    ensure!(body["id"] == 1, "the refusal's id: {body}");
    // 2025-11-25: a present Origin that is not the server's own is answered 403, token or not.
    let foreign = http
        .post(endpoint("run-tools"))
        .bearer_auth(&tools_token)
        .header("origin", "https://evil.example")
        .json(&list)
        .send()
        .await?;
    let status = foreign.status();
    let body: serde_json::Value = foreign.json().await?;
    ensure!(
        status == http::StatusCode::FORBIDDEN && body["error"]["code"] == -32003,
        "a foreign Origin: {status} {body}"
    );
    // A version header the endpoint does not speak: 400, naming the request's id.
    let unspoken = http
        .post(endpoint("run-tools"))
        .bearer_auth(&tools_token)
        .header("mcp-protocol-version", "1999-01-01")
        .json(&list)
        .send()
        .await?;
    let status = unspoken.status();
    let body: serde_json::Value = unspoken.json().await?;
    ensure!(
        status == http::StatusCode::BAD_REQUEST && body["id"] == 1,
        "an unspoken version: {status} {body}"
    );
    let (status, _) = ask(endpoint("run-tools"), None).await?;
    ensure!(
        status == http::StatusCode::UNAUTHORIZED,
        "no token: {status}"
    );
    Ok(())
}

/// The agent view: a run whose model calls a tool, then answers. The host recorded the call
/// as its MCP endpoint answered it (the runner did nothing for it): the run's route of the host
/// API shows the prompt, the call with its input and answer, and the final message, to a
/// caller with `get` on the run, and to no other. The transcript is the run's ConfigMap, owned
/// by the AgentRun: deleting the run deletes it.
async fn transcript(ns: Ns) -> anyhow::Result<()> {
    let _exclusive = exclusive().await;
    let _echo = claim_echo_tool(&ns).await?;
    let id = plugin_id(&ns, "tr");
    install(&ns, &echo_tool_plugin(&id)?).await?;
    apply_trusted(
        &ns,
        "proj",
        BTreeMap::from([(id.clone(), entry(true, &[]))]),
    )
    .await?;
    apply(&ns, &channel("general", "proj", ChannelKind::Channel, None)).await?;
    let model = start_model(vec![
        Step::call("plugin_echo", r#"{"text": "hello"}"#)
            .after_message_containing("echo hello for the agent view"),
        Step::answer("echoed hello").after_message_containing(r#"{"echo":"hello"}"#),
    ])
    .await?;
    let host = runner_for(&ns, &model).await?;
    let result = match instance_made(&ns, &id, "general").await {
        Ok(()) => transcript_scenario(&ns, &id, &host).await,
        Err(e) => Err(e),
    };
    put_back(&ns, result).await?;
    no_objection(&model)
}

async fn transcript_scenario(
    ns: &Ns,
    id: &str,
    host: &crate::host::HostServer,
) -> anyhow::Result<()> {
    use crate::host::{Caller, Grant, caller_token, token_with};
    use serde_json::json;

    let runs = ns.api::<AgentRun>();
    apply(ns, &run(id, "run-view", "echo hello for the agent view")).await?;
    let status = ended_status(&runs, "run-view").await?;
    ensure!(
        status.phase == Some(AgentRunPhase::Succeeded)
            && status.result.as_deref() == Some("echoed hello"),
        "{status:?}"
    );
    let path = "/channels/general/runs/run-view";
    let viewer = Caller::new(
        host,
        ns,
        Some(token_with(ns, "viewer", &["agentruns"]).await?),
    );
    let a = viewer.send("GET", path, None).await?;
    ensure!(a.status == http::StatusCode::OK, "{}: {}", a.status, a.json);
    let view = &a.json;
    ensure!(
        view["id"] == "run-view"
            && view["phase"] == "Succeeded"
            && view["prompt"] == "echo hello for the agent view"
            && view["result"] == "echoed hello"
            && view["dropped"] == 0
            && view["calls"].as_array().map(Vec::len) == Some(1),
        "the run as the agent view reads it: {view}"
    );
    let call = &view["calls"][0];
    ensure!(
        call["seq"] == 1
            && call["tool"] == "plugin_echo"
            && call["input"] == json!({ "text": "hello" })
            && call["result"]["structured"] == json!({ "echo": "hello" })
            && call["result"]["is_error"] == false
            && call["at"].is_string()
            && call["ms"].is_u64(),
        "the call, its input and its answer: {call}"
    );
    let nobody = Caller::new(
        host,
        ns,
        Some(caller_token(ns, "nobody", Grant::None).await?),
    );
    let a = nobody.send("GET", path, None).await?;
    ensure!(
        a.status == http::StatusCode::FORBIDDEN,
        "without get agentruns: {} {}",
        a.status,
        a.json
    );

    let maps = ns.api::<k8s_openapi::api::core::v1::ConfigMap>();
    let name = server::transcript::name("run-view");
    let map = maps.get(&name).await?;
    let uid = runs.get("run-view").await?.uid();
    ensure!(
        map.owner_references()
            .iter()
            .any(|o| o.kind == "AgentRun" && Some(&o.uid) == uid.as_ref()),
        "the transcript is the run's: {:?}",
        map.metadata
    );
    let labels = map.labels();
    ensure!(
        labels
            .get(model::names::LABEL_COMPONENT)
            .map(String::as_str)
            == Some("transcript")
            && labels.get(model::names::LABEL_RUN).map(String::as_str) == Some("run-view"),
        "{labels:?}"
    );
    runs.delete("run-view", &kube::api::DeleteParams::background())
        .await?;
    wait::deleted(&maps, &name, Duration::from_secs(90))
        .await
        .context("the garbage collector left the transcript of a deleted run")?;
    Ok(())
}

/// A runner that dies mid-run (its Pod deleted, as a node lost or an eviction would) fails
/// its run, and the plugin's `/done` says so: the run never resumes, as a session is never
/// resumed.
async fn killed_runner(ns: Ns) -> anyhow::Result<()> {
    let _exclusive = exclusive().await;
    let id = world(&ns, "rk", &[]).await?;
    // The model takes its time: the run is running when its Pod goes.
    let model = start_model(vec![
        Step::answer("too late").after(Duration::from_secs(90)),
    ])
    .await?;
    let _host = runner_for(&ns, &model).await?;
    let result = kill_mid_run(&ns, &id, &model).await;
    put_back(&ns, result).await?;
    // It was killed while it waited for the model, not failed some other way before.
    ensure!(
        model.requests().len() == 1 && model.failures().is_empty(),
        "the model saw {} requests and objected to {:?}",
        model.requests().len(),
        model.failures()
    );
    Ok(())
}

async fn kill_mid_run(ns: &Ns, id: &str, model: &ScriptedModel) -> anyhow::Result<()> {
    let runs = ns.api::<AgentRun>();
    apply(ns, &run(id, "run-killed", "think about it")).await?;
    let pods = ns.api::<k8s_openapi::api::core::v1::Pod>();
    let selector = "plugins.loop.dev/run=run-killed";
    let running = list_until(
        &pods,
        Some(selector),
        "the runner's Pod running",
        Duration::from_secs(60),
        |pods| {
            pods.iter()
                .any(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        },
    )
    .await?;
    // Killed while it waits for the model's answer.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while model.requests().is_empty() {
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the runner never asked the model"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for pod in running {
        pods.delete(&pod.name_any(), &Default::default()).await?;
    }
    let status = ended_status(&runs, "run-killed").await?;
    ensure!(
        status.phase == Some(AgentRunPhase::Failed) && status.result.as_deref() != Some("too late"),
        "a killed runner fails its run: {status:?}"
    );
    // The plugin is told, once, that the run failed.
    let told = wait::matches(
        &runs,
        "run-killed",
        "/done delivered",
        Duration::from_secs(60),
        |r: &AgentRun| r.status.as_ref().is_some_and(|s| s.done_delivered),
    )
    .await?;
    let done = serde_json::to_value(server::fanout::runs_done::done_body(
        told.status
            .as_ref()
            .and_then(|s| s.phase)
            .context("a phase")?,
        told.status.as_ref().and_then(|s| s.result.as_deref()),
    ))?;
    ensure!(done["status"] == "failed", "the plugin was told {done}");
    Ok(())
}

/// The reference's restart rules: a run that ends while the controller is down is recorded as
/// it ended, with its result, and the plugin gets its `/done` once the controller is back;
/// runs made meanwhile are never lost and run, in order, once it is back.
async fn controller_down(ns: Ns) -> anyhow::Result<()> {
    let _exclusive = exclusive().await;
    let id = world(&ns, "rd", &[]).await?;
    let model = start_model(vec![
        Step::answer("answered while nobody watched")
            .after(Duration::from_secs(3))
            .after_message_containing("the first"),
        Step::answer("second").after_message_containing("the second"),
        Step::answer("third").after_message_containing("the third"),
    ])
    .await?;
    let _host = runner_for(&ns, &model).await?;
    let result = across_a_restart(&ns, &id).await;
    put_back(&ns, result).await?;
    no_objection(&model)
}

async fn across_a_restart(ns: &Ns, id: &str) -> anyhow::Result<()> {
    let runs = ns.api::<AgentRun>();
    apply(ns, &run(id, "run-1", "the first")).await?;
    wait::matches(
        &runs,
        "run-1",
        "the first run running",
        Duration::from_secs(60),
        |r: &AgentRun| r.status.as_ref().and_then(|s| s.phase) == Some(AgentRunPhase::Running),
    )
    .await?;
    let jobs = ns.api::<Job>();
    restart_controller(ns, async {
        // While the controller is down: two runs are made, and the first one's Job ends.
        for (name, prompt) in [("run-2", "the second"), ("run-3", "the third")] {
            apply(ns, &run(id, name, prompt)).await.expect("a run made");
        }
        let _ = wait::matches(
            &jobs,
            "run-run-1",
            "the first run's Job ended",
            Duration::from_secs(60),
            |j: &Job| {
                j.status
                    .as_ref()
                    .is_some_and(|s| s.succeeded.unwrap_or(0) + s.failed.unwrap_or(0) > 0)
            },
        )
        .await;
    })
    .await?;
    let mut ended = Vec::new();
    for name in ["run-1", "run-2", "run-3"] {
        ended.push(ended_status(&runs, name).await?);
    }
    let results: Vec<_> = ended
        .iter()
        .map(|s| (s.phase, s.result.as_deref()))
        .collect();
    ensure!(
        results
            == [
                (
                    Some(AgentRunPhase::Succeeded),
                    Some("answered while nobody watched")
                ),
                (Some(AgentRunPhase::Succeeded), Some("second")),
                (Some(AgentRunPhase::Succeeded), Some("third")),
            ],
        "the runs ended {results:?}"
    );
    ensure!(
        ended[2].start_time.as_ref().map(|t| t.0) >= ended[1].end_time.as_ref().map(|t| t.0),
        "the runs made meanwhile ran one at a time"
    );
    wait::matches(
        &runs,
        "run-1",
        "/done of the run that ended meanwhile",
        Duration::from_secs(60),
        |r: &AgentRun| r.status.as_ref().is_some_and(|s| s.done_delivered),
    )
    .await?;
    Ok(())
}

/// An API server for the runs' MCP endpoints, and HostConfig's runner the real one against
/// `model` ([`use_runner`]). Put HostConfig back with [`put_back`].
async fn runner_for(ns: &Ns, model: &ScriptedModel) -> anyhow::Result<crate::host::HostServer> {
    runner_host(ns, model, |h| h).await
}

/// [`runner_for`], HostConfig's spec changed by `adjust` too (the approval tests' profiles).
pub(crate) async fn runner_host(
    ns: &Ns,
    model: &ScriptedModel,
    adjust: impl FnOnce(model::resources::HostConfigSpec) -> model::resources::HostConfigSpec,
) -> anyhow::Result<crate::host::HostServer> {
    let host = crate::host::host(ns).await?;
    use_runner_with(ns, model, host.url_for_pods.clone(), adjust).await?;
    Ok(host)
}

/// HostConfig as the other tests run under, whatever `result` a scenario had; then `result`.
pub(crate) async fn put_back(ns: &Ns, result: anyhow::Result<()>) -> anyhow::Result<()> {
    apply_host(ns.client(), host_spec(true)).await?;
    result
}

/// The scripted model objected to nothing it was sent.
fn no_objection(model: &ScriptedModel) -> anyhow::Result<()> {
    ensure!(
        model.failures().is_empty(),
        "the model objected to {:?}",
        model.failures()
    );
    Ok(())
}

/// The scripted model, where the runner reaches it: on loopback for the kubelet stand-in's
/// processes; on a kind cluster, on every address of this machine, named by the kind
/// network's gateway (`LOOP_PLUGINS_E2E_HOST_FROM_PODS`, from `hack/kind-e2e.sh`).
pub(crate) async fn start_model(steps: Vec<Step>) -> anyhow::Result<ScriptedModel> {
    match std::env::var("LOOP_PLUGINS_E2E_HOST_FROM_PODS") {
        Ok(host) if !host.is_empty() => {
            let mut model =
                ScriptedModel::start_on(std::net::SocketAddr::from(([0, 0, 0, 0], 0)), steps)
                    .await?;
            model.url = model.url.replacen("0.0.0.0", &host, 1);
            Ok(model)
        }
        _ => ScriptedModel::start(steps).await,
    }
}

/// The status of run `name` once it has ended (at most 120 s).
pub(crate) async fn ended_status(
    runs: &kube::Api<AgentRun>,
    name: &str,
) -> anyhow::Result<model::resources::AgentRunStatus> {
    let run = wait::matches(
        runs,
        name,
        "the run ended",
        Duration::from_secs(120),
        |r: &AgentRun| {
            r.status
                .as_ref()
                .and_then(|s| s.phase)
                .is_some_and(AgentRunPhase::is_final)
        },
    )
    .await?;
    run.status.context("an ended run has a status")
}

/// Makes HostConfig's runner the real one, `loop-plugins agent` from our image, against
/// `model` (its endpoint in the Secret `model-endpoint` of the test's namespace), with the
/// Plugin API at `api_url` for plugin Pods. Put HostConfig back with `host_spec(true)`.
async fn use_runner(ns: &Ns, model: &ScriptedModel, api_url: Option<String>) -> anyhow::Result<()> {
    use_runner_with(ns, model, api_url, |h| h).await
}

/// [`use_runner`], HostConfig's spec changed by `adjust` before it is applied.
pub(crate) async fn use_runner_with(
    ns: &Ns,
    model: &ScriptedModel,
    api_url: Option<String>,
    adjust: impl FnOnce(model::resources::HostConfigSpec) -> model::resources::HostConfigSpec,
) -> anyhow::Result<()> {
    let endpoint = Secret {
        metadata: ObjectMeta {
            name: Some("model-endpoint".into()),
            ..Default::default()
        },
        string_data: Some(BTreeMap::from([
            ("LOOP_AGENT_MODEL_URL".to_string(), model.url.clone()),
            ("LOOP_AGENT_MODEL".to_string(), "scripted".to_string()),
        ])),
        ..Default::default()
    };
    ns.api::<Secret>()
        .create(&Default::default(), &endpoint)
        .await?;
    let mut host = host_spec(true);
    if api_url.is_some() {
        host.api_url = api_url;
    }
    host.runner = Some(match chart_runner()? {
        // On kind, the runner the chart names by default (hack/kind-e2e.sh renders it): a run
        // there runs as a Helm install runs it.
        Some(runner) => runner,
        // Locally the stand-in's image, which the kubelet stand-in plays with the binary
        // under test.
        None => AgentRunner {
            image: ns.cluster().plugin_images().self_image().await?,
            command: vec![SELF_IMAGE_BINARY.into(), "agent".into()],
            resources: None,
            service_account: None,
            credentials_secret: Some("model-endpoint".into()),
            time_limit_seconds: 60,
        },
    });
    apply_host(ns.client(), adjust(host)).await
}

/// The runner the chart renders by default (`LOOP_PLUGINS_E2E_CHART_RUNNER`, on kind), checked
/// to be the release's own image's `loop-plugins agent` with the model Secret the suite writes.
fn chart_runner() -> anyhow::Result<Option<AgentRunner>> {
    let Some(json) = std::env::var("LOOP_PLUGINS_E2E_CHART_RUNNER")
        .ok()
        .filter(|j| !j.is_empty())
    else {
        return Ok(None);
    };
    let runner: AgentRunner = serde_json::from_str(&json)
        .map_err(|e| anyhow::anyhow!("the chart's runner {json}: {e}"))?;
    let image = std::env::var("LOOP_PLUGINS_E2E_SELF_IMAGE").unwrap_or_default();
    anyhow::ensure!(
        runner.image == image
            && runner.command == [SELF_IMAGE_BINARY, "agent"]
            && runner.credentials_secret.as_deref() == Some("model-endpoint"),
        "the chart's default runner is not the release's image's `loop-plugins agent` with Secret model-endpoint: {json} (release image {image})"
    );
    Ok(Some(runner))
}

/// A run of the plugin's `say` agent in chat `general`, as POST /runs makes it.
pub(crate) fn run(id: &str, name: &str, prompt: &str) -> AgentRun {
    let mut run = AgentRun::new(
        name,
        AgentRunSpec {
            plugin: id.into(),
            channel: "general".into(),
            thread: format!("plugin:{id}"),
            agent: "say".into(),
            read_only: true,
            tools: vec!["plugin_echo".into()],
            prompt: prompt.into(),
        },
    );
    run.metadata.labels = Some(model::names::labels(id, "proj", "general", "run"));
    run
}

/// The quiz example (written on the SDK) end to end: its `daily` action, run through the host
/// API, reads the chat's settings from the Plugin API and starts a run of its agent; the run
/// runs as a Job of the real runner; its end reaches the plugin, which posts its score card
/// and a notification to the chat's inbox.
async fn quiz(ns: Ns) -> anyhow::Result<()> {
    let _exclusive = exclusive().await;
    let host = crate::host::host(&ns).await?;
    // The agent grades one answer with the quiz's tool (through its run's MCP endpoint, to
    // the quiz's container), then answers.
    let model = start_model(vec![
        Step::call("plugin_grade", r#"{"a": 2, "b": 3, "answer": 5}"#)
            .offering(&["plugin_grade"])
            .after_message_containing("sums a + b with a and b from 1 to 9"),
        Step::answer("3 of 3 correct").after_message_containing(r#"{"correct":true,"expected":5}"#),
    ])
    .await?;
    use_runner(&ns, &model, host.url_for_pods.clone()).await?;
    let id = plugin_id(&ns, "qz");
    let result = quiz_scenario(&ns, &host, &id).await;
    let plugins: kube::Api<Plugin> = kube::Api::all(ns.client());
    let _ = plugins.delete(&id, &Default::default()).await;
    put_back(&ns, result).await?;
    no_objection(&model)
}

async fn quiz_scenario(ns: &Ns, host: &crate::host::HostServer, id: &str) -> anyhow::Result<()> {
    // The quiz's manifest under the test's id; its tool keeps its name, which the binary serves.
    let text = include_str!("../../examples/quiz-plugin/plugin.json").replacen(
        "\"id\": \"quiz\"",
        &format!("\"id\": \"{id}\""),
        1,
    );
    let plugin = Plugin::from_manifest(&text, &unpublished(id), vec![], true)?;
    install_as(ns, &plugin, testkit::images::QUIZ).await?;
    apply_trusted(
        ns,
        "proj",
        BTreeMap::from([(id.to_string(), entry(true, &[]))]),
    )
    .await?;
    apply(ns, &channel("general", "proj", ChannelKind::Channel, None)).await?;

    let caller = crate::host::Caller::new(
        host,
        ns,
        Some(crate::host::caller_token(ns, "app", crate::host::Grant::Actions).await?),
    );
    let a = caller
        .send_ready(
            "POST",
            &format!("/channels/general/plugins/{id}/actions/daily"),
            Some(serde_json::json!({"trigger": "manual"})),
        )
        .await?;
    ensure!(a.status == http::StatusCode::ACCEPTED, "{a:?}");

    // The run the action started, with the settings' defaults in its prompt, run to its end.
    let runs = ns.api::<AgentRun>();
    let label = format!("plugins.loop.dev/plugin={id}");
    let started = list_until(
        &runs,
        Some(&label),
        "the quiz's run",
        Duration::from_secs(60),
        |r| !r.is_empty(),
    )
    .await?;
    let name = started[0].name_any();
    ensure!(
        started[0].spec.agent == "ask"
            && started[0]
                .spec
                .prompt
                .starts_with("Ask 3 sums a + b with a and b from 1 to 9"),
        "{:?}",
        started[0].spec
    );
    let status = ended_status(&runs, &name).await?;
    ensure!(status.phase == Some(AgentRunPhase::Succeeded), "{status:?}");
    let called: Vec<(&str, bool)> = status
        .tool_calls
        .iter()
        .map(|c| (c.tool.as_str(), c.is_error))
        .collect();
    ensure!(
        status.tool_call_count == 1 && called == [("grade", false)],
        "the run's tool calls: {status:?}"
    );

    // Its end reached the plugin: the score card and the notification are in the chat's inbox.
    let inbox = server::cards::inbox::inbox_name(&model::names::instance_name(id, "general"));
    let maps = ns.api::<k8s_openapi::api::core::v1::ConfigMap>();
    let map = wait::matches(
        &maps,
        &inbox,
        "the score card and the notification",
        Duration::from_secs(60),
        |m| server::cards::inbox::entries(m).len() == 2,
    )
    .await?;
    let entries = server::cards::inbox::entries(&map);
    let card = entries
        .iter()
        .find(|e| e.card.as_deref() == Some("score"))
        .context("no score card")?;
    ensure!(
        card.title == "Quiz finished"
            && card
                .data
                .as_ref()
                .is_some_and(|d| d["run"] == name.as_str() && d["text"] == "3 of 3 correct"),
        "{card:?}"
    );
    ensure!(
        entries
            .iter()
            .any(|e| e.title == "Quiz finished" && e.body.as_deref() == Some("3 of 3 correct")),
        "{entries:?}"
    );
    Ok(())
}
