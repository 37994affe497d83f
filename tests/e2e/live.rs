//! Chats' live sessions between a test app and a plugin, through the real API server (as the
//! chart's ServiceAccount, under the chart's RBAC): the app opens the session with the control
//! subtypes it takes, follows the plugins' control requests as a stream and answers them; a
//! plugin's `POST /channel/live/control` waits for that answer, and answers 409 `not_live`
//! without an open session (never opened, or lapsed). The session's system messages reach
//! only the plugins whose `live.messages` list their subtype.

use std::time::Duration;

use anyhow::{Context, ensure};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::api::api_support::{ApiServer, chat, full_world};
use crate::host::{Grant, caller_token};
use crate::support::{E2eTest, Ns, test};
use model::resources::ChannelKind;

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "live::a_plugins_control_request_reaches_the_apps_session_and_its_answer_comes_back_until_the_session_lapses",
            control_round_trip,
        )
        .timeout(Duration::from_secs(180)),
    ]
}

/// The app's side: the host API as a caller allowed every route, under one chat's path.
pub struct App {
    pub http: reqwest::Client,
    pub base: String,
    pub token: String,
}

impl App {
    pub fn url(&self, rest: &str) -> String {
        format!("{}{rest}", self.base)
    }

    pub async fn send(
        &self,
        method: &str,
        rest: &str,
        body: Option<Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let mut request = self
            .http
            .request(method.parse()?, self.url(rest))
            .bearer_auth(&self.token);
        if let Some(body) = body {
            request = request.json(&body);
        }
        let response = request.send().await?;
        let status = response.status().as_u16();
        let text = response.text().await?;
        let json = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).with_context(|| format!("{method} {rest}: {text}"))?
        };
        Ok((status, json))
    }
}

/// The first `control` event of a server-sent event stream, as JSON.
async fn first_control(response: reqwest::Response) -> anyhow::Result<Value> {
    first_event(response, "control").await
}

/// The first event named `name` of a server-sent event stream, as JSON.
pub async fn first_event(response: reqwest::Response, name: &str) -> anyhow::Result<Value> {
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    while let Some(chunk) = body.next().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk?));
        while let Some(data) = next_event(&mut buffer, name) {
            if let Some(data) = data {
                return Ok(serde_json::from_str(&data)?);
            }
        }
    }
    anyhow::bail!("the stream ended without a {name} event")
}

/// Takes the next whole server-sent event off `buffer`: `None` while none is whole yet, then
/// `Some(Some(data))` for an event named `name` and `Some(None)` for any other block.
pub fn next_event(buffer: &mut String, name: &str) -> Option<Option<String>> {
    let end = buffer.find("\n\n")?;
    let event: String = buffer.drain(..end + 2).collect();
    let wanted = format!("event: {name}");
    Some(event.lines().any(|l| l == wanted).then(|| {
        event
            .lines()
            .filter_map(|l| l.strip_prefix("data: "))
            .collect()
    }))
}

async fn control_round_trip(ns: Ns) -> anyhow::Result<()> {
    let _shared = crate::controller_support::shared().await;
    let world = full_world(&ns, "lv", &[chat("general", ChannelKind::Channel, None)]).await?;
    let plugin = world.plugin.clone();
    let token = world.token("general").to_string();
    let api = ApiServer::start(&ns).await?;
    let app = App {
        http: reqwest::Client::new(),
        base: format!(
            "http://{}/api/host/v1/namespaces/{}/channels/general",
            api.addr(),
            ns.name()
        ),
        token: caller_token(&ns, "live-app", Grant::All).await?,
    };
    let control = |subtype: &str| json!({ "subtype": subtype, "request": { "mode": "plan" } });

    // No session: the chat is not live.
    api.call(
        "POST",
        "/channel/live/control",
        Some(&token),
        Some(&control("set_permission_mode")),
    )
    .await?
    .expect(409, Some("not_live"))?;

    // A session that does not take the subtype refuses it too, saying so.
    let (status, opened) = app
        .send(
            "PUT",
            "/live",
            Some(json!({ "controls": ["interrupt"], "lease_seconds": 30 })),
        )
        .await?;
    ensure!(status == 200 && opened["live"] == true, "{status} {opened}");
    // (Either replica may answer: one that has not seen the session yet says there is none.)
    let refused = api
        .until_saying(
            409,
            "does not take",
            "POST",
            "/channel/live/control",
            Some(&token),
            Some(&control("set_permission_mode")),
        )
        .await?;
    ensure!(
        refused.to_string().contains("does not take"),
        "the session is open but does not take the subtype: {refused}"
    );

    // The session takes it, with a short lease: the request reaches the app's stream, and
    // the app's answer the plugin.
    let (status, _) = app
        .send(
            "PUT",
            "/live",
            Some(json!({ "controls": ["set_permission_mode"], "lease_seconds": 6 })),
        )
        .await?;
    ensure!(status == 200, "renewing: {status}");
    let stream = app
        .http
        .get(app.url("/live/requests"))
        .bearer_auth(&app.token)
        .send()
        .await?;
    ensure!(
        stream.status() == 200
            && stream
                .headers()
                .get("content-type")
                .is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream")),
        "the stream: {:?}",
        stream.headers()
    );
    let first = tokio::spawn(first_control(stream));
    let sent = {
        let api_token = token.clone();
        let body = control("set_permission_mode");
        let api = &api;
        // The plugin's call waits for the answer; the app answers meanwhile. A replica that
        // has not seen the renewal yet refuses the subtype (409, nothing sent): asked again.
        let call = api.until(
            200,
            "POST",
            "/channel/live/control",
            Some(&api_token),
            Some(&body),
        );
        let answer = async {
            let request = tokio::time::timeout(Duration::from_secs(20), first)
                .await
                .context("no control request reached the app's stream")???;
            ensure!(
                request["plugin"] == plugin.as_str()
                    && request["subtype"] == "set_permission_mode"
                    && request["request"]["mode"] == "plan",
                "the app got {request}"
            );
            let id = request["id"].as_str().context("no id")?.to_string();
            let (status, body) = app
                .send(
                    "POST",
                    &format!("/live/requests/{id}"),
                    Some(json!({ "response": { "ok": true, "mode": "plan" } })),
                )
                .await?;
            ensure!(status == 204, "answering: {status} {body}");
            anyhow::Ok(id)
        };
        let (call, answered) = tokio::join!(call, answer);
        answered?;
        call?
    };
    sent.expect(200, None)?;
    let body = sent.json()?;
    ensure!(
        body == json!({ "subtype": "set_permission_mode", "response": { "ok": true, "mode": "plan" } }),
        "the plugin got {body}"
    );

    // The plugin holds the session; the app sees it.
    api.call(
        "PUT",
        "/channel/live/hold",
        Some(&token),
        Some(&json!({ "hold": true })),
    )
    .await?
    .expect(200, None)?;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (status, view) = app.send("GET", "/live", None).await?;
        ensure!(status == 200, "{status} {view}");
        if view["holds"] == json!([plugin.as_str()]) {
            ensure!(
                view["pending"] == json!([]),
                "answered requests wait no more: {view}"
            );
            break;
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the hold never showed: {view}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The session's system messages go only where live.messages lists the subtype.
    let deliveries = |subtype: &str| {
        json!({
            "type": "live.system",
            "data": { "subtype": subtype, "message": { "type": "system", "subtype": subtype } },
        })
    };
    let events = format!("{}/events", app.base);
    let post = |body: Value| {
        app.http
            .post(events.clone())
            .bearer_auth(&app.token)
            .json(&body)
            .send()
    };
    let listed: Value = post(deliveries("compact_boundary")).await?.json().await?;
    let unlisted: Value = post(deliveries("init")).await?.json().await?;
    // A listed message is routed to the plugin (delivered, or passed over because its
    // container is stopped, whichever it is now); an unlisted one is passed over for its
    // subtype.
    let filtered = |answer: &Value| answer["skipped"].to_string().contains("live.messages");
    ensure!(
        !filtered(&listed) && listed.to_string().contains(plugin.as_str()),
        "compact_boundary is listed: {listed}"
    );
    ensure!(
        filtered(&unlisted) && unlisted["deliveries"] == json!([]),
        "init is not listed: {unlisted}"
    );

    // Past its lease without a heartbeat, the session has lapsed.
    tokio::time::sleep(Duration::from_secs(7)).await;
    api.call(
        "POST",
        "/channel/live/control",
        Some(&token),
        Some(&control("set_permission_mode")),
    )
    .await?
    .expect(409, Some("not_live"))?;
    let (_, view) = app.send("GET", "/live", None).await?;
    ensure!(
        view["live"] == false && view["session"].is_object(),
        "{view}"
    );

    // Closed: no session at all.
    let (status, _) = app.send("DELETE", "/live", None).await?;
    ensure!(status == 204, "closing: {status}");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let (_, view) = app.send("GET", "/live", None).await?;
        if view["session"].is_null() {
            break;
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "the closed session still shows: {view}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}
