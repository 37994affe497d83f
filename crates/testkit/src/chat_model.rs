//! A scripted OpenAI-compatible chat-completions server, for tests of agent runners: no model
//! can run on these machines. A real HTTP server (`POST /v1/chat/completions`) that answers
//! each request with the next step of its script, after checking the request with that
//! step's expectation (the tools it was offered, the last message it got); a request that
//! fails its check is answered 400 and recorded in [`ScriptedModel::failures`], so a test
//! sees both what the runner did and what the model objected to.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::post;
use serde_json::{Value, json};

/// A check of a request: Err says what was wrong.
pub type Expectation = Box<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;

/// One answer of the script, and what the request it answers must be.
pub struct Step {
    expect: Vec<Expectation>,
    reply: Value,
    /// How long the answer takes (a model still thinking).
    delay: std::time::Duration,
}

impl Step {
    /// Answers with a final message.
    pub fn answer(text: &str) -> Self {
        Self::replying(json!({ "role": "assistant", "content": text }))
    }

    /// Answers with one call of `tool` with `arguments` (a JSON text, possibly not valid).
    pub fn call(tool: &str, arguments: &str) -> Self {
        Self::replying(json!({
            "role": "assistant",
            "content": null,
            "tool_calls": [{
                "id": format!("call-{tool}"),
                "type": "function",
                "function": { "name": tool, "arguments": arguments },
            }],
        }))
    }

    fn replying(reply: Value) -> Self {
        Self {
            expect: Vec::new(),
            reply,
            delay: std::time::Duration::ZERO,
        }
    }

    /// Answers only after `delay`: a run that is still running meanwhile.
    pub fn after(mut self, delay: std::time::Duration) -> Self {
        self.delay = delay;
        self
    }

    /// The request must pass `check`.
    pub fn expecting(
        mut self,
        check: impl Fn(&Value) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.expect.push(Box::new(check));
        self
    }

    /// The request offers exactly these tools, by name.
    pub fn offering(self, tools: &[&str]) -> Self {
        let want: Vec<String> = tools.iter().map(|t| t.to_string()).collect();
        self.expecting(move |request| {
            let offered = offered_tools(request);
            (offered == want)
                .then_some(())
                .ok_or_else(|| format!("offered tools {offered:?}, not {want:?}"))
        })
    }

    /// The request's last message contains `text`.
    pub fn after_message_containing(self, text: &str) -> Self {
        let text = text.to_string();
        self.expecting(move |request| {
            let last = last_message(request);
            last.contains(&text)
                .then_some(())
                .ok_or_else(|| format!("the last message is {last:?}, without {text:?}"))
        })
    }
}

/// The names of the tools a request offers.
pub fn offered_tools(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(String::from))
        .collect()
}

/// The text of a request's last message.
pub fn last_message(request: &Value) -> String {
    request["messages"]
        .as_array()
        .and_then(|m| m.last())
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_string()
}

#[derive(Default)]
struct Script {
    steps: Vec<Step>,
    requests: Vec<Value>,
    failures: Vec<String>,
}

/// The server, serving until dropped.
pub struct ScriptedModel {
    /// The base URL a runner is given (`http://127.0.0.1:<port>/v1`).
    pub url: String,
    script: Arc<Mutex<Script>>,
    server: tokio::task::JoinHandle<()>,
}

impl ScriptedModel {
    /// Serves `steps` on a free loopback port.
    pub async fn start(steps: Vec<Step>) -> anyhow::Result<Self> {
        Self::start_on(SocketAddr::from(([127, 0, 0, 1], 0)), steps).await
    }

    /// Serves `steps` on `addr` (every address, for runners in Pods).
    pub async fn start_on(addr: SocketAddr, steps: Vec<Step>) -> anyhow::Result<Self> {
        let script = Arc::new(Mutex::new(Script {
            steps,
            ..Default::default()
        }));
        let app = axum::Router::new()
            .route("/v1/chat/completions", post(complete))
            .with_state(script.clone());
        let listener = tokio::net::TcpListener::bind(addr).await?;
        let bound = listener.local_addr()?;
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Ok(Self {
            url: format!("http://{bound}/v1"),
            script,
            server,
        })
    }

    /// Every request the server got, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.script.lock().expect("not poisoned").requests.clone()
    }

    /// What the requests that failed their step's checks got wrong.
    pub fn failures(&self) -> Vec<String> {
        self.script.lock().expect("not poisoned").failures.clone()
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn complete(
    State(script): State<Arc<Mutex<Script>>>,
    Json(request): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let (turn, reply, delay) = match next_step(&script, request) {
        Ok(step) => step,
        Err(refused) => return refused,
    };
    tokio::time::sleep(delay).await;
    (
        StatusCode::OK,
        Json(json!({
            "id": format!("scripted-{turn}"),
            "object": "chat.completion",
            "choices": [{ "index": 0, "message": reply, "finish_reason": "stop" }],
        })),
    )
}

/// Records `request` and takes the script's next step: its turn, reply and delay, or the
/// refusal of a request past the script or failing its step's checks.
fn next_step(
    script: &Mutex<Script>,
    request: Value,
) -> Result<(usize, Value, std::time::Duration), (StatusCode, Json<Value>)> {
    let mut script = script.lock().expect("not poisoned");
    let turn = script.requests.len();
    script.requests.push(request.clone());
    let Some(step) = script.steps.get(turn) else {
        let message = format!("request {turn} is past the script's {turn} steps");
        script.failures.push(message.clone());
        return Err((StatusCode::BAD_REQUEST, Json(json!({ "error": message }))));
    };
    let wrong: Vec<String> = step
        .expect
        .iter()
        .filter_map(|check| check(&request).err())
        .collect();
    if !wrong.is_empty() {
        let message = format!("request {turn}: {}", wrong.join("; "));
        script.failures.push(message.clone());
        return Err((StatusCode::BAD_REQUEST, Json(json!({ "error": message }))));
    }
    Ok((turn, step.reply.clone(), step.delay))
}
