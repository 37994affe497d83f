//! `loop-plugins agent`: the built-in agent runner (docs/runner.md is its contract). One run:
//! read what the controller gave it ([`run_env`]), talk to an OpenAI-compatible
//! chat-completions endpoint with tool calling ([`chat`]: what vLLM, Ollama, llama.cpp's
//! server and hosted providers serve) until the model answers without a tool call or the
//! run's time limit or turn limit is reached ([`turns`] decides each step, purely), and print
//! the final message. It exits 0 when the model gave a final answer.
//!
//! The tools come through [`tools::Tools`]: the run's MCP endpoint ([`mcp`]), served by the
//! API server, with the plugin's tools the manifest gives the agent. A call the run cannot
//! make (a tool it was not offered, bad arguments, a tool that writes from a read-only
//! agent) is answered to the model as an error, never made ([`turns`]).

pub mod chat;
pub mod cli;
pub mod mcp;
pub mod run_env;
pub mod tools;
pub mod turns;

use std::time::Duration;

use serde_json::json;

use chat::{ChatClient, Message};
use run_env::RunEnv;
use tools::Tools;
use turns::Turn;

/// Why a run did not end with a final answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Env(#[from] run_env::EnvError),
    #[error(transparent)]
    Chat(#[from] chat::ChatError),
    #[error("the run's MCP endpoint: {0}")]
    Mcp(#[from] mcp::McpError),
    #[error("the model made {0} turns without a final answer")]
    TooManyTurns(usize),
    #[error("the run went past its time limit of {0:?}")]
    TimeLimit(Duration),
}

/// How the runner is told to talk to its model.
#[derive(Clone, Debug)]
pub struct ModelSettings {
    /// The endpoint's base URL, up to `/v1` (`http://ollama:11434/v1`).
    pub url: String,
    /// The model's name, as the endpoint knows it.
    pub model: String,
    /// A bearer key, if the endpoint wants one.
    pub api_key: Option<String>,
    /// The most model turns a run may take.
    pub max_turns: usize,
}

/// What a run ended with.
#[derive(Clone, Debug, PartialEq)]
pub struct Ended {
    /// The model's final message.
    pub message: String,
    /// The tools called, by name, in order.
    pub tools_called: Vec<String>,
}

/// Runs one agent run to its end.
pub async fn run(
    env: &RunEnv,
    settings: &ModelSettings,
    tools: &dyn Tools,
) -> Result<Ended, Error> {
    let limit = env.time_limit;
    tokio::time::timeout(limit, converse(env, settings, tools))
        .await
        .map_err(|_| Error::TimeLimit(limit))?
}

async fn converse(
    env: &RunEnv,
    settings: &ModelSettings,
    tools: &dyn Tools,
) -> Result<Ended, Error> {
    let client = ChatClient::new(&settings.url, &settings.model, settings.api_key.clone())?;
    let offered = tools.list();
    let mut messages = vec![
        Message::system(turns::system_prompt(env)),
        Message::user(env.prompt.clone()),
    ];
    let mut tools_called = Vec::new();
    for _ in 0..settings.max_turns {
        let reply = client.complete(&messages, &offered).await?;
        match turns::next(&reply, &offered, env.read_only) {
            Turn::Final(message) => {
                return Ok(Ended {
                    message,
                    tools_called,
                });
            }
            Turn::Calls(calls) => {
                messages.push(reply);
                for call in calls {
                    let answer = match call.refusal {
                        Some(refusal) => json!({ "error": refusal }),
                        None => {
                            tools_called.push(call.name.clone());
                            tools.call(&call.name, call.arguments).await
                        }
                    };
                    messages.push(Message::tool(&call.id, answer.to_string()));
                }
            }
        }
    }
    Err(Error::TooManyTurns(settings.max_turns))
}
