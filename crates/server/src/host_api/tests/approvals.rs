//! Agents' tool calls that wait for a person (issue 42), through the host API's tool route and
//! its approval routes, the approvals written into the index's store as the API server and its
//! watch would: an agent's call waits and runs with the input approved once; Always
//! pre-approves the tool for the rest of the run; Deny and a passed deadline deny; `alwaysAsk`
//! beats `*`; an unattended profile denies at once; a workflow's call never asks; a decision
//! is taken once, in its own chat, before its deadline, by someone RBAC lets approve.

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::fixtures::*;
use model::resources::{Decision, RiskLevel, RiskProfile};

fn profile(auto: &[&str], ask: &[&str]) -> RiskProfile {
    RiskProfile {
        auto_approve: auto.iter().map(|s| s.to_string()).collect(),
        always_ask: ask.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    }
}

fn call(text: &str, run: &str) -> String {
    json!({"input": {"text": text}, "agent": "say", "thread_id": "th", "run_id": run}).to_string()
}

/// Waits until an approval is pending; its name.
async fn pending(w: &World) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let found = w
            .state
            .index()
            .approvals
            .state()
            .into_iter()
            .find(|a| a.decision() == Decision::Pending);
        if let Some(a) = found {
            return kube::ResourceExt::name_any(a.as_ref());
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no approval was asked for"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn decide(w: &World, chat: &str, name: &str, token: &str, body: Value) -> Answer {
    w.send(
        "POST",
        &format!("/channels/{chat}/approvals/{name}"),
        Some(token),
        &body.to_string(),
    )
    .await
}

#[tokio::test]
async fn an_agents_call_waits_for_a_person_and_runs_with_the_input_approved() {
    let mut w = World::new().await;
    w.risk(profile(&[], &[]), "5m");
    w.start("general", "uid-g");
    let sender = w.sender();
    let waiting = tokio::spawn(async move {
        sender
            .send(
                "POST",
                &at("general", "/tools/echo"),
                Some(TOKEN),
                &call("hi", "run-1"),
            )
            .await
    });
    let name = pending(&w).await;
    assert!(
        w.plugin.seen("/tools").is_empty(),
        "nothing runs before a person decides"
    );
    let listed = w
        .send("GET", "/approvals?pending=true", Some(TOKEN), "")
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.json);
    let shown = &listed.json["approvals"][0];
    assert_eq!(
        (
            shown["tool"].as_str(),
            shown["agent"].as_str(),
            shown["input"].clone()
        ),
        (Some("plugin_echo"), Some("say"), json!({"text": "hi"}))
    );
    assert_eq!(shown["decision"], "Pending");

    let decided = decide(&w, "general", &name, TOKEN, json!({"answer": "once"})).await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.json);
    assert_eq!(decided.json["decision"], "Approved");
    assert_eq!(decided.json["decidedBy"], TOKEN);
    let answer = waiting.await.unwrap();
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.json);
    assert_eq!(answer.json["structured_content"], json!({"echo": "hi"}));
    // The tool got the input the person saw.
    assert_eq!(
        w.plugin.seen("/tools/echo")[0].body["input"],
        json!({"text": "hi"})
    );
    let events = w.approvals.events.lock().unwrap().clone();
    assert!(
        events.iter().any(|(n, reason, note)| n == &name
            && reason == "Approved"
            && note.starts_with(&format!("{TOKEN} approved"))),
        "{events:?}"
    );

    // Once is once: the next call of the run asks again.
    let sender = w.sender();
    let again = tokio::spawn(async move {
        sender
            .send(
                "POST",
                &at("general", "/tools/echo"),
                Some(TOKEN),
                &call("again", "run-1"),
            )
            .await
    });
    let second = pending(&w).await;
    assert_ne!(second, name);
    decide(
        &w,
        "general",
        &second,
        TOKEN,
        json!({"answer": "deny", "reason": "not now"}),
    )
    .await;
    let denied = again.await.unwrap();
    assert_eq!(denied.status, StatusCode::OK);
    assert_eq!(denied.json["is_error"], true);
    assert_eq!(denied.json["error_code"], "approval_denied");
    let text = denied.json["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("denied by") && text.contains("not now"),
        "{text}"
    );
    assert_eq!(
        w.plugin.seen("/tools/echo").len(),
        1,
        "a denied call does not run"
    );
}

#[tokio::test]
async fn always_pre_approves_the_tool_for_the_rest_of_the_run_unless_always_asked() {
    let mut w = World::new().await;
    w.risk(profile(&[], &[]), "5m");
    w.start("general", "uid-g");
    let sender = w.sender();
    let first = tokio::spawn(async move {
        sender
            .send(
                "POST",
                &at("general", "/tools/echo"),
                Some(TOKEN),
                &call("a", "run-7"),
            )
            .await
    });
    let name = pending(&w).await;
    let decided = decide(&w, "general", &name, TOKEN, json!({"answer": "always"})).await;
    assert_eq!(
        decided.json["decision"], "ApprovedAlways",
        "{}",
        decided.json
    );
    assert_eq!(first.await.unwrap().json["is_error"], false);
    // The rest of the run: at once.
    let second = w
        .send(
            "POST",
            &at("general", "/tools/echo"),
            Some(TOKEN),
            &call("b", "run-7"),
        )
        .await;
    assert_eq!(second.json["is_error"], false, "{}", second.json);
    // Another run asks again.
    let sender = w.sender();
    let other = tokio::spawn(async move {
        sender
            .send(
                "POST",
                &at("general", "/tools/echo"),
                Some(TOKEN),
                &call("c", "run-8"),
            )
            .await
    });
    let asked = pending(&w).await;
    decide(&w, "general", &asked, TOKEN, json!({"answer": "deny"})).await;
    assert_eq!(other.await.unwrap().json["error_code"], "approval_denied");
    // alwaysAsk beats an Always answer: it asks every time.
    w.risk(profile(&["*"], &["plugin_echo"]), "5m");
    let sender = w.sender();
    let asked_again = tokio::spawn(async move {
        sender
            .send(
                "POST",
                &at("general", "/tools/echo"),
                Some(TOKEN),
                &call("d", "run-7"),
            )
            .await
    });
    let name = pending(&w).await;
    decide(&w, "general", &name, TOKEN, json!({"answer": "once"})).await;
    assert_eq!(asked_again.await.unwrap().json["is_error"], false);
    // ... while `*` pre-approves the tool alwaysAsk does not name.
    let raw = json!({"input": {"x": 1}, "agent": "say", "thread_id": "", "run_id": "run-9"});
    let raw_call = w
        .send(
            "POST",
            &at("general", "/tools/raw"),
            Some(TOKEN),
            &raw.to_string(),
        )
        .await;
    assert_eq!(
        raw_call.status,
        StatusCode::FORBIDDEN,
        "say is not given raw: {}",
        raw_call.json
    );
}

#[tokio::test]
async fn nobody_deciding_in_time_denies_the_call() {
    let mut w = World::new().await;
    w.risk(profile(&[], &[]), "1s");
    w.start("general", "uid-g");
    let answer = w
        .send(
            "POST",
            &at("general", "/tools/echo"),
            Some(TOKEN),
            &call("late", "run-2"),
        )
        .await;
    assert_eq!(
        answer.json["error_code"], "approval_denied",
        "{}",
        answer.json
    );
    let text = answer.json["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("nobody approved it within 1s"), "{text}");
    assert!(w.plugin.seen("/tools").is_empty());
    let expired = w.state.index().approvals.state();
    assert_eq!(expired.len(), 1);
    assert_eq!(expired[0].decision(), Decision::Expired);
    let status = expired[0].status.clone().unwrap();
    assert_eq!(status.decided_by.as_deref(), Some("loop-plugins"));
    // A decision after the deadline is refused.
    let name = kube::ResourceExt::name_any(expired[0].as_ref());
    let late = decide(&w, "general", &name, TOKEN, json!({"answer": "once"})).await;
    assert_eq!(
        (late.status, late.json["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("approval_decided"))
    );
}

#[tokio::test]
async fn a_decision_is_taken_once_in_its_own_chat_by_someone_who_may_approve() {
    let mut w = World::new().await;
    w.risk(profile(&[], &[]), "5m");
    w.start("general", "uid-g");
    let sender = w.sender();
    let waiting = tokio::spawn(async move {
        sender
            .send(
                "POST",
                &at("general", "/tools/echo"),
                Some(TOKEN),
                &call("x", "run-3"),
            )
            .await
    });
    let name = pending(&w).await;
    // RBAC: LIMITED may run actions, not approve.
    let refused = decide(&w, "general", &name, LIMITED, json!({"answer": "once"})).await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.json);
    let message = refused.json["error"]["message"].as_str().unwrap();
    assert!(message.contains("approve toolcallapprovals"), "{message}");
    // Another chat's route.
    let other = decide(&w, "general-t1", &name, TOKEN, json!({"answer": "once"})).await;
    assert_eq!(
        (other.status, other.json["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("approval_other_chat"))
    );
    // No such approval.
    let none = decide(&w, "general", "nope", TOKEN, json!({"answer": "once"})).await;
    assert_eq!(none.status, StatusCode::NOT_FOUND);
    // A bad answer.
    let bad = decide(&w, "general", &name, TOKEN, json!({"answer": "maybe"})).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    // Decided, then decided again.
    let first = decide(&w, "general", &name, TOKEN, json!({"answer": "deny"})).await;
    assert_eq!(first.status, StatusCode::OK);
    let second = decide(&w, "general", &name, TOKEN, json!({"answer": "once"})).await;
    assert_eq!(
        (second.status, second.json["error"]["code"].as_str()),
        (StatusCode::CONFLICT, Some("approval_decided"))
    );
    assert!(
        second.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Denied by good")
    );
    assert_eq!(waiting.await.unwrap().json["error_code"], "approval_denied");
}

#[tokio::test]
async fn pre_approved_tools_unattended_profiles_and_workflows_do_not_wait() {
    let mut w = World::new().await;
    w.start("general", "uid-g");
    // Listed by name: at once.
    w.risk(profile(&["plugin_echo"], &[]), "5m");
    let at_once = w
        .send(
            "POST",
            &at("general", "/tools/echo"),
            Some(TOKEN),
            &call("hi", "run-4"),
        )
        .await;
    assert_eq!(at_once.json["is_error"], false, "{}", at_once.json);
    // level: full, the same.
    w.risk(
        RiskProfile {
            level: Some(RiskLevel::Full),
            ..Default::default()
        },
        "5m",
    );
    let full = w
        .send(
            "POST",
            &at("general", "/tools/echo"),
            Some(TOKEN),
            &call("hi", "run-5"),
        )
        .await;
    assert_eq!(full.json["is_error"], false, "{}", full.json);
    // Unattended: what would ask is denied at once, no approval made.
    w.risk(
        RiskProfile {
            unattended: Some(true),
            ..Default::default()
        },
        "5m",
    );
    let unattended = w
        .send(
            "POST",
            &at("general", "/tools/echo"),
            Some(TOKEN),
            &call("hi", "run-6"),
        )
        .await;
    assert_eq!(unattended.json["error_code"], "approval_denied");
    assert!(
        unattended.json["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("nobody attends"),
        "{}",
        unattended.json
    );
    assert!(w.state.index().approvals.state().is_empty());
    // A workflow's call never asks: a person built the workflow.
    let workflow = json!({"input": {"text": "w"}, "run_id": "workflow:r1:n1"});
    let answer = w
        .send(
            "POST",
            &at("general", "/tools/echo"),
            Some(TOKEN),
            &workflow.to_string(),
        )
        .await;
    assert_eq!(answer.json["is_error"], false, "{}", answer.json);
    assert!(w.state.index().approvals.state().is_empty());
}

/// An approval whose waiting call went away (its replica restarted) is expired by the fan-out
/// leader's sweep once past its deadline and a grace, with an Event; one still in its grace,
/// and one a person decided, are left as they are.
#[tokio::test]
async fn an_approval_nobody_waits_on_any_more_expires_after_its_deadline() {
    let w = World::new().await;
    w.approval("orphan", "general").await;
    w.approval("decided", "general").await;
    let decided = decide(&w, "general", "decided", TOKEN, json!({"answer": "deny"})).await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.json);
    let desk = w.state.tools.desk();
    let decision = |name: &str| {
        let at = kube::runtime::reflector::ObjectRef::new(name).within(NS);
        w.state.index().approvals.get(&at).unwrap().decision()
    };

    // Made with a five-minute wait: at its deadline, still in the grace, nothing expires.
    let made = jiff::Timestamp::now();
    let at_deadline = made + Duration::from_secs(300);
    assert_eq!(desk.expire_overdue(at_deadline).await, 0);
    assert_eq!(decision("orphan"), Decision::Pending);

    let past = made + Duration::from_secs(300 + 60);
    assert_eq!(desk.expire_overdue(past).await, 1);
    assert_eq!(decision("orphan"), Decision::Expired);
    assert_eq!(decision("decided"), Decision::Denied);
    let events = w.approvals.events.lock().unwrap().clone();
    assert!(
        events.iter().any(|(n, reason, note)| n == "orphan"
            && reason == "Expired"
            && note.contains("went away")),
        "{events:?}"
    );
    // A second sweep finds nothing left.
    assert_eq!(desk.expire_overdue(past).await, 0);
}

/// A decision read from a cache a write behind (the desk's own pending status, not yet
/// watched) meets a conflict: it reads the approval as stored and decides, instead of
/// answering that someone decided. A conflict that is a decision says who made it.
#[tokio::test]
async fn a_decision_that_meets_a_stale_cache_reads_again_and_decides() {
    use std::sync::atomic::Ordering;
    let mut w = World::new().await;
    w.risk(profile(&[], &[]), "5m");
    w.start("general", "uid-g");
    let sender = w.sender();
    let waiting = tokio::spawn(async move {
        sender
            .send(
                "POST",
                &at("general", "/tools/echo"),
                Some(TOKEN),
                &call("hi", "run-1"),
            )
            .await
    });
    let name = pending(&w).await;
    w.approvals.conflicts.store(1, Ordering::SeqCst);
    let decided = decide(&w, "general", &name, TOKEN, json!({"answer": "once"})).await;
    assert_eq!(decided.status, StatusCode::OK, "{}", decided.json);
    assert_eq!(decided.json["decision"], "Approved");
    assert_eq!(waiting.await.unwrap().status, StatusCode::OK);
    // Decided now: a second decision is refused, naming who decided.
    w.approvals.conflicts.store(1, Ordering::SeqCst);
    let again = decide(&w, "general", &name, TOKEN, json!({"answer": "deny"})).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.json);
    let said = again.json["error"]["message"].as_str().unwrap_or_default();
    assert!(said.contains(&format!("Approved by {TOKEN}")), "{said}");
}
