//! UI commands between a plugin and a test app, through the real API server (as the chart's
//! ServiceAccount, under the chart's RBAC): the plugin's `POST /ui/commands` reaches the app's
//! stream of the chat's commands, the app answers each step, and the plugin gets the answers;
//! with no app following the chat, the plugin is told so at the command's timeout.

use std::time::Duration;

use anyhow::{Context, ensure};
use serde_json::json;

use crate::api::api_support::{ApiServer, chat, full_world};
use crate::host::{Grant, caller_token};
use crate::live::{App, first_event};
use crate::support::{E2eTest, Ns, test};
use model::resources::ChannelKind;

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "ui_commands::a_plugins_ui_command_reaches_the_apps_stream_and_each_steps_answer_comes_back",
            round_trip,
        )
        .timeout(Duration::from_secs(180)),
    ]
}

async fn round_trip(ns: Ns) -> anyhow::Result<()> {
    let _shared = crate::controller_support::shared().await;
    let world = full_world(&ns, "uc", &[chat("general", ChannelKind::Channel, None)]).await?;
    let plugin = world.plugin.clone();
    let token = world.token("general").to_string();
    let api = ApiServer::start(&ns).await?;
    let base = format!(
        "http://{}/api/host/v1/namespaces/{}/channels/general",
        api.addr(),
        ns.name()
    );
    let app = App {
        http: reqwest::Client::new(),
        base: base.clone(),
        token: caller_token(&ns, "ui-app", Grant::All).await?,
    };

    // Nobody follows the chat: the plugin hears so at the command's timeout.
    let alone = json!({ "steps": [{ "type": "open_drawer" }], "timeout_seconds": 2 });
    api.until(504, "POST", "/ui/commands", Some(&token), Some(&alone))
        .await?
        .expect(504, Some("timeout"))?;

    // A caller without the right to the chat's commands cannot follow them.
    let stranger = App {
        http: reqwest::Client::new(),
        base,
        token: caller_token(&ns, "ui-stranger", Grant::Actions).await?,
    };
    let refused = stranger
        .http
        .get(stranger.url("/ui/commands"))
        .bearer_auth(&stranger.token)
        .send()
        .await?;
    ensure!(
        refused.status() == 403,
        "a caller without channels/uicommands follows the commands: {}",
        refused.status()
    );

    // The app follows the chat; the command reaches it, and its answers the plugin.
    let stream = app
        .http
        .get(app.url("/ui/commands"))
        .bearer_auth(&app.token)
        .send()
        .await?;
    ensure!(stream.status() == 200, "the stream: {}", stream.status());
    let first = tokio::spawn(first_event(stream, "command"));
    let command = json!({
        "steps": [
            { "type": "select_chat" },
            { "type": "open_panel", "panel": "history" },
            { "type": "compose", "text": "/quiz rust" },
        ],
        "timeout_seconds": 30,
    });
    let call = api.call("POST", "/ui/commands", Some(&token), Some(&command));
    let answer = async {
        let got = tokio::time::timeout(Duration::from_secs(20), first)
            .await
            .context("no UI command reached the app's stream")???;
        ensure!(
            got["plugin"] == plugin.as_str()
                && got["chat"] == "general"
                && got["steps"] == command["steps"],
            "the app got {got}"
        );
        let id = got["id"].as_str().context("no id")?.to_string();
        let results = json!({ "steps": [
            { "status": "ran" },
            { "status": "ran" },
            { "status": "unsupported", "error": "this app has no composer" },
        ]});
        let (status, body) = app
            .send("POST", &format!("/ui/commands/{id}"), Some(results.clone()))
            .await?;
        ensure!(status == 204, "answering: {status} {body}");
        // The first answer counts: another is told there is no such command waiting.
        let (again, _) = app
            .send("POST", &format!("/ui/commands/{id}"), Some(results))
            .await?;
        ensure!(
            again == 404 || again == 204,
            "a second answer: {again} (404 once the first is seen)"
        );
        anyhow::Ok(id)
    };
    let (call, answered) = tokio::join!(call, answer);
    let id = answered?;
    let call = call?;
    call.expect(200, None)?;
    let body = call.json()?;
    ensure!(
        body == json!({
            "id": id,
            "ran": false,
            "steps": [
                { "type": "select_chat", "status": "ran" },
                { "type": "open_panel", "status": "ran" },
                { "type": "compose", "status": "unsupported", "error": "this app has no composer" },
            ],
        }),
        "the plugin got {body}"
    );

    // An answer that does not fit the command is refused, naming the field.
    let short = json!({ "steps": [{ "status": "ran" }] });
    let stream = app
        .http
        .get(app.url("/ui/commands"))
        .bearer_auth(&app.token)
        .send()
        .await?;
    let first = tokio::spawn(first_event(stream, "command"));
    let two = json!({ "steps": [{ "type": "select_chat" }, { "type": "open_drawer" }], "timeout_seconds": 10 });
    let call = api.call("POST", "/ui/commands", Some(&token), Some(&two));
    let refuse = async {
        let got = tokio::time::timeout(Duration::from_secs(20), first)
            .await
            .context("the second command never came")???;
        let id = got["id"].as_str().context("no id")?.to_string();
        let (status, body) = app
            .send("POST", &format!("/ui/commands/{id}"), Some(short))
            .await?;
        ensure!(
            status == 400 && body.to_string().contains("steps"),
            "a short answer: {status} {body}"
        );
        let all = json!({ "steps": [{ "status": "ran" }, { "status": "ran" }] });
        let (status, body) = app
            .send("POST", &format!("/ui/commands/{id}"), Some(all))
            .await?;
        ensure!(status == 204, "answering: {status} {body}");
        anyhow::Ok(())
    };
    let (call, refused) = tokio::join!(call, refuse);
    refused?;
    let call = call?;
    call.expect(200, None)?;
    ensure!(call.json()?["ran"] == true, "{}", call.json()?);
    Ok(())
}

/// An app following `chat`'s UI commands through the host API at `base` and answering each
/// that every step ran, until dropped (the task is aborted).
pub fn answer_every_command(base: String, ns: String, chat: String, token: String) -> AbortOnDrop {
    let task = tokio::spawn(async move {
        let http = reqwest::Client::new();
        let channel = format!("{base}/api/host/v1/namespaces/{ns}/channels/{chat}");
        loop {
            let Ok(stream) = http
                .get(format!("{channel}/ui/commands"))
                .bearer_auth(&token)
                .send()
                .await
            else {
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            };
            let mut body = stream.bytes_stream();
            let mut buffer = String::new();
            while let Some(Ok(chunk)) = futures::StreamExt::next(&mut body).await {
                buffer.push_str(&String::from_utf8_lossy(&chunk));
                while let Some(event) = crate::live::next_event(&mut buffer, "command") {
                    let Some(data) = event else { continue };
                    let Ok(command) = serde_json::from_str::<serde_json::Value>(&data) else {
                        continue;
                    };
                    let steps = command["steps"].as_array().map_or(0, Vec::len);
                    let answer = json!({ "steps": vec![json!({ "status": "ran" }); steps] });
                    let id = command["id"].as_str().unwrap_or_default();
                    let _ = http
                        .post(format!("{channel}/ui/commands/{id}"))
                        .bearer_auth(&token)
                        .json(&answer)
                        .send()
                        .await;
                }
            }
        }
    });
    AbortOnDrop(task)
}

/// A task aborted when dropped.
pub struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}
