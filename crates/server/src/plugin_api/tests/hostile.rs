//! Generated hostile bodies for every Plugin API route that reads one (crates/hostile): what
//! a plugin's code sends is untrusted, and the server serves every chat. Each input is a route
//! and a body (valid bodies with their values replaced, mutated byte by byte, nested past any
//! limit, or any JSON), sent through the whole router with a valid token and every capability
//! approved. The server answers it without a panic, without a 500, with the API's error body
//! when it refuses, in bounded time and memory. The hotspots routes read a query string
//! instead: `hotspots_queries` sends them generated ones, to a chat with a scan.

use std::cell::RefCell;

use axum::body::Body;
use axum::http::{Method, Request};
use hostile::inputs::{deep_text, json_leaves_mutated, json_mutated, json_value, mutated};
use hostile::proptest::prelude::*;
use hostile::{Bounds, Target};
use serde_json::{Value, json};

use super::fixtures::*;

/// The routes that read a body, each with a body it takes.
fn routes() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "POST",
            "/runs",
            json!({ "agent": "fixer", "prompt": "fix" }),
        ),
        (
            "PUT",
            "/composer/switches/sync",
            json!({ "on": true, "title": "t", "busy": false, "error": false }),
        ),
        (
            "POST",
            "/cards",
            json!({ "card": "score", "title": "Score", "data": {"a": [1]} }),
        ),
        (
            "POST",
            "/notifications",
            json!({ "title": "Hi", "body": "there" }),
        ),
        (
            "POST",
            "/channel/live/control",
            json!({ "subtype": "set_permission_mode", "request": {} }),
        ),
        ("PUT", "/channel/live/hold", json!({ "hold": true })),
        ("PUT", "/memory/last", json!({ "value": {"n": 1} })),
    ]
}

/// An input: its first byte picks the route, the rest is the body, made from that route's
/// own body.
fn requests() -> BoxedStrategy<Vec<u8>> {
    let n = routes().len();
    (0..n as u8)
        .prop_flat_map(|route| {
            let seed = routes()[usize::from(route)].2.clone();
            let bytes = seed.to_string().into_bytes();
            let body = prop_oneof![
                4 => json_leaves_mutated(vec![seed.clone()]).prop_map(|v| v.to_string().into_bytes()),
                3 => json_mutated(vec![seed], 300).prop_map(|v| v.to_string().into_bytes()),
                2 => mutated(vec![bytes]),
                1 => deep_text(),
                1 => json_value(6).prop_map(|v| v.to_string().into_bytes()),
                1 => prop::collection::vec(any::<u8>(), 0..512),
            ];
            (Just(route), body)
        })
        .prop_map(|(route, body)| {
            let mut input = vec![route];
            input.extend(body);
            input
        })
        .boxed()
}

thread_local! {
    static WORLD: RefCell<Option<(tokio::runtime::Runtime, Harness)>> = const { RefCell::new(None) };
}

fn answer(input: &[u8]) -> Result<(), String> {
    let Some((&route, body)) = input.split_first() else {
        return Ok(());
    };
    let routes = routes();
    let (method, path, _) = &routes[usize::from(route) % routes.len()];
    WORLD.with(|world| {
        let mut world = world.borrow_mut();
        let (rt, harness) = world.get_or_insert_with(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            let harness = rt.block_on(async { World::new().build() });
            (rt, harness)
        });
        let req = Request::builder()
            .method(Method::from_bytes(method.as_bytes()).expect("a method"))
            .uri(uri(path))
            .header("authorization", format!("Bearer {TOKEN_A}"))
            .header("content-type", "application/json")
            .body(Body::from(body.to_vec()))
            .expect("a request");
        let answer = rt.block_on(harness.send(req));
        if answer.status.is_server_error() {
            return Err(format!(
                "{method} {path} answered {}: {}",
                answer.status,
                String::from_utf8_lossy(&answer.bytes)
            ));
        }
        if answer.status.is_client_error() {
            let error: Value = serde_json::from_slice(&answer.bytes)
                .map_err(|e| format!("{method} {path}: a refusal that is not JSON ({e})"))?;
            if !error["error"]["code"].is_string() || !error["error"]["message"].is_string() {
                return Err(format!(
                    "{method} {path}: a refusal without the error body: {error}"
                ));
            }
        }
        Ok(())
    })
}

#[test]
fn plugin_api_bodies() {
    Target::new("plugin_api_bodies", env!("CARGO_MANIFEST_DIR"))
        .bounds(Bounds::default())
        .run(requests, answer);
}

/// A query: its first byte picks the route, the rest is the query string (a valid one mutated
/// byte by byte, or any bytes), sent percent-encoded but for `&` and `=`.
fn queries() -> BoxedStrategy<Vec<u8>> {
    let seeds = vec![
        b"offset=0&limit=10".to_vec(),
        b"limit=100".to_vec(),
        b"offset=18446744073709551615&limit=1".to_vec(),
    ];
    (
        any::<u8>(),
        prop_oneof![
            3 => mutated(seeds),
            1 => prop::collection::vec(any::<u8>(), 0..256),
        ],
    )
        .prop_map(|(route, query)| {
            let mut input = vec![route];
            input.extend(query);
            input
        })
        .boxed()
}

thread_local! {
    static SCANNED: RefCell<Option<(tokio::runtime::Runtime, Harness)>> = const { RefCell::new(None) };
}

fn answer_query(input: &[u8]) -> Result<(), String> {
    let Some((&route, query)) = input.split_first() else {
        return Ok(());
    };
    let path = if route % 2 == 0 {
        "/hotspots"
    } else {
        "/hotspots/page"
    };
    // A URI longer than the http crate takes never reaches a server: the first 4 KiB.
    let mut encoded = String::new();
    for &b in query.iter().take(4096) {
        if b.is_ascii_alphanumeric() || matches!(b, b'&' | b'=' | b'-' | b'.' | b'_' | b'~') {
            encoded.push(b as char);
        } else {
            encoded.push_str(&format!("%{b:02X}"));
        }
    }
    SCANNED.with(|world| {
        let mut world = world.borrow_mut();
        let (rt, harness) = world.get_or_insert_with(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            let mut w = World::new();
            w.maps.push(scan_map("a", 150));
            let harness = rt.block_on(async { w.build() });
            (rt, harness)
        });
        let req = Request::builder()
            .method(Method::GET)
            .uri(format!("{}?{encoded}", uri(path)))
            .header("authorization", format!("Bearer {TOKEN_A}"))
            .body(Body::empty())
            .expect("a request");
        let answer = rt.block_on(harness.send(req));
        let body: Value = serde_json::from_slice(&answer.bytes)
            .map_err(|e| format!("GET {path}?{encoded}: an answer that is not JSON ({e})"))?;
        match answer.status.as_u16() {
            200 => {
                let n = body["functions"].as_array().map_or(usize::MAX, Vec::len);
                if n > 100 {
                    return Err(format!("GET {path}?{encoded}: {n} functions"));
                }
            }
            400 if body["error"]["code"] == "invalid_query" => {}
            status => {
                return Err(format!("GET {path}?{encoded} answered {status}: {body}"));
            }
        }
        Ok(())
    })
}

#[test]
fn hotspots_queries() {
    Target::new("hotspots_queries", env!("CARGO_MANIFEST_DIR"))
        .bounds(Bounds::default())
        .run(queries, answer_query);
}
