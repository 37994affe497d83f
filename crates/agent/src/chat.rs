//! An OpenAI-compatible chat-completions client with tool calling: `POST {url}/chat/completions`
//! with the conversation and the tools offered, one assistant message back. Only the fields
//! every compatible server (vLLM, Ollama, llama.cpp's server, hosted providers) knows.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

/// The longest one model call may take; the run's own time limit bounds the whole.
const CALL_TIMEOUT: Duration = Duration::from_secs(300);

/// One message of the conversation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
}

impl Message {
    pub fn system(content: String) -> Self {
        Self::said("system", content)
    }

    pub fn user(content: String) -> Self {
        Self::said("user", content)
    }

    /// A tool's answer to the call `id`.
    pub fn tool(id: &str, content: String) -> Self {
        Self {
            tool_call_id: Some(id.into()),
            ..Self::said("tool", content)
        }
    }

    fn said(role: &str, content: String) -> Self {
        Self {
            role: role.into(),
            content: Some(content),
            ..Default::default()
        }
    }
}

/// A tool call the model made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    #[serde(rename = "type", default = "function")]
    pub kind: String,
    pub function: FunctionCall,
}

fn function() -> String {
    "function".into()
}

/// The called function: its name, and its arguments as a JSON text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    pub name: String,
    #[serde(default)]
    pub arguments: String,
}

/// A tool offered to the model: its name, what it does, its input schema.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub input_schema: Value,
    /// Whether calling it changes something (a read-only agent may not).
    pub writes: bool,
}

impl ToolSpec {
    /// The tool as chat-completions' `tools` list takes it.
    pub fn to_openai(&self) -> Value {
        json!({
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.input_schema,
            }
        })
    }
}

/// Why a model call failed.
#[derive(Debug, thiserror::Error)]
pub enum ChatError {
    #[error("building the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("calling {url}: {source}")]
    Call {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url} answered {status}: {body}")]
    Refused {
        url: String,
        status: u16,
        body: String,
    },
    #[error("{url} answered no choice")]
    NoChoice { url: String },
}

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    choices: Vec<Choice>,
}

#[derive(Deserialize)]
struct Choice {
    message: Message,
}

/// A client of one endpoint and model.
pub struct ChatClient {
    http: reqwest::Client,
    url: String,
    model: String,
    api_key: Option<String>,
}

impl ChatClient {
    pub fn new(base: &str, model: &str, api_key: Option<String>) -> Result<Self, ChatError> {
        let http = reqwest::Client::builder()
            .timeout(CALL_TIMEOUT)
            .build()
            .map_err(ChatError::Client)?;
        Ok(Self {
            http,
            url: format!("{}/chat/completions", base.trim_end_matches('/')),
            model: model.into(),
            api_key,
        })
    }

    /// The model's next message after `messages`, with `tools` offered.
    pub async fn complete(
        &self,
        messages: &[Message],
        tools: &[ToolSpec],
    ) -> Result<Message, ChatError> {
        let mut body = json!({ "model": self.model, "messages": messages });
        if !tools.is_empty() {
            body["tools"] = tools.iter().map(ToolSpec::to_openai).collect();
        }
        let mut request = self.http.post(&self.url).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let call = |source| ChatError::Call {
            url: self.url.clone(),
            source,
        };
        let response = request.send().await.map_err(call)?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(ChatError::Refused {
                url: self.url.clone(),
                status: status.as_u16(),
                body: body.chars().take(2048).collect(),
            });
        }
        let completion: Completion = response.json().await.map_err(call)?;
        completion
            .choices
            .into_iter()
            .next()
            .map(|c| c.message)
            .ok_or_else(|| ChatError::NoChoice {
                url: self.url.clone(),
            })
    }
}
