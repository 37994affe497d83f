//! The routes the console needs, through the router: the namespace's chats with their
//! instances and unread counts, a chat's agent runs, a plugin's effective settings, the Stop
//! button, and `plugins.changed` as a stream.

use std::time::Duration;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde_json::json;
use tower::ServiceExt;

use super::fixtures::*;
use model::resources::{
    AgentRun, AgentRunPhase, AgentRunSpec, AgentRunStatus, InstancePhase, PluginInstanceStatus,
};

#[tokio::test]
async fn the_chats_list_their_instances_and_unread_cards() {
    let mut w = World::new().await;
    let mut running = instance("general");
    running.status = Some(PluginInstanceStatus {
        phase: Some(InstancePhase::Running),
        ..Default::default()
    });
    apply(&mut w.writers.instances, running);
    apply(
        &mut w.writers.config_maps,
        inbox("general", &[("card-1", "2026-12-05T09:00:00Z")]),
    );
    let a = w.send("GET", "/chats", Some(TOKEN), "").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    let chats = a.json["chats"].as_array().unwrap();
    let names: Vec<&str> = chats.iter().map(|c| c["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["general", "general-h", "general-t1"]);
    assert_eq!(chats[0]["unread"], 1);
    assert_eq!(
        chats[0]["plugins"],
        json!([{ "plugin": "echo", "instance": "echo-general", "phase": "Running", "breaker": "Closed" }])
    );
    assert_eq!(chats[1]["hidden"], true);
    assert_eq!(chats[2]["parent"], "general");
    assert_eq!(chats[2]["plugins"][0]["phase"], "Stopped");

    let a = w.send("GET", "/chats", Some(LIMITED), "").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert!(
        a.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("list channels"),
        "{}",
        a.json
    );
}

#[tokio::test]
async fn a_chats_runs_are_listed_newest_first() {
    let mut w = World::new().await;
    for (id, chat, created, phase) in [
        (
            "run-1",
            "general",
            "2026-12-05T09:00:00Z",
            Some(AgentRunPhase::Succeeded),
        ),
        ("run-2", "general", "2026-12-05T10:00:00Z", None),
        ("run-3", "general-t1", "2026-12-05T11:00:00Z", None),
    ] {
        let mut run = AgentRun::new(
            id,
            AgentRunSpec {
                plugin: "echo".into(),
                channel: chat.into(),
                thread: format!("{chat}-plugin-echo"),
                agent: "say".into(),
                read_only: true,
                tools: vec!["echo".into()],
                prompt: "hi".into(),
            },
        );
        run.metadata.namespace = Some(NS.into());
        run.metadata.creation_timestamp = Some(Time(created.parse().unwrap()));
        run.status = phase.map(|p| AgentRunStatus {
            phase: Some(p),
            result: Some("said hi".into()),
            ..Default::default()
        });
        apply(&mut w.writers.runs, run);
    }
    let a = w
        .send("GET", "/channels/general/runs", Some(TOKEN), "")
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    let runs: Vec<(&str, &str)> = a.json["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["id"].as_str().unwrap(), r["phase"].as_str().unwrap()))
        .collect();
    assert_eq!(runs, [("run-2", "Queued"), ("run-1", "Succeeded")]);
    assert_eq!(a.json["runs"][1]["result"], "said hi");
    let a = w
        .send("GET", "/channels/nowhere/runs", Some(TOKEN), "")
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::NOT_FOUND, "channel_not_found")
    );
}

#[tokio::test]
async fn settings_are_the_plugins_effective_ones_and_need_the_plugin_enabled() {
    let w = World::new().await;
    let a = w
        .send("GET", &at("general", "/settings"), Some(TOKEN), "")
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(a.json, json!({ "settings": { "verbose": false } }));
    let a = w
        .send("GET", &at("general-h", "/settings"), Some(TOKEN), "")
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::CONFLICT, "plugin_not_enabled")
    );
    let a = w
        .send("GET", &at("general", "/settings"), Some(LIMITED), "")
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn a_stop_records_its_time_on_the_instance_as_the_cli_does() {
    let w = World::new().await;
    let a = w
        .send("POST", &at("general", "/stop"), Some(TOKEN), "")
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(a.json["instance"], "echo-general");
    let written = w.recorded.of("stopped_at");
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].0, key("general"));
    assert_eq!(written[0].1, a.json["stoppedAt"]);
    // Seconds, as `loop-plugins plugin stop` writes them.
    let at_: jiff::Timestamp = a.json["stoppedAt"].as_str().unwrap().parse().unwrap();
    assert_eq!(at_.subsec_nanosecond(), 0);
    // No plugin was called.
    assert!(w.plugin.seen("/").is_empty());

    let a = w
        .send("POST", &at("general-h", "/stop"), Some(TOKEN), "")
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::NOT_FOUND, "plugin_not_found")
    );
    let a = w
        .send("POST", &at("general", "/stop"), Some(LIMITED), "")
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
    assert_eq!(w.recorded.of("stopped_at").len(), 1);
}

#[tokio::test]
async fn plugins_changed_streams_instances_made_moved_and_gone_plugins_removed_and_config_writes() {
    let mut w = World::new().await;
    let request = Request::builder()
        .uri(format!("/api/host/v1/namespaces/{NS}/plugins/changes"))
        .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"))
        .body(Body::empty())
        .unwrap();
    let response = crate::host_api::router(w.state.clone())
        .oneshot(request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(
        response.headers()[header::CONTENT_TYPE],
        "text/event-stream"
    );
    let mut body = response.into_body().into_data_stream();
    let mut text = String::new();
    let mut read_until = async |text: &mut String, needle: &str| {
        while !text.contains(needle) {
            let chunk = tokio::time::timeout(Duration::from_secs(5), body.next())
                .await
                .unwrap_or_else(|_| panic!("no {needle:?} in {text}"))
                .expect("the stream goes on")
                .unwrap();
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    read_until(&mut text, ": following plugins.changed").await;

    let changed = w.state.index().changed.clone();
    let mut moved = instance("general");
    moved.status = Some(PluginInstanceStatus {
        phase: Some(InstancePhase::Running),
        ..Default::default()
    });
    apply(&mut w.writers.instances, moved);
    ::index::changed::bump(&changed.instances);
    read_until(&mut text, "\"change\":\"instance\"").await;
    assert!(text.contains("event: plugins.changed"), "{text}");
    assert!(text.contains("\"phase\":\"Running\""), "{text}");

    w.writers
        .instances
        .apply_watcher_event(&kube::runtime::watcher::Event::Delete(instance(
            "general-t1",
        )));
    ::index::changed::bump(&changed.instances);
    read_until(&mut text, "\"change\":\"disabled\"").await;
    assert!(text.contains("\"chat\":\"general-t1\""), "{text}");

    let plugin = w.state.index().plugin("echo").unwrap();
    w.writers
        .plugins
        .apply_watcher_event(&kube::runtime::watcher::Event::Delete((*plugin).clone()));
    ::index::changed::bump(&changed.plugins);
    read_until(&mut text, "\"change\":\"removed\"").await;
    assert!(text.contains("\"plugin\":\"echo\""), "{text}");

    // A settings-only edit of the project's config moves no instance, and is told; so is a
    // trust, and a write of the global config. A status write (same generation) is not.
    let project = w.state.index().projects.state()[0].clone();
    let mut status_only = (*project).clone();
    status_only.status = Some(Default::default());
    apply(&mut w.writers.projects, status_only);
    ::index::changed::bump(&changed.configs);
    let mut edited = (*project).clone();
    edited.metadata.generation = Some(edited.metadata.generation.unwrap_or_default() + 1);
    apply(&mut w.writers.projects, edited);
    ::index::changed::bump(&changed.configs);
    read_until(&mut text, "\"scope\":\"project\"").await;
    assert!(text.contains("\"project\":\"proj\""), "{text}");
    assert_eq!(text.matches("\"change\":\"config\"").count(), 1, "{text}");
    w.writers
        .project_trusts
        .apply_watcher_event(&kube::runtime::watcher::Event::Delete(
            (*w.state.index().project_trusts.state()[0]).clone(),
        ));
    ::index::changed::bump(&changed.configs);
    read_until(&mut text, "\"change\":\"trusted\"").await;
    let mut host = (*w.state.index().host.state()[0]).clone();
    host.metadata.generation = Some(host.metadata.generation.unwrap_or_default() + 1);
    apply(&mut w.writers.host, host);
    ::index::changed::bump(&changed.configs);
    read_until(&mut text, "\"scope\":\"global\"").await;

    let a = w.send("GET", "/plugins/changes", Some(LIMITED), "").await;
    assert_eq!(a.status, StatusCode::FORBIDDEN);
}
