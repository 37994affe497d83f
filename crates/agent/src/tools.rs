//! The tools a run offers its model: the run's MCP endpoint's ([`crate::mcp::McpTools`]), or
//! [`NoTools`] for a run given no endpoint.

use futures::future::BoxFuture;
use serde_json::{Value, json};

use super::chat::ToolSpec;

/// Where a run's tools come from.
pub trait Tools: Send + Sync {
    /// The tools offered to the model.
    fn list(&self) -> Vec<ToolSpec>;
    /// Calls `name` with `arguments`; the answer is what the model sees.
    fn call(&self, name: &str, arguments: Value) -> BoxFuture<'_, Value>;
}

/// No tools: any call the model makes is answered with an error.
pub struct NoTools;

impl Tools for NoTools {
    fn list(&self) -> Vec<ToolSpec> {
        Vec::new()
    }

    fn call(&self, name: &str, _: Value) -> BoxFuture<'_, Value> {
        let answer = json!({ "error": format!("no tool {name} in this run") });
        Box::pin(async move { answer })
    }
}
