//! The quiz plugin, as the SDK's handlers: what each part of the manifest does.
//!
//! | manifest | handler |
//! |---|---|
//! | action `daily` (weekdays 9:00) | reads the chat's settings, starts a run of `ask` with the quiz's prompt, remembers its id |
//! | tool `grade` | grades `a + b = answer`; its result's content and `structured_content` are the same JSON |
//! | run end | posts the `score` card with the run's result, and a notification (in the background: the host waits for the answer) |
//! | switch `hints` | on or off, remembered in the project's memory |
//! | event `message.created` | counted in `/data/messages` |
//!
//! Without a Plugin API (`LOOP_API_URL` unset, as when run by hand) the action and the run's
//! end say so in the log and do nothing else.

use std::path::PathBuf;
use std::sync::Arc;

use loop_plugin_sdk::api::Client;
use loop_plugin_sdk::api::wire::{CardRequest, Level, NotificationRequest};
use loop_plugin_sdk::manifest::Manifest;
use loop_plugin_sdk::{
    ActionContext, ActionRequest, Event, Plugin, RunDone, RunStatus, SwitchRequest, SwitchState,
    ToolError, ToolRequest, ToolResult,
};
use serde_json::{Value, json};

/// The memory key of the last quiz's run.
pub const LAST_RUN: &str = "last-run";
/// The memory key of the hints switch.
pub const HINTS: &str = "hints";

/// What the handlers share.
struct Quiz {
    api: Option<Client>,
    data: PathBuf,
}

/// The plugin: `api` is the Plugin API (none when run by hand), `data` its volume.
pub fn plugin(manifest: Manifest, api: Option<Client>, data: PathBuf) -> Plugin {
    let quiz = Arc::new(Quiz { api, data });
    let (daily, done, hints, events) = (quiz.clone(), quiz.clone(), quiz.clone(), quiz);
    let plugin = Plugin::new(manifest);
    let background = plugin.background();
    plugin
        .action("daily", move |req, cx| {
            let quiz = daily.clone();
            async move { quiz.daily(req, cx).await }
        })
        .tool("grade", |req: ToolRequest| async move { grade(&req.input) })
        .on_run_done(move |run_id, end| {
            let quiz = done.clone();
            background.go(move |cancelled| async move {
                tokio::select! {
                    _ = cancelled.cancelled() => {}
                    _ = quiz.run_done(&run_id, end) => {}
                }
            });
            async {}
        })
        .switch("hints", move |req| {
            let quiz = hints.clone();
            async move { quiz.hints(req).await }
        })
        .on_event(move |event| {
            let quiz = events.clone();
            async move { quiz.event(event).await }
        })
}

/// The prompt of a quiz of `questions` sums at `level`.
pub fn prompt(level: &str, questions: u64) -> String {
    let range = if level == "hard" {
        "100 to 999"
    } else {
        "1 to 9"
    };
    format!(
        "Ask {questions} sums a + b with a and b from {range}, one at a time. Grade each answer \
         with plugin_grade and end with the number of correct answers."
    )
}

/// `grade`: whether `answer` is `a + b`.
pub fn grade(input: &serde_json::Map<String, Value>) -> Result<ToolResult, ToolError> {
    let int = |name: &str| {
        input
            .get(name)
            .and_then(Value::as_i64)
            .ok_or_else(|| ToolError::new(format!("{name} must be an integer")))
    };
    let (a, b, answer) = (int("a")?, int("b")?, int("answer")?);
    let expected = a
        .checked_add(b)
        .ok_or_else(|| ToolError::new("a + b overflows"))?;
    let result = json!({ "correct": answer == expected, "expected": expected });
    Ok(ToolResult::json(&result).expect("an object"))
}

impl Quiz {
    async fn daily(&self, req: ActionRequest, cx: ActionContext) {
        let Some(api) = &self.api else {
            eprintln!("daily ({:?}): no Plugin API, no quiz", req.trigger);
            return;
        };
        let started = async {
            let channel = api.channel().await?;
            let level = channel.settings.get("level").and_then(Value::as_str);
            let questions = channel.settings.get("questions").and_then(Value::as_u64);
            let run = api
                .start_run(
                    "ask",
                    &prompt(level.unwrap_or("easy"), questions.unwrap_or(3)),
                )
                .await?;
            api.remember(LAST_RUN, json!(run.id)).await?;
            Ok::<_, loop_plugin_sdk::api::Error>(run.id)
        };
        tokio::select! {
            _ = cx.cancelled.cancelled() => eprintln!("daily: cancelled"),
            outcome = started => match outcome {
                Ok(id) => eprintln!("daily ({:?}): started run {id}", req.trigger),
                Err(err) => eprintln!("daily ({:?}): {err}", req.trigger),
            },
        }
    }

    async fn run_done(&self, run_id: &str, end: RunDone) {
        let Some(api) = &self.api else {
            eprintln!("run {run_id} ended: no Plugin API, no card");
            return;
        };
        let (title, level, text) = match end.status {
            RunStatus::Done => (
                "Quiz finished",
                Level::Success,
                end.result.unwrap_or_default(),
            ),
            RunStatus::Failed => ("Quiz failed", Level::Error, end.error.unwrap_or_default()),
        };
        let card = CardRequest {
            card: "score".into(),
            title: title.into(),
            data: Some(json!({ "run": run_id, "text": text })),
        };
        let note = NotificationRequest {
            title: title.into(),
            body: Some(text.clone()),
            level: Some(level),
        };
        if let Err(err) = api.post_card(&card).await {
            eprintln!("run {run_id}: the score card: {err}");
        }
        if let Err(err) = api.notify(&note).await {
            eprintln!("run {run_id}: the notification: {err}");
        }
    }

    async fn hints(&self, req: SwitchRequest) -> SwitchState {
        let mut state = SwitchState {
            on: req.on,
            title: Some(format!("Hints are {}", if req.on { "on" } else { "off" })),
            ..Default::default()
        };
        if let Some(api) = &self.api
            && let Err(err) = api.remember(HINTS, json!(req.on)).await
        {
            state.error = Some(err.to_string());
        }
        state
    }

    async fn event(&self, event: Event) {
        if event.kind != "message.created" {
            return;
        }
        let path = self.data.join("messages");
        let count: u64 = tokio::fs::read_to_string(&path)
            .await
            .ok()
            .and_then(|t| t.trim().parse().ok())
            .unwrap_or(0);
        if let Err(err) = tokio::fs::write(&path, format!("{}\n", count + 1)).await {
            eprintln!("counting messages in {}: {err}", path.display());
        }
    }
}
