//! Request-level tests: the router over stores filled by hand, each request through
//! `tower::ServiceExt::oneshot`, every write recorded.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode};
use kube::ResourceExt;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::fixtures::*;
use crate::plugin_api::inbox;
use model::manifest::Capability;
use model::resources::SwitchState;

fn all_but(cap: Capability) -> Vec<Capability> {
    Capability::ALL.into_iter().filter(|c| *c != cap).collect()
}

/// Every capability-gated call: (method, path, body, the capability it needs).
fn gated() -> Vec<(&'static str, &'static str, Option<Value>, Capability)> {
    vec![
        (
            "POST",
            "/runs",
            Some(json!({ "agent": "quiz", "prompt": "ask" })),
            Capability::AgentReadonly,
        ),
        (
            "POST",
            "/runs",
            Some(json!({ "agent": "fixer", "prompt": "fix" })),
            Capability::AgentWrite,
        ),
        (
            "PUT",
            "/composer/switches/sync",
            Some(json!({ "on": true })),
            Capability::UiComposerSwitch,
        ),
        (
            "DELETE",
            "/composer/switches/sync",
            None,
            Capability::UiComposerSwitch,
        ),
        (
            "POST",
            "/cards",
            Some(json!({ "card": "score", "title": "Score" })),
            Capability::UiNotificationCard,
        ),
        (
            "GET",
            "/cards/card-0000000000000000",
            None,
            Capability::UiNotificationCard,
        ),
        (
            "POST",
            "/notifications",
            Some(json!({ "title": "Hi" })),
            Capability::NotificationsSend,
        ),
        (
            "POST",
            "/channel/live/control",
            Some(json!({ "subtype": "set_permission_mode" })),
            Capability::LiveControl,
        ),
        (
            "PUT",
            "/channel/live/hold",
            Some(json!({ "hold": true })),
            Capability::LiveControl,
        ),
        ("GET", "/files/README.md", None, Capability::FilesRead),
        ("GET", "/memory/last", None, Capability::MemoryRead),
        (
            "PUT",
            "/memory/last",
            Some(json!({ "value": 1 })),
            Capability::MemoryWrite,
        ),
    ]
}

#[tokio::test]
async fn each_gated_route_without_its_capability_answers_403() {
    for (method, path, body, cap) in gated() {
        let h = World::new().approve(&all_but(cap)).build();
        let a = h.call(method, path, Some(TOKEN_A), body.clone()).await;
        assert_eq!(
            a.status,
            StatusCode::FORBIDDEN,
            "{method} {path} without {cap}: {:?}",
            a.json()
        );
        assert_eq!(a.code(), "capability_not_approved");
        assert!(
            a.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains(cap.as_str())
        );

        // With it, the same call is not refused for want of a capability.
        let h = World::new().build();
        let a = h.call(method, path, Some(TOKEN_A), body).await;
        assert_ne!(
            a.status,
            StatusCode::FORBIDDEN,
            "{method} {path} with {cap}: {:?}",
            a.json()
        );
    }
    // Reading a run needs either agent capability.
    let h = World::new().approve(&[Capability::FilesRead]).build();
    let a = h
        .call("GET", "/runs/cogtest-0000000000000000", Some(TOKEN_A), None)
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    let h = World::new().approve(&[Capability::AgentWrite]).build();
    let a = h
        .call("GET", "/runs/cogtest-0000000000000000", Some(TOKEN_A), None)
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_capability_the_manifest_does_not_declare_does_not_count() {
    let mut w = World::new();
    let mut manifest: Value = serde_json::to_value(&w.plugin.spec.manifest).unwrap();
    manifest["capabilities"] = json!(["ui.panel", "agent.readonly"]);
    manifest["agents"] = json!([{ "id": "quiz", "read_only": true, "tools": ["ask"] }]);
    for key in ["ui", "live", "events", "events_start", "actions"] {
        manifest.as_object_mut().unwrap().remove(key);
    }
    w.plugin.spec.manifest = serde_json::from_value(manifest).unwrap();
    let h = w.build();
    let a = h.call("GET", "/memory/last", Some(TOKEN_A), None).await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(
        a.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not declare")
    );
    let a = h
        .call(
            "POST",
            "/runs",
            Some(TOKEN_A),
            Some(json!({ "agent": "quiz", "prompt": "p" })),
        )
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED, "{:?}", a.json());
}

#[tokio::test]
async fn ids_of_another_chat_are_not_found() {
    let mut w = World::new();
    let t0 = T0.parse().unwrap();
    w.runs.push(run("run-of-b", "b", t0));
    let mut other_plugin = run("run-of-other", "a", t0);
    other_plugin.spec.plugin = "other".into();
    w.runs.push(other_plugin);
    let mut inbox_b = inbox::template(NS, "cogtest-b", PLUGIN, PROJECT, "b", None);
    let card =
        json!({ "id": "card-b", "kind": "card", "card": "score", "title": "B's", "created": T0 });
    inbox_b
        .data
        .as_mut()
        .unwrap()
        .insert("card-b".into(), card.to_string());
    inbox_b.metadata.resource_version = Some("1".into());
    w.maps.push(inbox_b);
    let h = w.build();

    for (path, code) in [
        ("/runs/run-of-b", "run_not_found"),
        ("/runs/run-of-other", "run_not_found"),
        ("/cards/card-b", "card_not_found"),
    ] {
        let a = h.call("GET", path, Some(TOKEN_A), None).await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{path}");
        assert_eq!(a.code(), code);
    }
    // Chat B's own token finds them.
    let a = h.call("GET", "/runs/run-of-b", Some(TOKEN_B), None).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.json()["agent"], "quiz");
    let a = h.call("GET", "/cards/card-b", Some(TOKEN_B), None).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.json()["title"], "B's");

    // A switch is only ever the token's own chat's, and only one the manifest declares.
    let a = h
        .call(
            "PUT",
            "/composer/switches/nope",
            Some(TOKEN_A),
            Some(json!({ "on": true })),
        )
        .await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::NOT_FOUND, "switch_not_found")
    );
    h.writer.clear();
    h.status.clear();
    let a = h
        .call(
            "PUT",
            "/composer/switches/sync",
            Some(TOKEN_A),
            Some(json!({ "on": true })),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    let written: Vec<String> = h
        .status
        .of("switches")
        .into_iter()
        .map(|(k, _)| k.name)
        .collect();
    assert_eq!(written, ["cogtest-a"]);
}

#[tokio::test]
async fn tokens_of_removed_instances_and_bad_headers_answer_401() {
    let h = World::new().build();
    for (header, code) in [
        (None, "missing_token"),
        (Some("Basic abc"), "malformed_token"),
        (Some("Bearer"), "malformed_token"),
        (Some("Bearer not-a-token-we-made"), "invalid_token"),
    ] {
        let mut req = Request::builder().uri("/api/plugin/v1/channel");
        if let Some(header) = header {
            req = req.header("authorization", header);
        }
        let a = h.send(req.body(Body::empty()).unwrap()).await;
        assert_eq!(a.status, StatusCode::UNAUTHORIZED, "{header:?}");
        assert_eq!(a.code(), code, "{header:?}");
        assert_eq!(a.headers["www-authenticate"], "Bearer");
    }

    // The instance is removed; its Secret lingers until garbage collection.
    let mut h = World::new().build();
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_A), None).await.status,
        StatusCode::OK
    );
    h.writers
        .instances
        .apply_watcher_event(&watcher::Event::Delete(instance("a")));
    let a = h.call("GET", "/channel", Some(TOKEN_A), None).await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::UNAUTHORIZED, "invalid_token")
    );
    // A new instance of the same name does not revive the old token.
    let mut again = instance("a");
    again.metadata.uid = Some("uid-instance-a-2".into());
    h.writers
        .instances
        .apply_watcher_event(&watcher::Event::Apply(again));
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_A), None).await.status,
        StatusCode::UNAUTHORIZED
    );
    // Chat B is untouched.
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_B), None).await.status,
        StatusCode::OK
    );

    // A chat that is deleted takes its token with it.
    h.writers
        .channels
        .apply_watcher_event(&watcher::Event::Delete(channel("b")));
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_B), None).await.status,
        StatusCode::UNAUTHORIZED
    );
    h.writers
        .channels
        .apply_watcher_event(&watcher::Event::Apply(channel("b")));
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_B), None).await.status,
        StatusCode::OK
    );

    // So does a token Secret that is deleted (or rotated).
    let secret = token_secret(NS, "cogtest-b", "uid-instance-b", PLUGIN, "b", TOKEN_B);
    h.tokens
        .apply_watcher_event(&watcher::Event::Delete(secret));
    let a = h.call("GET", "/channel", Some(TOKEN_B), None).await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::UNAUTHORIZED, "invalid_token")
    );
    let rotated = token_secret(
        NS,
        "cogtest-b",
        "uid-instance-b",
        PLUGIN,
        "b",
        "rotated-token-b",
    );
    h.tokens
        .apply_watcher_event(&watcher::Event::Apply(rotated));
    assert_eq!(
        h.call("GET", "/channel", Some("rotated-token-b"), None)
            .await
            .status,
        StatusCode::OK
    );

    // A plugin being removed takes its tokens with it.
    let mut going = plugin(&Capability::ALL);
    going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    h.writers
        .plugins
        .apply_watcher_event(&watcher::Event::Apply(going));
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_B), None).await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn a_project_that_does_not_enable_the_plugin_answers_409() {
    let h = World::new().trusting(false).build();
    for (method, path, body, _) in gated() {
        let a = h.call(method, path, Some(TOKEN_A), body).await;
        assert_eq!(a.status, StatusCode::CONFLICT, "{method} {path}");
        assert_eq!(a.code(), "plugin_not_enabled");
    }
    let a = h.call("GET", "/channel", Some(TOKEN_A), None).await;
    assert_eq!(a.status, StatusCode::CONFLICT);
    assert!(
        a.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("does not enable")
    );

    // The store's view counts at once: an edit that enables it counts once trusted, then
    // plugins are turned off globally.
    let mut h = h;
    h.writers
        .projects
        .apply_watcher_event(&watcher::Event::Apply(project(true)));
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_A), None).await.status,
        StatusCode::CONFLICT
    );
    h.writers
        .project_trusts
        .apply_watcher_event(&watcher::Event::Apply(trust(true)));
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_A), None).await.status,
        StatusCode::OK
    );
    h.writers
        .host
        .apply_watcher_event(&watcher::Event::Apply(host(false)));
    let a = h.call("GET", "/channel", Some(TOKEN_A), None).await;
    assert_eq!(a.status, StatusCode::CONFLICT);
    assert!(
        a.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("plugins.enabled"),
        "{:?}",
        a.json()
    );

    // An untrusted change that would enable it does not count, nor does a config never
    // trusted.
    for trust in [Some(trust(false)), None] {
        let mut w = World::new();
        w.trust = trust;
        assert_eq!(
            w.build()
                .call("GET", "/channel", Some(TOKEN_A), None)
                .await
                .status,
            StatusCode::CONFLICT
        );
    }

    // Plugins off in the global config.
    let mut w = World::new();
    w.host = host(false);
    assert_eq!(
        w.build()
            .call("GET", "/channel", Some(TOKEN_A), None)
            .await
            .status,
        StatusCode::CONFLICT
    );

    // 401 comes first: a bad token in a disabled project is still a bad token.
    let w = World::new().trusting(false);
    let a = w.build().call("GET", "/channel", Some("nope"), None).await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_51st_run_in_24_hours_answers_429() {
    let h = World::new().build();
    let body = || Some(json!({ "agent": "quiz", "prompt": "next question" }));
    for i in 0..50 {
        // Across both chats: the quota is the plugin's.
        let token = if i % 2 == 0 { TOKEN_A } else { TOKEN_B };
        let a = h.call("POST", "/runs", Some(token), body()).await;
        assert_eq!(
            a.status,
            StatusCode::ACCEPTED,
            "run {}: {:?}",
            i + 1,
            a.json()
        );
        h.clock.advance(Duration::from_secs(60));
    }
    let a = h.call("POST", "/runs", Some(TOKEN_A), body()).await;
    assert_eq!(a.status, StatusCode::TOO_MANY_REQUESTS, "{:?}", a.json());
    assert_eq!(a.code(), "daily_runs_exceeded");
    // The first run leaves the window 24 h after it started, 50 minutes ago.
    assert_eq!(a.headers["retry-after"], (24 * 3600 - 50 * 60).to_string());
    assert_eq!(h.writer.runs().len(), 50);

    // Once the first run leaves the window (after Retry-After), one more fits, and only one.
    h.clock
        .advance(Duration::from_secs(24 * 3600 - 50 * 60 - 1));
    assert_eq!(
        h.call("POST", "/runs", Some(TOKEN_A), body()).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    h.clock.advance(Duration::from_secs(1));
    assert_eq!(
        h.call("POST", "/runs", Some(TOKEN_A), body()).await.status,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        h.call("POST", "/runs", Some(TOKEN_A), body()).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn runs_the_store_holds_count_and_daily_runs_comes_from_the_host_config() {
    let mut w = World::new();
    w.host.spec.plugins.daily_runs = 3;
    let t0: jiff::Timestamp = T0.parse().unwrap();
    w.runs
        .push(run("old", "b", t0 - Duration::from_secs(25 * 3600)));
    w.runs
        .push(run("r1", "b", t0 - Duration::from_secs(23 * 3600)));
    let mut other = run("r-other", "b", t0);
    other.spec.plugin = "other".into();
    w.runs.push(other);
    let h = w.build();
    let body = || Some(json!({ "agent": "quiz", "prompt": "p" }));
    assert_eq!(
        h.call("POST", "/runs", Some(TOKEN_A), body()).await.status,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        h.call("POST", "/runs", Some(TOKEN_A), body()).await.status,
        StatusCode::ACCEPTED
    );
    let a = h.call("POST", "/runs", Some(TOKEN_A), body()).await;
    assert_eq!(a.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(a.headers["retry-after"], "3600");
}

#[tokio::test]
async fn a_run_is_an_agent_run_in_the_hidden_thread() {
    let h = World::new().build();
    let a = h
        .call(
            "POST",
            "/runs",
            Some(TOKEN_A),
            Some(json!({ "agent": "quiz", "prompt": "Ask me three things" })),
        )
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED);
    let body = a.json();
    let id = body["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("cogtest-"));
    assert_eq!(body["status"], "queued");
    assert_eq!(a.headers["location"], format!("/api/plugin/v1/runs/{id}"));
    let runs = h.writer.runs();
    let run = &runs[0];
    assert_eq!(run.namespace().as_deref(), Some(NS));
    assert_eq!(run.spec.plugin, "cogtest");
    assert_eq!(run.spec.channel, "a");
    assert_eq!(run.spec.thread, "plugin:cogtest");
    assert_eq!(run.spec.agent, "quiz");
    assert!(run.spec.read_only);
    assert_eq!(run.spec.tools, ["plugin_ask", "plugin_score"]);
    assert_eq!(run.spec.prompt, "Ask me three things");
    assert_eq!(run.labels()["app.kubernetes.io/managed-by"], "loop-plugins");
    assert_eq!(run.labels()["plugins.loop.dev/instance"], "cogtest-a");
    assert_eq!(run.owner_references()[0].kind, "Channel");

    // Read back before the watch brings it.
    let a = h
        .call("GET", &format!("/runs/{id}"), Some(TOKEN_A), None)
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.json()["created"], T0);
    assert_eq!(
        h.call("GET", &format!("/runs/{id}"), Some(TOKEN_B), None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    let w = h
        .call(
            "POST",
            "/runs",
            Some(TOKEN_A),
            Some(json!({ "agent": "fixer", "prompt": "x" })),
        )
        .await;
    assert_eq!(h.writer.runs().len(), 2, "{:?}", w.json());
    assert!(!h.writer.runs()[1].spec.read_only);

    for (body, status, code) in [
        (
            json!({ "agent": "nobody", "prompt": "x" }),
            StatusCode::UNPROCESSABLE_ENTITY,
            "unknown_agent",
        ),
        (
            json!({ "agent": "quiz", "prompt": "" }),
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (
            json!({ "agent": "quiz" }),
            StatusCode::BAD_REQUEST,
            "invalid_body",
        ),
        (json!(["quiz"]), StatusCode::BAD_REQUEST, "invalid_body"),
    ] {
        let a = h
            .call("POST", "/runs", Some(TOKEN_A), Some(body.clone()))
            .await;
        assert_eq!((a.status, a.code().as_str()), (status, code), "{body}");
    }
}

#[tokio::test]
async fn switches_are_set_and_reset_per_chat() {
    let h = World::new().build();
    let long = "x".repeat(201);
    let a = h
        .call(
            "PUT",
            "/composer/switches/sync",
            Some(TOKEN_A),
            Some(json!({ "on": true, "title": long })),
        )
        .await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::BAD_REQUEST, "invalid_body")
    );
    let ok_title = "é".repeat(200);
    let a = h
        .call(
            "PUT",
            "/composer/switches/sync",
            Some(TOKEN_A),
            Some(json!({ "on": true, "title": ok_title, "busy": true })),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{:?}", a.json());
    assert_eq!(
        a.json(),
        json!({ "id": "sync", "on": true, "title": ok_title, "error": false, "busy": true })
    );
    let status = h.status.status(&key("a"));
    assert_eq!(
        status.switches,
        vec![SwitchState {
            id: "sync".into(),
            on: true,
            title: Some(ok_title.clone()),
            error: false,
            busy: true
        }]
    );

    // A second switch keeps the first.
    let a = h
        .call(
            "PUT",
            "/composer/switches/quiz",
            Some(TOKEN_A),
            Some(json!({ "on": false, "error": true })),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    let status = h.status.status(&key("a"));
    assert_eq!(
        status
            .switches
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>(),
        ["sync", "quiz"]
    );

    let a = h
        .call("DELETE", "/composer/switches/sync", Some(TOKEN_A), None)
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        a.json(),
        json!({ "id": "sync", "on": false, "title": "Sync is off", "error": false, "busy": false })
    );
    let status = h.status.status(&key("a"));
    assert_eq!(
        status
            .switches
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>(),
        ["quiz"]
    );
}

#[tokio::test]
async fn live_control_takes_only_listed_subtypes_and_hold_is_recorded() {
    let h = World::new().build();
    let a = h
        .call(
            "POST",
            "/channel/live/control",
            Some(TOKEN_A),
            Some(json!({ "subtype": "interrupt" })),
        )
        .await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "subtype_not_declared")
    );
    let body = json!({ "subtype": "set_permission_mode", "request": { "mode": "plan" } });
    let a = h
        .call(
            "POST",
            "/channel/live/control",
            Some(TOKEN_A),
            Some(body.clone()),
        )
        .await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::CONFLICT, "not_live")
    );
    h.live
        .responses
        .lock()
        .unwrap()
        .insert("set_permission_mode".into(), json!({ "ok": true }));
    let a = h
        .call("POST", "/channel/live/control", Some(TOKEN_A), Some(body))
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        a.json(),
        json!({ "subtype": "set_permission_mode", "response": { "ok": true } })
    );
    let (chat, _, request) = h.live.requests.lock().unwrap().last().cloned().unwrap();
    assert_eq!((chat.namespace.as_str(), chat.channel.as_str()), (NS, "a"));
    assert_eq!(request, json!({ "mode": "plan" }));

    let a = h
        .call(
            "PUT",
            "/channel/live/hold",
            Some(TOKEN_A),
            Some(json!({ "hold": true })),
        )
        .await;
    assert_eq!(a.json(), json!({ "hold": true }));
    assert!(h.status.status(&key("a")).live_hold);
    let a = h
        .call(
            "PUT",
            "/channel/live/hold",
            Some(TOKEN_A),
            Some(json!({ "hold": false })),
        )
        .await;
    assert_eq!(a.json(), json!({ "hold": false }));
    assert!(!h.status.status(&key("a")).live_hold);
}

#[tokio::test]
async fn a_body_must_be_an_object_not_its_fields_in_an_array() {
    // serde reads a struct from an array of its fields by position; the API documents only
    // objects (schemathesis sent `[true]` for `{"hold": true}` and got 200).
    let h = World::new().build();
    for (method, path, body) in [
        ("PUT", "/channel/live/hold", json!([true])),
        ("POST", "/runs", json!(["quiz", "p"])),
        ("PUT", "/memory/k", json!([1])),
    ] {
        let a = h
            .call(method, path, Some(TOKEN_A), Some(body.clone()))
            .await;
        assert_eq!(
            (a.status, a.code().as_str()),
            (StatusCode::BAD_REQUEST, "invalid_body"),
            "{method} {path} {body}"
        );
        let message = a.json()["error"]["message"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(message.contains("a JSON object"), "{message}");
    }
}

#[tokio::test]
async fn cards_and_notifications_land_in_the_chats_inbox() {
    let h = World::new().build();
    let a = h
        .call(
            "POST",
            "/cards",
            Some(TOKEN_A),
            Some(json!({ "card": "score", "title": "Quiz done", "data": { "score": 3 } })),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:?}", a.json());
    let card = a.json();
    let id = card["id"].as_str().unwrap();
    assert!(id.starts_with("card-"));
    assert_eq!(card["created"], T0);
    assert_eq!(a.headers["location"], format!("/api/plugin/v1/cards/{id}"));
    let (name, data) = h.writer.maps().pop().unwrap();
    assert_eq!(name, "cogtest-a-inbox");
    let stored: Value = serde_json::from_str(data[id].as_ref().unwrap()).unwrap();
    assert_eq!(stored, card);
    // Read back, only by chat A.
    let a = h
        .call("GET", &format!("/cards/{id}"), Some(TOKEN_A), None)
        .await;
    assert_eq!(a.json(), card);
    assert_eq!(
        h.call("GET", &format!("/cards/{id}"), Some(TOKEN_B), None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    let a = h
        .call(
            "POST",
            "/cards",
            Some(TOKEN_A),
            Some(json!({ "card": "nope", "title": "x" })),
        )
        .await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, "unknown_card")
    );
    let a = h
        .call(
            "POST",
            "/cards",
            Some(TOKEN_A),
            Some(json!({ "card": "score", "title": "" })),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    let big = json!({ "card": "score", "title": "x", "data": { "blob": "y".repeat(70_000) } });
    let a = h.call("POST", "/cards", Some(TOKEN_A), Some(big)).await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large")
    );

    let a = h
        .call(
            "POST",
            "/notifications",
            Some(TOKEN_A),
            Some(json!({ "title": "Synced", "level": "success" })),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED);
    assert_eq!(a.json()["kind"], "notification");
    assert_eq!(a.json()["level"], "success");
    // A notification is not a card.
    let nid = a.json()["id"].as_str().unwrap().to_string();
    assert_eq!(
        h.call("GET", &format!("/cards/{nid}"), Some(TOKEN_A), None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
    let a = h
        .call(
            "POST",
            "/notifications",
            Some(TOKEN_A),
            Some(json!({ "title": "x", "level": "loud" })),
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_full_inbox_drops_its_oldest_entry() {
    let mut w = World::new();
    let mut map = inbox::template(NS, "cogtest-a", PLUGIN, PROJECT, "a", None);
    for i in 0..inbox::MAX_ENTRIES {
        let e = json!({ "id": format!("note-{i:03}"), "kind": "notification", "title": "t",
                        "created": format!("2026-01-01T00:{:02}:{:02}Z", i / 60, i % 60) });
        map.data
            .as_mut()
            .unwrap()
            .insert(format!("note-{i:03}"), e.to_string());
    }
    map.metadata.resource_version = Some("1".into());
    w.maps.push(map);
    let h = w.build();
    let a = h
        .call(
            "POST",
            "/notifications",
            Some(TOKEN_A),
            Some(json!({ "title": "new" })),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED);
    let (_, data) = h.writer.maps().pop().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data["note-000"], None);
}

#[tokio::test]
async fn memory_is_kept_per_plugin_and_project() {
    let h = World::new().build();
    let a = h
        .call("GET", "/memory/last-quiz", Some(TOKEN_A), None)
        .await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::NOT_FOUND, "memory_not_found")
    );
    let value = json!({ "score": 3, "topics": ["rust"] });
    let a = h
        .call(
            "PUT",
            "/memory/last-quiz",
            Some(TOKEN_A),
            Some(json!({ "value": value })),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.json(), json!({ "key": "last-quiz", "value": value }));
    let (name, data) = h.writer.maps().pop().unwrap();
    assert_eq!(name, "memory-cogtest-proj");
    assert_eq!(
        data["last-quiz"].as_deref(),
        Some(value.to_string().as_str())
    );
    // The project's other chat reads it too.
    let a = h
        .call("GET", "/memory/last-quiz", Some(TOKEN_B), None)
        .await;
    assert_eq!(a.json(), json!({ "key": "last-quiz", "value": value }));
    // null is a value.
    let a = h
        .call(
            "PUT",
            "/memory/gone",
            Some(TOKEN_A),
            Some(json!({ "value": null })),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        h.call("GET", "/memory/gone", Some(TOKEN_A), None)
            .await
            .json()["value"],
        Value::Null
    );

    let a = h
        .call("PUT", "/memory/x", Some(TOKEN_A), Some(json!({ "v": 1 })))
        .await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::BAD_REQUEST, "invalid_body")
    );
    let a = h.call("GET", "/memory/..x", Some(TOKEN_A), None).await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::BAD_REQUEST, "invalid_key")
    );
    let a = h
        .call(
            "PUT",
            "/memory/big",
            Some(TOKEN_A),
            Some(json!({ "value": "z".repeat(70_000) })),
        )
        .await;
    assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE);
}

#[tokio::test]
async fn files_are_read_only_within_the_chats_working_tree() {
    let dir = TempDir::new("api-files");
    let tree = dir.path().join("team/repo/trees/a");
    std::fs::create_dir_all(tree.join("src")).unwrap();
    std::fs::write(tree.join("src/lib.rs"), "pub fn f() {}").unwrap();
    std::fs::write(dir.path().join("team/repo/secret"), "not yours").unwrap();
    std::os::unix::fs::symlink("../../secret", tree.join("out")).unwrap();
    std::os::unix::fs::symlink("/etc/hostname", tree.join("abs")).unwrap();
    let fifo = std::ffi::CString::new(tree.join("pipe").as_os_str().as_encoded_bytes()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
    std::fs::write(tree.join("big"), vec![0u8; 2048]).unwrap();

    let mut w = World::new();
    w.config.worktree_root = Some(dir.path().to_path_buf());
    w.config.max_file_bytes = 1024;
    // Chat b is a thread of a, without a tree of its own: it reads a's.
    w.channels[1].spec.kind = model::resources::ChannelKind::Thread;
    w.channels[1].spec.parent = Some("a".into());
    w.channels[1].spec.working_tree = None;
    let h = w.build();

    let a = h
        .call("GET", "/files/src/lib.rs", Some(TOKEN_A), None)
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.bytes, b"pub fn f() {}");
    assert_eq!(a.headers["content-type"], "application/octet-stream");
    assert_eq!(
        h.call("GET", "/files/src/lib.rs", Some(TOKEN_B), None)
            .await
            .bytes,
        b"pub fn f() {}"
    );

    for (path, status, code) in [
        ("/files/../secret", StatusCode::BAD_REQUEST, "invalid_path"),
        (
            "/files/src/../../secret",
            StatusCode::BAD_REQUEST,
            "invalid_path",
        ),
        (
            "/files/..%2F..%2Fsecret",
            StatusCode::BAD_REQUEST,
            "invalid_path",
        ),
        (
            "/files//etc/passwd",
            StatusCode::BAD_REQUEST,
            "invalid_path",
        ),
        (
            "/files/%2Fetc%2Fpasswd",
            StatusCode::BAD_REQUEST,
            "invalid_path",
        ),
        ("/files/out", StatusCode::FORBIDDEN, "outside_working_tree"),
        ("/files/abs", StatusCode::FORBIDDEN, "outside_working_tree"),
        (
            "/files/pipe",
            StatusCode::UNPROCESSABLE_ENTITY,
            "not_a_regular_file",
        ),
        (
            "/files/src",
            StatusCode::UNPROCESSABLE_ENTITY,
            "not_a_regular_file",
        ),
        (
            "/files/big",
            StatusCode::PAYLOAD_TOO_LARGE,
            "file_too_large",
        ),
        ("/files/missing", StatusCode::NOT_FOUND, "file_not_found"),
    ] {
        let a = h.call("GET", path, Some(TOKEN_A), None).await;
        assert_eq!((a.status, a.code().as_str()), (status, code), "{path}");
    }

    // Without a root, no tree is served.
    let h = World::new().build();
    let a = h
        .call("GET", "/files/src/lib.rs", Some(TOKEN_A), None)
        .await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::NOT_FOUND, "no_working_tree")
    );
}

#[tokio::test]
async fn get_channel_answers_the_chat_and_its_resolved_settings() {
    let h = World::new().build();
    let a = h.call("GET", "/channel", Some(TOKEN_A), None).await;
    assert_eq!(a.status, StatusCode::OK);
    let body = a.json();
    assert_eq!(body["id"], "a");
    assert_eq!(body["kind"], "channel");
    assert_eq!(body["project"], PROJECT);
    assert_eq!(body["app"], "desktop");
    assert!(body.get("parent").is_none());
    // Default, global, project; a refused project value leaves the default.
    assert_eq!(body["settings"]["question_count"], 8);
    assert_eq!(body["settings"]["pass_mark"], 0.5);
    assert_eq!(body["settings"]["language"], "en");
    assert_eq!(body["settings"]["sync_all"], false);
}

/// Waits (a little) for the background activity write of accepted work.
async fn activity_of(h: &Harness, chat: &str) -> Option<String> {
    for _ in 0..50 {
        if let Some(at) = h.status.status(&key(chat)).last_activity {
            return Some(at);
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    None
}

#[tokio::test]
async fn only_accepted_work_keeps_the_container_up() {
    // Polling (reads) and refused calls record no activity: before, every call that got past
    // the token (a 403, a 404, GET /channel) refreshed lastActivity, so a plugin polling its
    // own API never went idle.
    let h = World::new()
        .approve(&[Capability::UiComposerSwitch])
        .build();
    let refused = [
        ("GET", "/channel", Some(TOKEN_A), None, StatusCode::OK),
        (
            "GET",
            "/runs/nope",
            Some(TOKEN_A),
            None,
            StatusCode::FORBIDDEN,
        ),
        (
            "GET",
            "/memory/k",
            Some(TOKEN_A),
            None,
            StatusCode::FORBIDDEN,
        ),
        (
            "PUT",
            "/composer/switches/nope",
            Some(TOKEN_A),
            Some(json!({ "on": true })),
            StatusCode::NOT_FOUND,
        ),
        (
            "PUT",
            "/composer/switches/sync",
            Some("wrong"),
            Some(json!({ "on": true })),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "PUT",
            "/composer/switches/sync",
            Some(TOKEN_A),
            Some(json!({ "on": "yes" })),
            StatusCode::BAD_REQUEST,
        ),
    ];
    for (method, path, token, body, want) in refused {
        let a = h.call(method, path, token, body).await;
        assert_eq!(a.status, want, "{method} {path}: {:?}", a.bytes);
    }
    assert_eq!(
        activity_of(&h, "a").await,
        None,
        "{:?}",
        h.status.of("last_activity")
    );
    // Accepted work does.
    let a = h
        .call(
            "PUT",
            "/composer/switches/sync",
            Some(TOKEN_A),
            Some(json!({ "on": true })),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(activity_of(&h, "a").await.is_some());
    assert_eq!(activity_of(&h, "b").await, None);
}

#[tokio::test]
async fn every_error_has_the_one_shape() {
    let h = World::new().build();
    let a = h.call("GET", "/nope", Some(TOKEN_A), None).await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    let a = h.call("GET", "//somewhere/else", None, None).await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    let a = h.call("PATCH", "/channel", Some(TOKEN_A), None).await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
    );
    let huge = json!({ "agent": "quiz", "prompt": "p".repeat(2 * 1024 * 1024) });
    let a = h.call("POST", "/runs", Some(TOKEN_A), Some(huge)).await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::PAYLOAD_TOO_LARGE, "body_too_large")
    );
    let req = Request::builder()
        .method("POST")
        .uri("/api/plugin/v1/runs")
        .header("authorization", format!("Bearer {TOKEN_A}"))
        .body(Body::from("{not json"))
        .unwrap();
    let a = h.send(req).await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::BAD_REQUEST, "invalid_body")
    );
    assert!(
        a.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("line 1")
    );

    // A write that fails is a 503, never a panic.
    h.api_down(true);
    let a = h
        .call(
            "POST",
            "/runs",
            Some(TOKEN_A),
            Some(json!({ "agent": "quiz", "prompt": "p" })),
        )
        .await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
    );
    // ...and a run that was not made does not count against the quota.
    h.api_down(false);
    let a = h
        .call(
            "POST",
            "/runs",
            Some(TOKEN_A),
            Some(json!({ "agent": "quiz", "prompt": "p" })),
        )
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED);

    // Health answers without a token.
    let a = h.call("GET", "//healthz", None, None).await;
    assert_eq!(a.status, StatusCode::OK);
}

#[tokio::test]
async fn requests_are_counted_by_route_template_and_status() {
    let h = World::new().build();
    h.call("GET", "/runs/abc", Some(TOKEN_A), None).await;
    h.call("GET", "/runs/def", Some(TOKEN_A), None).await;
    h.call("GET", "/nope", Some(TOKEN_A), None).await;
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register("requests", "", h.requests.requests.clone());
    let text = runtime::metrics::encode(&registry);
    assert!(
        text.contains(
            r#"requests_total{route="/api/plugin/v1/runs/{run_id}",method="GET",status="404"} 2"#
        ),
        "{text}"
    );
    assert!(text.contains(r#"route="unmatched""#), "{text}");
}
