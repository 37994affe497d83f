//! Settings → Plugins through the host API: the view of a project's plugins, an edit checked
//! against the manifest before it is written with the caller's own token, the cluster's
//! refusal passed on, and a trust of the version read.

use axum::http::StatusCode;
use serde_json::json;

use super::fixtures::*;
use crate::person::Written;

const VIEW: &str = "/projects/proj/plugins";

#[tokio::test]
async fn the_view_has_each_plugins_schema_entries_and_what_it_sees() {
    let w = World::new().await;
    let a = w.send("GET", VIEW, Some(TOKEN), "").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(a.json["project"]["trust"], "Trusted");
    let hash = a.json["project"]["hash"].as_str().unwrap();
    assert!(hash.starts_with("sha256:"), "{hash}");
    let echo = &a.json["plugins"][0];
    assert_eq!(echo["plugin"], "echo");
    assert_eq!(echo["settings"]["verbose"]["type"], "boolean");
    assert_eq!(echo["project"], json!({ "enabled": true }));
    assert_eq!(echo["enabled"], true);
    assert_eq!(echo["effective"], json!({ "verbose": false }));
    let actions: Vec<&str> = echo["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["ping", "tick"]);
    let a = w
        .send("GET", "/projects/nope/plugins", Some(TOKEN), "")
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::NOT_FOUND, "project_not_found")
    );
}

#[tokio::test]
async fn an_edit_is_checked_then_written_as_the_caller() {
    let w = World::new().await;
    let edit = r#"{"settings": {"verbose": true}, "schedules": {"tick": {"enabled": false}}}"#;
    let a = w
        .send("PATCH", &format!("{VIEW}/echo"), Some(TOKEN), edit)
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(
        w.person.written.lock().unwrap().clone(),
        [Written::Project {
            token: TOKEN.into(),
            namespace: NS.into(),
            project: "proj".into(),
            patch: json!({ "spec": { "plugins": { "echo": {
                "settings": { "verbose": true },
                "schedules": { "tick": { "enabled": false } },
            } } } }),
        }]
    );
    // Refused before anything is written, naming each field and why.
    let bad = r#"{"settings": {"verbose": "yes", "nope": 1}, "schedules": {"tick": {"type": "cron", "schedule": "soon"}}}"#;
    let a = w
        .send("PATCH", &format!("{VIEW}/echo"), Some(TOKEN), bad)
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::BAD_REQUEST, "invalid_body")
    );
    let message = a.json["error"]["message"].as_str().unwrap();
    for field in ["settings.verbose:", "settings.nope:", "schedules.tick:"] {
        assert!(message.contains(field), "{field} in {message}");
    }
    let a = w
        .send("PATCH", &format!("{VIEW}/echo"), Some(TOKEN), "{}")
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST, "an edit of nothing");
    let a = w
        .send("PATCH", &format!("{VIEW}/ghost"), Some(TOKEN), edit)
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::NOT_FOUND, "plugin_not_found")
    );
    assert_eq!(w.person.written.lock().unwrap().len(), 1);

    // The global entry goes to HostConfig's defaults.
    let a = w
        .send(
            "PATCH",
            "//global/plugins/echo",
            Some(TOKEN),
            r#"{"enabled": false}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(
        w.person.written.lock().unwrap().last().cloned().unwrap(),
        Written::HostConfig {
            token: TOKEN.into(),
            patch: json!({ "spec": { "plugins": { "defaults": { "echo": { "enabled": false } } } } }),
        }
    );
}

#[tokio::test]
async fn the_clusters_refusal_is_the_answer_and_a_trust_names_the_version_read() {
    let w = World::new().await;
    *w.person.refuse.lock().unwrap() = Some((
        403,
        "projects.plugins.loop.dev \"proj\" is forbidden: User \"ana\" cannot patch resource \"projects\"".into(),
    ));
    let a = w
        .send(
            "PATCH",
            &format!("{VIEW}/echo"),
            Some(TOKEN),
            r#"{"enabled": false}"#,
        )
        .await;
    assert_eq!((a.status, a.code()), (StatusCode::FORBIDDEN, "forbidden"));
    assert!(
        a.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cannot patch resource \"projects\""),
        "{}",
        a.json
    );
    *w.person.refuse.lock().unwrap() = None;

    let a = w
        .send(
            "POST",
            "/projects/proj/trust",
            Some(TOKEN),
            r#"{"hash": "latest"}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    let hash = w.send("GET", VIEW, Some(TOKEN), "").await.json["project"]["hash"].clone();
    let a = w
        .send(
            "POST",
            "/projects/proj/trust",
            Some(TOKEN),
            &json!({ "hash": hash }).to_string(),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(
        w.person.written.lock().unwrap().clone(),
        [Written::Trust {
            token: TOKEN.into(),
            namespace: NS.into(),
            project: "proj".into(),
            hash: hash.as_str().unwrap().into(),
        }]
    );
}

pub(super) fn cronjob(chat: &str, action: &str) -> k8s_openapi::api::batch::v1::CronJob {
    use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec};
    use model::names::{
        LABEL_ACTION, LABEL_CHANNEL, LABEL_COMPONENT, LABEL_MANAGED_BY, LABEL_PLUGIN, MANAGED_BY,
    };
    {
        let mut c = CronJob {
            spec: CronJobSpec {
                schedule: "*/5 * * * *".into(),
                ..Default::default()
            },
            ..Default::default()
        };
        c.metadata.name = Some(format!("echo-{chat}-{action}"));
        c.metadata.namespace = Some(NS.into());
        c.metadata.labels = Some(
            [
                (LABEL_MANAGED_BY, MANAGED_BY),
                (LABEL_COMPONENT, "schedule"),
                (LABEL_CHANNEL, chat),
                (LABEL_PLUGIN, "echo"),
                (LABEL_ACTION, action),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        );
        c
    }
}

/// The Tasks panel's list: the chat's CronJobs as tasks, each with whose entry makes it.
#[tokio::test]
async fn the_tasks_are_the_chats_cronjobs_with_whose_entry_makes_each() {
    let w = World::new().await;
    *w.tasks.0.lock().unwrap() = vec![cronjob("general", "tick"), cronjob("random", "tick")];
    let a = w
        .send("GET", "/channels/general/tasks", Some(TOKEN), "")
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    let tasks = a.json["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "only the chat's: {}", a.json);
    assert_eq!(tasks[0]["name"], "echo-general-tick");
    assert_eq!(tasks[0]["enabled"], true);
    assert!(tasks[0]["nextRun"].is_string(), "{}", a.json);
    // No entry asks for it in this world (the project's entry has no schedules).
    assert_eq!(tasks[0]["deletable"], false);
}

/// A task's own options: checked (each refusal names its field), written on the chat's own
/// CronJob by the API server once RBAC let the caller (all off removes them; the 403 of a
/// caller without `update channels/tasks` is the spec's test), and read back in the list.
#[tokio::test]
async fn a_tasks_options_are_checked_then_written_on_its_cronjob() {
    use model::task::ANNOTATION_TASK_OPTIONS;
    let w = World::new().await;
    *w.tasks.0.lock().unwrap() = vec![cronjob("general", "tick"), cronjob("random", "tick")];
    let put = |task: &str, body: &str| {
        let path = format!("/channels/general/tasks/{task}/options");
        let body = body.to_string();
        let w = &w;
        async move { w.send("PUT", &path, Some(TOKEN), &body).await }
    };
    let all = r#"{"worktree": true, "updateBeforeRun": true, "autoDeleteSeconds": 600}"#;
    let a = put("echo-general-tick", all).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(a.json["options"]["autoDeleteSeconds"], 600);
    let a = put("echo-general-tick", "{}").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    let value = model::task::TaskOptions::from_json(all).unwrap().to_json();
    let patch = |v: serde_json::Value| {
        (
            NS.to_string(),
            "echo-general-tick".to_string(),
            json!({"metadata": {"annotations": {ANNOTATION_TASK_OPTIONS: v}}}),
        )
    };
    assert_eq!(
        w.tasks.1.lock().unwrap().clone(),
        [patch(json!(value)), patch(serde_json::Value::Null)]
    );
    // Refused before anything is written, naming the field.
    for (body, field) in [
        (
            r#"{"updateBeforeRun": true}"#,
            "updateBeforeRun: needs worktree",
        ),
        (
            r#"{"worktree": true, "autoDeleteSeconds": 0}"#,
            "autoDeleteSeconds: 0",
        ),
        (r#"{"worktree": true, "rebase": true}"#, "rebase"),
        (r#"{"worktree": "yes"}"#, "worktree"),
    ] {
        let a = put("echo-general-tick", body).await;
        assert_eq!(
            (a.status, a.code()),
            (StatusCode::BAD_REQUEST, "invalid_body"),
            "{body}"
        );
        assert!(a.message().contains(field), "{body}: {}", a.json);
    }
    // Another chat's task, or none: not found here.
    for task in ["echo-random-tick", "nope"] {
        let a = put(task, "{}").await;
        assert_eq!(a.status, StatusCode::NOT_FOUND, "{task}: {}", a.json);
    }
    assert_eq!(w.tasks.1.lock().unwrap().len(), 2);
    // Read back in the list; an unreadable annotation says why and counts as all off.
    let mut tasks = vec![cronjob("general", "tick")];
    tasks[0].metadata.annotations = Some([(ANNOTATION_TASK_OPTIONS.to_string(), value)].into());
    *w.tasks.0.lock().unwrap() = tasks.clone();
    let a = w
        .send("GET", "/channels/general/tasks", Some(TOKEN), "")
        .await;
    assert_eq!(
        a.json["tasks"][0]["options"]["worktree"], true,
        "{}",
        a.json
    );
    tasks[0].metadata.annotations =
        Some([(ANNOTATION_TASK_OPTIONS.to_string(), "{".to_string())].into());
    *w.tasks.0.lock().unwrap() = tasks;
    let a = w
        .send("GET", "/channels/general/tasks", Some(TOKEN), "")
        .await;
    assert_eq!(
        a.json["tasks"][0]["options"],
        json!({"worktree": false, "updateBeforeRun": false})
    );
    assert!(
        a.json["tasks"][0]["optionsProblem"]
            .as_str()
            .unwrap()
            .starts_with("not task options"),
        "{}",
        a.json
    );
}
