//! Generated hostile MCP messages (crates/hostile): an agent run's MCP client sends whatever
//! its model wrote. `mcp::protocol::read` takes any bytes to a message or a JSON-RPC refusal
//! without a panic, in bounded time and memory; a refusal keeps the request's id when it had
//! a valid one. The run's transcript takes any call (its input, whatever the plugin answered)
//! to an entry within its bounds that reads back as it was written.

use hostile::Target;
use hostile::inputs::{deep_text, json_mutated, json_value, mutated};
use hostile::proptest::prelude::*;
use loop_plugins_server::mcp::protocol::{self, Message};
use loop_plugins_server::tool_calls::ToolResult;
use loop_plugins_server::transcript::entry::{self, Call, Entry, MAX_PART, MAX_TOOL};
use serde_json::{Value, json};

#[global_allocator]
static ALLOC: hostile::Counting = hostile::Counting;

fn seeds() -> Vec<Value> {
    vec![
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "id": "a", "method": "tools/list", "params": {}}),
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "plugin_echo", "arguments": {"text": "hi"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!([{"jsonrpc": "2.0", "id": 3, "method": "ping"}]),
    ]
}

fn messages() -> BoxedStrategy<Vec<u8>> {
    let bytes: Vec<Vec<u8>> = seeds().iter().map(|v| v.to_string().into_bytes()).collect();
    prop_oneof![
        3 => json_mutated(seeds(), 300).prop_map(|v| v.to_string().into_bytes()),
        2 => mutated(bytes),
        1 => deep_text(),
        1 => json_value(6).prop_map(|v| v.to_string().into_bytes()),
    ]
    .boxed()
}

#[test]
fn mcp_messages() {
    Target::new("mcp_messages", env!("CARGO_MANIFEST_DIR")).run(messages, |bytes| {
        let message = protocol::read(bytes);
        if let Message::Refused { id, .. } = &message {
            let asked: Option<Value> = serde_json::from_slice::<Value>(bytes)
                .ok()
                .and_then(|v| v.get("id").cloned())
                .filter(|id| id.is_string() || id.is_number());
            if let Some(asked) = asked
                && id != &asked
                && id != &Value::Null
            {
                return Err(format!(
                    "refused with id {id}, though the request's id was {asked}"
                ));
            }
        }
        Ok(())
    });
}

/// A run's call as the transcript gets it: the arguments of a `tools/call` the bytes read as
/// (else the bytes as JSON, else as text), its name, and the bytes as the plugin's answer.
#[test]
fn transcript_entries() {
    Target::new("transcript_entries", env!("CARGO_MANIFEST_DIR")).run(messages, |bytes| {
        let text = String::from_utf8_lossy(bytes).into_owned();
        let (tool, input) = match protocol::read(bytes) {
            Message::CallTool {
                tool, arguments, ..
            } => (tool, arguments),
            _ => (
                text.chars().take(400).collect(),
                serde_json::from_slice(bytes).unwrap_or_else(|_| Value::String(text.clone())),
            ),
        };
        let result = ToolResult {
            content: vec![json!({ "type": "text", "text": text }), input.clone()],
            structured_content: Some(input.clone()),
            is_error: bytes.len() % 2 == 1,
            error_code: None,
        };
        let call = Call {
            tool: &tool,
            input: &input,
            result: &result,
            at: "2026-12-05T09:00:01.250Z".parse().expect("a time"),
            took: std::time::Duration::from_millis(bytes.len() as u64),
        };
        let seq = u32::try_from(bytes.len()).unwrap_or(u32::MAX).max(1);
        let e = entry::entry(seq, &call);
        let stored = |v: &Value| {
            serde_json::to_string(v)
                .map(|s| s.len())
                .unwrap_or(usize::MAX)
        };
        for (part, size) in [
            ("input", stored(&e.input)),
            ("text", stored(&json!(e.result.text))),
            ("structured", e.result.structured.as_ref().map_or(0, stored)),
        ] {
            if size > MAX_PART {
                return Err(format!("{part} takes {size} bytes"));
            }
        }
        if stored(&json!(e.tool)) > MAX_TOOL {
            return Err(format!("the tool's name takes {} bytes", e.tool.len()));
        }
        if e.cut.input.is_none() && e.input != input {
            return Err("an input not cut was changed".into());
        }
        let written = serde_json::to_string(&e).map_err(|err| err.to_string())?;
        let read: Entry = serde_json::from_str(&written)
            .map_err(|err| format!("the entry does not read back: {err}"))?;
        // Numbers may come back a bit off (serde_json reads floats fast, not exactly): the
        // rest comes back as written.
        if (read.seq, &read.tool, &read.result.text, &read.cut, &read.at)
            != (e.seq, &e.tool, &e.result.text, &e.cut, &e.at)
        {
            return Err("the entry read back is not the one written".into());
        }
        Ok(())
    });
}
