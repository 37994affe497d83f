//! openapi/plugin-api-v1.yaml against the router: the spec lists exactly the routes served,
//! its error codes are the server's, every operation states its capability, and every answer
//! the router gives (successes from the spec's own examples, and 400, 401, 403, 409, 413 and
//! the routes' other errors) has a status the operation documents and a body of its schema.

use std::collections::BTreeSet;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};

use super::fixtures::*;
use crate::cards::inbox;
use crate::openapi_spec::{self, METHODS, resolve, validator};
use crate::plugin_api::error::Code;
use crate::plugin_api::{ROUTES, memory};
use model::manifest::Capability;

const SPEC: &str = include_str!("../../../../../openapi/plugin-api-v1.yaml");
fn spec() -> Value {
    openapi_spec::parse(SPEC)
}

struct Op {
    method: String,
    path: String,
    op: Value,
    url: String,
}

impl Op {
    fn what(&self) -> String {
        format!("{} {}", self.method, self.path)
    }

    fn has_body(&self) -> bool {
        self.op.get("requestBody").is_some()
    }

    /// The capabilities `x-loop-capability` names (any of them will do).
    fn capabilities(&self) -> Vec<Capability> {
        match &self.op["x-loop-capability"] {
            Value::Null => vec![],
            Value::String(s) => {
                vec![Capability::parse(s).unwrap_or_else(|| panic!("{}: {s}", self.what()))]
            }
            Value::Array(list) => list
                .iter()
                .map(|v| {
                    Capability::parse(v.as_str().unwrap())
                        .unwrap_or_else(|| panic!("{}: {v}", self.what()))
                })
                .collect(),
            other => panic!("{}: x-loop-capability {other}", self.what()),
        }
    }

    /// The request examples of the operation (none for a route without a body).
    fn examples(&self, spec: &Value) -> Vec<Value> {
        let Some(media) = self.op.pointer("/requestBody/content/application~1json") else {
            return vec![];
        };
        if let Some(e) = media.get("example") {
            return vec![e.clone()];
        }
        media["examples"]
            .as_object()
            .unwrap_or_else(|| panic!("{}: a JSON body has examples", self.what()))
            .values()
            .map(|e| resolve(spec, e)["value"].clone())
            .collect()
    }
}

fn operations(spec: &Value) -> Vec<Op> {
    let mut ops = vec![];
    for (path, item) in spec["paths"].as_object().unwrap() {
        for m in METHODS {
            let Some(op) = item.get(m) else { continue };
            let mut url = path.clone();
            for p in op
                .get("parameters")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                let p = resolve(spec, p);
                let name = p["name"].as_str().unwrap();
                let example = p["example"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{path}: {name} has no example"));
                url = url.replace(&format!("{{{name}}}"), example);
            }
            assert!(
                !url.contains('{'),
                "{path}: a path parameter has no definition"
            );
            ops.push(Op {
                method: m.to_uppercase(),
                path: path.clone(),
                op: op.clone(),
                url,
            });
        }
    }
    ops
}

/// Asserts the answer is one the operation documents, of the documented shape.
fn check(spec: &Value, op: &Op, a: &Answer, why: &str) {
    let what = format!("{} ({why}) answered {}", op.what(), a.status);
    let documented = op.op["responses"]
        .get(a.status.as_str())
        .unwrap_or_else(|| {
            panic!(
                "{what}, which isn't documented: {}",
                String::from_utf8_lossy(&a.bytes)
            )
        });
    let documented = resolve(spec, documented);
    let content_type = a
        .headers
        .get("content-type")
        .map(|v| v.to_str().unwrap())
        .unwrap_or("");
    if let Some(schema) = documented.pointer("/content/application~1json/schema") {
        assert!(
            content_type.starts_with("application/json"),
            "{what}: content-type {content_type}"
        );
        let body = a.json();
        let errors: Vec<String> = validator(spec, schema)
            .iter_errors(&body)
            .map(|e| e.to_string())
            .collect();
        assert!(
            errors.is_empty(),
            "{what}: {body} breaks the schema: {errors:?}"
        );
        if !a.status.is_success() {
            let code = *Code::ALL.iter().find(|c| c.as_str() == a.code()).unwrap();
            assert_eq!(
                code.status(),
                a.status.as_u16(),
                "{what}: code {} belongs to another status",
                a.code()
            );
        }
    } else if documented
        .pointer("/content/application~1octet-stream")
        .is_some()
    {
        assert_eq!(content_type, "application/octet-stream", "{what}");
    } else {
        assert!(a.bytes.is_empty(), "{what}: no body is documented");
    }
    for header in documented
        .get("headers")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, _)| k)
    {
        assert!(
            a.headers.contains_key(header.to_lowercase().as_str()),
            "{what}: no {header} header"
        );
    }
}

/// A world where each example of the spec finds what it names.
fn world(root: &std::path::Path) -> World {
    let mut w = World::new();
    w.config.worktree_root = Some(root.to_path_buf());
    w.runs
        .push(run("cogtest-0123456789abcdef", "a", T0.parse().unwrap()));
    let mut inbox = inbox::template(NS, "cogtest-a", PLUGIN, PROJECT, "a", None);
    let card = json!({ "id": "card-0123456789abcdef", "kind": "card", "card": "score", "title": "Quiz",
                       "data": { "score": 3 }, "created": T0 });
    inbox
        .data
        .as_mut()
        .unwrap()
        .insert("card-0123456789abcdef".into(), card.to_string());
    let mut memory = memory::template(NS, PLUGIN, PROJECT, None);
    memory
        .data
        .as_mut()
        .unwrap()
        .insert("last-quiz".into(), json!({ "score": 3 }).to_string());
    for m in [&mut inbox, &mut memory] {
        m.metadata.resource_version = Some("1".into());
    }
    w.maps.extend([inbox, memory, scan_map("a", 25)]);
    w
}

fn worktrees() -> TempDir {
    let dir = TempDir::new("api-openapi");
    let tree = dir.path().join("team/repo/trees/a");
    std::fs::create_dir_all(&tree).unwrap();
    std::fs::write(tree.join("README.md"), "# a chat's checkout\n").unwrap();
    dir
}

#[test]
fn the_spec_lists_the_routes_codes_and_capabilities_the_server_has() {
    let spec = spec();
    assert_eq!(spec["openapi"], "3.1.0");
    assert!(
        spec.pointer("/components/securitySchemes/pluginToken")
            .is_some()
    );
    assert_eq!(spec["servers"][0]["url"], crate::plugin_api::PREFIX);
    for name in spec["components"]["schemas"].as_object().unwrap().keys() {
        validator(
            &spec,
            &json!({ "$ref": format!("#/components/schemas/{name}") }),
        );
    }
    let served: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    let listed: BTreeSet<(String, String)> = operations(&spec)
        .into_iter()
        .map(|o| (o.method, o.path))
        .collect();
    assert_eq!(listed, served);

    let codes: BTreeSet<&str> = spec["components"]["schemas"]["ErrorCode"]["enum"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(codes, Code::ALL.iter().map(|c| c.as_str()).collect());

    for op in operations(&spec) {
        assert!(
            op.op.get("x-loop-capability").is_some(),
            "{} states no capability",
            op.what()
        );
        op.capabilities();
        for status in ["401", "409"] {
            assert!(
                op.op["responses"].get(status).is_some(),
                "{} lacks {status}",
                op.what()
            );
        }
        if !op.capabilities().is_empty() {
            assert!(
                op.op["responses"].get("403").is_some(),
                "{} lacks 403",
                op.what()
            );
        }
        if op.has_body() {
            for status in ["400", "413"] {
                assert!(
                    op.op["responses"].get(status).is_some(),
                    "{} lacks {status}",
                    op.what()
                );
            }
            let schema = op
                .op
                .pointer("/requestBody/content/application~1json/schema")
                .unwrap();
            for example in op.examples(&spec) {
                assert!(
                    validator(&spec, schema).is_valid(&example),
                    "{}: example {example}",
                    op.what()
                );
            }
        }
    }
}

#[test]
fn the_specs_patterns_say_what_the_server_checks() {
    let spec = spec();
    let param = |name: &str| validator(&spec, &spec["components"]["parameters"][name]["schema"]);
    let files = param("FilePath");
    for path in [
        "README.md",
        "src/a.rs",
        ".github/x",
        "a..b",
        "..x",
        "/etc",
        "a/",
        "a//b",
        "../x",
        "a/..",
        "a/../b",
        ".",
        "a/.",
        "a\\b",
        "a\u{0}b",
        "",
    ] {
        let served = crate::plugin_api::files::check_path(path).is_ok();
        assert_eq!(files.is_valid(&json!(path)), served, "path {path:?}");
    }
    let keys = param("MemoryKey");
    for key in [
        "a",
        "last-quiz",
        "v1.x_2",
        ".",
        "..",
        "..x",
        ".x",
        "a/b",
        "ü",
        "",
        &"k".repeat(129),
    ] {
        let served = memory::check_key(key).is_ok();
        assert_eq!(keys.is_valid(&json!(key)), served, "key {key:?}");
    }
}

#[tokio::test]
async fn every_answer_is_one_the_spec_documents() {
    let spec = spec();
    let trees = worktrees();
    for op in operations(&spec) {
        let bodies = if op.has_body() {
            op.examples(&spec)
        } else {
            vec![Value::Null]
        };
        let some = |v: &Value| (!v.is_null()).then(|| v.clone());

        // Each example succeeds.
        for body in &bodies {
            let h = world(trees.path()).build();
            h.live
                .responses
                .lock()
                .unwrap()
                .insert("set_permission_mode".into(), json!({ "mode": "plan" }));
            let a = h.call(&op.method, &op.url, Some(TOKEN_A), some(body)).await;
            assert!(
                a.status.is_success(),
                "{} with {body}: {} {}",
                op.what(),
                a.status,
                String::from_utf8_lossy(&a.bytes)
            );
            check(&spec, &op, &a, "its example");
        }
        let body = some(&bodies[0]);

        let h = world(trees.path()).build();
        check(
            &spec,
            &op,
            &h.call(&op.method, &op.url, None, body.clone()).await,
            "no token",
        );
        check(
            &spec,
            &op,
            &h.call(&op.method, &op.url, Some("nope"), body.clone())
                .await,
            "a bad token",
        );

        let a = world(trees.path())
            .trusting(false)
            .build()
            .call(&op.method, &op.url, Some(TOKEN_A), body.clone())
            .await;
        assert_eq!(a.status, StatusCode::CONFLICT, "{}", op.what());
        check(&spec, &op, &a, "not enabled");

        let caps = op.capabilities();
        if !caps.is_empty() {
            let others: Vec<Capability> = Capability::ALL
                .into_iter()
                .filter(|c| !caps.contains(c))
                .collect();
            let a = world(trees.path())
                .approve(&others)
                .build()
                .call(&op.method, &op.url, Some(TOKEN_A), body.clone())
                .await;
            assert_eq!(
                a.status,
                StatusCode::FORBIDDEN,
                "{} without {caps:?}",
                op.what()
            );
            check(&spec, &op, &a, "no capability");
        }

        if op.has_body() {
            let h = world(trees.path()).build();
            for (bad, why) in [(json!([]), "an array body"), (json!({}), "an empty object")] {
                let a = h.call(&op.method, &op.url, Some(TOKEN_A), Some(bad)).await;
                assert_eq!(
                    a.status,
                    StatusCode::BAD_REQUEST,
                    "{} with {why}",
                    op.what()
                );
                check(&spec, &op, &a, why);
            }
            let huge = json!({ "x": "y".repeat(2 * 1024 * 1024) });
            let a = h.call(&op.method, &op.url, Some(TOKEN_A), Some(huge)).await;
            assert_eq!(a.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", op.what());
            check(&spec, &op, &a, "a huge body");
        }
    }
}

#[tokio::test]
async fn the_routes_other_answers_are_documented_too() {
    let spec = spec();
    let ops = operations(&spec);
    let op = |method: &str, path: &str| {
        ops.iter()
            .find(|o| o.method == method && o.path == path)
            .unwrap()
    };
    let trees = worktrees();
    let tree = trees.path().join("team/repo/trees/a");
    std::fs::create_dir_all(tree.join("dir")).unwrap();
    std::fs::write(tree.join("big"), vec![0u8; 64]).unwrap();
    std::os::unix::fs::symlink("../../../../../etc/hostname", tree.join("out")).unwrap();
    let mut w = world(trees.path());
    w.host.spec.plugins.daily_runs = 1;
    w.config.max_file_bytes = 32;
    let h = w.build();

    let cases: Vec<(&str, &str, &str, Option<Value>)> = vec![
        (
            "POST",
            "/runs",
            "/runs",
            Some(json!({ "agent": "nobody", "prompt": "p" })),
        ),
        (
            "POST",
            "/runs",
            "/runs",
            Some(json!({ "agent": "quiz", "prompt": "p" })),
        ),
        (
            "POST",
            "/runs",
            "/runs",
            Some(json!({ "agent": "quiz", "prompt": "p" })),
        ),
        ("GET", "/runs/{run_id}", "/runs/someone-elses", None),
        (
            "PUT",
            "/composer/switches/{id}",
            "/composer/switches/nope",
            Some(json!({ "on": true })),
        ),
        (
            "PUT",
            "/composer/switches/{id}",
            "/composer/switches/sync",
            Some(json!({ "on": true, "title": "t".repeat(201) })),
        ),
        (
            "DELETE",
            "/composer/switches/{id}",
            "/composer/switches/nope",
            None,
        ),
        (
            "POST",
            "/cards",
            "/cards",
            Some(json!({ "card": "nope", "title": "t" })),
        ),
        ("GET", "/cards/{id}", "/cards/card-ffffffffffffffff", None),
        (
            "POST",
            "/notifications",
            "/notifications",
            Some(json!({ "title": "" })),
        ),
        (
            "POST",
            "/channel/live/control",
            "/channel/live/control",
            Some(json!({ "subtype": "other" })),
        ),
        (
            "POST",
            "/channel/live/control",
            "/channel/live/control",
            Some(json!({ "subtype": "set_permission_mode" })),
        ),
        ("GET", "/files/{path}", "/files/..%2Fx", None),
        ("GET", "/files/{path}", "/files/out", None),
        ("GET", "/files/{path}", "/files/dir", None),
        ("GET", "/files/{path}", "/files/big", None),
        ("GET", "/files/{path}", "/files/missing", None),
        ("GET", "/hotspots", "/hotspots?limit=0", None),
        ("GET", "/hotspots/page", "/hotspots/page?offset=x", None),
        ("GET", "/memory/{key}", "/memory/never", None),
        ("GET", "/memory/{key}", "/memory/..bad", None),
        (
            "PUT",
            "/memory/{key}",
            "/memory/big",
            Some(json!({ "value": "v".repeat(70_000) })),
        ),
    ];
    let mut seen = BTreeSet::new();
    for (method, path, url, body) in cases {
        let a = h.call(method, url, Some(TOKEN_A), body).await;
        check(&spec, op(method, path), &a, url);
        seen.insert(a.code());
    }
    // Chat b was never scanned.
    for path in ["/hotspots", "/hotspots/page"] {
        let a = h.call("GET", path, Some(TOKEN_B), None).await;
        check(&spec, op("GET", path), &a, "a chat never scanned");
        seen.insert(a.code());
    }
    for code in [
        "unknown_agent",
        "daily_runs_exceeded",
        "run_not_found",
        "switch_not_found",
        "unknown_card",
        "card_not_found",
        "subtype_not_declared",
        "not_live",
        "invalid_path",
        "outside_working_tree",
        "not_a_regular_file",
        "file_too_large",
        "file_not_found",
        "memory_not_found",
        "invalid_key",
        "invalid_query",
        "scan_not_found",
        "body_too_large",
    ] {
        assert!(seen.contains(code), "no case answered {code}: {seen:?}");
    }

    // A failing write is a documented 503 on every route that writes.
    h.api_down(true);
    h.clock.advance(Duration::from_secs(25 * 3600));
    for (method, path, url, body) in [
        (
            "POST",
            "/runs",
            "/runs",
            json!({ "agent": "quiz", "prompt": "p" }),
        ),
        (
            "PUT",
            "/composer/switches/{id}",
            "/composer/switches/sync",
            json!({ "on": true }),
        ),
        (
            "POST",
            "/cards",
            "/cards",
            json!({ "card": "score", "title": "t" }),
        ),
        (
            "POST",
            "/notifications",
            "/notifications",
            json!({ "title": "t" }),
        ),
        (
            "PUT",
            "/channel/live/hold",
            "/channel/live/hold",
            json!({ "hold": true }),
        ),
        ("PUT", "/memory/{key}", "/memory/k", json!({ "value": 1 })),
    ] {
        let a = h.call(method, url, Some(TOKEN_A), Some(body)).await;
        assert_eq!(a.status, StatusCode::SERVICE_UNAVAILABLE, "{method} {url}");
        check(&spec, op(method, path), &a, "a failing write");
    }
    let a = h
        .call("DELETE", "/composer/switches/sync", Some(TOKEN_A), None)
        .await;
    check(
        &spec,
        op("DELETE", "/composer/switches/{id}"),
        &a,
        "a failing write",
    );
}
