//! openapi/host-api-v1.yaml against the router: the spec lists exactly the routes served, its
//! error codes are the server's, each operation's `x-rbac` is the permission the server asks
//! RBAC for, and the answers to the spec's own request examples (and to a caller without the
//! grant) have a status the operation documents and a body of its schema.

use crate::http::ErrorCode;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use futures::future::BoxFuture;
use serde_json::Value;

use super::fixtures::*;
use crate::cards::inbox::Entry;
use crate::host_api::auth::{Permission, Reviewer, User};
use crate::host_api::error::Code;
use crate::host_api::{PREFIX, ROUTES};
use crate::openapi_spec::{self, METHODS, resolve, validator};

const SPEC: &str = include_str!("../../../../../openapi/host-api-v1.yaml");
/// The approval the spec's examples name.
const EXAMPLE_APPROVAL: &str = "general-plugin-grade-x7k2p";
/// The agent run the spec's examples name.
const EXAMPLE_RUN: &str = "run-4f1c2a9b";
fn spec() -> Value {
    openapi_spec::parse(SPEC)
}

struct Op {
    method: String,
    path: String,
    op: Value,
    /// The path with the examples' parameters, after `/namespaces/{namespace}`.
    rest: String,
}

fn operations(spec: &Value) -> Vec<Op> {
    let mut ops = vec![];
    for (path, item) in spec["paths"].as_object().unwrap() {
        for m in METHODS {
            let Some(op) = item.get(m) else { continue };
            let params = item
                .get("parameters")
                .or(op.get("parameters"))
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let mut url = path.clone();
            for p in &params {
                let p = resolve(spec, p);
                let name = p["name"].as_str().unwrap();
                let example = p["example"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{path}: {name} has no example"));
                if name != "namespace" {
                    url = url.replace(&format!("{{{name}}}"), example);
                }
            }
            // A route of every namespace (`/approvals`) is sent as `//...` (see `Sender`).
            let rest = match url.strip_prefix(&format!("{PREFIX}/namespaces/{{namespace}}")) {
                Some(rest) => rest.to_string(),
                None => format!(
                    "//{}",
                    url.strip_prefix(&format!("{PREFIX}/"))
                        .unwrap_or_else(|| panic!("{path} is not under {PREFIX}"))
                ),
            };
            assert!(!rest.contains('{'), "{path}: a parameter has no definition");
            ops.push(Op {
                method: m.to_uppercase(),
                path: path.clone(),
                op: op.clone(),
                rest,
            });
        }
    }
    ops
}

#[test]
fn the_spec_lists_exactly_the_routes_served() {
    let spec = spec();
    let documented: BTreeSet<(String, String)> = operations(&spec)
        .into_iter()
        .map(|o| (o.method, o.path))
        .collect();
    let served: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), format!("{PREFIX}{p}")))
        .collect();
    assert_eq!(documented, served);
}

#[test]
fn the_error_codes_are_the_servers() {
    let spec = spec();
    let documented: BTreeSet<&str> = spec["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    let served: BTreeSet<&str> = Code::ALL.iter().map(|c| c.as_str()).collect();
    assert_eq!(documented, served);
}

#[test]
fn every_operation_states_its_time_limit_and_permission() {
    let spec = spec();
    for op in operations(&spec) {
        let rbac = &op.op["x-rbac"];
        assert!(
            rbac["verb"].is_string() && rbac["resource"].is_string(),
            "{} {}: x-rbac",
            op.method,
            op.path
        );
        // Listing switches, panels, cards, chats and runs, marking cards read, settings, a
        // stop and the change stream keep to the host's state: no call, no time limit.
        let host_state = [
            "/switches",
            "/panels",
            "/cards",
            "/cards/read",
            "/cards/unread",
            "/notifications",
            "/notifications/read",
            "/quality",
            "/live",
            "/live/requests",
            "/live/requests/{id}",
            "/ui/commands",
            "/ui/commands/{id}",
            "/chats",
            "/tasks",
            "/tasks/{task}/options",
            "/projects/{project}/plugins",
            "/projects/{project}/plugins/{plugin}",
            "/projects/{project}/trust",
            "/global/plugins/{plugin}",
            "/global/plugins/{plugin}/review",
            "/plugins/changes",
            "/runs",
            "/runs/{run}",
            "/settings",
            "/stop",
            "/approvals",
            "/approvals/watch",
            "/approvals/{name}",
        ];
        if !host_state.iter().any(|end| op.path.ends_with(end)) {
            assert!(
                op.op["x-loop-time-limit-seconds"].is_u64(),
                "{} {}: x-loop-time-limit-seconds",
                op.method,
                op.path
            );
        }
    }
}

/// Knows every token, refuses everything, and records what it was asked.
#[derive(Default)]
struct Recorder(Arc<Mutex<Vec<Permission>>>);

impl Reviewer for Recorder {
    fn authenticate<'a>(&'a self, _token: &'a str) -> BoxFuture<'a, Result<Option<User>, String>> {
        Box::pin(async {
            Ok(Some(User {
                username: "nobody".into(),
                ..Default::default()
            }))
        })
    }

    fn authorize<'a>(
        &'a self,
        _user: &'a User,
        permission: &'a Permission,
    ) -> BoxFuture<'a, Result<Result<(), String>, String>> {
        self.0.lock().unwrap().push(permission.clone());
        Box::pin(async { Ok(Err("no grant".into())) })
    }
}

#[tokio::test]
async fn x_rbac_is_the_permission_asked_and_a_caller_without_it_gets_403() {
    let spec = spec();
    let asked: Arc<Mutex<Vec<Permission>>> = Arc::default();
    let w = World::with_reviewer(Arc::new(Recorder(asked.clone()))).await;
    // An approval in the namespace: listing every namespace's asks RBAC about this one.
    w.approval(EXAMPLE_APPROVAL, "general").await;
    // The routes of every namespace go last: they ask about the namespace a route of its own
    // asked about first, whose answer the server keeps.
    let mut ops = operations(&spec);
    ops.sort_by_key(|o| o.rest.starts_with("//"));
    for op in ops {
        if op.rest.starts_with("//") {
            asked.lock().unwrap().clear();
            w.state.auth.forget();
        }
        let a = w.send(&op.method, &op.rest, Some("t"), "{}").await;
        let what = format!("{} {}", op.method, op.path);
        assert_eq!(a.status, StatusCode::FORBIDDEN, "{what}: {}", a.json);
        check_answer(&spec, &op, &a);
        let p = asked
            .lock()
            .unwrap()
            .pop()
            .unwrap_or_else(|| panic!("{what}: no review"));
        assert_eq!(p.verb, op.op["x-rbac"]["verb"], "{what}");
        assert_eq!(
            p.rule_resource(),
            op.op["x-rbac"]["resource"].as_str().unwrap(),
            "{what}"
        );
        // HostConfig is cluster-scoped: its review names no namespace.
        let ns = if op.path.contains("/global/") { "" } else { NS };
        assert_eq!(p.namespace, ns, "{what}");
    }
}

/// Checks the answer's status is documented and its JSON body is of the documented schema.
fn check_answer(spec: &Value, op: &Op, a: &Answer) {
    let what = format!("{} {}", op.method, op.path);
    let responses = &op.op["responses"];
    let documented = responses
        .get(a.status.as_str())
        .or(responses.get("default"))
        .unwrap_or_else(|| panic!("{what}: status {} is not documented", a.status));
    let documented = resolve(spec, documented);
    if let Some(schema) = documented.pointer("/content/application~1json/schema") {
        let v = validator(spec, schema);
        let errors: Vec<String> = v.iter_errors(&a.json).map(|e| e.to_string()).collect();
        assert!(
            errors.is_empty(),
            "{what} {}: {errors:?}\n{}",
            a.status,
            a.json
        );
    }
}

#[tokio::test]
async fn the_spec_examples_get_documented_answers() {
    let spec = spec();
    let mut w = World::new().await;
    w.start("general", "uid-1");
    // A drawer with a card to show and one whose page the manifest no longer has.
    let mut map = inbox("general", &[("card-1", "2026-12-05T09:00:00Z")]);
    let mut gone: Entry = serde_json::from_str(&map.data.as_ref().unwrap()["card-1"]).unwrap();
    (gone.id, gone.card) = ("card-2".into(), Some("old".into()));
    map.data
        .get_or_insert_default()
        .insert(gone.id.clone(), serde_json::to_string(&gone).unwrap());
    apply(&mut w.writers.config_maps, map);
    // A scan to read back before the example's is posted.
    apply(&mut w.writers.config_maps, scan_map("general", 3));
    // The approval the decision's example decides.
    w.approval(EXAMPLE_APPROVAL, "general").await;
    // The run the run's example reads, with a call in its transcript.
    let run = w.run(EXAMPLE_RUN, "general", "2026-12-05T09:00:00Z");
    let result = crate::tool_calls::ToolResult {
        content: vec![serde_json::json!({ "type": "text", "text": "hi" })],
        structured_content: Some(serde_json::json!({ "echo": "hi" })),
        is_error: false,
        error_code: None,
    };
    let call = crate::transcript::entry::Call {
        tool: "plugin_echo",
        input: &serde_json::json!({ "text": "hi" }),
        result: &result,
        at: jiff::Timestamp::now(),
        took: std::time::Duration::from_millis(3),
    };
    crate::transcript::record(w.transcripts.as_ref(), &run, 1, &call).await;
    for op in operations(&spec) {
        // A stream does not end: the live tests read it.
        if op
            .op
            .pointer("/responses/200/content/text~1event-stream")
            .is_some()
        {
            continue;
        }
        // An operation that pulls an image from a registry runs against a real one in e2e
        // (`console::settings_upgrade_...`): these fixtures have no registry.
        if op.op["x-loop-pulls-image"] == Value::Bool(true) {
            continue;
        }
        let media = op.op.pointer("/requestBody/content/application~1json");
        let examples: Vec<Value> = match media {
            None => vec![Value::Null],
            Some(m) => m["examples"]
                .as_object()
                .unwrap_or_else(|| panic!("{} {}: examples", op.method, op.path))
                .values()
                .map(|e| resolve(&spec, e)["value"].clone())
                .collect(),
        };
        for example in examples {
            let body = if example.is_null() {
                String::new()
            } else {
                example.to_string()
            };
            if op.path.ends_with("/live/requests/{id}") {
                w.waiting_request("general", "4f1c2a9b0e7d3c58").await;
            }
            if op.path.ends_with("/tasks/{task}/options") {
                *w.tasks.0.lock().unwrap() = vec![super::config::cronjob("general", "tick")];
            }
            if op.path.ends_with("/ui/commands/{id}") {
                let steps = serde_json::json!([{ "type": "select_chat" }, { "type": "compose", "text": "hi" }]);
                w.waiting_command("general", "4f1c2a9b0e7d3c58", steps)
                    .await;
            }
            let a = w.send(&op.method, &op.rest, Some(TOKEN), &body).await;
            let what = format!("{} {} {body}", op.method, op.path);
            assert!(
                a.status.is_success(),
                "{what}: {} {}",
                a.status,
                String::from_utf8_lossy(&a.bytes)
            );
            check_answer(&spec, &op, &a);
        }
    }
    // Refusals have their documented shape too.
    let ops = operations(&spec);
    let tool = ops
        .iter()
        .find(|o| o.path.ends_with("/tools/{tool}"))
        .unwrap();
    for (body, status) in [
        (r#"{"input": {"text": 5}, "agent": "say"}"#, StatusCode::OK),
        (r#"{"input": {}, "agent": "nobody"}"#, StatusCode::NOT_FOUND),
        (r#"{"input": {}"#, StatusCode::BAD_REQUEST),
    ] {
        let a = w.send("POST", &tool.rest, Some(TOKEN), body).await;
        assert_eq!(a.status, status, "{body}: {}", a.json);
        check_answer(&spec, tool, &a);
    }
    let a = w.send("POST", &tool.rest, None, "{}").await;
    check_answer(&spec, tool, &a);
    // A chat never scanned, a scan that breaks a rule, one over the cap.
    let quality = |m: &str| {
        ops.iter()
            .find(|o| o.method == m && o.path.ends_with("/quality"))
            .unwrap()
    };
    let a = w
        .send("GET", "/channels/general-t1/quality", Some(TOKEN), "")
        .await;
    assert_eq!(a.status, StatusCode::NOT_FOUND);
    assert_eq!(a.code(), "scan_not_found");
    check_answer(&spec, quality("GET"), &a);
    let put = quality("PUT");
    let mut bad = scan_body(1);
    bad["functions"][0]["line"] = serde_json::json!(0);
    for (body, status) in [
        (bad.to_string(), StatusCode::BAD_REQUEST),
        (
            format!("{{\"x\": \"{}\"}}", "y".repeat(5 << 20)),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
    ] {
        let a = w.send("PUT", &put.rest, Some(TOKEN), &body).await;
        assert_eq!(a.status, status, "{}", a.json);
        check_answer(&spec, put, &a);
    }
    let action = ops
        .iter()
        .find(|o| o.path.ends_with("/actions/{action}"))
        .unwrap();
    w.plugin.hang(1, std::time::Duration::from_millis(400));
    let a = w
        .send(
            "POST",
            &action.rest,
            Some(TOKEN),
            r#"{"trigger": "manual"}"#,
        )
        .await;
    assert_eq!(a.status, StatusCode::GATEWAY_TIMEOUT);
    check_answer(&spec, action, &a);
}
