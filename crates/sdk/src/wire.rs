//! The bodies of the host → plugin contract (`openapi/plugin-contract-v1.yaml`), as serde
//! types. Written by hand, not generated: eight small schemas read better as Rust an author
//! can open than as generator output, and `tests/wire_drift.rs` holds them to the spec (every
//! schema's properties and required fields, and each type's serialized fields, compared both
//! ways), as the reference's `make sdk-gen-check` holds its generated Go types.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// `POST /actions/{action}`'s body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ActionRequest {
    pub trigger: Trigger,
    /// The scheduled task's id, with `trigger: schedule`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// `workflow:<run id>:<node id>`, with `trigger: workflow`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The workflow node's rendered input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
}

/// What ran the action.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Trigger {
    /// Someone ran it (the app, `loop plugin`, the host API).
    Manual,
    /// A scheduled task.
    Schedule,
    /// A workflow's plugin node.
    Workflow,
}

impl ActionRequest {
    /// The contract's rules beyond the shape: a schedule call names its task, a workflow call
    /// its `workflow:<run>:<node>`.
    pub fn check(&self) -> Result<(), String> {
        match self.trigger {
            Trigger::Schedule if self.task_id.as_deref().is_none_or(str::is_empty) => {
                Err("trigger schedule needs a task_id".into())
            }
            Trigger::Workflow if !self.run_id.as_deref().is_some_and(is_workflow_run_id) => {
                Err("trigger workflow needs a run_id workflow:<run id>:<node id>".into())
            }
            _ => Ok(()),
        }
    }
}

/// `workflow:<run>:<node>` (the spec's `^workflow:[^:]+:.+$`).
fn is_workflow_run_id(id: &str) -> bool {
    id.strip_prefix("workflow:")
        .and_then(|rest| rest.split_once(':'))
        .is_some_and(|(run, node)| !run.is_empty() && !node.is_empty())
}

/// `POST /tools/{tool}`'s body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolRequest {
    /// Valid against the tool's `input_schema` (the host checked).
    pub input: serde_json::Map<String, Value>,
    /// The agent whose run called; empty for a workflow's call.
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub thread_id: String,
    /// The agent run's id, or `workflow:<run id>:<node id>`.
    #[serde(default)]
    pub run_id: String,
}

/// A tool's answer, MCP-like.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub content: Vec<ContentBlock>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<serde_json::Map<String, Value>>,
    #[serde(default)]
    pub is_error: bool,
}

impl ToolResult {
    /// Text for the agent, no structured content.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(text)],
            structured_content: None,
            is_error: false,
        }
    }

    /// `value` as both: its JSON as the agent's text and as `structured_content` (what a tool
    /// with an `output_schema` answers). `None` when it is not a JSON object.
    pub fn json<T: Serialize>(value: &T) -> Option<Self> {
        let Value::Object(object) = serde_json::to_value(value).ok()? else {
            return None;
        };
        Some(Self {
            content: vec![ContentBlock::text(
                Value::Object(object.clone()).to_string(),
            )],
            structured_content: Some(object),
            is_error: false,
        })
    }

    /// The tool failed; the agent reads why.
    pub fn error(message: impl Into<String>) -> Self {
        Self {
            content: vec![ContentBlock::text(message)],
            structured_content: None,
            is_error: true,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContentBlock {
    /// Always `text`.
    #[serde(rename = "type")]
    pub kind: String,
    pub text: String,
}

impl ContentBlock {
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            kind: "text".into(),
            text: text.into(),
        }
    }
}

/// `POST /runs/{run_id}/done`'s body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunDone {
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Done,
    Failed,
}

/// `POST /events`'s body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    #[serde(rename = "type")]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
    pub data: Value,
}

/// `POST /switches/{switch}`'s body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchRequest {
    pub on: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_id: Option<String>,
}

/// A switch's new state, as the pill shows it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SwitchState {
    pub on: bool,
    /// The tooltip, at most 200 characters; `None` keeps the current one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub busy: bool,
}

/// `GET /healthz`'s answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// Always `ok`.
    pub status: String,
    pub id: String,
    pub version: String,
}

/// Every error answer: `{"error": "..."}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    pub error: String,
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn action_rules() {
        let req = |v: Value| serde_json::from_value::<ActionRequest>(v).unwrap().check();
        assert!(req(json!({"trigger": "manual"})).is_ok());
        assert!(req(json!({"trigger": "schedule", "task_id": "t"})).is_ok());
        assert!(
            req(json!({"trigger": "schedule"}))
                .unwrap_err()
                .contains("task_id")
        );
        assert!(req(json!({"trigger": "workflow", "run_id": "workflow:r:n"})).is_ok());
        assert!(req(json!({"trigger": "workflow", "run_id": "workflow::n"})).is_err());
        assert!(req(json!({"trigger": "workflow", "run_id": "r"})).is_err());
        assert!(serde_json::from_value::<ActionRequest>(json!({"trigger": "cron"})).is_err());
    }

    #[test]
    fn a_json_result_is_both_text_and_structured() {
        let r = ToolResult::json(&json!({"echo": "hi"})).unwrap();
        assert_eq!(r.content[0].text, r#"{"echo":"hi"}"#);
        assert_eq!(r.structured_content.unwrap()["echo"], "hi");
        assert!(ToolResult::json(&"just text").is_none());
        assert!(ToolResult::error("nope").is_error);
    }
}
