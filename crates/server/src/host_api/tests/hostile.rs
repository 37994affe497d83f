//! Generated hostile input for the host API (crates/hostile): the bodies callers send (an
//! agent's tool input is whatever its model wrote; a quality scan is whatever the app's
//! scanner measured), and what a plugin answers a tool call with. Each goes through the whole
//! router to a running fake plugin; the server answers without a panic or a 500, with the
//! API's error body when it refuses, in bounded time and memory. A posted scan's reader is
//! also run alone (`quality_scans`), many more inputs a second: it answers a scan it keeps
//! within the bounds, or a refusal naming a field.

use std::cell::RefCell;

use hostile::Target;
use hostile::inputs::{deep_text, json_leaves_mutated, json_mutated, json_value, mutated};
use hostile::proptest::prelude::*;
use serde_json::{Value, json};

use super::fixtures::*;

/// The routes that read a body, each with its method and a body it takes.
fn routes() -> Vec<(&'static str, String, Value)> {
    let post = |(path, body): (String, Value)| ("POST", path, body);
    let mut routes: Vec<(&'static str, String, Value)> = vec![
        (
            at("general", "/tools/echo"),
            json!({"input": {"text": "hi"}, "agent": "say", "thread_id": "th", "run_id": "run-1"}),
        ),
        (
            at("general", "/tools/raw"),
            json!({"input": {"a": [1, {"b": "c"}]}, "agent": "", "thread_id": "", "run_id": "workflow:1:n"}),
        ),
        (at("general", "/actions/ping"), json!({"trigger": "manual"})),
        (at("general", "/switches/mode"), json!({"on": true})),
        (
            "/channels/general/events".to_string(),
            json!({"type": "message.created", "data": {"text": "hi"}}),
        ),
    ]
    .into_iter()
    .map(post)
    .collect();
    routes.push(("PUT", "/channels/general/quality".to_string(), scan_body(3)));
    routes
}

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

/// A tool's answer: its status in two bytes, then the body (a tool result with its values replaced,
/// or anything).
fn answers() -> BoxedStrategy<Vec<u8>> {
    let result = json!({"content": [{"type": "text", "text": "hi"}], "structured_content": {"echo": "hi"}, "is_error": false});
    let body = prop_oneof![
        4 => json_leaves_mutated(vec![result.clone()]),
        3 => json_mutated(vec![result], 120),
        1 => json_value(6),
    ];
    (
        prop_oneof![Just(200u16), Just(201), Just(400), Just(500), 200u16..600],
        body,
    )
        .prop_map(|(status, body)| {
            let mut input = status.to_be_bytes().to_vec();
            input.extend(body.to_string().into_bytes());
            input
        })
        .boxed()
}

thread_local! {
    static WORLD: RefCell<Option<(tokio::runtime::Runtime, World)>> = const { RefCell::new(None) };
}

/// Runs `f` with this thread's world: the echo plugin's container Ready in `general`.
fn with_world<R>(f: impl FnOnce(&tokio::runtime::Runtime, &World) -> R) -> R {
    WORLD.with(|world| {
        let mut world = world.borrow_mut();
        let (rt, w) = world.get_or_insert_with(|| {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime");
            let mut w = rt.block_on(World::new());
            w.start("general", "uid-g");
            (rt, w)
        });
        f(rt, w)
    })
}

/// The answer is no 500, and a refusal carries the API's error body.
fn well_formed(what: &str, answer: &Answer) -> Result<(), String> {
    if answer.status.as_u16() == 500 {
        return Err(format!("{what} answered 500: {}", answer.json));
    }
    if answer.status.is_client_error()
        && (!answer.json["error"]["code"].is_string()
            || !answer.json["error"]["message"].is_string())
    {
        return Err(format!(
            "{what}: a refusal without the error body: {}",
            answer.json
        ));
    }
    Ok(())
}

#[test]
fn host_api_bodies() {
    Target::new("host_api_bodies", env!("CARGO_MANIFEST_DIR")).run(requests, |input| {
        let Some((&route, body)) = input.split_first() else {
            return Ok(());
        };
        let routes = routes();
        let (method, path, _) = &routes[usize::from(route) % routes.len()];
        let body = String::from_utf8_lossy(body).into_owned();
        with_world(|rt, w| {
            let answer = rt.block_on(w.send(method, path, Some(TOKEN), &body));
            well_formed(&format!("{method} {path}"), &answer)
        })
    });
}

#[test]
fn tool_answers() {
    Target::new("tool_answers", env!("CARGO_MANIFEST_DIR")).run(answers, |input| {
        let [high, low, body @ ..] = input else {
            return Ok(());
        };
        let Ok(body) = serde_json::from_slice::<Value>(body) else {
            return Ok(());
        };
        // A status the fake plugin can send.
        let status = 200 + u16::from_be_bytes([*high, *low]) % 400;
        with_world(|rt, w| {
            w.plugin.behaviour.lock().unwrap().tool_answer = Some((status, body));
            let say = r#"{"input": {"text": "hi"}, "agent": "say", "thread_id": "th", "run_id": "run-1"}"#;
            let answer = rt.block_on(w.send("POST", &at("general", "/tools/echo"), Some(TOKEN), say));
            well_formed("a tool call", &answer)?;
            if answer.status.is_success() && !answer.json["content"].is_array() {
                return Err(format!("a tool call answered a result without content: {}", answer.json));
            }
            Ok(())
        })
    });
}

/// Scans: the seed's values replaced (most often by one of the same type), its shape changed,
/// its bytes mutated, or any JSON; and, now and then, a scan of many functions.
fn scans() -> BoxedStrategy<Vec<u8>> {
    let seed = scan_body(3);
    let bytes = seed.to_string().into_bytes();
    prop_oneof![
        4 => json_leaves_mutated(vec![seed.clone()]).prop_map(|v| v.to_string().into_bytes()),
        3 => json_mutated(vec![seed], 300).prop_map(|v| v.to_string().into_bytes()),
        2 => mutated(vec![bytes]),
        1 => deep_text(),
        1 => json_value(6).prop_map(|v| v.to_string().into_bytes()),
        1 => (0usize..12_000).prop_map(|n| scan_body(n).to_string().into_bytes()),
    ]
    .boxed()
}

#[test]
fn quality_scans() {
    use crate::quality::scan::{self, KEPT_BYTES, KEPT_FUNCTIONS, MAX_FUNCTIONS, Scan};
    Target::new("quality_scans", env!("CARGO_MANIFEST_DIR")).run(scans, |body| {
        match scan::parse(body) {
            Ok(posted) => {
                let listed = posted.functions.len();
                if listed > MAX_FUNCTIONS {
                    return Err(format!("{listed} functions taken"));
                }
                let kept = Scan::of(posted, jiff::Timestamp::UNIX_EPOCH);
                let bytes = serde_json::to_vec(&kept.functions).map_or(0, |v| v.len());
                if kept.functions.len() > KEPT_FUNCTIONS || bytes > KEPT_BYTES + 2 {
                    return Err(format!(
                        "kept {} functions in {bytes} bytes",
                        kept.functions.len()
                    ));
                }
                let sorted = kept
                    .functions
                    .windows(2)
                    .all(|w| sdk::api::wire::Hotspot::worst_first(&w[0], &w[1]).is_le());
                if !sorted {
                    return Err("kept out of order".into());
                }
                Ok(())
            }
            Err(refused) if refused.field.is_empty() || refused.why.is_empty() => {
                Err(format!("a refusal that names no field: {refused:?}"))
            }
            Err(_) => Ok(()),
        }
    });
}
