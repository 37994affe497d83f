//! The rules of a tool call, pure: who may call which tool and with what time limit, the
//! input against `input_schema` before it reaches the plugin, and the plugin's answer made
//! into the result the caller sees (`structured_content` checked against `output_schema`, a
//! mismatch an `is_error` result, as are answers over 1 MB and every way the container can
//! fail to answer). The compiled schemas come in as values.

use std::time::Duration;

use jsonschema::Validator;
use sdk::wire::ToolRequest;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::ToolCallError;
use crate::Limits;
use crate::client::{CallFailure, PluginAnswer, seconds};
use crate::failure::{self, Failure};
use model::manifest::{Manifest, json_schema};

/// `POST .../tools/{tool}`'s body.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The tool's input: an object its `input_schema` accepts.
    pub input: Value,
    /// The agent whose run calls the tool; empty for a workflow's call.
    #[serde(default)]
    pub agent: String,
    /// The thread of the agent's run; empty for a workflow's call.
    #[serde(default)]
    pub thread_id: String,
    /// The agent run's id, or `workflow:<run id>:<node id>`.
    #[serde(default)]
    pub run_id: String,
    /// A workflow node's own time limit, when longer than the tool's 60 s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
}

/// Who calls a tool.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CalledBy {
    /// An agent's run: only the tools the manifest gives the agent.
    Agent(String),
    /// A workflow's plugin node: any tool of the manifest.
    Workflow,
}

/// Whether `run_id` is `workflow:<run id>:<node id>`.
pub fn is_workflow_run_id(run_id: &str) -> bool {
    let Some(rest) = run_id.strip_prefix("workflow:") else {
        return false;
    };
    match rest.split_once(':') {
        Some((run, node)) => !run.is_empty() && !node.is_empty(),
        None => false,
    }
}

/// Checks who calls `tool` and with what time limit.
pub fn check_call(
    manifest: &Manifest,
    tool: &str,
    call: &ToolCall,
    limits: &Limits,
) -> Result<(CalledBy, Duration), ToolCallError> {
    if manifest.tool(tool).is_none() {
        return Err(ToolCallError::ToolNotFound {
            plugin: manifest.id.clone(),
            tool: tool.into(),
        });
    }
    if !call.input.is_object() {
        return Err(ToolCallError::Invalid(
            "input: must be a JSON object".into(),
        ));
    }
    let workflow = call.run_id.starts_with("workflow:");
    let caller = if workflow {
        if !is_workflow_run_id(&call.run_id) {
            return Err(ToolCallError::Invalid(format!(
                "run_id: {:?} is not workflow:<run id>:<node id>",
                call.run_id
            )));
        }
        if !call.agent.is_empty() || !call.thread_id.is_empty() {
            return Err(ToolCallError::Invalid(
                "agent and thread_id: a workflow's call comes with both empty".into(),
            ));
        }
        CalledBy::Workflow
    } else {
        if call.agent.is_empty() {
            return Err(ToolCallError::Invalid(
                "agent: a tool is called by an agent's run (agent set) or a workflow \
                 (run_id workflow:<run id>:<node id>)"
                    .into(),
            ));
        }
        let Some(agent) = manifest.agent(&call.agent) else {
            return Err(ToolCallError::AgentNotFound {
                plugin: manifest.id.clone(),
                agent: call.agent.clone(),
            });
        };
        if !agent.tools.iter().any(|t| t == tool) {
            return Err(ToolCallError::ToolNotGiven {
                agent: call.agent.clone(),
                tool: tool.into(),
            });
        }
        CalledBy::Agent(call.agent.clone())
    };
    let limit = match call.timeout_seconds {
        None => limits.tool,
        Some(s) if !(s.is_finite() && s > 0.0) => {
            return Err(ToolCallError::Invalid(
                "timeout_seconds: must be a positive number".into(),
            ));
        }
        Some(s) => {
            let asked = Duration::from_secs_f64(s);
            let max = match caller {
                CalledBy::Workflow => limits.workflow_tool_max,
                CalledBy::Agent(_) => limits.tool,
            };
            if asked > max {
                let who = match caller {
                    CalledBy::Workflow => "a workflow's tool call",
                    CalledBy::Agent(_) => {
                        "an agent's tool call (only a workflow may ask for longer)"
                    }
                };
                return Err(ToolCallError::Invalid(format!(
                    "timeout_seconds: {who} may take at most {}",
                    seconds(max)
                )));
            }
            asked
        }
    };
    Ok((caller, limit))
}

/// The body the plugin gets: the contract's `ToolRequest` (the SDK's type, which the spec
/// holds), the call's input moved into it, not copied. The input is an object:
/// [`check_call`] refused any other.
pub fn plugin_body(call: ToolCall) -> ToolRequest {
    let input = match call.input {
        Value::Object(input) => input,
        _ => serde_json::Map::new(),
    };
    ToolRequest {
        input,
        agent: call.agent,
        thread_id: call.thread_id,
        run_id: call.run_id,
    }
}

/// A tool's result, MCP-like, as the caller gets it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub content: Vec<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    #[serde(default)]
    pub is_error: bool,
    /// Why the host made this an error result (absent for the tool's own results).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_code: Option<String>,
}

/// Why the host made a result an error: the host API's error code (`input_invalid`,
/// `output_invalid`, a failed call's).
pub const INPUT_INVALID: &str = "input_invalid";
pub const OUTPUT_INVALID: &str = "output_invalid";

impl ToolResult {
    /// An error result the host made, with the host API's code for why; `content` says why.
    pub fn host_error(code: &str, text: impl Into<String>) -> Self {
        Self {
            content: vec![json!({ "type": "text", "text": text.into() })],
            structured_content: None,
            is_error: true,
            error_code: Some(code.into()),
        }
    }

    /// A failed call as an `is_error` result.
    pub fn from_failure(f: &Failure) -> Self {
        Self::host_error(f.code.as_str(), f.message.clone())
    }
}

/// Checks the input against the tool's compiled `input_schema`.
pub fn check_input(schema: &Result<Validator, String>, input: &Value) -> Result<(), ToolResult> {
    match schema {
        Err(e) => Err(ToolResult::host_error(
            INPUT_INVALID,
            format!("the tool's input_schema does not compile: {e}"),
        )),
        Ok(v) => json_schema::check(v, input).map_err(|why| {
            ToolResult::host_error(
                INPUT_INVALID,
                format!("the input does not match the tool's input_schema: {why}"),
            )
        }),
    }
}

/// The result the caller sees for what the plugin did.
pub fn result_of(
    tool: &str,
    answer: Result<PluginAnswer, CallFailure>,
    output_schema: Option<&Result<Validator, String>>,
) -> ToolResult {
    let answer = match answer {
        Ok(a) => a,
        Err(failure) => return failure_result(tool, &failure),
    };
    if !answer.status.is_success() {
        return ToolResult::host_error(
            failure::FailureCode::PluginError.as_str(),
            format!(
                "tool {tool} failed: the plugin answered {}: {}",
                answer.status.as_u16(),
                answer.error_text()
            ),
        );
    }
    let mut result: ToolResult = match serde_json::from_slice::<Value>(&answer.body)
        .ok()
        .and_then(parse_result)
    {
        Some(r) => r,
        None => {
            return ToolResult::host_error(
                failure::FailureCode::InvalidAnswer.as_str(),
                format!(
                    "tool {tool} answered something other than a tool result \
                     ({{\"content\": [...], \"structured_content\"?, \"is_error\"?}})"
                ),
            );
        }
    };
    result.error_code = None;
    if result.is_error {
        return result;
    }
    let Some(schema) = output_schema else {
        return result;
    };
    let checked = match (schema, &result.structured_content) {
        (Err(e), _) => Err(format!("the tool's output_schema does not compile: {e}")),
        (Ok(_), None) => {
            Err("the tool declares an output_schema but answered no structured_content".to_string())
        }
        (Ok(v), Some(sc)) => json_schema::check(v, sc).map_err(|why| {
            format!("its structured_content does not match the tool's output_schema: {why}")
        }),
    };
    match checked {
        Ok(()) => result,
        Err(why) => {
            let mut error = ToolResult::host_error(
                OUTPUT_INVALID,
                format!("tool {tool} answered a result the host refused: {why}"),
            );
            // What the tool said stays readable after the reason.
            error.content.extend(result.content);
            error
        }
    }
}

/// The answer as a tool result, taken apart (nothing in it copied).
fn parse_result(v: Value) -> Option<ToolResult> {
    let Value::Object(mut v) = v else {
        return None;
    };
    let Some(Value::Array(content)) = v.remove("content") else {
        return None;
    };
    let structured_content = match v.remove("structured_content") {
        None | Some(Value::Null) => None,
        Some(o @ Value::Object(_)) => Some(o),
        Some(_) => return None,
    };
    let is_error = match v.get("is_error") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return None,
    };
    Some(ToolResult {
        content,
        structured_content,
        is_error,
        error_code: None,
    })
}

/// The `is_error` result for a call that brought no answer.
pub fn failure_result(tool: &str, failure: &CallFailure) -> ToolResult {
    ToolResult::from_failure(&failure::of_call(&format!("tool {tool}"), failure))
}

#[cfg(test)]
mod tests {
    use http::StatusCode;

    use super::*;
    use crate::index::Compiled;

    /// The refusal's code in the host API's vocabulary.
    fn code(e: ToolCallError) -> &'static str {
        e.code()
    }

    /// The echo plugin's manifest, with a second tool no agent gets.
    fn manifest() -> Manifest {
        model::manifest::parse_str(
            r#"{
              "id": "echo", "name": "Echo", "version": "1", "api": "1",
              "capabilities": ["agent.readonly"],
              "agents": [{ "id": "say", "read_only": true, "tools": ["echo"] }],
              "tools": [
                { "name": "echo", "description": "echo",
                  "input_schema": { "type": "object", "properties": { "text": { "type": "string" } },
                                    "required": ["text"], "additionalProperties": false },
                  "output_schema": { "type": "object", "properties": { "echo": { "type": "string" } },
                                     "required": ["echo"] } },
                { "name": "score", "description": "score", "input_schema": { "type": "object" } }
              ]
            }"#,
        )
        .unwrap()
    }

    fn call(v: Value) -> ToolCall {
        serde_json::from_value(v).unwrap()
    }

    fn answer(status: u16, body: Value) -> Result<PluginAnswer, CallFailure> {
        Ok(PluginAnswer {
            status: StatusCode::from_u16(status).unwrap(),
            content_type: None,
            body: body.to_string().into(),
        })
    }

    #[test]
    fn an_agent_calls_only_the_tools_it_is_given() {
        let m = manifest();
        let l = Limits::default();
        let (who, limit) = check_call(
            &m,
            "echo",
            &call(
                json!({"input": {"text": "hi"}, "agent": "say", "thread_id": "t", "run_id": "r"}),
            ),
            &l,
        )
        .unwrap();
        assert_eq!((who, limit), (CalledBy::Agent("say".into()), l.tool));
        let e =
            check_call(&m, "score", &call(json!({"input": {}, "agent": "say"})), &l).unwrap_err();
        assert_eq!(code(e), "tool_not_given");
        let e = check_call(
            &m,
            "echo",
            &call(json!({"input": {}, "agent": "nobody"})),
            &l,
        )
        .unwrap_err();
        assert_eq!(code(e), "agent_not_found");
        let e = check_call(&m, "echo", &call(json!({"input": {}})), &l).unwrap_err();
        assert_eq!(code(e), "invalid_body");
        let e =
            check_call(&m, "nope", &call(json!({"input": {}, "agent": "say"})), &l).unwrap_err();
        assert_eq!(code(e), "tool_not_found");
        let e =
            check_call(&m, "echo", &call(json!({"input": [1], "agent": "say"})), &l).unwrap_err();
        assert!(e.to_string().starts_with("input:"), "{e}");
    }

    #[test]
    fn a_workflow_calls_any_tool_with_empty_agent_and_thread_and_may_take_longer() {
        let m = manifest();
        let l = Limits::default();
        let (who, limit) = check_call(
            &m,
            "score",
            &call(json!({"input": {}, "run_id": "workflow:run-7:node-2", "timeout_seconds": 300})),
            &l,
        )
        .unwrap();
        assert_eq!((who, limit), (CalledBy::Workflow, Duration::from_secs(300)));
        for bad in [
            json!({"input": {}, "run_id": "workflow:run-7", }),
            json!({"input": {}, "run_id": "workflow::n"}),
            json!({"input": {}, "run_id": "workflow:r:n", "agent": "say"}),
            json!({"input": {}, "run_id": "workflow:r:n", "thread_id": "t"}),
            json!({"input": {}, "run_id": "workflow:r:n", "timeout_seconds": 7200}),
            json!({"input": {}, "run_id": "workflow:r:n", "timeout_seconds": -1}),
        ] {
            let e = check_call(&m, "score", &call(bad.clone()), &l).unwrap_err();
            assert_eq!(code(e), "invalid_body", "{bad}");
        }
        // An agent's call may not ask for more than 60 s.
        let e = check_call(
            &m,
            "echo",
            &call(json!({"input": {}, "agent": "say", "timeout_seconds": 61})),
            &l,
        )
        .unwrap_err();
        assert!(e.to_string().contains("60s"), "{e}");
        assert!(is_workflow_run_id("workflow:a:b:c"));
        assert!(!is_workflow_run_id("run-1"));
    }

    #[test]
    fn input_is_checked_against_the_input_schema() {
        let c = Compiled::new(manifest());
        let schema = &c.inputs["echo"];
        assert!(check_input(schema, &json!({"text": "hi"})).is_ok());
        let r = check_input(schema, &json!({"text": 5})).unwrap_err();
        assert!(r.is_error);
        assert_eq!(r.error_code.as_deref(), Some("input_invalid"));
        let text = r.content[0]["text"].as_str().unwrap();
        assert!(text.contains("/text"), "{text}");
        let r = check_input(schema, &json!({"text": "a", "extra": 1})).unwrap_err();
        assert!(r.is_error);
        let broken: Result<Validator, String> = Err("bad".into());
        assert!(check_input(&broken, &json!({})).is_err());
    }

    #[test]
    fn structured_content_is_checked_against_the_output_schema() {
        let c = Compiled::new(manifest());
        let out = c.outputs.get("echo");
        let ok = json!({"content": [{"type": "text", "text": "hi"}], "structured_content": {"echo": "hi"}, "is_error": false});
        let r = result_of("echo", answer(200, ok), out);
        assert!(!r.is_error && r.error_code.is_none());
        assert_eq!(r.structured_content, Some(json!({"echo": "hi"})));

        let wrong =
            json!({"content": [{"type": "text", "text": "hi"}], "structured_content": {"echo": 5}});
        let r = result_of("echo", answer(200, wrong), out);
        assert!(r.is_error);
        assert_eq!(r.error_code.as_deref(), Some("output_invalid"));
        assert!(r.structured_content.is_none());
        assert_eq!(
            r.content.len(),
            2,
            "the tool's own content follows the reason"
        );

        let missing = json!({"content": [{"type": "text", "text": "hi"}]});
        let r = result_of("echo", answer(200, missing.clone()), out);
        assert_eq!(r.error_code.as_deref(), Some("output_invalid"));
        // A tool without an output_schema may answer without structured_content.
        let r = result_of("score", answer(200, missing), c.outputs.get("score"));
        assert!(!r.is_error);
        // The tool's own error result is left as it is.
        let own = json!({"content": [{"type": "text", "text": "no"}], "is_error": true});
        let r = result_of("echo", answer(200, own), out);
        assert!(r.is_error && r.error_code.is_none());
    }

    #[test]
    fn every_failure_is_an_error_result() {
        let c = Compiled::new(manifest());
        let out = c.outputs.get("echo");
        let cases = [
            (answer(500, json!({"error": "boom"})), "plugin_error"),
            (
                answer(200, json!({"text": "not a result"})),
                "invalid_answer",
            ),
            (answer(200, json!({"content": "x"})), "invalid_answer"),
            (
                Err(CallFailure::TimedOut(Duration::from_secs(60))),
                "plugin_timeout",
            ),
            (
                Err(CallFailure::Refused("connection refused".into())),
                "plugin_unreachable",
            ),
            (
                Err(CallFailure::TooLarge { cap: 1_048_576 }),
                "answer_too_large",
            ),
            (
                Err(CallFailure::BreakerOpen {
                    retry_after: Duration::from_secs(30),
                }),
                "breaker_open",
            ),
        ];
        for (a, code) in cases {
            let r = result_of("echo", a, out);
            assert!(r.is_error, "{code}");
            assert_eq!(r.error_code.as_deref(), Some(code));
        }
        let r = result_of("echo", answer(500, json!({"error": "boom"})), out);
        assert!(r.content[0]["text"].as_str().unwrap().contains("boom"));
    }
}
