//! The run's tools from its MCP endpoint (`LOOP_RUN_MCP_URL`, served by the API server):
//! an MCP client over streamable HTTP, tools only. It initializes, lists the tools once, and
//! calls them; the bearer token is read from `LOOP_RUN_MCP_TOKEN_FILE` for each request.
//!
//! What the model sees of a call: the tool's `structuredContent` when it has one, else its
//! text; an `isError` result or a refused call as `{"error": ...}`, so it can correct itself.

use std::path::PathBuf;
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::chat::ToolSpec;
use super::tools::Tools;

/// The protocol version the client asks for.
pub const PROTOCOL_VERSION: &str = "2025-06-18";
/// The longest a request may take when the run gives no longer: a tool call's own limit is
/// the host's 60 s. A call that waits for a person's approval takes longer (HostConfig's
/// `approval.wait`, 5 minutes by default, then the tool's 60 s): the runner lets each request
/// run as long as the run may ([`McpTools::connect`]).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(75);

/// Why the endpoint could not be used.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    #[error("reading the run's MCP token from {path}: {source}")]
    Token {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("building the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("calling {url}: {source}")]
    Call {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url} answered {status}: {message}")]
    Refused {
        url: String,
        status: u16,
        message: String,
    },
    #[error("{method} failed ({code}): {message}")]
    Rpc {
        method: String,
        code: i64,
        message: String,
    },
    #[error("{method} answered something other than its result: {body}")]
    Shape { method: String, body: String },
}

/// A connection to a run's MCP endpoint.
pub struct McpTools {
    http: reqwest::Client,
    url: String,
    token_file: PathBuf,
    version: String,
    tools: Vec<ToolSpec>,
    next_id: std::sync::atomic::AtomicU64,
}

impl McpTools {
    /// Initializes with the endpoint at `url` and lists its tools. A request may take as long
    /// as the run (`run_limit`, at least [`REQUEST_TIMEOUT`]): a tool call waiting for a
    /// person's approval is held open until the person decides or the wait runs out.
    pub async fn connect(
        url: &str,
        token_file: PathBuf,
        run_limit: Duration,
    ) -> Result<Self, McpError> {
        let http = reqwest::Client::builder()
            .timeout(run_limit.max(REQUEST_TIMEOUT))
            .build()
            .map_err(McpError::Client)?;
        let mut mcp = Self {
            http,
            url: url.into(),
            token_file,
            version: PROTOCOL_VERSION.into(),
            tools: Vec::new(),
            next_id: 1.into(),
        };
        let init = mcp
            .request(
                "initialize",
                json!({
                    "protocolVersion": PROTOCOL_VERSION,
                    "capabilities": {},
                    "clientInfo": { "name": "loop-plugins-agent", "version": env!("CARGO_PKG_VERSION") },
                }),
            )
            .await?;
        if let Some(v) = init.get("protocolVersion").and_then(Value::as_str) {
            mcp.version = v.into();
        }
        mcp.notify("notifications/initialized").await?;
        let listed = mcp.request("tools/list", json!({})).await?;
        mcp.tools = tool_specs(&listed).ok_or_else(|| McpError::Shape {
            method: "tools/list".into(),
            body: listed.to_string(),
        })?;
        Ok(mcp)
    }

    fn token(&self) -> Result<String, McpError> {
        std::fs::read_to_string(&self.token_file)
            .map(|t| t.trim().to_string())
            .map_err(|source| McpError::Token {
                path: self.token_file.clone(),
                source,
            })
    }

    async fn post(&self, body: &Value) -> Result<Option<Value>, McpError> {
        let call = |source| McpError::Call {
            url: self.url.clone(),
            source,
        };
        let response = self
            .http
            .post(&self.url)
            .bearer_auth(self.token()?)
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", &self.version)
            .json(body)
            .send()
            .await
            .map_err(call)?;
        let status = response.status();
        if status == reqwest::StatusCode::ACCEPTED {
            return Ok(None);
        }
        let text = response.text().await.map_err(call)?;
        let value: Option<Value> = serde_json::from_str(&text).ok();
        if !status.is_success() {
            let message = value
                .as_ref()
                .and_then(|v| v["error"]["message"].as_str())
                .map(String::from)
                .unwrap_or_else(|| text.chars().take(512).collect());
            return Err(McpError::Refused {
                url: self.url.clone(),
                status: status.as_u16(),
                message,
            });
        }
        Ok(value)
    }

    async fn request(&self, method: &str, params: Value) -> Result<Value, McpError> {
        let id = self
            .next_id
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let body = json!({ "jsonrpc": "2.0", "id": id, "method": method, "params": params });
        let shape = |body: String| McpError::Shape {
            method: method.into(),
            body,
        };
        let answer = self
            .post(&body)
            .await?
            .ok_or_else(|| shape(String::new()))?;
        if let Some(error) = answer.get("error") {
            return Err(McpError::Rpc {
                method: method.into(),
                code: error["code"].as_i64().unwrap_or_default(),
                message: error["message"].as_str().unwrap_or_default().into(),
            });
        }
        answer
            .get("result")
            .cloned()
            .ok_or_else(|| shape(answer.to_string()))
    }

    async fn notify(&self, method: &str) -> Result<(), McpError> {
        self.post(&json!({ "jsonrpc": "2.0", "method": method }))
            .await
            .map(|_| ())
    }
}

/// `tools/list`'s result as the model is offered it. A tool writes unless the server marks
/// it `readOnlyHint` (MCP's default).
pub fn tool_specs(listed: &Value) -> Option<Vec<ToolSpec>> {
    listed
        .get("tools")?
        .as_array()?
        .iter()
        .map(|t| {
            Some(ToolSpec {
                name: t.get("name")?.as_str()?.to_string(),
                description: t
                    .get("description")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                input_schema: t.get("inputSchema")?.clone(),
                writes: t["annotations"]["readOnlyHint"].as_bool() != Some(true),
            })
        })
        .collect()
}

/// What the model sees of a `tools/call` result.
pub fn for_model(result: &Value) -> Value {
    let text: Vec<&str> = result["content"]
        .as_array()
        .map(|c| c.iter().filter_map(|p| p["text"].as_str()).collect())
        .unwrap_or_default();
    if result["isError"].as_bool() == Some(true) {
        return json!({ "error": text.join("\n") });
    }
    match result.get("structuredContent") {
        Some(sc) if !sc.is_null() => sc.clone(),
        _ => json!({ "text": text.join("\n") }),
    }
}

impl Tools for McpTools {
    fn list(&self) -> Vec<ToolSpec> {
        self.tools.clone()
    }

    fn call(&self, name: &str, arguments: Value) -> BoxFuture<'_, Value> {
        let params = json!({ "name": name, "arguments": arguments });
        Box::pin(async move {
            match self.request("tools/call", params).await {
                Ok(result) => for_model(&result),
                Err(e) => json!({ "error": e.to_string() }),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_tool_writes_unless_marked_read_only() {
        let specs = tool_specs(&json!({"tools": [
            {"name": "plugin_echo", "description": "d", "inputSchema": {"type": "object"},
             "annotations": {"readOnlyHint": true}},
            {"name": "plugin_store", "inputSchema": {"type": "object"}}
        ]}))
        .unwrap();
        assert_eq!(
            specs
                .iter()
                .map(|s| (s.name.as_str(), s.writes))
                .collect::<Vec<_>>(),
            [("plugin_echo", false), ("plugin_store", true)]
        );
        assert!(
            tool_specs(&json!({"tools": [{"name": "x"}]})).is_none(),
            "no schema"
        );
    }

    #[test]
    fn the_model_sees_structured_content_else_text_and_errors_as_errors() {
        assert_eq!(
            for_model(&json!({"content": [{"type": "text", "text": "{}"}],
                              "structuredContent": {"echo": "hi"}, "isError": false})),
            json!({"echo": "hi"})
        );
        assert_eq!(
            for_model(
                &json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})
            ),
            json!({"text": "a\nb"})
        );
        assert_eq!(
            for_model(
                &json!({"content": [{"type": "text", "text": "bad input"}], "isError": true})
            ),
            json!({"error": "bad input"})
        );
    }
}
