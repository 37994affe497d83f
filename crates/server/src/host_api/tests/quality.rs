//! A chat's quality scan through the router: the app posts one and reads it back, what is
//! kept of a large one, the refusals (each naming the field), RBAC of its own, and a write
//! that fails.

use std::sync::Arc;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::fixtures::*;
use crate::quality::scan::{KEPT_FUNCTIONS, MAX_FUNCTIONS};
use crate::quality::{MemoryScanWriter, Quality};

const AT: &str = "/channels/general/quality";

fn names(a: &Answer) -> Vec<String> {
    a.json["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn the_app_posts_a_scan_and_reads_it_back_worst_first() {
    let w = World::new().await;
    let a = w.send("GET", AT, Some(TOKEN), "").await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::NOT_FOUND, "scan_not_found"),
        "{}",
        a.json
    );

    let a = w
        .send("PUT", AT, Some(TOKEN), &scan_body(25).to_string())
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(a.json["chat"], "general");
    assert_eq!(a.json["commit"], "3f2c1a9e");
    assert_eq!(
        a.json["totals"],
        json!({"files": 3, "functions": 35, "lines": 1234})
    );
    assert_eq!(
        (&a.json["listed"], &a.json["kept"]),
        (&json!(25), &json!(25))
    );
    let scanned_at: jiff::Timestamp = a.json["scanned_at"].as_str().unwrap().parse().unwrap();

    let got = w.send("GET", AT, Some(TOKEN), "").await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.json);
    let want: Vec<String> = (0..25).rev().map(|i| format!("f{i}")).collect();
    assert_eq!(names(&got), want);
    assert_eq!(got.json["scanned_at"], json!(scanned_at));
    assert_eq!(got.json["listed"], 25);
    // Another chat's scan is its own: none yet.
    let other = w
        .send("GET", "/channels/general-t1/quality", Some(TOKEN), "")
        .await;
    assert_eq!(other.code(), "scan_not_found");

    // A new scan replaces the last, without a commit this time.
    let mut next = scan_body(2);
    next.as_object_mut().unwrap().remove("commit");
    let a = w.send("PUT", AT, Some(TOKEN), &next.to_string()).await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert!(a.json.get("commit").is_none(), "{}", a.json);
    let got = w.send("GET", AT, Some(TOKEN), "").await;
    assert_eq!(names(&got), ["f1", "f0"]);
    assert!(got.json.get("commit").is_none(), "{}", got.json);
}

#[tokio::test]
async fn a_scan_of_the_most_functions_keeps_its_worst_and_says_how_many() {
    let w = World::new().await;
    let a = w
        .send(
            "PUT",
            AT,
            Some(TOKEN),
            &scan_body(MAX_FUNCTIONS).to_string(),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(a.json["listed"], MAX_FUNCTIONS);
    assert_eq!(a.json["kept"], KEPT_FUNCTIONS);
    let got = w.send("GET", AT, Some(TOKEN), "").await;
    let kept = names(&got);
    assert_eq!(kept.len(), KEPT_FUNCTIONS);
    assert_eq!(kept[0], format!("f{}", MAX_FUNCTIONS - 1));
    // Stored well below the 1 MiB a ConfigMap holds.
    assert!(got.bytes.len() < 900 * 1024, "{}", got.bytes.len());

    let a = w
        .send(
            "PUT",
            AT,
            Some(TOKEN),
            &scan_body(MAX_FUNCTIONS + 1).to_string(),
        )
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::BAD_REQUEST, "invalid_body")
    );
    assert!(
        a.json["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("functions: "),
        "{}",
        a.json
    );
}

#[tokio::test]
async fn each_refusal_names_the_field() {
    let w = World::new().await;
    let edit = |f: &dyn Fn(&mut Value)| {
        let mut b = scan_body(2);
        f(&mut b);
        b.to_string()
    };
    let cases: Vec<(String, StatusCode, &str, &str)> = vec![
        (
            edit(&|b| b["functions"][1]["line"] = json!(0)),
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "functions[1].line: must be 1 or more",
        ),
        (
            edit(&|b| b["functions"][0]["file"] = json!("../../etc/passwd")),
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "functions[0].file: ",
        ),
        (
            edit(&|b| b["functions"][0]["score"] = json!("bad")),
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "functions[0].score: invalid type",
        ),
        (
            edit(&|b| b["totals"]["functions"] = json!(1)),
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "totals.functions: is 1, fewer than the 2 functions listed",
        ),
        (
            edit(&|b| b["commit"] = json!("c".repeat(129))),
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "commit: has 129 characters",
        ),
        (
            "[]".to_string(),
            StatusCode::BAD_REQUEST,
            "invalid_body",
            "the body: must be a JSON object",
        ),
        (
            format!(r#"{{"x": "{}"}}"#, "y".repeat(5 << 20)),
            StatusCode::PAYLOAD_TOO_LARGE,
            "body_too_large",
            "",
        ),
    ];
    for (body, status, code, says) in cases {
        let a = w.send("PUT", AT, Some(TOKEN), &body).await;
        let message = a.json["error"]["message"].as_str().unwrap_or("");
        assert_eq!((a.status, a.code()), (status, code), "{says}: {}", a.json);
        assert!(
            message.starts_with(says),
            "{message:?} does not start {says:?}"
        );
    }
    // Nothing was stored.
    let a = w.send("GET", AT, Some(TOKEN), "").await;
    assert_eq!(a.code(), "scan_not_found");
}

#[tokio::test]
async fn callers_need_their_grant_and_a_chat_that_exists() {
    let w = World::new().await;
    let body = scan_body(1).to_string();
    for (method, token, status, code) in [
        ("PUT", None, StatusCode::UNAUTHORIZED, "missing_token"),
        ("PUT", Some(LIMITED), StatusCode::FORBIDDEN, "forbidden"),
        ("GET", Some(LIMITED), StatusCode::FORBIDDEN, "forbidden"),
    ] {
        let a = w.send(method, AT, token, &body).await;
        assert_eq!((a.status, a.code()), (status, code), "{method}: {}", a.json);
    }
    let a = w.send("PUT", AT, Some(LIMITED), &body).await;
    assert!(
        a.json["error"]["message"]
            .as_str()
            .unwrap()
            .contains("update channels/quality"),
        "{}",
        a.json
    );
    for method in ["PUT", "GET"] {
        let a = w
            .send(method, "/channels/nowhere/quality", Some(TOKEN), &body)
            .await;
        assert_eq!(
            (a.status, a.code()),
            (StatusCode::NOT_FOUND, "channel_not_found"),
            "{method}"
        );
    }
}

#[tokio::test]
async fn a_scan_the_cluster_does_not_take_is_a_503_and_the_last_one_stays() {
    let mut w = World::new().await;
    apply(&mut w.writers.config_maps, scan_map("general", 3));
    let writer = Arc::new(MemoryScanWriter::default());
    w.state.quality = Arc::new(Quality::new(w.state.index().clone(), writer.clone()));
    writer.fail(true);
    let a = w
        .send("PUT", AT, Some(TOKEN), &scan_body(5).to_string())
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
        "{}",
        a.json
    );
    assert_eq!(a.headers["retry-after"], "1");
    let got = w.send("GET", AT, Some(TOKEN), "").await;
    assert_eq!(names(&got), ["f2", "f1", "f0"]);

    writer.fail(false);
    let a = w
        .send("PUT", AT, Some(TOKEN), &scan_body(5).to_string())
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    // What this process wrote is read before the index shows it.
    let got = w.send("GET", AT, Some(TOKEN), "").await;
    assert_eq!(names(&got).len(), 5);
    let written = writer.written();
    assert_eq!(written.len(), 1);
    let map = &written[0];
    assert_eq!(map.metadata.name.as_deref(), Some("general-quality"));
    assert_eq!(
        map.metadata.owner_references.as_ref().unwrap()[0].kind,
        "Channel"
    );
}

#[tokio::test]
async fn a_stored_scan_is_sent_as_quality_scanned_to_the_plugins_subscribed() {
    let mut w = World::new().await;
    w.start("general", "uid-g");
    let a = w
        .send("PUT", AT, Some(TOKEN), &scan_body(4).to_string())
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(
        a.json["event"],
        json!({
            "type": "quality.scanned",
            "deliveries": [{"plugin": "echo", "chat": "general", "start": false,
                            "delivered": true, "status": 204}],
            "skipped": [],
        })
    );
    let seen = w.plugin.seen("/events");
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0].body,
        json!({
            "type": "quality.scanned",
            "data": {"commit": "3f2c1a9e", "totals": {"files": 3, "functions": 14, "lines": 1234},
                     "scanned_at": a.json["scanned_at"]},
        })
    );

    // A scan refused sends nothing.
    let a = w.send("PUT", AT, Some(TOKEN), "{}").await;
    assert_eq!(a.status, StatusCode::BAD_REQUEST);
    assert_eq!(w.plugin.seen("/events").len(), 1);
}
