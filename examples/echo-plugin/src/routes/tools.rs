//! `POST /tools/{tool}`: the `echo` tool. `{"text": s}` answers `s` as text content and
//! `{"echo": s}` as structured content; anything else is an `is_error` result.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::error::{ApiError, parse_json};
use crate::state::AppState;

#[derive(Debug, Deserialize)]
pub struct ToolRequest {
    pub input: Map<String, Value>,
    #[serde(default)]
    pub agent: String,
    #[serde(default)]
    pub thread_id: String,
    #[serde(default)]
    pub run_id: String,
}

/// The contract's `ToolResult`, MCP-like.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolResult {
    pub content: Vec<Content>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    pub is_error: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Content {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub text: String,
}

impl ToolResult {
    pub fn text(text: impl Into<String>, structured: Value) -> Self {
        Self {
            content: vec![Content {
                kind: "text",
                text: text.into(),
            }],
            structured_content: Some(structured),
            is_error: false,
        }
    }

    pub fn error(text: impl Into<String>) -> Self {
        Self {
            content: vec![Content {
                kind: "text",
                text: text.into(),
            }],
            structured_content: None,
            is_error: true,
        }
    }
}

/// The echo tool.
pub fn echo(input: &Map<String, Value>) -> ToolResult {
    match input.get("text") {
        Some(Value::String(text)) => ToolResult::text(text.clone(), json!({ "echo": text })),
        Some(_) => ToolResult::error("input.text: expected a string"),
        None => ToolResult::error("input.text: missing"),
    }
}

pub async fn call(
    State(state): State<AppState>,
    Path(tool): Path<String>,
    body: Bytes,
) -> Result<Json<ToolResult>, ApiError> {
    if state.manifest.tool(&tool).is_none() {
        return Err(ApiError::not_found(format!("no such tool: {tool}")));
    }
    let req: ToolRequest = parse_json(&body)?;
    tracing::info!(
        tool,
        agent = req.agent,
        thread_id = req.thread_id,
        run_id = req.run_id,
        "tool call"
    );
    let result = match tool.as_str() {
        "echo" => echo(&req.input),
        other => ToolResult::error(format!(
            "{other}: declared in the manifest but not implemented"
        )),
    };
    Ok(Json(result))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn input(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn echoes_text() {
        let r = echo(&input(json!({"text": "hi"})));
        assert_eq!(r, ToolResult::text("hi", json!({"echo": "hi"})));
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"content": [{"type": "text", "text": "hi"}], "structured_content": {"echo": "hi"}, "is_error": false})
        );
    }

    #[test]
    fn bad_input_is_an_error_result() {
        assert!(echo(&input(json!({}))).is_error);
        assert!(echo(&input(json!({"text": 3}))).is_error);
        let v = serde_json::to_value(echo(&input(json!({})))).unwrap();
        assert!(v.get("structured_content").is_none());
    }
}
