//! `check_with_host`: a plugin written on the SDK (nothing but its handlers), whose action starts an agent run through
//! the Plugin API, checked with the SDK's fake host as that API. The run it started is ended
//! and the plugin must take its end; a call the host refuses for the plugin's own fault is a
//! problem; and broken copies fail with the line that names the fault.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use loop_plugins_conformance::{Contract, Outcome, Report, Target, check_with_host};
use sdk::api::ui_command::{Step, UiCommandRequest};
use sdk::testing::{Config, FakeHost};
use sdk::{Plugin, ToolRequest, ToolResult};
use serde_json::json;

const SECRET: &str = "s3cret";

const MANIFEST: &str = r#"{
  "id": "quiz", "name": "Quiz", "version": "0.3.0", "api": "1",
  "capabilities": ["agent.readonly", "memory.read", "ui.composer_switch", "events.subscribe",
                   "ui.command", "ui.panel"],
  "agents": [{ "id": "ask", "read_only": true, "tools": ["grade"] }],
  "tools": [{
    "name": "grade",
    "input_schema": { "type": "object", "properties": { "answer": { "type": "string" } },
                      "required": ["answer"], "examples": [{ "answer": "4" }] },
    "output_schema": { "type": "object", "properties": { "correct": { "type": "boolean" } },
                       "required": ["correct"] }
  }],
  "actions": [{ "id": "quiz" }],
  "events": ["message.created"],
  "ui": { "composer_switches": [{ "id": "hints", "label": "Hints", "icon": "ui/hints.svg" }],
          "panels": [{ "id": "board", "label": "Board", "entry": "ui/board/index.html" }] }
}"#;

fn manifest() -> manifest::Manifest {
    manifest::parse_str(MANIFEST).unwrap()
}

/// The quiz plugin: `quiz` starts a run of `ask` and shows its board with a UI command (and,
/// when `greedy`, also writes memory it did not declare and opens a panel it does not
/// declare); `grade` grades; the run ends are kept in `ended`.
fn quiz(host: &FakeHost, greedy: bool, ended: Arc<Mutex<Vec<String>>>) -> Plugin {
    let client = host.client();
    Plugin::new(manifest())
        .action("quiz", move |_req, _cx| {
            let client = client.clone();
            async move {
                let _ = client.start_run("ask", "Ask what 2+2 is").await;
                let panel = if greedy { "scores" } else { "board" };
                let _ = client
                    .run_ui(&UiCommandRequest {
                        steps: vec![Step::OpenPanel {
                            panel: panel.into(),
                        }],
                        timeout_seconds: None,
                    })
                    .await;
                if greedy {
                    let _ = client.remember("last", json!("now")).await;
                }
            }
        })
        .tool("grade", |req: ToolRequest| async move {
            let correct = req.input.get("answer") == Some(&json!("4"));
            Ok(ToolResult::json(&json!({ "correct": correct })).unwrap())
        })
        .switch("hints", |req| async move {
            sdk::SwitchState {
                on: req.on,
                ..Default::default()
            }
        })
        .on_event(|_event| async {})
        .on_run_done(move |run_id, _done| {
            let ended = ended.clone();
            async move { ended.lock().unwrap().push(run_id) }
        })
}

async fn check_quiz(greedy: bool, broken: Router) -> (Report, FakeHost, Vec<String>) {
    let host = FakeHost::start(Config::new(manifest())).await.unwrap();
    let ended = Arc::new(Mutex::new(Vec::new()));
    let server = quiz(&host, greedy, ended.clone()).build(SECRET).unwrap();
    let app = broken.fallback_service(server.router());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    let target = Target {
        url,
        secret: SECRET.into(),
        manifest: manifest(),
    };
    let contract = Contract::load()
        .unwrap()
        .with_time_limits_capped(Duration::from_secs(1));
    let report = check_with_host(&contract, &target, &host).await.unwrap();
    let ended = ended.lock().unwrap().clone();
    (report, host, ended)
}

#[tokio::test]
async fn the_runs_a_plugin_starts_are_ended_and_it_takes_their_end() {
    let (report, host, ended) = check_quiz(false, Router::new()).await;
    // A plugin of SDK handlers passes every check, nothing skipped.
    assert!(
        report.findings.iter().all(|f| f.outcome == Outcome::Pass),
        "{}",
        report.text()
    );
    // One run per trigger of `quiz` (manual, schedule, workflow), each ended.
    let runs = host.recorded().runs;
    assert_eq!(runs.len(), 3, "{runs:?}");
    for started in &runs {
        assert!(
            started.run.status.ended() && started.run.done_delivered,
            "{started:?}"
        );
        let line = format!(
            "PASS runs POST /runs/{}/done (a run of agent ask it started)",
            started.run.id
        );
        assert!(
            report.text().contains(&line),
            "no {line:?} in\n{}",
            report.text()
        );
    }
    let mut ids: Vec<String> = runs.iter().map(|r| r.run.id.clone()).collect();
    ids.sort();
    let mut ended = ended;
    ended.retain(|id| ids.contains(id));
    ended.sort();
    assert_eq!(ended, ids, "the plugin got each run's end");
    // Its UI commands are listed, one per run of `quiz`.
    let commands = report
        .text()
        .matches(
            "PASS api POST /api/plugin/v1/ui/commands (a UI command the plugin ran: open_panel)",
        )
        .count();
    assert_eq!(commands, 3, "{}", report.text());
}

#[tokio::test]
async fn a_call_the_manifest_does_not_cover_is_a_problem() {
    let (report, _host, _) = check_quiz(true, Router::new()).await;
    let failures: Vec<String> = report.failures().map(|f| f.line()).collect();
    assert_eq!(failures.len(), 3, "{}", report.text());
    // A panel it does not declare is this host's rule, not the reference's: a warning.
    let text = report.text();
    assert!(
        text.contains("WARN api POST /api/plugin/v1/ui/commands (a call the plugin made): the host refused it 422 invalid_step: steps[0].panel: \"scores\" is not one of the manifest's ui.panels"),
        "{text}"
    );
    assert!(
        failures.iter().all(|l| l.starts_with(
            "FAIL api PUT /api/plugin/v1/memory/last (a call the plugin made): the host refused it 403 capability_not_approved: this route needs the capability memory.write, and the manifest does not declare it"
        )),
        "{}",
        report.text()
    );
}

#[tokio::test]
async fn a_plugin_that_does_not_take_the_end_of_its_own_runs_fails() {
    // It takes the end of a run it never saw (the plan's check), not of its own.
    let broken = Router::new().route(
        "/runs/{run_id}/done",
        post(
            |axum::extract::Path(id): axum::extract::Path<String>,
             headers: axum::http::HeaderMap| async move {
                let secret = headers.get("authorization").and_then(|v| v.to_str().ok());
                if secret != Some("Bearer s3cret") {
                    let body = json!({"error": "the secret is missing or wrong"});
                    return (StatusCode::UNAUTHORIZED, axum::Json(body));
                }
                let status = if id.starts_with("quiz-") {
                    StatusCode::INTERNAL_SERVER_ERROR
                } else {
                    StatusCode::OK
                };
                (status, axum::Json(json!({})))
            },
        ),
    );
    let (report, _host, _) = check_quiz(false, broken).await;
    let failures: Vec<String> = report.failures().map(|f| f.line()).collect();
    assert_eq!(failures.len(), 3, "{}", report.text());
    for line in &failures {
        assert!(
            line.starts_with("FAIL runs POST /runs/quiz-") && line.contains("answered 500"),
            "{line}"
        );
    }
    assert!(
        report
            .findings
            .iter()
            .filter(|f| f.at.starts_with("POST /runs/conformance-run"))
            .all(|f| f.outcome == Outcome::Pass)
    );
}
