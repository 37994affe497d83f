//! `check` against a plugin served on a loopback port: the echo plugin's manifest served by
//! nothing but SDK handlers passes, each copy that breaks a sentence of the reference (one
//! route replaced) fails with the line that names the fault and quotes the sentence, and a
//! copy that only misses this host's stricter conventions passes with WARN lines. (The echo
//! plugin itself is checked in its own tests, `examples/echo-plugin/tests/plugin/conformance.rs`.)

use std::time::Duration;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::{any, get, post};
use loop_plugins_conformance::reference::{self, Rule};
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

/// The warning lines.
fn warnings(report: &Report) -> Vec<String> {
    report
        .findings
        .iter()
        .filter(|f| matches!(f.outcome, Outcome::Warn(_)))
        .map(|f| f.line())
        .collect()
}

/// `; the reference: "<sentence>"`, as a failure ends.
fn quoting(rule: Rule) -> String {
    format!("; {rule}")
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
    // health 1, secret 18, actions 6, tools 2, runs 2, events 4, switches 2, errors 6.
    assert_eq!(report.findings.len(), 41, "{}", report.text());
    assert!(
        report
            .summary()
            .ends_with(": 41 checks, 41 passed, 0 warned, 0 failed, 0 skipped"),
        "{}",
        report.summary()
    );
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
    let secret = quoting(reference::SECRET);
    assert_eq!(
        failures(&report),
        [
            format!(
                "FAIL secret GET /healthz (no secret): answered 200: served without the plugin's secret{secret}"
            ),
            format!(
                "FAIL secret GET /healthz (a wrong secret): answered 200: served without the plugin's secret{secret}"
            ),
        ]
    );
}

/// The reference's rules and nothing more: it refuses a request without the secret only on
/// the routes it serves (elsewhere: 404, whatever the secret), and takes every event, even one
/// it is not subscribed to, with 204 ("dropped when the plugin doesn't take it" is the host's
/// choice, not a rule for the plugin). Every such answer is a WARN line, none a failure.
#[tokio::test]
async fn a_plugin_within_the_reference_passes_with_warnings() {
    let not_served = || async { (StatusCode::NOT_FOUND, "no such route") };
    let lenient = Router::new()
        .route("/x/{*rest}", any(not_served))
        .route("/conformance-no-such", any(not_served))
        .route(
            "/events",
            post(|headers: HeaderMap| async move {
                let secret = format!("Bearer {SECRET}");
                if headers.get("authorization").and_then(|v| v.to_str().ok()) == Some(&secret) {
                    StatusCode::NO_CONTENT.into_response()
                } else {
                    let refusal = json!({"error": "no secret"});
                    (StatusCode::UNAUTHORIZED, axum::Json(refusal)).into_response()
                }
            }),
        );
    let report = check_plugin(lenient).await;
    assert!(report.passed(), "{}", report.text());
    let warned = warnings(&report);
    for line in [
        "WARN secret GET /x/conformance (no secret): answered 404: a refusal, but not 401; no {\"error\"} body with the refusal; within the reference, not this host's contract (openapi/plugin-contract-v1.yaml)",
        "WARN secret GET /x/conformance (a wrong secret): answered 404: a refusal, but not 401",
        "WARN secret GET /conformance-no-such (no secret): answered 404: a refusal, but not 401",
        "WARN secret GET /conformance-no-such (a wrong secret): answered 404: a refusal, but not 401",
        "WARN errors POST /events (an event it does not take): answered 204, not 422",
    ] {
        assert!(
            warned.iter().any(|l| l.starts_with(line)),
            "no line {line:?} in\n{}",
            report.text()
        );
    }
    assert_eq!(warned.len(), 5, "{}", report.text());
    assert!(
        report
            .summary()
            .ends_with(": 41 checks, 36 passed, 5 warned, 0 failed, 0 skipped"),
        "{}",
        report.summary()
    );
}

#[tokio::test]
async fn an_action_that_answers_200_warns_and_one_that_skips_the_secret_fails() {
    let broken = Router::new().route(
        "/actions/tick",
        post(|| async { axum::Json(json!({"accepted": true})) }),
    );
    let report = check_plugin(broken).await;
    // 200 for 202 is this host's convention: a warning for each trigger.
    let warned = warnings(&report);
    for trigger in ["manual", "schedule", "workflow"] {
        assert!(
            warned.iter().any(|l| l.starts_with(&format!(
                "WARN actions POST /actions/tick (trigger {trigger}): answered 200, not 202"
            ))),
            "{warned:#?}"
        );
    }
    // The replacement checks no secret, which the reference asks: 2 failures.
    let lines = failures(&report);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(
        lines
            .iter()
            .all(|l| l.starts_with("FAIL secret POST /actions/tick (")
                && l.ends_with(&quoting(reference::SECRET))),
        "{lines:#?}"
    );
}

#[tokio::test]
async fn an_action_it_does_not_accept_is_caught() {
    let broken = Router::new().route(
        "/actions/tick",
        post(|| async {
            (
                StatusCode::NOT_FOUND,
                axum::Json(json!({"error": "no such action"})),
            )
        }),
    );
    let lines = failures(&check_plugin(broken).await);
    for trigger in ["manual", "schedule", "workflow"] {
        assert!(
            lines.contains(&format!(
                "FAIL actions POST /actions/tick (trigger {trigger}): answered 404 (\"no such action\"): not accepted{}",
                quoting(reference::CHECK)
            )),
            "{lines:#?}"
        );
    }
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
            )) && l.contains("echo")
                && l.ends_with(&quoting(reference::OUTPUT_SCHEMA))),
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
            lines.contains(&format!(
                "FAIL switches POST /switches/mode ({state}): no answer within 1 s, the route's time limit{}",
                quoting(reference::TIME_LIMITS)
            )),
            "{lines:#?}"
        );
    }
}

#[tokio::test]
async fn a_wrong_version_is_caught() {
    let broken = Router::new().route(
        "/healthz",
        get(|| async { axum::Json(json!({"status": "ok", "version": "9.9.9"})) }),
    );
    let lines = failures(&check_plugin(broken).await);
    assert!(
        lines.contains(&format!(
            "FAIL health GET /healthz (health and version): version \"9.9.9\", the manifest's is \"0.1.0\"{}",
            quoting(reference::HEALTH_VERSION)
        )),
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
    assert!(
        report
            .failures()
            .all(|f| f.line().ends_with(&quoting(reference::UNANSWERED))),
        "{}",
        report.text()
    );
}
