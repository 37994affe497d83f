//! The host API through its router, against in-memory stores and a fake plugin on a loopback
//! port: scale-from-zero, the breaker, time limits and size caps, schemas, RBAC, switches,
//! `/x` and events.

use std::time::{Duration, Instant};

use axum::http::{StatusCode, header};
use serde_json::{Value, json};

use super::fixtures::*;
use crate::calls::CallSettings;

const SAY: &str =
    r#"{"input": {"text": "hi"}, "agent": "say", "thread_id": "th", "run_id": "run-1"}"#;

/// Waits (briefly) until `cond` holds.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let until = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < until, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_tool_call_to_a_stopped_container_records_demand_waits_for_ready_then_goes_through() {
    let mut w = World::new().await;
    let call = {
        let w2 = w.sender();
        tokio::spawn(async move {
            w2.send("POST", &at("general", "/tools/echo"), Some(TOKEN), SAY)
                .await
        })
    };
    let recorded = w.recorded.clone();
    eventually("the demand", || !recorded.of("last_activity").is_empty()).await;
    assert_eq!(recorded.of("last_activity")[0].0, key("general"));
    assert!(w.plugin.seen("/tools").is_empty(), "held until Ready");
    w.start("general", "uid-1");
    let answer = call.await.unwrap();
    assert_eq!(answer.status, StatusCode::OK, "{:?}", answer.json);
    assert_eq!(
        answer.json,
        json!({"content": [{"type": "text", "text": "hi"}], "structured_content": {"echo": "hi"}, "is_error": false})
    );
    let seen = w.plugin.seen("/tools/echo");
    assert_eq!(
        seen[0].body,
        json!({"input": {"text": "hi"}, "agent": "say", "thread_id": "th", "run_id": "run-1"})
    );
}

#[tokio::test]
async fn calls_that_arrive_meanwhile_wait_together_in_a_bounded_queue() {
    let mut w = World::new().await;
    let mut calls = vec![];
    for _ in 0..3 {
        let w2 = w.sender();
        calls.push(tokio::spawn(async move {
            w2.send(
                "POST",
                &at("general", "/actions/ping"),
                Some(TOKEN),
                r#"{"trigger": "manual"}"#,
            )
            .await
        }));
    }
    let state = w.state.clone();
    eventually("three waiting", || {
        state.calls.waiting(&key("general")) == 3
    })
    .await;
    let full = w
        .send(
            "POST",
            &at("general", "/actions/ping"),
            Some(TOKEN),
            r#"{"trigger": "manual"}"#,
        )
        .await;
    assert_eq!(full.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(full.code(), "queue_full");
    assert!(
        full.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("3 calls already wait")
    );
    // One write of demand for them all.
    assert_eq!(w.recorded.of("last_activity").len(), 1);
    w.start("general", "uid-1");
    for c in calls {
        assert_eq!(c.await.unwrap().status, StatusCode::ACCEPTED);
    }
    assert_eq!(w.plugin.seen("/actions/ping").len(), 3);
}

#[tokio::test]
async fn a_start_that_takes_too_long_fails_clearly() {
    let w = World::new().await;
    let started = Instant::now();
    let a = w
        .send(
            "POST",
            &at("general", "/actions/ping"),
            Some(TOKEN),
            r#"{"trigger": "manual"}"#,
        )
        .await;
    assert!(started.elapsed() >= Duration::from_millis(800));
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(a.code(), "start_timeout");
    assert!(
        a.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("did not become Ready within")
    );
    // For a tool: an error result the agent sees.
    let t = w
        .send("POST", &at("general", "/tools/echo"), Some(TOKEN), SAY)
        .await;
    assert_eq!(t.status, StatusCode::OK);
    assert_eq!(t.json["is_error"], true);
    assert_eq!(t.json["error_code"], "start_timeout");
}

#[tokio::test]
async fn a_running_container_has_its_demand_refreshed_at_most_every_interval() {
    let mut w = World::new().await;
    w.start("general", "uid-1");
    for _ in 0..3 {
        let a = w
            .send(
                "POST",
                &at("general", "/actions/ping"),
                Some(TOKEN),
                r#"{"trigger": "manual"}"#,
            )
            .await;
        assert_eq!(a.status, StatusCode::ACCEPTED);
    }
    let recorded = w.recorded.clone();
    eventually("one refresh", || recorded.of("last_activity").len() == 1).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(w.recorded.of("last_activity").len(), 1);
}

#[tokio::test]
async fn tool_input_is_checked_before_it_reaches_the_plugin() {
    let mut w = World::new().await;
    w.start("general", "uid-1");
    let bad = r#"{"input": {"text": 5}, "agent": "say"}"#;
    let a = w
        .send("POST", &at("general", "/tools/echo"), Some(TOKEN), bad)
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.json["is_error"], true);
    assert_eq!(a.json["error_code"], "input_invalid");
    assert!(
        a.json["content"][0]["text"]
            .as_str()
            .unwrap()
            .contains("/text")
    );
    assert!(w.plugin.seen("/tools").is_empty());
}

#[tokio::test]
async fn structured_content_its_output_schema_refuses_is_an_error_result() {
    let mut w = World::new().await;
    w.start("general", "uid-1");
    w.plugin.behaviour.lock().unwrap().tool_answer = Some((
        200,
        json!({"content": [{"type": "text", "text": "5"}], "structured_content": {"echo": 5}}),
    ));
    let a = w
        .send("POST", &at("general", "/tools/echo"), Some(TOKEN), SAY)
        .await;
    assert_eq!(a.json["is_error"], true);
    assert_eq!(a.json["error_code"], "output_invalid");
    assert!(a.json.get("structured_content").is_none());
    // An answer over the cap (2048 bytes here, 1 MB by default) is refused.
    let big = "x".repeat(3000);
    w.plugin.behaviour.lock().unwrap().tool_answer = Some((
        200,
        json!({"content": [{"type": "text", "text": big}], "structured_content": {"echo": big}}),
    ));
    let a = w
        .send("POST", &at("general", "/tools/echo"), Some(TOKEN), SAY)
        .await;
    assert_eq!(a.json["error_code"], "answer_too_large");
}

#[tokio::test]
async fn a_workflow_calls_any_tool_and_may_take_longer_than_the_tool_limit() {
    let mut w = World::new().await;
    w.start("general", "uid-1");
    w.plugin.hang(2, Duration::from_millis(500));
    w.plugin.behaviour.lock().unwrap().tool_answer =
        Some((200, json!({"content": [{"type": "text", "text": "ok"}]})));
    // An agent may not call `raw`; a workflow may, with its node's longer limit.
    let a = w
        .send(
            "POST",
            &at("general", "/tools/raw"),
            Some(TOKEN),
            r#"{"input": {}, "agent": "say"}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert_eq!(a.code(), "tool_not_given");
    let body = r#"{"input": {}, "run_id": "workflow:run-7:node-2", "timeout_seconds": 2}"#;
    let a = w
        .send("POST", &at("general", "/tools/raw"), Some(TOKEN), body)
        .await;
    assert_eq!(a.json["is_error"], false, "{}", a.json);
    let seen = w.plugin.seen("/tools/raw");
    assert_eq!(seen[0].body["agent"], "");
    assert_eq!(seen[0].body["thread_id"], "");
    // Without the longer limit the 300 ms tool limit applies.
    assert!(
        w.marks.posted.lock().unwrap().is_empty(),
        "a call that ran tells nobody"
    );
    let body = r#"{"input": {}, "run_id": "workflow:run-7:node-2"}"#;
    let a = w
        .send("POST", &at("general", "/tools/raw"), Some(TOKEN), body)
        .await;
    assert_eq!(a.json["error_code"], "plugin_timeout");
    // Nobody in the chat waits on a workflow's call: its failure is told in the drawer.
    let posted = w.marks.posted.lock().unwrap().clone();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0].0, "general-host-inbox");
    let entry: Value =
        serde_json::from_str(posted[0].1.values().next().unwrap().as_deref().unwrap()).unwrap();
    assert_eq!(
        entry["title"],
        "Workflow run-7, node node-2: tool raw of echo failed"
    );
    assert_eq!(entry["data"]["workflow_run"], "run-7");
}

#[tokio::test]
async fn three_unanswered_calls_open_the_breaker_then_one_trial_closes_it() {
    let mut w = World::new().await;
    w.start("general", "uid-1");
    w.plugin.hang(3, Duration::from_millis(600));
    let manual = r#"{"trigger": "manual"}"#;
    let mut hung = vec![];
    for _ in 0..3 {
        let w2 = w.sender();
        hung.push(tokio::spawn(async move {
            w2.send("POST", &at("general", "/actions/ping"), Some(TOKEN), manual)
                .await
        }));
    }
    for h in hung {
        let a = h.await.unwrap();
        assert_eq!(a.status, StatusCode::GATEWAY_TIMEOUT);
        assert_eq!(a.code(), "plugin_timeout");
    }
    // The 4th fails at once, and so do tools and /x.
    let started = Instant::now();
    let a = w
        .send("POST", &at("general", "/actions/ping"), Some(TOKEN), manual)
        .await;
    assert!(
        started.elapsed() < Duration::from_millis(100),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(a.code(), "breaker_open");
    assert!(a.headers.contains_key(header::RETRY_AFTER));
    let t = w
        .send("POST", &at("general", "/tools/echo"), Some(TOKEN), SAY)
        .await;
    assert_eq!(
        (t.json["is_error"].clone(), t.json["error_code"].clone()),
        (json!(true), json!("breaker_open"))
    );
    let x = w
        .send("GET", &at("general", "/x/anything"), Some(TOKEN), "")
        .await;
    assert_eq!(x.status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(
        w.plugin.seen("/actions").len(),
        3,
        "nothing reached the plugin meanwhile"
    );
    let recorded = w.recorded.clone();
    eventually("the status shows it open", || {
        recorded
            .of("breaker")
            .last()
            .is_some_and(|(_, b)| b["state"] == "Open" && b["openUntil"].is_string())
    })
    .await;
    // After the open time, one trial call; its answer closes the breaker.
    tokio::time::sleep(Duration::from_millis(550)).await;
    let a = w
        .send("POST", &at("general", "/actions/ping"), Some(TOKEN), manual)
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED);
    let a = w
        .send("POST", &at("general", "/actions/ping"), Some(TOKEN), manual)
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED);
    eventually("the status shows it closed", || {
        recorded
            .of("breaker")
            .last()
            .is_some_and(|(_, b)| b["state"] == "Closed" && b["openUntil"].is_null())
    })
    .await;
}

#[tokio::test]
async fn a_new_container_starts_with_a_closed_breaker() {
    let mut w = World::new().await;
    w.start("general", "uid-1");
    w.plugin.hang(3, Duration::from_millis(400));
    let manual = r#"{"trigger": "manual"}"#;
    for _ in 0..3 {
        w.send("POST", &at("general", "/actions/ping"), Some(TOKEN), manual)
            .await;
    }
    let a = w
        .send("POST", &at("general", "/actions/ping"), Some(TOKEN), manual)
        .await;
    assert_eq!(a.code(), "breaker_open");
    // The Pod is replaced: a new UID, a new breaker.
    w.writers
        .pods
        .apply_watcher_event(&kube::runtime::watcher::Event::Delete(pod(
            "general",
            w.plugin.addr,
            "uid-1",
        )));
    w.start("general", "uid-2");
    let a = w
        .send("POST", &at("general", "/actions/ping"), Some(TOKEN), manual)
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn actions_carry_their_trigger_and_the_thread() {
    let mut w = World::new().await;
    w.start("general-t1", "uid-t1");
    let a = w
        .send(
            "POST",
            &at("general-t1", "/actions/tick"),
            Some(TOKEN),
            r#"{"trigger": "schedule", "task_id": "echo-general-tick"}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED);
    assert_eq!(a.json, json!({"accepted": true}));
    assert_eq!(
        w.plugin.seen("/actions/tick")[0].body,
        json!({"trigger": "schedule", "task_id": "echo-general-tick", "thread_id": "general-t1"})
    );
    let a = w
        .send(
            "POST",
            &at("general-t1", "/actions/tick"),
            Some(TOKEN),
            r#"{"trigger": "schedule"}"#,
        )
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::BAD_REQUEST, "invalid_body")
    );
    let a = w
        .send(
            "POST",
            &at("general-t1", "/actions/nope"),
            Some(TOKEN),
            r#"{"trigger": "manual"}"#,
        )
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::NOT_FOUND, "action_not_found")
    );
    let a = w
        .send("POST", &at("general-t1", "/actions/tick"), Some(TOKEN), "{")
        .await;
    assert_eq!(a.code(), "invalid_body");
    // Its fields in an array, which serde alone would read by position, are no request.
    let a = w
        .send(
            "POST",
            &at("general-t1", "/actions/tick"),
            Some(TOKEN),
            r#"["schedule", "echo-general-tick"]"#,
        )
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::BAD_REQUEST, "invalid_body")
    );
}

/// One request and what it must answer.
struct Row {
    method: &'static str,
    path: String,
    token: Option<&'static str>,
    body: String,
    status: StatusCode,
    code: &'static str,
    /// A part of the error message, when it matters.
    says: &'static str,
}

fn row(
    method: &'static str,
    path: String,
    token: Option<&'static str>,
    body: &str,
    (status, code, says): (StatusCode, &'static str, &'static str),
) -> Row {
    Row {
        method,
        path,
        token,
        body: body.to_string(),
        status,
        code,
        says,
    }
}

async fn check_rows(w: &World, rows: &[Row]) {
    for r in rows {
        let a = w.send(r.method, &r.path, r.token, &r.body).await;
        let what = format!("{} {} with {:?}", r.method, r.path, r.token);
        assert_eq!(
            (a.status, a.code()),
            (r.status, r.code),
            "{what}: {}",
            a.json
        );
        let message = a.json["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(r.says), "{what}: {message}");
    }
}

#[tokio::test]
async fn callers_need_a_token_the_cluster_accepts_and_the_rbac_grant() {
    let mut w = World::new().await;
    w.start("general", "uid-1");
    let tool = at("general", "/tools/echo");
    let manual = r#"{"trigger": "manual"}"#;
    use StatusCode as S;
    check_rows(
        &w,
        &[
            row(
                "POST",
                tool.clone(),
                None,
                SAY,
                (S::UNAUTHORIZED, "missing_token", ""),
            ),
            row(
                "POST",
                tool.clone(),
                Some("stolen"),
                SAY,
                (S::UNAUTHORIZED, "invalid_token", ""),
            ),
            row(
                "POST",
                tool.clone(),
                Some(LIMITED),
                SAY,
                (S::FORBIDDEN, "forbidden", "create plugininstances/tools"),
            ),
            // RBAC comes before anything about the chat: no way to probe what exists.
            row(
                "POST",
                at("nowhere", "/tools/echo"),
                Some(LIMITED),
                SAY,
                (S::FORBIDDEN, "forbidden", ""),
            ),
            row(
                "POST",
                at("general", "/actions/ping"),
                Some(LIMITED),
                manual,
                (S::ACCEPTED, "", ""),
            ),
        ],
    )
    .await;
    let a = w.send("POST", &tool, None, SAY).await;
    assert_eq!(a.headers[header::WWW_AUTHENTICATE], "Bearer");
    assert!(w.plugin.seen("/tools").is_empty());
}

#[tokio::test]
async fn chats_and_plugins_that_do_not_exist_or_run_nothing_are_refused() {
    let w = World::new().await;
    let manual = r#"{"trigger": "manual"}"#;
    let big = format!(
        r#"{{"trigger": "manual", "input": "{}"}}"#,
        "x".repeat(3000)
    );
    use StatusCode as S;
    check_rows(
        &w,
        &[
            row(
                "POST",
                at("nowhere", "/actions/ping"),
                Some(TOKEN),
                manual,
                (S::NOT_FOUND, "channel_not_found", "nowhere"),
            ),
            row(
                "POST",
                "/channels/general/plugins/other/actions/ping".into(),
                Some(TOKEN),
                manual,
                (S::NOT_FOUND, "plugin_not_found", "other"),
            ),
            row(
                "POST",
                at("general-h", "/actions/ping"),
                Some(TOKEN),
                manual,
                (S::CONFLICT, "plugin_not_enabled", "hidden"),
            ),
            row(
                "GET",
                at("general", "/actions/ping"),
                Some(TOKEN),
                "",
                (S::METHOD_NOT_ALLOWED, "method_not_allowed", ""),
            ),
            row(
                "GET",
                "/nothing/here".into(),
                Some(TOKEN),
                "",
                (S::NOT_FOUND, "not_found", ""),
            ),
            row(
                "POST",
                at("general", "/actions/ping"),
                Some(TOKEN),
                &big,
                (S::PAYLOAD_TOO_LARGE, "body_too_large", ""),
            ),
        ],
    )
    .await;
}

#[tokio::test]
async fn x_passes_method_path_query_and_body_through_both_ways() {
    let mut w = World::new().await;
    w.start("general", "uid-1");
    let a = w
        .send_with(
            "PUT",
            &at("general", "/x/a/b%20c?q=1&r=2"),
            Some(TOKEN),
            "hello",
            "text/plain",
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(&a.bytes[..], b"hello");
    assert_eq!(a.headers[header::CONTENT_TYPE], "text/plain");
    let seen = w.plugin.seen("/x/a");
    assert_eq!(seen[0].path, "/x/a/b%20c?q=1&r=2");
    assert_eq!(seen[0].method, axum::http::Method::PUT);
    // The plugin's own error passes as it is.
    let a = w
        .send("GET", &at("general", "/x/missing"), Some(TOKEN), "")
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert_eq!(&a.bytes[..], b"nope");
    // Bodies are capped both ways (4096 bytes here, 8 MB by default).
    let a = w
        .send(
            "POST",
            &at("general", "/x/echo"),
            Some(TOKEN),
            &"x".repeat(5000),
        )
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large")
    );
    w.plugin.behaviour.lock().unwrap().big = 5000;
    let a = w
        .send("GET", &at("general", "/x/big"), Some(TOKEN), "")
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::BAD_GATEWAY, "answer_too_large")
    );
}

#[tokio::test]
async fn a_switch_click_goes_to_the_chats_container_and_its_state_is_kept() {
    let mut w = World::new().await;
    w.start("general-t1", "uid-t1");
    let a = w
        .send(
            "POST",
            &at("general-t1", "/switches/mode"),
            Some(TOKEN),
            r#"{"on": true}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(
        a.json,
        json!({"id": "mode", "on": true, "title": "Mode is on", "error": false, "busy": false})
    );
    assert_eq!(
        w.plugin.seen("/switches/mode")[0].body,
        json!({"on": true, "thread_id": "general-t1"})
    );
    let kept = w.recorded.of("switches");
    assert_eq!(
        kept,
        vec![(
            key("general-t1"),
            json!([{"id": "mode", "on": true, "title": "Mode is on"}])
        )]
    );
    let a = w
        .send(
            "POST",
            &at("general-t1", "/switches/other"),
            Some(TOKEN),
            r#"{"on": true}"#,
        )
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::NOT_FOUND, "switch_not_found")
    );
    let a = w
        .send("GET", &at("general-t1", "/switches"), Some(TOKEN), "")
        .await;
    assert_eq!(a.json["switches"][0]["id"], "mode");
    assert_eq!(a.json["switches"][0]["title"], "Mode is off");
}

#[tokio::test]
async fn events_reach_the_containers_the_rules_name() {
    let mut w = World::new().await;
    w.start("general", "uid-g");
    w.start("general-t1", "uid-t1");
    let a = w
        .send(
            "POST",
            "/channels/general-t1/events",
            Some(TOKEN),
            r#"{"type": "message.created", "data": {"text": "hi"}}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    let d = &a.json["deliveries"];
    assert_eq!(d.as_array().unwrap().len(), 1, "{}", a.json);
    assert_eq!(d[0]["chat"], "general-t1");
    assert_eq!(d[0]["thread_id"], "general-t1");
    assert_eq!(d[0]["delivered"], true);
    assert_eq!(
        w.plugin.seen("/events")[0].body,
        json!({"type": "message.created", "thread_id": "general-t1", "data": {"text": "hi"}})
    );
    // Hidden threads get nothing; events nobody subscribes to go nowhere.
    let a = w
        .send(
            "POST",
            "/channels/general-h/events",
            Some(TOKEN),
            r#"{"type": "message.created", "data": {}}"#,
        )
        .await;
    assert!(a.json["ignored"].as_str().unwrap().contains("hidden"));
    let a = w
        .send(
            "POST",
            "/channels/general/events",
            Some(TOKEN),
            r#"{"type": "agent.status", "data": {}}"#,
        )
        .await;
    assert_eq!(a.json["deliveries"], json!([]));
    // settings.changed brings the plugin's settings, without a thread id.
    let a = w
        .send(
            "POST",
            "/channels/general/events",
            Some(TOKEN),
            r#"{"type": "settings.changed"}"#,
        )
        .await;
    assert_eq!(a.json["deliveries"][0]["delivered"], true, "{}", a.json);
    let last = w.plugin.seen("/events").pop().unwrap();
    assert_eq!(
        last.body,
        json!({"type": "settings.changed", "data": {"settings": {"verbose": false}}})
    );
    // RBAC: create channels/events.
    let a = w
        .send(
            "POST",
            "/channels/general/events",
            Some(LIMITED),
            r#"{"type": "x", "data": {}}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_plugin_that_refuses_the_connection_counts_as_unanswered() {
    let s = CallSettings {
        start_timeout: Duration::from_millis(500),
        ..Default::default()
    };
    let mut w = World::with_settings(s).await;
    // A Pod whose address nothing listens on.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dead = listener.local_addr().unwrap();
    drop(listener);
    apply(&mut w.writers.pods, pod("general", dead, "uid-dead"));
    w.pods.refresh(&key("general"));
    let manual = r#"{"trigger": "manual"}"#;
    for _ in 0..3 {
        let a = w
            .send("POST", &at("general", "/actions/ping"), Some(TOKEN), manual)
            .await;
        assert_eq!(
            (a.status, a.code()),
            (StatusCode::BAD_GATEWAY, "plugin_unreachable"),
            "{}",
            a.json
        );
    }
    let a = w
        .send("POST", &at("general", "/actions/ping"), Some(TOKEN), manual)
        .await;
    assert_eq!(a.code(), "breaker_open");
    let _: Value = a.json;
}

#[tokio::test]
async fn an_answer_that_stalls_past_its_limit_counts_as_unanswered() {
    // Before, a body that stopped coming was "broken" but answered, so a container that sends
    // its headers and then hangs never opened the breaker.
    let mut w = World::new().await;
    w.start("general", "uid-1");
    for _ in 0..3 {
        let a = w
            .send("GET", &at("general", "/x/stall"), Some(TOKEN), "")
            .await;
        assert_eq!(
            (a.status, a.code()),
            (StatusCode::GATEWAY_TIMEOUT, "plugin_timeout"),
            "{}",
            a.json
        );
    }
    let a = w
        .send("GET", &at("general", "/x/stall"), Some(TOKEN), "")
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "breaker_open")
    );
}

#[tokio::test]
async fn a_chats_panels_are_listed_with_links_to_their_pages_in_this_chat() {
    let w = World::new().await;
    let a = w
        .send("GET", &at("general", "/panels"), Some(TOKEN), "")
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    let panels = a.json["panels"].as_array().unwrap();
    assert_eq!(panels.len(), 1);
    assert_eq!(
        (
            &panels[0]["id"],
            &panels[0]["label"],
            &panels[0]["singleton"]
        ),
        (&json!("main"), &json!("Echo"), &json!(true))
    );
    let url = panels[0]["url"].as_str().unwrap();
    let (token, page) = url
        .strip_prefix("/ui/v1/")
        .and_then(|rest| rest.split_once('/'))
        .unwrap();
    assert_eq!(page, "main/index.html");
    let keys = w.state.links.borrow().clone().unwrap();
    let link = crate::ui::link::verify(&keys, token, jiff::Timestamp::now().as_second()).unwrap();
    assert_eq!(link.plugin, "echo");
    assert_eq!(link.chat, format!("{NS}/general"));
    assert_eq!(link.digest, format!("sha256:{}", "0".repeat(64)));
    assert_eq!(link.page, crate::ui::link::Page::Panel("main".into()));
    assert_eq!(panels[0]["expires"], json!(link.expires));
    // A chat whose project runs no plugin (a hidden thread) says so instead.
    let a = w
        .send("GET", &at("general-h", "/panels"), Some(TOKEN), "")
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::CONFLICT, "plugin_not_enabled")
    );
}

/// Kind saw it: a project that enables a plugin again lists its panels (and its switches, all
/// off) while the controller is still making the instance; before, both answered 503
/// instance_pending, and the console's open pane kept saying the plugin was disabled.
#[tokio::test]
async fn panels_and_switches_list_before_the_instance_is_made() {
    let mut w = World::new().await;
    w.writers
        .instances
        .apply_watcher_event(&kube::runtime::watcher::Event::Delete(
            super::fixtures::instance("general"),
        ));
    let a = w
        .send("GET", &at("general", "/panels"), Some(TOKEN), "")
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(a.json["panels"][0]["id"], "main");
    let a = w
        .send("GET", &at("general", "/switches"), Some(TOKEN), "")
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert!(
        a.json["switches"]
            .as_array()
            .unwrap()
            .iter()
            .all(|s| s["on"] == false),
        "{}",
        a.json
    );
    // A click still needs the instance: it says so.
    let a = w
        .send(
            "POST",
            &at("general", "/switches/mode"),
            Some(TOKEN),
            r#"{"on": true}"#,
        )
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "instance_pending")
    );
}

/// A schedule's call of an action that fails is told in the chat's drawer as the host's own
/// notification (nobody waits on a CronJob's call); a person's failed call is not (they see the
/// answer).
#[tokio::test]
async fn a_scheduled_action_that_fails_is_told_in_the_chats_drawer() {
    let mut w = World::new().await;
    w.start("general", "uid-1");
    let tick = r#"{"trigger": "schedule", "task_id": "echo-general-tick"}"#;
    w.plugin.hang(1, Duration::from_secs(2));
    let a = w
        .send("POST", &at("general", "/actions/tick"), Some(TOKEN), tick)
        .await;
    assert_eq!(a.status, StatusCode::GATEWAY_TIMEOUT, "{}", a.json);
    let posted = w.marks.posted.lock().unwrap().clone();
    assert_eq!(posted.len(), 1, "{posted:?}");
    assert_eq!(posted[0].0, "general-host-inbox");
    let entry: Value =
        serde_json::from_str(posted[0].1.values().next().unwrap().as_deref().unwrap()).unwrap();
    assert_eq!(entry["title"], "Scheduled action tick of echo failed");
    assert_eq!(entry["level"], "error");
    assert_eq!(entry["data"]["task"], "echo-general-tick");
    assert!(
        entry["body"].as_str().unwrap().contains("action tick"),
        "{entry}"
    );

    w.plugin.hang(1, Duration::from_secs(2));
    let a = w
        .send(
            "POST",
            &at("general", "/actions/tick"),
            Some(TOKEN),
            r#"{"trigger": "manual"}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::GATEWAY_TIMEOUT, "{}", a.json);
    assert_eq!(w.marks.posted.lock().unwrap().len(), 1);
}
