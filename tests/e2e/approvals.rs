//! A person approves what an agent does (issue 42), on the real control plane (and on kind):
//! an agent run's tool call waits as a ToolCallApproval until someone with the chart's
//! approver role decides through the host API (`approve` on toolcallapprovals, checked by
//! SubjectAccessReview); once, then always for the rest of the run; deny; nobody in time; a
//! caller without the role refused. Risk profiles: a pre-approved tool runs at once,
//! `alwaysAsk` beats `*`, and a project's profile counts only once its owner trusts it.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::ResourceExt;
use kube::api::PostParams;
use model::resources::{
    AgentRun, AgentRunPhase, ChannelKind, Decision, HostConfigSpec, RiskProfile, ToolCallApproval,
};
use serde_json::{Value, json};
use testkit::chat_model::Step;

use crate::controller_support::*;
use crate::host::{Caller, Grant, caller_token};
use crate::runs::{ended_status, put_back, run, runner_host, start_model};
use crate::support::{E2eTest, Ns, test};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "approvals::a_runs_tool_call_waits_for_a_person_once_always_deny_and_nobody_in_time",
            run_waits,
        )
        .timeout(Duration::from_secs(300)),
        test(
            "approvals::profiles_pre_approve_always_ask_beats_star_and_a_projects_counts_once_trusted",
            profiles,
        )
        .timeout(Duration::from_secs(240)),
    ]
}

/// A profile (its level written out: server-side apply turns an emptied entry of a map into
/// null, which the schema refuses).
fn profile(auto: &[&str], ask: &[&str]) -> RiskProfile {
    RiskProfile {
        auto_approve: auto.iter().map(|s| s.to_string()).collect(),
        always_ask: ask.iter().map(|s| s.to_string()).collect(),
        level: Some(model::resources::RiskLevel::Supervised),
        ..Default::default()
    }
}

/// HostConfig as the suite's, with these profiles and this wait.
fn with_profiles(
    mut host: HostConfigSpec,
    profiles: &[(&str, RiskProfile)],
    wait: &str,
) -> HostConfigSpec {
    host.risk_profiles = profiles
        .iter()
        .map(|(n, p)| (n.to_string(), p.clone()))
        .collect();
    host.approval.wait = wait.into();
    host
}

/// A ServiceAccount bound to the chart's approver ClusterRole in the test's namespace, and a
/// token for it.
async fn approver_token(ns: &Ns) -> anyhow::Result<String> {
    let mut account = ServiceAccount::default();
    account.metadata.name = Some("approver".into());
    apply(ns, &account).await?;
    bind_approver(ns, "approver").await?;
    let request = TokenRequest {
        spec: Some(TokenRequestSpec {
            expiration_seconds: Some(3600),
            ..Default::default()
        }),
        ..Default::default()
    };
    ns.api::<ServiceAccount>()
        .create_token_request("approver", &PostParams::default(), &request)
        .await?
        .status
        .and_then(|s| s.token)
        .context("the TokenRequest has no token")
}

/// Waits for the `n`th approval of the namespace (counting from 1) to be pending; it.
async fn nth_pending(ns: &Ns, n: usize) -> anyhow::Result<ToolCallApproval> {
    let api = ns.api::<ToolCallApproval>();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(90);
    loop {
        let mut all = api.list(&Default::default()).await?.items;
        all.sort_by(|a, b| a.spec.requested_at.cmp(&b.spec.requested_at));
        if all.len() >= n && all[n - 1].decision() == Decision::Pending {
            return Ok(all.swap_remove(n - 1));
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "approval {n} never waited: {:?}",
            all.iter()
                .map(|a| (a.name_any(), a.decision()))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn decide(
    caller: &Caller,
    a: &ToolCallApproval,
    body: Value,
) -> anyhow::Result<crate::host::Answer> {
    caller
        .post(
            &format!("/channels/{}/approvals/{}", a.spec.chat, a.name_any()),
            body,
        )
        .await
}

async fn run_waits(ns: Ns) -> anyhow::Result<()> {
    let _exclusive = exclusive().await;
    let _echo = claim_echo_tool(&ns).await?;
    let id = plugin_id(&ns, "ap");
    install(&ns, &echo_tool_plugin(&id)?).await?;
    apply_trusted(
        &ns,
        "proj",
        BTreeMap::from([(id.clone(), entry(true, &[]))]),
    )
    .await?;
    apply(&ns, &channel("general", "proj", ChannelKind::Channel, None)).await?;
    let model = start_model(vec![
        Step::call("plugin_echo", r#"{"text": "one"}"#).after_message_containing("approve me"),
        Step::call("plugin_echo", r#"{"text": "two"}"#)
            .after_message_containing(r#"{"echo":"one"}"#),
        Step::call("plugin_echo", r#"{"text": "three"}"#)
            .after_message_containing(r#"{"echo":"two"}"#),
        Step::answer("all three").after_message_containing(r#"{"echo":"three"}"#),
        Step::call("plugin_echo", r#"{"text": "four"}"#).after_message_containing("deny me"),
        Step::answer("told no").after_message_containing("not this one"),
        Step::call("plugin_echo", r#"{"text": "five"}"#).after_message_containing("nobody"),
        Step::answer("nobody came").after_message_containing("nobody approved it within 4s"),
    ])
    .await?;
    let host = runner_host(&ns, &model, |h| {
        with_profiles(h, &[("default", profile(&[], &[]))], "4m")
    })
    .await?;
    // Plugins are on once the suite's HostConfig is applied (by the API server just started).
    let result = match instance_made(&ns, &id, "general").await {
        Ok(()) => scenario(&ns, &id, &host).await,
        Err(e) => Err(e),
    };
    put_back(&ns, result).await?;
    ensure!(
        model.failures().is_empty(),
        "the model objected to {:?}",
        model.failures()
    );
    Ok(())
}

async fn scenario(ns: &Ns, id: &str, host: &crate::host::HostServer) -> anyhow::Result<()> {
    let approver = Caller::new(host, ns, Some(approver_token(ns).await?));
    let caller = Caller::new(
        host,
        ns,
        Some(caller_token(ns, "caller", Grant::All).await?),
    );
    let runs = ns.api::<AgentRun>();

    apply(ns, &run(id, "run-approve", "approve me")).await?;
    let first = nth_pending(ns, 1).await?;
    ensure!(
        (
            first.spec.tool.as_str(),
            first.spec.agent.as_str(),
            first.spec.run.as_str(),
            &first.spec.input
        ) == ("plugin_echo", "say", "run-approve", &json!({"text": "one"})),
        "the approval shows the call: {:?}",
        first.spec
    );
    // A caller without the approver role may not decide.
    let refused = decide(&caller, &first, json!({"answer": "once"})).await?;
    ensure!(
        refused.status == http::StatusCode::FORBIDDEN
            && refused.json["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("approve toolcallapprovals"),
        "a caller without the approver role: {refused:?}"
    );
    let once = decide(&approver, &first, json!({"answer": "once"})).await?;
    ensure!(
        once.status == http::StatusCode::OK && once.json["decision"] == "Approved",
        "{once:?}"
    );
    // Once is once: the run's next call asks again; Always then covers the rest of the run.
    let second = nth_pending(ns, 2).await?;
    ensure!(
        second.spec.input == json!({"text": "two"}),
        "{:?}",
        second.spec
    );
    let always = decide(&approver, &second, json!({"answer": "always"})).await?;
    ensure!(always.json["decision"] == "ApprovedAlways", "{always:?}");
    // A decision is taken once.
    let again = decide(&approver, &second, json!({"answer": "deny"})).await?;
    ensure!(
        again.status == http::StatusCode::CONFLICT
            && again.json["error"]["code"] == "approval_decided",
        "{again:?}"
    );
    let status = ended_status(&runs, "run-approve").await?;
    ensure!(
        status.phase == Some(AgentRunPhase::Succeeded)
            && status.result.as_deref() == Some("all three"),
        "{status:?}"
    );
    let approvals = ns
        .api::<ToolCallApproval>()
        .list(&Default::default())
        .await?
        .items;
    ensure!(
        approvals.len() == 2,
        "the third call went at once: {} approvals",
        approvals.len()
    );
    // The decisions are Events naming who made them.
    let events = ns
        .api::<k8s_openapi::api::events::v1::Event>()
        .list(&Default::default())
        .await?
        .items;
    let approver_name = format!("system:serviceaccount:{}:approver", ns.name());
    ensure!(
        events
            .iter()
            .any(|e| e.reason.as_deref() == Some("Approved")
                && e.note
                    .as_deref()
                    .unwrap_or_default()
                    .starts_with(&approver_name)),
        "no Event of the approval by {approver_name}"
    );

    // Deny: the call does not run; the agent reads why and goes on.
    apply(ns, &run(id, "run-deny", "deny me")).await?;
    let third = nth_pending(ns, 3).await?;
    let denied = decide(
        &approver,
        &third,
        json!({"answer": "deny", "reason": "not this one"}),
    )
    .await?;
    ensure!(denied.json["decision"] == "Denied", "{denied:?}");
    let status = ended_status(&runs, "run-deny").await?;
    ensure!(status.result.as_deref() == Some("told no"), "{status:?}");

    // Nobody in time: denied when the wait runs out.
    apply_host(
        ns.client(),
        with_profiles(
            runner_spec_now(ns).await?,
            &[("default", profile(&[], &[]))],
            "4s",
        ),
    )
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    apply(ns, &run(id, "run-expire", "nobody")).await?;
    let status = ended_status(&runs, "run-expire").await?;
    ensure!(
        status.result.as_deref() == Some("nobody came"),
        "{status:?}"
    );
    let expired = ns
        .api::<ToolCallApproval>()
        .list(&Default::default())
        .await?
        .items
        .into_iter()
        .filter(|a| a.decision() == Decision::Expired)
        .count();
    ensure!(expired == 1, "{expired} expired");
    Ok(())
}

/// HostConfig's spec as it is now (the runner the scenario set up kept).
async fn runner_spec_now(ns: &Ns) -> anyhow::Result<HostConfigSpec> {
    let api: kube::Api<model::resources::HostConfig> = kube::Api::all(ns.client());
    Ok(api.get(model::resources::HOST_CONFIG_NAME).await?.spec)
}

async fn profiles(ns: Ns) -> anyhow::Result<()> {
    let _exclusive = exclusive().await;
    let _echo = claim_echo_tool(&ns).await?;
    let id = plugin_id(&ns, "pr");
    install(&ns, &echo_tool_plugin(&id)?).await?;
    let enabled = BTreeMap::from([(id.clone(), entry(true, &[]))]);
    apply_trusted(&ns, "proj", enabled.clone()).await?;
    apply(&ns, &channel("general", "proj", ChannelKind::Channel, None)).await?;
    // The API server first: the first one the suite starts applies the suite's HostConfig.
    let host = crate::host::host(&ns).await?;
    // `*` pre-approves every tool but the one `alwaysAsk` names; `lenient` pre-approves all.
    apply_host(
        ns.client(),
        with_profiles(
            host_spec(true),
            &[
                ("default", profile(&["*"], &["plugin_echo"])),
                ("lenient", profile(&["*"], &[])),
            ],
            "3s",
        ),
    )
    .await?;
    let result = profiles_scenario(&ns, &id, enabled, &host).await;
    apply_host(ns.client(), host_spec(true)).await?;
    result
}

async fn profiles_scenario(
    ns: &Ns,
    id: &str,
    enabled: BTreeMap<String, model::config::PluginConfig>,
    host: &crate::host::HostServer,
) -> anyhow::Result<()> {
    let caller = Caller::new(
        host,
        ns,
        Some(caller_token(ns, "caller", Grant::All).await?),
    );
    let tool = format!("/channels/general/plugins/{id}/tools/echo");
    let call = |text: &str| json!({"input": {"text": text}, "agent": "say", "thread_id": "", "run_id": "turn-1"});
    // alwaysAsk beats `*`: it waits, and nobody answers in 3 s. (A call the API server
    // answers before it read the new HostConfig runs at once under the suite's: it is made
    // again.)
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let asked = caller.send_ready("POST", &tool, Some(call("a"))).await?;
        if asked.json["error_code"] == "approval_denied" {
            break;
        }
        if asked.json["is_error"] != false || tokio::time::Instant::now() >= deadline {
            let stored: model::resources::HostConfig = kube::Api::all(ns.client())
                .get(model::resources::HOST_CONFIG_NAME)
                .await?;
            anyhow::bail!(
                "alwaysAsk never asked: {asked:?}; the HostConfig's profiles: {:?}",
                stored.spec.risk_profiles
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // The project names the lenient profile, not trusted yet: it does not count.
    let mut lenient = enabled.clone();
    lenient.get_mut(id).context("entry")?.risk_profile = Some("lenient".into());
    apply(ns, &project("proj", lenient.clone())).await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let untrusted = caller.post(&tool, call("b")).await?;
    ensure!(
        untrusted.json["error_code"] == "approval_denied",
        "{untrusted:?}"
    );
    // Trusted: it counts, and the call runs at once.
    apply_trusted(ns, "proj", lenient).await?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    for attempt in 0.. {
        // Each try its own input: a try made before the server read the trust asks (and is
        // denied), and must not be taken for the one that runs.
        let text = format!("c{attempt}");
        let trusted = caller.post(&tool, call(&text)).await?;
        if trusted.json["is_error"] == false {
            ensure!(
                trusted.json["structured_content"] == json!({ "echo": text }),
                "{trusted:?}"
            );
            // It ran without asking anyone: no approval names its input. (Its time says
            // nothing: on kind the call may start the plugin's container first.)
            let asked: Vec<_> = ns
                .api::<ToolCallApproval>()
                .list(&Default::default())
                .await?
                .items
                .into_iter()
                .filter(|a| a.spec.input == json!({ "text": text }))
                .map(|a| a.name_any())
                .collect();
            ensure!(asked.is_empty(), "the pre-approved call asked: {asked:?}");
            break;
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the trusted profile never counted: {trusted:?}"
        );
    }
    // A workflow's call never asks, whatever the profile.
    let workflow = caller
        .post(
            &tool,
            json!({"input": {"text": "w"}, "run_id": "workflow:r1:n1"}),
        )
        .await?;
    ensure!(workflow.json["is_error"] == false, "{workflow:?}");
    Ok(())
}
