//! The MCP a run's endpoint speaks, decided purely: which JSON-RPC message asks for what, the
//! tools a run is offered, a tool result in MCP's shape, and every error's code.
//!
//! Streamable HTTP without sessions (each POST carries one message and its answer is one JSON
//! body; under 2025-03-26 and 2024-11-05, or without a version header, a batch too, answered
//! with an array), tools only. A request's `Origin`, when it has one, must be this server's
//! (else 403); a refusal names the request's id when it had one.
//!
//! | message | answer |
//! |---|---|
//! | `initialize` | the protocol version (the client's when supported, else [`LATEST`]), `tools` capability, `instructions` naming the agent and, for a read-only one, saying so |
//! | `ping` | `{}` |
//! | `tools/list` | the tools the manifest gives the run's agent, `plugin_<tool>`, with `inputSchema`, `outputSchema` and, for a read-only agent, `readOnlyHint` |
//! | `tools/call` | the tool's result (`content`, `structuredContent`, `isError`); a name the run was not given is `-32602` |
//! | a notification or a response | nothing (HTTP 202) |
//! | a request whose `id` is null or not a string or number | `-32600` |
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
    /// The request's Origin is not this server's (HTTP 403).
    pub const ORIGIN_REFUSED: i64 = -32003;
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

/// What a POSTed body holds: one message, or a batch of them.
#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    One(Message),
    Batch(Vec<Message>),
}

/// The revisions a batch is taken under: 2025-03-26 says a server MUST support receiving
/// them, and 2024-11-05 is JSON-RPC 2.0's own; 2025-06-18 removed them.
pub const BATCH_REVISIONS: [&str; 2] = ["2025-03-26", "2024-11-05"];

/// The revision a request without an `MCP-Protocol-Version` header speaks (2025-06-18,
/// "Protocol Version Header": the server assumes 2025-03-26).
pub const WITHOUT_HEADER: &str = "2025-03-26";

/// Reads one POSTed body, of the revision `version` (its `MCP-Protocol-Version` header): one
/// message, or a batch where that revision has them.
pub fn read_body(body: &[u8], version: Option<&str>) -> Body {
    let value: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(e) => {
            return Body::One(refused(
                Value::Null,
                code::PARSE_ERROR,
                format!("not JSON: {e}"),
            ));
        }
    };
    let Value::Array(items) = value else {
        return Body::One(message(value, false));
    };
    let revision = version.unwrap_or(WITHOUT_HEADER);
    if !BATCH_REVISIONS.contains(&revision) {
        return Body::One(refused(
            Value::Null,
            code::INVALID_REQUEST,
            format!(
                "one JSON-RPC message per POST under protocol {revision}: batches were removed in \
                 2025-06-18 (they are taken under {})",
                BATCH_REVISIONS.join(" and ")
            ),
        ));
    }
    if items.is_empty() {
        return Body::One(refused(
            Value::Null,
            code::INVALID_REQUEST,
            "an empty batch",
        ));
    }
    Body::Batch(items.into_iter().map(|item| message(item, true)).collect())
}

/// Reads one POSTed body holding one message (a batch is refused).
pub fn read(body: &[u8]) -> Message {
    match read_body(body, Some(LATEST)) {
        Body::One(m) => m,
        Body::Batch(_) => unreachable!("no batches under the latest revision"),
    }
}

/// The request's id, for a refusal made before the body is read: null when there is none to
/// name (not JSON, a batch, a notification, an id that is not a string or a number).
pub fn id_of(body: &[u8]) -> Value {
    serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|v| v.get("id").cloned())
        .filter(is_id)
        .unwrap_or(Value::Null)
}

/// Whether a request's `Origin` may be served: none (a client outside a browser), or this
/// server's own (its scheme's host and port are the request's `Host`). 2025-11-25: a present
/// Origin that is not valid is answered 403.
pub fn origin_allowed(origin: Option<&str>, host: Option<&str>) -> bool {
    let Some(origin) = origin else {
        return true;
    };
    let Some(host) = host else {
        return false;
    };
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    matches!(scheme, "http" | "https") && authority.eq_ignore_ascii_case(host)
}

/// One message of a body; `in_batch` when it came in a batch (where `initialize` may not).
fn message(value: Value, in_batch: bool) -> Message {
    let Some(object) = value.as_object() else {
        return refused(
            Value::Null,
            code::INVALID_REQUEST,
            "a JSON-RPC message is an object",
        );
    };
    if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
        let id = object
            .get("id")
            .cloned()
            .filter(is_id)
            .unwrap_or(Value::Null);
        return refused(id, code::INVALID_REQUEST, "jsonrpc: must be \"2.0\"");
    }
    let Some(method) = object.get("method").and_then(Value::as_str) else {
        // A response to something the endpoint never asks: nothing to do.
        return Message::NoAnswer;
    };
    let id = match object.get("id") {
        // No id member: a notification.
        None => return Message::NoAnswer,
        Some(id) if is_id(id) => id.clone(),
        Some(_) => {
            return refused(
                Value::Null,
                code::INVALID_REQUEST,
                "id: a string or a number (a notification has no id at all)",
            );
        }
    };
    let params = object.get("params").cloned().unwrap_or(json!({}));
    match method {
        "initialize" if in_batch => refused(
            id,
            code::INVALID_REQUEST,
            "initialize may not be part of a batch",
        ),
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
            if let Some(description) = &tool.description {
                t.insert("description".into(), json!(description));
            }
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

    /// JSON-RPC 2.0 (every MCP revision): an id is a string or a number; a request with
    /// `"id": null` is not a notification (a notification has no id member) but invalid.
    #[test]
    fn a_request_whose_id_is_null_is_refused_not_taken_as_a_notification() {
        match msg(json!({"jsonrpc": "2.0", "id": null, "method": "ping"})) {
            Message::Refused { id, code, .. } => {
                assert_eq!((id, code), (Value::Null, code::INVALID_REQUEST));
            }
            other => panic!("{other:?}"),
        }
        match msg(json!({"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"})) {
            Message::Refused { code, .. } => assert_eq!(code, code::INVALID_REQUEST),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            msg(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            Message::NoAnswer,
            "no id member: a notification"
        );
    }

    /// 2025-03-26 (and 2024-11-05, JSON-RPC's own rule): a server must take a batch and answer
    /// an array; 2025-06-18 removed batches, so from then on an array is refused. No header
    /// means 2025-03-26 (2025-06-18, "Protocol Version Header").
    #[test]
    fn a_batch_is_taken_under_the_revisions_that_have_batches_and_refused_after() {
        let batch = json!([
            {"jsonrpc": "2.0", "id": 1, "method": "ping"},
            {"jsonrpc": "2.0", "method": "notifications/initialized"},
            {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
            {"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {}}
        ])
        .to_string();
        for version in [None, Some("2025-03-26"), Some("2024-11-05")] {
            match read_body(batch.as_bytes(), version) {
                Body::Batch(messages) => {
                    assert_eq!(messages.len(), 4, "{version:?}");
                    assert_eq!(messages[0], Message::Ping { id: json!(1) });
                    assert_eq!(messages[1], Message::NoAnswer);
                    assert_eq!(messages[2], Message::ListTools { id: json!(2) });
                    // "The initialization request MUST NOT be part of a JSON-RPC batch".
                    assert!(matches!(
                        &messages[3],
                        Message::Refused { id, code, .. } if *id == json!(3) && *code == code::INVALID_REQUEST
                    ));
                }
                other => panic!("{version:?}: {other:?}"),
            }
        }
        for version in [Some("2025-06-18"), Some("2025-11-25")] {
            match read_body(batch.as_bytes(), version) {
                Body::One(Message::Refused { code, message, .. }) => {
                    assert_eq!(code, code::INVALID_REQUEST);
                    assert!(message.contains("2025-03-26"), "{message}");
                }
                other => panic!("{version:?}: {other:?}"),
            }
        }
        // An empty array is an invalid request under every revision (JSON-RPC 2.0).
        assert!(matches!(
            read_body(b"[]", None),
            Body::One(Message::Refused {
                code: code::INVALID_REQUEST,
                ..
            })
        ));
    }

    /// A refusal before the message is read (a token, a version header) still names the
    /// request's id when it had one (JSON-RPC 2.0: the id is null only when it could not be
    /// read).
    #[test]
    fn the_id_of_a_request_is_found_for_refusals_made_before_reading_it() {
        assert_eq!(
            id_of(br#"{"jsonrpc": "2.0", "id": 7, "method": "tools/list"}"#),
            json!(7)
        );
        assert_eq!(
            id_of(br#"{"jsonrpc": "2.0", "id": "x", "method": "ping"}"#),
            json!("x")
        );
        assert_eq!(id_of(br#"{"id": null}"#), Value::Null);
        assert_eq!(id_of(b"[{\"id\": 1}]"), Value::Null);
        assert_eq!(id_of(b"not json"), Value::Null);
    }

    /// 2025-11-25, "Security Warning": a present Origin that is not the server's own is
    /// answered 403; a client outside a browser sends none.
    #[test]
    fn an_origin_other_than_the_servers_own_is_refused() {
        assert!(origin_allowed(None, Some("api.loop-plugins.svc:8080")));
        assert!(origin_allowed(
            Some("http://api.loop-plugins.svc:8080"),
            Some("api.loop-plugins.svc:8080")
        ));
        assert!(origin_allowed(
            Some("https://127.0.0.1:30080"),
            Some("127.0.0.1:30080")
        ));
        assert!(!origin_allowed(
            Some("https://evil.example"),
            Some("127.0.0.1:30080")
        ));
        assert!(!origin_allowed(Some("null"), Some("127.0.0.1:30080")));
        assert!(!origin_allowed(Some("http://127.0.0.1:30080"), None));
        assert!(!origin_allowed(
            Some("http://127.0.0.1:30081"),
            Some("127.0.0.1:30080")
        ));
    }

    /// 2025-06-18 and later, `Tool`: `description` is optional; a tool without one is listed
    /// without it, not with an empty string.
    #[test]
    fn a_tool_without_a_description_is_listed_without_one() {
        let m = manifest();
        let keep = tools(&m, &view("keep", false));
        assert_eq!(keep[0]["description"], "says it back");
        assert!(keep[1].get("description").is_none(), "{}", keep[1]);
    }
}
