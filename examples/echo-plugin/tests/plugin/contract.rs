//! openapi/plugin-contract-v1.yaml against the router: every route and method it lists
//! exists, refuses a request without the secret, takes each of its request examples with a
//! documented success status, and answers JSON of the documented shape.

use std::path::Path;

use reqwest::Method;
use serde_json::{Value, json};

use crate::common::{TempDir, start};

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

fn spec() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../openapi/plugin-contract-v1.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

/// Follows a local `$ref`.
fn resolve<'a>(spec: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => spec
            .pointer(r.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("dangling {r}")),
        None => v,
    }
}

/// A validator for `schema`, which may point into the spec's components.
fn validator(spec: &Value, schema: &Value) -> jsonschema::Validator {
    let mut root = schema.clone();
    if let Value::Object(m) = &mut root {
        m.insert(
            "$schema".into(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        m.insert("components".into(), spec["components"].clone());
    }
    jsonschema::validator_for(&root).unwrap_or_else(|e| panic!("schema {schema}: {e}"))
}

/// The path with each `{param}` replaced by its parameter's example.
fn concrete(spec: &Value, path: &str, params: &[&Value]) -> String {
    let mut out = path.to_owned();
    for p in params {
        let p = resolve(spec, p);
        let name = p["name"].as_str().unwrap();
        let example = p["example"]
            .as_str()
            .unwrap_or_else(|| panic!("parameter {name} has no example"));
        out = out.replace(&format!("{{{name}}}"), example);
    }
    assert!(
        !out.contains('{'),
        "{path}: a path parameter has no definition"
    );
    out
}

/// The JSON request examples of an operation (`example` or each of `examples`).
fn examples(spec: &Value, op: &Value) -> Vec<Value> {
    let Some(body) = op.get("requestBody") else {
        return vec![];
    };
    let Some(media) = resolve(spec, body).pointer("/content/application~1json") else {
        return vec![];
    };
    if let Some(e) = media.get("example") {
        return vec![e.clone()];
    }
    let all = media["examples"]
        .as_object()
        .expect("a JSON request body has examples");
    all.values()
        .map(|e| resolve(spec, e)["value"].clone())
        .collect()
}

fn operations(spec: &Value) -> Vec<(String, Method, &Value, Vec<&Value>)> {
    let mut ops = vec![];
    for (path, item) in spec["paths"].as_object().unwrap() {
        let shared: Vec<&Value> = item
            .get("parameters")
            .map_or(vec![], |p| p.as_array().unwrap().iter().collect());
        for m in METHODS {
            if let Some(op) = item.get(m) {
                let mut params = shared.clone();
                params.extend(
                    op.get("parameters")
                        .map_or(vec![], |p| p.as_array().unwrap().iter().collect()),
                );
                ops.push((path.clone(), m.to_uppercase().parse().unwrap(), op, params));
            }
        }
    }
    ops
}

#[test]
fn the_spec_parses_and_its_schemas_compile() {
    let spec = spec();
    assert_eq!(spec["openapi"].as_str().unwrap(), "3.1.0");
    assert!(
        spec.pointer("/components/securitySchemes/pluginSecret")
            .is_some()
    );
    for name in spec["components"]["schemas"].as_object().unwrap().keys() {
        validator(
            &spec,
            &json!({"$ref": format!("#/components/schemas/{name}")}),
        );
    }
    let paths: Vec<_> = spec["paths"].as_object().unwrap().keys().cloned().collect();
    for want in [
        "/healthz",
        "/actions/{action}",
        "/tools/{tool}",
        "/runs/{run_id}/done",
        "/events",
        "/switches/{switch}",
        "/x/{path}",
    ] {
        assert!(paths.iter().any(|p| p == want), "the spec lacks {want}");
    }
    // Every operation states the host's time limit, except /healthz.
    for (path, method, op, _) in operations(&spec) {
        if path != "/healthz" {
            assert!(
                op["x-loop-time-limit-seconds"].is_u64(),
                "{method} {path} has no time limit"
            );
        }
    }
}

#[tokio::test]
async fn every_route_in_the_spec_is_served_as_documented() {
    let spec = spec();
    let dir = TempDir::new("contract");
    let p = start(dir.path()).await;
    let error = validator(&spec, &json!({"$ref": "#/components/schemas/Error"}));
    let ops = operations(&spec);
    assert!(ops.len() >= 11, "{} operations", ops.len());
    for (path, method, op, params) in ops {
        let url = concrete(&spec, &path, &params);
        let what = format!("{method} {path} ({url})");

        let res = p
            .client
            .request(method.clone(), format!("{}{url}", p.url))
            .send()
            .await
            .unwrap();
        assert_eq!(res.status(), 401, "{what} without the secret");
        assert!(
            op["responses"].get("401").is_some(),
            "{what}: 401 isn't documented"
        );
        let body: Value = res.json().await.unwrap();
        assert!(error.is_valid(&body), "{what}: 401 body {body}");

        let bodies = examples(&spec, op);
        let bodies = if bodies.is_empty() {
            vec![Value::Null]
        } else {
            bodies
        };
        for body in bodies {
            let mut req = p.req(method.clone(), &url);
            if !body.is_null() {
                if let Some(schema) = op.pointer("/requestBody/content/application~1json/schema") {
                    let v = validator(&spec, schema);
                    assert!(
                        v.is_valid(&body),
                        "{what}: example {body} breaks its own schema"
                    );
                }
                req = req.json(&body);
            }
            let res = req.send().await.unwrap();
            let status = res.status();
            let code = status.as_u16().to_string();
            let documented = op["responses"]
                .get(&code)
                .or_else(|| op["responses"].get("default"));
            assert!(status.is_success(), "{what} with {body}: {status}");
            let documented =
                documented.unwrap_or_else(|| panic!("{what}: {status} isn't documented"));
            let documented = resolve(&spec, documented);
            let bytes = res.bytes().await.unwrap();
            match documented.pointer("/content/application~1json/schema") {
                Some(schema) => {
                    let answer: Value = serde_json::from_slice(&bytes)
                        .unwrap_or_else(|e| panic!("{what}: answer isn't JSON: {e}"));
                    let v = validator(&spec, schema);
                    let errors: Vec<_> = v.iter_errors(&answer).map(|e| e.to_string()).collect();
                    assert!(
                        errors.is_empty(),
                        "{what}: answer {answer} breaks the schema: {errors:?}"
                    );
                }
                None if documented.get("content").is_none() => {
                    assert!(bytes.is_empty(), "{what}: {status} should have no body");
                }
                None => {}
            }
        }
    }
    p.stop().await;
}
