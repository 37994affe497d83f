//! `check` against a plugin served on a loopback port: the echo plugin's manifest served by
//! nothing but SDK handlers passes, and each broken copy (one route replaced) fails with the
//! line that names the fault, while everything else still passes. (The echo plugin itself is
//! checked in its own tests, `examples/echo-plugin/tests/plugin/conformance.rs`.)

use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use loop_plugins_conformance::{Contract, Outcome, Report, Target, check};
use sdk::{Plugin, SwitchState, ToolRequest, ToolResult};
use serde_json::json;

const SECRET: &str = "s3cret";
const MANIFEST: &str = include_str!("../../../examples/echo-plugin/plugin.json");

/// The echo manifest's plugin, with `broken` routes in front of its own.
async fn serve(broken: Router) -> String {
    let server = Plugin::new(manifest::parse_str(MANIFEST).unwrap())
        .action("ping", |_, _| async {})
        .action("tick", |_, _| async {})
        .tool("echo", |req: ToolRequest| async move {
            let text = req.input.get("text").cloned().unwrap_or_default();
            Ok(ToolResult::json(&json!({ "echo": text })).unwrap())
        })
        .switch("mode", |req| async move {
            SwitchState {
                on: req.on,
                ..Default::default()
            }
        })
        .on_event(|_| async {})
        .build(SECRET)
        .unwrap();
    let app = broken.fallback_service(server.router());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

async fn check_plugin(broken: Router) -> Report {
    let url = serve(broken).await;
    let target = Target {
        url,
        secret: SECRET.into(),
        manifest: manifest::parse_str(MANIFEST).unwrap(),
    };
    // A plugin that never answers holds each call for its limit: a second here, not 10 s.
    let contract = Contract::load()
        .unwrap()
        .with_time_limits_capped(Duration::from_secs(1));
    check(&contract, &target).await.unwrap()
}

/// The failing lines, checking there is at least one.
fn failures(report: &Report) -> Vec<String> {
    let lines: Vec<String> = report.failures().map(|f| f.line()).collect();
    assert!(
        !lines.is_empty(),
        "the broken copy passed:\n{}",
        report.text()
    );
    lines
}

#[tokio::test]
async fn the_echo_manifests_plugin_passes() {
    let report = check_plugin(Router::new()).await;
    assert!(report.passed(), "{}", report.text());
    assert!(
        report.findings.iter().all(|f| f.outcome == Outcome::Pass),
        "{}",
        report.text()
    );
    // health 1, secret 18, actions 6, tools 2, runs 2, events 3, switches 2, errors 6.
    assert_eq!(report.findings.len(), 40, "{}", report.text());
    assert!(
        report.summary().starts_with("echo 0.1.0: "),
        "{}",
        report.summary()
    );
}

#[tokio::test]
async fn a_route_that_skips_the_secret_is_caught() {
    let broken = Router::new().route(
        "/healthz",
        get(|| async { axum::Json(json!({"status": "ok", "id": "echo", "version": "0.1.0"})) }),
    );
    let report = check_plugin(broken).await;
    assert_eq!(
        failures(&report),
        [
            "FAIL secret GET /healthz (no secret): answered 200: every route must refuse a call without the secret with 401",
            "FAIL secret GET /healthz (a wrong secret): answered 200: every route must refuse a call without the secret with 401",
        ]
    );
}

#[tokio::test]
async fn an_action_that_answers_200_is_caught() {
    let broken = Router::new().route(
        "/actions/tick",
        post(|| async { axum::Json(json!({"accepted": true})) }),
    );
    let lines = failures(&check_plugin(broken).await);
    // Each trigger, and the secret (the replacement checks none): 3 + 2.
    for trigger in ["manual", "schedule", "workflow"] {
        assert!(
            lines.contains(&format!("FAIL actions POST /actions/tick (trigger {trigger}): answered 200: an action answers 202 and does its work in the background")),
            "{lines:#?}"
        );
    }
    assert_eq!(lines.len(), 5, "{lines:#?}");
}

#[tokio::test]
async fn a_tool_whose_output_breaks_its_schema_is_caught() {
    let broken = Router::new().route(
        "/tools/echo",
        post(|| async {
            axum::Json(json!({"content": [{"type": "text", "text": "hi"}],
                "structured_content": {"said": "hi"}}))
        }),
    );
    let lines = failures(&check_plugin(broken).await);
    for call in ["agent say's call", "a workflow's call"] {
        assert!(
            lines.iter().any(|l| l.starts_with(&format!(
                "FAIL tools POST /tools/echo ({call}): structured_content breaks the output_schema"
            )) && l.contains("echo")),
            "{lines:#?}"
        );
    }
}

#[tokio::test]
async fn a_switch_that_never_answers_is_caught() {
    let broken = Router::new().route(
        "/switches/mode",
        post(|| async {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            StatusCode::OK
        }),
    );
    let lines = failures(&check_plugin(broken).await);
    for state in ["on", "off"] {
        assert!(
            lines.contains(&format!("FAIL switches POST /switches/mode ({state}): no answer within 1 s, the route's time limit")),
            "{lines:#?}"
        );
    }
}

#[tokio::test]
async fn a_wrong_version_and_wrong_error_answers_are_caught() {
    let broken = Router::new()
        .route(
            "/healthz",
            get(|| async { axum::Json(json!({"status": "ok", "version": "9.9.9"})) }),
        )
        .route("/events", post(|| async { StatusCode::NO_CONTENT }));
    let lines = failures(&check_plugin(broken).await);
    assert!(
        lines
            .iter()
            .any(|l| l
                .starts_with("FAIL health GET /healthz (health and version): version \"9.9.9\"")),
        "{lines:#?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("FAIL errors POST /events (an event it does not take): answered 204, the contract says 422")),
        "{lines:#?}"
    );
}

#[tokio::test]
async fn nothing_listening_fails_every_call_without_stopping_the_check() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    let target = Target {
        url,
        secret: SECRET.into(),
        manifest: manifest::parse_str(MANIFEST).unwrap(),
    };
    let report = check(&Contract::load().unwrap(), &target).await.unwrap();
    assert_eq!(
        report.failures().count(),
        report.findings.len(),
        "{}",
        report.text()
    );
    assert!(report.text().contains("no answer: "), "{}", report.text());
}
