//! Generated hostile MCP messages (crates/hostile): an agent run's MCP client sends whatever
//! its model wrote. `mcp::protocol::read` takes any bytes to a message or a JSON-RPC refusal
//! without a panic, in bounded time and memory; a refusal keeps the request's id when it had
//! a valid one.

use hostile::Target;
use hostile::inputs::{deep_text, json_mutated, json_value, mutated};
use hostile::proptest::prelude::*;
use loop_plugins_server::mcp::protocol::{self, Message};
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
