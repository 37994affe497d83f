//! Upgrade and remove through the host API: each refusal made before any image is pulled or
//! anything written, and the removal written as the caller. The review and the upgrade
//! against a real registry are e2e's (`tests/e2e/console.rs`, `plugins_upgraded_...`).

use axum::http::StatusCode;
use serde_json::json;

use super::fixtures::*;
use crate::person::Written;

const ECHO: &str = "//global/plugins/echo";

fn pinned() -> String {
    format!("r.test/echo:0.2.0@sha256:{}", "b".repeat(64))
}

#[tokio::test]
async fn each_refusal_comes_before_a_pull_or_a_write() {
    let w = World::new().await;
    // RBAC first: a person who may not update plugins cannot make the server pull.
    let a = w
        .send("POST", &format!("{ECHO}/review"), Some(LIMITED), "")
        .await;
    assert_eq!((a.status, a.code()), (StatusCode::FORBIDDEN, "forbidden"));
    assert!(a.message().contains("update plugins"), "{}", a.json);
    let a = w.send("DELETE", ECHO, Some(LIMITED), "").await;
    assert_eq!((a.status, a.code()), (StatusCode::FORBIDDEN, "forbidden"));
    // No such plugin.
    let a = w
        .send("POST", "//global/plugins/nope/review", Some(TOKEN), "{}")
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::NOT_FOUND, "plugin_not_found")
    );
    // The body, each field named.
    let cases = [
        (
            json!({ "image": "r.test/echo:0.2.0", "resourceVersion": "1" }),
            "image: pinned by digest",
        ),
        (
            json!({ "image": "not a reference", "resourceVersion": "1" }),
            "image:",
        ),
        (
            json!({ "image": pinned(), "resourceVersion": "1", "approve": vec!["schedule"; 65] }),
            "approve: at most 64",
        ),
        (json!({ "image": pinned() }), "resourceVersion"),
        (
            json!({ "image": pinned(), "resourceVersion": "1", "also": 1 }),
            "also",
        ),
    ];
    for (body, says) in cases {
        let a = w.send("PUT", ECHO, Some(TOKEN), &body.to_string()).await;
        assert_eq!(
            (a.status, a.code()),
            (StatusCode::BAD_REQUEST, "invalid_body"),
            "{body}: {}",
            a.json
        );
        assert!(a.message().contains(says), "{says} in {}", a.json);
    }
    // Reviewed against another version of the Plugin: review again.
    let stale = json!({ "image": pinned(), "resourceVersion": "0" }).to_string();
    let a = w.send("PUT", ECHO, Some(TOKEN), &stale).await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::CONFLICT, "config_changed")
    );
    assert!(a.message().contains("review again"), "{}", a.json);
    // The installed image names no tag: the image to upgrade to must be given.
    let a = w
        .send("POST", &format!("{ECHO}/review"), Some(TOKEN), "")
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::BAD_REQUEST, "invalid_body")
    );
    assert!(a.message().contains("names no tag"), "{}", a.json);
    // A server without a cluster pulls nothing, and says so.
    let next = json!({ "image": "r.test/echo:0.2.0" }).to_string();
    let a = w
        .send("POST", &format!("{ECHO}/review"), Some(TOKEN), &next)
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        "{}",
        a.json
    );
    assert!(w.person.written.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_removal_is_written_as_the_caller_and_the_clusters_refusal_passed_on() {
    let w = World::new().await;
    let a = w.send("DELETE", ECHO, Some(TOKEN), "").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert!(
        a.json["note"].as_str().unwrap().contains("kept"),
        "{}",
        a.json
    );
    assert_eq!(
        w.person.written.lock().unwrap().clone(),
        [Written::PluginDeleted {
            token: TOKEN.into(),
            name: "echo".into(),
        }]
    );
    *w.person.refuse.lock().unwrap() = Some((
        403,
        "plugins.plugins.loop.dev \"echo\" is forbidden: cannot delete".into(),
    ));
    let a = w.send("DELETE", ECHO, Some(TOKEN), "").await;
    assert_eq!((a.status, a.code()), (StatusCode::FORBIDDEN, "forbidden"));
    assert!(a.message().contains("cannot delete"), "{}", a.json);
}
