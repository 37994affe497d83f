//! The plugin's behaviour, route by route.

use std::time::{Duration, Instant};

use loop_plugin_sdk::api::Client as ApiClient;
use loop_plugin_sdk::testing::{Config, FakeHost};
use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{self, SECRET, TempDir, start, start_with};

#[tokio::test]
async fn refuses_requests_without_the_secret() {
    let dir = TempDir::new("secret");
    let p = start(dir.path()).await;
    let url = |path: &str| format!("{}{path}", p.url);
    for (auth, what) in [
        (None, "no header"),
        (Some("Bearer wrong"), "wrong secret"),
        (Some("Bearer test-secre"), "a prefix"),
        (Some("Basic test-secret"), "another scheme"),
        (Some("test-secret"), "no scheme"),
    ] {
        for (method, path) in [
            (Method::GET, "/healthz"),
            (Method::POST, "/tools/echo"),
            (Method::POST, "/actions/ping"),
            (Method::GET, "/x/journal"),
            (Method::GET, "/no/such/route"),
        ] {
            let mut req = p.client.request(method.clone(), url(path)).json(&json!({}));
            if let Some(auth) = auth {
                req = req.header("authorization", auth);
            }
            let res = req.send().await.unwrap();
            assert_eq!(res.status(), 401, "{what}: {method} {path}");
            assert_eq!(res.headers()["www-authenticate"], "Bearer");
            let body: Value = res.json().await.unwrap();
            assert!(body["error"].is_string());
        }
    }
    // Nothing refused reached the journal.
    assert!(p.journal("/tools/echo").await.is_empty());

    let res = p
        .client
        .get(url("/healthz"))
        .bearer_auth(SECRET)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let health: Value = res.json().await.unwrap();
    assert_eq!(
        health,
        json!({"status": "ok", "id": "echo", "version": "0.1.0"})
    );
    let res = p
        .client
        .get(url("/healthz"))
        .header("authorization", "bearer test-secret")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200, "the scheme's case doesn't matter");
    p.stop().await;
}

#[tokio::test]
async fn echo_tool() {
    let dir = TempDir::new("echo");
    let p = start(dir.path()).await;
    let call =
        json!({"input": {"text": "hello"}, "agent": "say", "thread_id": "t1", "run_id": "run-1"});
    let res = p.post("/tools/echo", call.clone()).await;
    assert_eq!(res.status(), 200);
    let result: Value = res.json().await.unwrap();
    assert_eq!(
        result,
        json!({"content": [{"type": "text", "text": "hello"}], "structured_content": {"echo": "hello"}, "is_error": false})
    );

    let res = p.post("/tools/echo", json!({"input": {"text": 42}})).await;
    assert_eq!(res.status(), 200);
    let result: Value = res.json().await.unwrap();
    assert_eq!(result["is_error"], true);
    assert_eq!(
        result["content"][0]["text"],
        "input.text: expected a string"
    );

    let res = p.post("/tools/nope", json!({"input": {}})).await;
    assert_eq!(res.status(), 404);
    let res = p.post("/tools/echo", json!({"text": "no input"})).await;
    assert_eq!(res.status(), 400);
    let err: Value = res.json().await.unwrap();
    assert!(err["error"].as_str().unwrap().contains("input"), "{err}");

    let seen = p.journal("/tools/echo").await;
    assert_eq!(seen.len(), 3);
    assert_eq!(seen[0]["body"], call);
    assert_eq!(seen[0]["method"], "POST");
    assert_eq!(seen[0]["kind"], "request");
    p.stop().await;
}

#[tokio::test]
async fn actions_answer_202_and_are_journaled() {
    let dir = TempDir::new("actions");
    let p = start(dir.path()).await;
    for body in [
        json!({"trigger": "manual"}),
        json!({"trigger": "schedule", "task_id": "task-1"}),
        json!({"trigger": "workflow", "run_id": "workflow:r1:n1", "input": {"a": 1}, "thread_id": ""}),
    ] {
        let res = p.post("/actions/ping", body).await;
        assert_eq!(res.status(), 202);
        let answer: Value = res.json().await.unwrap();
        assert_eq!(answer, json!({"accepted": true}));
    }
    let res = p
        .post(
            "/actions/tick",
            json!({"trigger": "schedule", "task_id": "task-2"}),
        )
        .await;
    assert_eq!(res.status(), 202);

    assert_eq!(
        p.post("/actions/tick", json!({"trigger": "schedule"}))
            .await
            .status(),
        400
    );
    assert_eq!(
        p.post(
            "/actions/ping",
            json!({"trigger": "workflow", "run_id": "r1"})
        )
        .await
        .status(),
        400
    );
    assert_eq!(
        p.post("/actions/ping", json!({"trigger": "later"}))
            .await
            .status(),
        400
    );
    assert_eq!(
        p.post("/actions/nope", json!({"trigger": "manual"}))
            .await
            .status(),
        404
    );

    let pings = p.journal("/actions/ping").await;
    let triggers: Vec<_> = pings
        .iter()
        .map(|e| e["body"]["trigger"].as_str().unwrap())
        .collect();
    assert_eq!(
        triggers,
        ["manual", "schedule", "workflow", "workflow", "later"]
    );
    assert_eq!(pings[1]["body"]["task_id"], "task-1");
    assert_eq!(pings[2]["body"]["run_id"], "workflow:r1:n1");
    let ticks = p.journal("/actions/tick").await;
    assert_eq!(
        ticks[0]["body"],
        json!({"trigger": "schedule", "task_id": "task-2"})
    );
    p.stop().await;
}

/// The journal's `loop_api` entry of one `ping`, with `api` as the Plugin API.
async fn ping_entry(dir: &TempDir, api: ApiClient) -> Value {
    let p = start_with(dir.path(), Some(api)).await;
    let ping = p.post("/actions/ping", json!({"trigger": "manual"})).await;
    assert_eq!(ping.status(), 202);
    let deadline = Instant::now() + Duration::from_secs(15);
    let entry = loop {
        if let Some(e) = p.journal("/api/plugin/v1/channel").await.pop() {
            break e;
        }
        assert!(
            Instant::now() < deadline,
            "the ping's API call never reached the journal"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    p.stop().await;
    assert_eq!(entry["kind"], "loop_api");
    assert_eq!(entry["method"], "GET");
    entry
}

#[tokio::test]
async fn ping_reads_the_channel_and_journals_the_answer() {
    // The fake host, with the token read from a file as the host mounts it.
    let mut config = Config::new(common::manifest());
    config
        .channel
        .settings
        .insert("verbose".into(), json!(true));
    let host = FakeHost::start(config).await.unwrap();
    let dir = TempDir::new("ping");
    let token = dir.path().join("token");
    std::fs::write(&token, format!("  {}\n", host.token())).unwrap();
    let api = ApiClient::new(host.url(), &token).unwrap();
    let entry = ping_entry(&dir, api).await;
    assert_eq!(entry["status"], 200);
    assert_eq!(entry["body"]["id"], "chat");
    assert_eq!(entry["body"]["settings"]["verbose"], true);

    // An answer that is not 2xx: its status and error.
    let mut config = Config::new(common::manifest());
    config.enabled = false;
    let host = FakeHost::start(config).await.unwrap();
    let entry = ping_entry(&TempDir::new("ping-409"), host.client()).await;
    assert_eq!(entry["status"], 409);
    assert_eq!(entry["body"]["error"]["code"], "plugin_not_enabled");

    // Nothing answers: the error, no status (what the e2e suite's network policy test reads).
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let api = ApiClient::with_token(&url, "t").unwrap();
    let entry = ping_entry(&TempDir::new("ping-closed"), api).await;
    assert!(entry["status"].is_null(), "{entry}");
    assert!(entry["error"].is_string(), "{entry}");
}

#[tokio::test]
async fn switches_toggle_per_chat() {
    let dir = TempDir::new("switches");
    let p = start(dir.path()).await;
    let res = p.post("/switches/mode", json!({"on": true})).await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.json::<Value>().await.unwrap(),
        json!({"on": true, "title": "Mode is on"})
    );
    let res = p
        .post("/switches/mode", json!({"on": false, "thread_id": "t1"}))
        .await;
    assert_eq!(
        res.json::<Value>().await.unwrap(),
        json!({"on": false, "title": "Mode is off"})
    );
    let res = p.post("/switches/mode", json!({"on": false})).await;
    assert_eq!(
        res.json::<Value>().await.unwrap(),
        json!({"on": false, "title": "Mode is off"})
    );
    assert_eq!(
        p.post("/switches/other", json!({"on": true}))
            .await
            .status(),
        404
    );
    assert_eq!(
        p.post("/switches/mode", json!({"on": "yes"}))
            .await
            .status(),
        400
    );
    let clicks = p.journal("/switches/mode").await;
    assert_eq!(clicks.len(), 4);
    assert_eq!(clicks[1]["body"]["thread_id"], "t1");
    p.stop().await;

    // The state lives in the data dir.
    let saved: Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("switches.json")).unwrap()).unwrap();
    assert_eq!(saved, json!({"mode": {"": false, "t1": false}}));
}

#[tokio::test]
async fn events_and_run_ends_are_recorded() {
    let dir = TempDir::new("events");
    let p = start(dir.path()).await;
    let event = json!({"type": "message.created", "thread_id": "t1", "data": {"text": "hi"}});
    let res = p.post("/events", event.clone()).await;
    assert_eq!(res.status(), 204);
    let res = p
        .post(
            "/events",
            json!({"type": "settings.changed", "data": {"settings": {"verbose": true}}}),
        )
        .await;
    assert_eq!(res.status(), 204);
    let res = p
        .post("/events", json!({"type": "live.status", "data": {}}))
        .await;
    assert_eq!(res.status(), 422, "not subscribed");
    assert_eq!(p.post("/events", json!({"data": {}})).await.status(), 400);

    let events = p.journal("/events").await;
    assert_eq!(events.len(), 4);
    assert_eq!(events[0]["body"], event);
    assert_eq!(events[1]["body"]["type"], "settings.changed");

    let res = p
        .post(
            "/runs/run-9/done",
            json!({"status": "done", "result": "fine"}),
        )
        .await;
    assert_eq!(res.status(), 204);
    let res = p
        .post(
            "/runs/run-9/done",
            json!({"status": "failed", "error": "restart"}),
        )
        .await;
    assert_eq!(res.status(), 204);
    assert_eq!(
        p.post("/runs/run-9/done", json!({"status": "ok"}))
            .await
            .status(),
        400
    );
    let ends = p.journal("/runs/run-9/done").await;
    assert_eq!(ends[0]["body"], json!({"status": "done", "result": "fine"}));
    p.stop().await;
}

#[tokio::test]
async fn x_echoes_and_the_journal_survives_a_restart() {
    let dir = TempDir::new("x");
    let p = start(dir.path()).await;
    let res = p
        .req(Method::PUT, "/x/some/where?q=1")
        .header("content-type", "text/plain")
        .body("raw body")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.headers()["content-type"], "text/plain");
    assert_eq!(res.headers()["x-echo-method"], "PUT");
    assert_eq!(res.headers()["x-echo-path"], "/x/some/where");
    assert_eq!(res.text().await.unwrap(), "raw body");
    let res = p.req(Method::GET, "/nope").send().await.unwrap();
    assert_eq!(res.status(), 404);

    // 8 MB passes, more is refused.
    let big = vec![b'a'; 8 * 1024 * 1024];
    let res = p
        .req(Method::POST, "/x/big")
        .body(big.clone())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.bytes().await.unwrap().len(), big.len());
    let res = p
        .req(Method::POST, "/x/big")
        .body(vec![b'a'; 8 * 1024 * 1024 + 1])
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 413);
    let bigs = p.journal("/x/big").await;
    assert_eq!(bigs.len(), 1, "the refused body isn't journaled");
    assert_eq!(bigs[0]["body"], Value::Null);
    assert_eq!(bigs[0]["body_size"], 8 * 1024 * 1024);
    p.stop().await;

    let p = start(dir.path()).await;
    let seen = p.journal("/x/some/where").await;
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["body"], "raw body");
    assert_eq!(seen[0]["query"], "q=1");
    assert_eq!(
        p.req(Method::DELETE, "/x/journal")
            .send()
            .await
            .unwrap()
            .status(),
        204
    );
    assert!(p.journal("/x/some/where").await.is_empty());
    p.stop().await;
}

#[tokio::test]
async fn hang_delays_the_next_calls() {
    let dir = TempDir::new("hang");
    let p = start(dir.path()).await;
    let res = p.post("/x/hang", json!({"count": 2, "seconds": 1.0})).await;
    assert_eq!(res.status(), 200);
    assert_eq!(
        res.json::<Value>().await.unwrap(),
        json!({"pending": 2, "kinds": ["tools", "actions"], "seconds": 1.0})
    );

    let timed = |path: &'static str, body: Value| {
        let p = &p;
        async move {
            let start = Instant::now();
            let status = p.post(path, body).await.status();
            (status, start.elapsed())
        }
    };
    let hung = Duration::from_secs(1);
    let (status, took) = timed("/events", json!({"type": "agent.status", "data": {}})).await;
    assert_eq!(status, 204);
    assert!(took < hung, "events weren't armed");
    let (status, took) = timed("/tools/echo", json!({"input": {"text": "a"}})).await;
    assert_eq!(status, 200);
    assert!(took >= hung, "first tool call hung ({took:?})");
    let (status, took) = timed("/actions/ping", json!({"trigger": "manual"})).await;
    assert_eq!(status, 202);
    assert!(took >= hung, "then the action ({took:?})");
    let (_, took) = timed("/tools/echo", json!({"input": {"text": "a"}})).await;
    assert!(took < hung, "only two calls hang");
    // The hung calls were journaled when they arrived.
    assert_eq!(p.journal("/tools/echo").await.len(), 2);

    assert_eq!(
        p.post("/x/hang", json!({"kinds": ["nope"]})).await.status(),
        400
    );
    assert_eq!(
        p.post("/x/hang", json!({"seconds": -1})).await.status(),
        400
    );
    p.stop().await;
}

#[tokio::test]
async fn shutdown_cuts_hangs_short() {
    let dir = TempDir::new("shutdown");
    let p = start(dir.path()).await;
    p.post("/x/hang", json!({"kinds": ["x"]})).await; // 35 s by default
    let client = p.client.clone();
    let url = format!("{}/x/slow", p.url);
    let call =
        tokio::spawn(async move { client.post(url).bearer_auth(SECRET).body("b").send().await });
    // Wait until the call is in.
    let deadline = Instant::now() + Duration::from_secs(5);
    while p.journal("/x/slow").await.is_empty() {
        assert!(Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let start = Instant::now();
    p.stop().await;
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "shutdown waited out the hang"
    );
    let res = call.await.unwrap().unwrap();
    assert_eq!(
        res.status(),
        200,
        "the request in flight still got its answer"
    );
}
