//! The MCP a run's endpoint speaks, decided purely: which JSON-RPC message asks for what, the
//! tools a run is offered, a tool result in MCP's shape, and every error's code.
//!
//! Streamable HTTP without sessions (each POST carries one message and its answer is one JSON
//! body), tools only:
//!
//! | message | answer |
//! |---|---|
//! | `initialize` | the protocol version (the client's when supported, else [`LATEST`]), `tools` capability, `instructions` naming the agent and, for a read-only one, saying so |
//! | `ping` | `{}` |
//! | `tools/list` | the tools the manifest gives the run's agent, `plugin_<tool>`, with `inputSchema`, `outputSchema` and, for a read-only agent, `readOnlyHint` |
//! | `tools/call` | the tool's result (`content`, `structuredContent`, `isError`); a name the run was not given is `-32602` |
//! | a notification or a response | nothing (HTTP 202) |
//! | any other method | `-32601` |

use serde_json::{Map, Value, json};

use crate::tool_calls::ToolResult;
use model::manifest::{MCP_TOOL_PREFIX, Manifest};

/// The protocol versions the endpoint speaks, newest first.
pub const SUPPORTED: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// What it answers a client asking for a version it does not speak.
pub const LATEST: &str = SUPPORTED[0];

/// JSON-RPC's and MCP's error codes the endpoint answers.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    /// The tools could not be listed (the plugin is not enabled in the run's chat).
    pub const INTERNAL: i64 = -32603;
    /// The bearer token is missing, or not the run's (HTTP 401).
    pub const UNAUTHORIZED: i64 = -32001;
    /// The run has ended, or has not started (HTTP 403).
    pub const RUN_NOT_RUNNING: i64 = -32002;
}

/// What a run's endpoint knows of its caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunCaller {
    pub run: String,
    pub plugin: String,
    pub agent: String,
    pub read_only: bool,
    pub thread: String,
}

/// One message, read.
#[derive(Clone, Debug, PartialEq)]
pub enum Message {
    Initialize {
        id: Value,
        version: Option<String>,
    },
    Ping {
        id: Value,
    },
    ListTools {
        id: Value,
    },
    CallTool {
        id: Value,
        tool: String,
        arguments: Value,
    },
    /// A notification or a response: nothing to answer.
    NoAnswer,
    /// A request the endpoint answers with an error.
    Refused {
        id: Value,
        code: i64,
        message: String,
    },
}

/// Reads one POSTed body.
pub fn read(body: &[u8]) -> Message {
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => return refused(Value::Null, code::PARSE_ERROR, format!("not JSON: {e}")),
    };
    let Some(object) = value.as_object() else {
        return refused(
            Value::Null,
            code::INVALID_REQUEST,
            "one JSON-RPC message per POST, an object (batches are not taken)",
        );
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        let id = object.get("id").cloned().unwrap_or(Value::Null);
        return refused(id, code::INVALID_REQUEST, "jsonrpc: must be \"2.0\"");
    }
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        // A response to something the endpoint never asks: nothing to do.
        return Message::NoAnswer;
    };
    let Some(id) = object.get("id").cloned().filter(is_id) else {
        return Message::NoAnswer;
    };
    let params = object.get("params").cloned().unwrap_or(json!({}));
    match method {
        "initialize" => Message::Initialize {
            id,
            version: params
                .get("protocolVersion")
                .and_then(Value::as_str)
                .map(String::from),
        },
        "ping" => Message::Ping { id },
        "tools/list" => Message::ListTools { id },
        "tools/call" => {
            let Some(name) = params.get("name").and_then(Value::as_str) else {
                return refused(id, code::INVALID_PARAMS, "params.name: the tool to call");
            };
            let arguments = match params.get("arguments") {
                None | Some(Value::Null) => json!({}),
                Some(a @ Value::Object(_)) => a.clone(),
                Some(_) => {
                    return refused(id, code::INVALID_PARAMS, "params.arguments: an object");
                }
            };
            Message::CallTool {
                id,
                tool: name.to_string(),
                arguments,
            }
        }
        other => refused(
            id,
            code::METHOD_NOT_FOUND,
            format!("{other}: this endpoint serves initialize, ping, tools/list and tools/call"),
        ),
    }
}

fn is_id(id: &Value) -> bool {
    id.is_string() || id.is_number()
}

fn refused(id: Value, code: i64, message: impl Into<String>) -> Message {
    Message::Refused {
        id,
        code,
        message: message.into(),
    }
}

/// The version to answer a client that asked for `asked`.
pub fn negotiate(asked: Option<&str>) -> &'static str {
    SUPPORTED
        .iter()
        .find(|v| Some(**v) == asked)
        .copied()
        .unwrap_or(LATEST)
}

/// `initialize`'s result.
pub fn initialize(run: &RunCaller, asked: Option<&str>) -> Value {
    let mut instructions = format!(
        "You are agent \"{}\" of plugin \"{}\", in run {} in the chat's hidden thread {}. \
         These tools are the plugin's.",
        run.agent, run.plugin, run.run, run.thread
    );
    if run.read_only {
        instructions.push_str(
            " This agent is read-only: it must not change anything, and the chat's working \
             tree is mounted read-only for it.",
        );
    }
    json!({
        "protocolVersion": negotiate(asked),
        "capabilities": { "tools": { "listChanged": false } },
        "serverInfo": { "name": "loop-plugins", "version": env!("CARGO_PKG_VERSION") },
        "instructions": instructions,
    })
}

/// The tools the manifest gives the run's agent, as `tools/list` lists them.
pub fn tools(manifest: &Manifest, run: &RunCaller) -> Vec<Value> {
    let Some(agent) = manifest.agent(&run.agent) else {
        return Vec::new();
    };
    agent
        .tools
        .iter()
        .filter_map(|name| manifest.tool(name))
        .map(|tool| {
            let mut t = Map::new();
            t.insert("name".into(), json!(tool.mcp_name()));
            t.insert(
                "description".into(),
                json!(tool.description.clone().unwrap_or_default()),
            );
            t.insert("inputSchema".into(), tool.input_schema.clone());
            if let Some(schema) = &tool.output_schema {
                t.insert("outputSchema".into(), schema.clone());
            }
            if run.read_only {
                t.insert("annotations".into(), json!({ "readOnlyHint": true }));
            }
            Value::Object(t)
        })
        .collect()
}

/// The manifest's tool a `tools/call` names, when the run's agent was given it.
pub fn given_tool<'a>(manifest: &Manifest, run: &RunCaller, name: &'a str) -> Option<&'a str> {
    let tool = name.strip_prefix(MCP_TOOL_PREFIX)?;
    let agent = manifest.agent(&run.agent)?;
    agent.tools.iter().any(|t| t == tool).then_some(tool)
}

/// Why a `tools/call` name is refused: the tools the run has.
pub fn unknown_tool(manifest: &Manifest, run: &RunCaller, name: &str) -> String {
    let names: Vec<String> = tools(manifest, run)
        .iter()
        .filter_map(|t| t["name"].as_str().map(String::from))
        .collect();
    format!(
        "unknown tool {name}: agent {} of this run has [{}]",
        run.agent,
        names.join(", ")
    )
}

/// A tool's result in MCP's shape.
pub fn call_result(result: &ToolResult) -> Value {
    let mut r = Map::new();
    r.insert("content".into(), Value::Array(result.content.clone()));
    if let Some(sc) = &result.structured_content {
        r.insert("structuredContent".into(), sc.clone());
    }
    r.insert("isError".into(), json!(result.is_error));
    Value::Object(r)
}

/// A JSON-RPC answer.
pub fn answer(id: &Value, result: Value) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "result": result })
}

/// A JSON-RPC error.
pub fn error(id: &Value, code: i64, message: &str) -> Value {
    json!({ "jsonrpc": "2.0", "id": id, "error": { "code": code, "message": message } })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        model::manifest::parse_str(
            r#"{
              "id": "echo", "name": "Echo", "version": "1", "api": "1",
              "capabilities": ["agent.readonly", "agent.write"],
              "agents": [
                { "id": "say", "read_only": true, "tools": ["echo"] },
                { "id": "keep", "tools": ["echo", "store"] }
              ],
              "tools": [
                { "name": "echo", "description": "says it back",
                  "input_schema": { "type": "object", "properties": { "text": { "type": "string" } } },
                  "output_schema": { "type": "object", "properties": { "echo": { "type": "string" } } } },
                { "name": "store", "input_schema": { "type": "object" } }
              ]
            }"#,
        )
        .unwrap()
    }

    fn view(agent: &str, read_only: bool) -> RunCaller {
        RunCaller {
            run: "echo-1".into(),
            plugin: "echo".into(),
            agent: agent.into(),
            read_only,
            thread: "plugin:echo".into(),
        }
    }

    fn msg(v: Value) -> Message {
        read(v.to_string().as_bytes())
    }

    #[test]
    fn each_message_is_read_for_what_it_asks() {
        assert_eq!(
            msg(json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                       "params": {"protocolVersion": "2025-06-18"}})),
            Message::Initialize {
                id: json!(1),
                version: Some("2025-06-18".into())
            }
        );
        assert_eq!(
            msg(json!({"jsonrpc": "2.0", "id": "a", "method": "tools/call",
                       "params": {"name": "plugin_echo"}})),
            Message::CallTool {
                id: json!("a"),
                tool: "plugin_echo".into(),
                arguments: json!({})
            }
        );
        assert_eq!(
            msg(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            Message::NoAnswer
        );
        assert_eq!(
            msg(json!({"jsonrpc": "2.0", "id": 3, "result": {}})),
            Message::NoAnswer
        );
        let code_of = |m: Message| match m {
            Message::Refused { code, .. } => code,
            other => panic!("refused expected, got {other:?}"),
        };
        assert_eq!(code_of(read(b"{")), code::PARSE_ERROR);
        assert_eq!(code_of(msg(json!([]))), code::INVALID_REQUEST);
        assert_eq!(
            code_of(msg(json!({"jsonrpc": "1.0", "id": 1, "method": "ping"}))),
            code::INVALID_REQUEST
        );
        assert_eq!(
            code_of(msg(
                json!({"jsonrpc": "2.0", "id": 1, "method": "resources/list"})
            )),
            code::METHOD_NOT_FOUND
        );
        assert_eq!(
            code_of(msg(
                json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                               "params": {"name": "plugin_echo", "arguments": [1]}})
            )),
            code::INVALID_PARAMS
        );
    }

    #[test]
    fn a_version_the_endpoint_speaks_is_kept_and_any_other_gets_the_latest() {
        assert_eq!(negotiate(Some("2025-03-26")), "2025-03-26");
        assert_eq!(negotiate(Some("2099-01-01")), LATEST);
        assert_eq!(negotiate(None), LATEST);
    }

    #[test]
    fn a_run_is_offered_exactly_its_agents_tools_with_their_schemas() {
        let m = manifest();
        let listed = tools(&m, &view("say", true));
        assert_eq!(listed.len(), 1);
        assert_eq!(listed[0]["name"], "plugin_echo");
        assert_eq!(
            listed[0]["inputSchema"]["properties"]["text"]["type"],
            "string"
        );
        assert_eq!(
            listed[0]["outputSchema"]["properties"]["echo"]["type"],
            "string"
        );
        assert_eq!(listed[0]["annotations"]["readOnlyHint"], true);
        let keep = tools(&m, &view("keep", false));
        let names: Vec<&str> = keep.iter().map(|t| t["name"].as_str().unwrap()).collect();
        assert_eq!(names, ["plugin_echo", "plugin_store"]);
        assert!(keep[1].get("outputSchema").is_none());
        assert!(keep[0].get("annotations").is_none());
    }

    #[test]
    fn only_a_tool_given_to_the_agent_by_its_mcp_name_is_called() {
        let m = manifest();
        let say = view("say", true);
        assert_eq!(given_tool(&m, &say, "plugin_echo"), Some("echo"));
        assert_eq!(given_tool(&m, &say, "echo"), None, "the MCP name only");
        assert_eq!(given_tool(&m, &say, "plugin_store"), None, "not say's");
        assert_eq!(
            given_tool(&m, &view("keep", false), "plugin_store"),
            Some("store")
        );
        assert!(unknown_tool(&m, &say, "plugin_store").contains("[plugin_echo]"));
    }

    #[test]
    fn a_read_only_agent_is_told_so() {
        let told = initialize(&view("say", true), Some("2025-06-18"));
        assert_eq!(told["protocolVersion"], "2025-06-18");
        assert!(told["instructions"].as_str().unwrap().contains("read-only"));
        let told = initialize(&view("keep", false), None);
        assert!(!told["instructions"].as_str().unwrap().contains("read-only"));
    }

    #[test]
    fn a_result_takes_mcps_field_names() {
        let result = ToolResult {
            content: vec![json!({"type": "text", "text": "{\"echo\":\"hi\"}"})],
            structured_content: Some(json!({"echo": "hi"})),
            is_error: false,
            error_code: None,
        };
        assert_eq!(
            call_result(&result),
            json!({"content": [{"type": "text", "text": "{\"echo\":\"hi\"}"}],
                   "structuredContent": {"echo": "hi"}, "isError": false})
        );
    }
}
