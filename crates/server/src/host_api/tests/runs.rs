//! One agent run through the router (`GET .../channels/{chat}/runs/{run}`): the run with its
//! prompt and its transcript, the calls its runner made through the run's MCP endpoint
//! (`crate::mcp`, which records them), in order; only a run of the chat, only with `get
//! agentruns`; and a transcript that could not be written never fails a call.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use futures::future::BoxFuture;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tower::ServiceExt;

use super::fixtures::*;
use crate::mcp::record::{Calls, Recorder, ToolCallLog};
use model::resources::{AgentRun, AgentRunPhase, AgentRunStatus};

/// The run's MCP token.
const RUN_TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Writes no status: these tests read the transcript.
struct NoStatus;

impl Recorder for NoStatus {
    fn write<'a>(
        &'a self,
        _run: &'a AgentRun,
        _calls: &'a Calls,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async { Ok(()) })
    }
}

/// Run `id` of echo's `say` agent in `general`, running, its MCP token [`RUN_TOKEN`].
fn running(w: &mut World, id: &str) -> AgentRun {
    let mut run = agent_run(id, "general", "2026-12-05T09:00:00Z");
    run.status = Some(AgentRunStatus {
        phase: Some(AgentRunPhase::Running),
        mcp_token_sha256: Some(hex::encode(Sha256::digest(RUN_TOKEN.as_bytes()))),
        ..Default::default()
    });
    apply(&mut w.writers.runs, run.clone());
    run
}

/// The MCP endpoint of the world's runs (one ledger numbering each run's calls, as a
/// process has).
fn endpoint(w: &World) -> crate::mcp::McpState {
    crate::mcp::McpState {
        tools: w.state.tools.clone(),
        ledger: std::sync::Arc::new(ToolCallLog::new(Box::new(NoStatus))),
        transcripts: w.transcripts.clone(),
    }
}

/// Sends one MCP `tools/call` of `tool` with `arguments` to run `run`'s endpoint.
async fn call_tool(state: &crate::mcp::McpState, run: &str, tool: &str, arguments: Value) -> Value {
    let body = json!({ "jsonrpc": "2.0", "id": 1, "method": "tools/call",
                       "params": { "name": tool, "arguments": arguments } });
    let request = Request::builder()
        .method("POST")
        .uri(model::run_contract::mcp_path(NS, run))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::AUTHORIZATION, format!("Bearer {RUN_TOKEN}"))
        .body(Body::from(body.to_string()))
        .unwrap();
    let response = crate::mcp::router(state.clone())
        .oneshot(request)
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .unwrap();
    serde_json::from_slice(&bytes).unwrap()
}

/// The answer with each call's time and duration checked and taken out.
fn without_times(mut answer: Value) -> Value {
    for call in answer["calls"].as_array_mut().into_iter().flatten() {
        let at = call["at"].as_str().expect("at");
        assert!(at.parse::<jiff::Timestamp>().is_ok(), "{at}");
        assert!(call["ms"].is_u64(), "{call}");
        let fields = call.as_object_mut().unwrap();
        fields.remove("at");
        fields.remove("ms");
    }
    answer
}

#[tokio::test]
async fn a_runs_calls_through_its_mcp_endpoint_are_its_transcript_in_order() {
    let mut w = World::new().await;
    w.start("general", "uid-g");
    running(&mut w, "run-1");
    let mcp = endpoint(&w);
    let path = "/channels/general/runs/run-1";

    // Before any call: the run, its prompt, no calls.
    let a = w.send("GET", path, Some(TOKEN), "").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(
        a.json,
        json!({
            "id": "run-1", "plugin": "echo", "agent": "say", "thread": "plugin:echo",
            "phase": "Running", "created": "2026-12-05T09:00:00Z", "toolCalls": 0,
            "prompt": "Say hi, then echo it", "calls": [], "dropped": 0
        })
    );

    let said = call_tool(&mcp, "run-1", "plugin_echo", json!({ "text": "hello" })).await;
    assert_eq!(
        said["result"]["structuredContent"],
        json!({ "echo": "hello" })
    );
    let refused = call_tool(&mcp, "run-1", "plugin_echo", json!({ "text": 5 })).await;
    assert_eq!(refused["result"]["isError"], true);
    // A tool the run was not given is refused before it is called: not a call of the run.
    let unknown = call_tool(&mcp, "run-1", "plugin_nope", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");

    let a = w.send("GET", path, Some(TOKEN), "").await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    let refusal = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(
        without_times(a.json)["calls"],
        json!([
            { "seq": 1, "tool": "plugin_echo", "input": { "text": "hello" },
              "result": { "text": "hello", "structured": { "echo": "hello" }, "is_error": false } },
            { "seq": 2, "tool": "plugin_echo", "input": { "text": 5 },
              "result": { "text": refusal, "is_error": true } },
        ])
    );

    // A transcript that cannot be written: the call is answered all the same, and reading
    // it answers 503 until the store is back; the call it missed stays missing.
    w.transcripts.fail(true);
    let said = call_tool(&mcp, "run-1", "plugin_echo", json!({ "text": "again" })).await;
    assert_eq!(
        said["result"]["structuredContent"],
        json!({ "echo": "again" })
    );
    let a = w.send("GET", path, Some(TOKEN), "").await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
    );
    assert!(a.headers.contains_key(header::RETRY_AFTER));
    w.transcripts.fail(false);
    let said = call_tool(&mcp, "run-1", "plugin_echo", json!({ "text": "last" })).await;
    assert_eq!(said["result"]["isError"], false);
    let a = w.send("GET", path, Some(TOKEN), "").await;
    let seqs: Vec<u64> = a.json["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [1, 2, 4], "{}", a.json);
}

#[tokio::test]
async fn a_run_is_read_in_its_own_chat_with_get_on_it() {
    let mut w = World::new().await;
    w.run("run-1", "general", "2026-12-05T09:00:00Z");
    w.run("run-t", "general-t1", "2026-12-05T09:00:00Z");
    for (path, token, status, code) in [
        ("/channels/general/runs/run-1", TOKEN, StatusCode::OK, ""),
        // Another chat's run, a run that is not there, a chat that is not there.
        (
            "/channels/general/runs/run-t",
            TOKEN,
            StatusCode::NOT_FOUND,
            "run_not_found",
        ),
        (
            "/channels/general/runs/nope",
            TOKEN,
            StatusCode::NOT_FOUND,
            "run_not_found",
        ),
        (
            "/channels/nowhere/runs/run-1",
            TOKEN,
            StatusCode::NOT_FOUND,
            "channel_not_found",
        ),
        // RBAC first, whatever the run.
        (
            "/channels/general/runs/nope",
            LIMITED,
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
        (
            "/channels/general/runs/run-1",
            LIMITED,
            StatusCode::FORBIDDEN,
            "forbidden",
        ),
    ] {
        let a = w.send("GET", path, Some(token), "").await;
        assert_eq!((a.status, a.code()), (status, code), "{path}: {}", a.json);
        if status == StatusCode::FORBIDDEN {
            let message = a.json["error"]["message"].as_str().unwrap();
            assert!(message.contains("get agentruns"), "{message}");
        }
    }
    let a = w
        .send("GET", "/channels/general/runs/run-1", None, "")
        .await;
    assert_eq!(a.status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_transcript_past_its_bounds_shows_the_latest_calls_and_how_many_were_dropped() {
    let mut w = World::new().await;
    let run = w.run("run-1", "general", "2026-12-05T09:00:00Z");
    let big = "é".repeat(10_000);
    let result = crate::tool_calls::ToolResult {
        content: vec![json!({ "type": "text", "text": big })],
        structured_content: None,
        is_error: false,
        error_code: None,
    };
    let input = json!({ "text": big });
    let max = crate::transcript::entry::MAX_ENTRIES;
    for seq in 1..=max + 3 {
        let call = crate::transcript::entry::Call {
            tool: "plugin_echo",
            input: &input,
            result: &result,
            at: jiff::Timestamp::now(),
            took: std::time::Duration::ZERO,
        };
        crate::transcript::record(w.transcripts.as_ref(), &run, seq, &call).await;
    }
    let a = w
        .send("GET", "/channels/general/runs/run-1", Some(TOKEN), "")
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.json["dropped"], 3);
    let calls = a.json["calls"].as_array().unwrap();
    assert_eq!(calls.len(), max as usize);
    assert_eq!(calls[0]["seq"], 4);
    assert_eq!(
        calls[0]["cut"],
        json!({ "input": input.to_string().len(), "text": big.len() })
    );
    assert!(
        calls[0]["input"]
            .as_str()
            .unwrap()
            .starts_with(r#"{"text":"éé"#)
    );
}
