//! `make dev`'s stand-in for a model: no model can run on these machines, so the dev cluster's
//! agent runs talk to this OpenAI-compatible chat-completions server instead. It does what a
//! model asked to use its tools would, deterministically: the first turn calls the first tool
//! offered with the first example of its input schema (or `{}`), and the next answers with
//! what the tool gave. Plug a real model in with the runner's credentials Secret
//! (docs/runner.md); the tour and the dev loop only need a run to go through its steps.

use std::net::SocketAddr;

use axum::Json;
use axum::routing::post;
use serde_json::{Value, json};

/// What the stand-in answers `request` (a chat-completions request).
pub fn reply(request: &Value) -> Value {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or_default();
    if last["role"] == "tool" {
        let answer = last["content"].as_str().unwrap_or_default();
        return message(json!({
            "role": "assistant",
            "content": format!("The tool answered {answer}"),
        }));
    }
    let tools = request["tools"].as_array().cloned().unwrap_or_default();
    let Some(tool) = tools.first() else {
        return message(json!({
            "role": "assistant",
            "content": "No tools were offered, so there is nothing to do.",
        }));
    };
    let function = &tool["function"];
    let arguments = function["parameters"]["examples"]
        .get(0)
        .cloned()
        .unwrap_or_else(|| json!({}));
    message(json!({
        "role": "assistant",
        "content": null,
        "tool_calls": [{
            "id": "call-1",
            "type": "function",
            "function": {
                "name": function["name"],
                "arguments": arguments.to_string(),
            },
        }],
    }))
}

fn message(message: Value) -> Value {
    json!({
        "id": "demo",
        "object": "chat.completion",
        "model": "demo",
        "choices": [{ "index": 0, "message": message, "finish_reason": "stop" }],
    })
}

/// The stand-in, serving on a loopback port until dropped.
pub struct DemoModel {
    /// The base URL a runner is given (`http://127.0.0.1:<port>/v1`).
    pub url: String,
    server: tokio::task::JoinHandle<()>,
}

impl DemoModel {
    pub async fn start() -> std::io::Result<Self> {
        let app = axum::Router::new().route(
            "/v1/chat/completions",
            post(|Json(request): Json<Value>| async move { Json(reply(&request)) }),
        );
        let listener = tokio::net::TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let url = format!("http://{}/v1", listener.local_addr()?);
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self { url, server })
    }
}

impl Drop for DemoModel {
    fn drop(&mut self) {
        self.server.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(messages: Value, tools: Value) -> Value {
        json!({ "model": "demo", "messages": messages, "tools": tools })
    }

    #[test]
    fn it_calls_the_first_tool_with_its_example_then_answers_with_the_result() {
        let tools = json!([{ "type": "function", "function": {
            "name": "plugin_grade",
            "parameters": { "type": "object", "examples": [{ "a": 2, "b": 2, "answer": 4 }] },
        }}]);
        let first = reply(&request(
            json!([{ "role": "user", "content": "Ask 3 sums" }]),
            tools.clone(),
        ));
        let call = &first["choices"][0]["message"]["tool_calls"][0]["function"];
        assert_eq!(call["name"], "plugin_grade");
        assert_eq!(
            serde_json::from_str::<Value>(call["arguments"].as_str().unwrap()).unwrap(),
            json!({ "a": 2, "b": 2, "answer": 4 })
        );
        let second = reply(&request(
            json!([
                { "role": "user", "content": "Ask 3 sums" },
                { "role": "tool", "tool_call_id": "call-1", "content": "{\"correct\":true}" },
            ]),
            tools,
        ));
        assert_eq!(
            second["choices"][0]["message"]["content"],
            "The tool answered {\"correct\":true}"
        );
    }

    #[test]
    fn without_tools_or_examples_it_still_ends() {
        let none = reply(&request(
            json!([{ "role": "user", "content": "hi" }]),
            json!([]),
        ));
        assert!(none["choices"][0]["message"]["content"].is_string());
        let bare = reply(&request(
            json!([{ "role": "user", "content": "hi" }]),
            json!([{ "type": "function", "function": { "name": "plugin_echo", "parameters": {} } }]),
        ));
        assert_eq!(
            bare["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
            "{}"
        );
    }
}
