//! `POST .../channels/{channel}/events`: an event that happened in a chat, delivered by
//! `crate::delivery` (the rules, then a call to each container they name, 10 s each); the
//! answer says what became of it in each container, which containers the rules skipped and
//! why, or why the chat gets no events at all.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::auth::Permission;
use super::error::{Code, HostError};
use super::state::{HostState, json_body, what};
use crate::calls::CallOptions;
use crate::calls::failure;
use crate::delivery::target;
use crate::delivery::{EventReport, SendError, Sent, deliver_event};
use crate::http::ErrorCode;

/// The body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventPost {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    data: Value,
}

/// Checks the caller, the chat and the body, then delivers the event, starting the stopped
/// containers the rules let it start.
pub async fn post(
    State(s): State<HostState>,
    Path((ns, chat)): Path<(String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HostError> {
    s.authorize(&headers, &Permission::events(&ns, &chat))
        .await?;
    let channel = target::chat(s.index(), &ns, &chat)?;
    let post: EventPost = json_body(&body)?;
    if post.kind.is_empty() {
        return Err(HostError::new(Code::InvalidBody, "type: must not be empty"));
    }
    let report = deliver_event(
        &s.calls,
        &ns,
        &channel,
        &post.kind,
        &post.data,
        CallOptions::DEMAND,
    )
    .await;
    Ok(Json(answer(&report)).into_response())
}

/// The answer: the event's type, each delivery with whether it got through (with the plugin's
/// status, or the error as the host API answers it), the containers skipped and why, and why
/// the chat gets no events, when it gets none.
pub fn answer(report: &EventReport) -> Value {
    let deliveries: Vec<Value> = report.sent.iter().map(sent).collect();
    let mut answer = json!({
        "type": report.kind,
        "deliveries": deliveries,
        "skipped": report.skipped,
    });
    if let Some(why) = &report.ignored {
        answer["ignored"] = json!(why);
    }
    answer
}

fn sent(sent: &Sent) -> Value {
    let mut out = serde_json::to_value(&sent.delivery).unwrap_or_default();
    match &sent.result {
        Ok(status) => {
            out["delivered"] = json!(true);
            out["status"] = json!(status.as_u16());
        }
        Err(e) => {
            let e = send_error(e);
            out["delivered"] = json!(false);
            if let Some(st) = e.plugin_status {
                out["status"] = json!(st);
            }
            out["error"] = json!({ "code": e.code.as_str(), "message": e.message });
        }
    }
    out
}

/// A send that failed, as the host API answers a call that fails so.
fn send_error(e: &SendError) -> HostError {
    match e {
        SendError::Target(e) => e.clone().into(),
        SendError::Call { target, error } => {
            failure::of_error(target, &what(target, "the events route"), error).into()
        }
        SendError::Refused { target, answer } => {
            failure::of_answer(&what(target, "the events route"), answer).into()
        }
    }
}

#[cfg(test)]
mod tests {
    use axum::http::StatusCode;

    use super::*;
    use crate::delivery::routing::{Delivery, Skip, SkipReason};
    use crate::delivery::target::{Missing, TargetError};

    fn delivery(chat: &str, thread_id: Option<&str>) -> Delivery {
        Delivery {
            plugin: "echo".into(),
            chat: chat.into(),
            thread_id: thread_id.map(Into::into),
            start: false,
        }
    }

    #[test]
    fn the_answer_says_what_became_of_the_event_in_each_container() {
        let report = EventReport {
            kind: "message.created".into(),
            sent: vec![
                Sent {
                    delivery: delivery("general-t1", Some("general-t1")),
                    result: Ok(StatusCode::ACCEPTED),
                },
                Sent {
                    delivery: delivery("general", Some("general-t1")),
                    result: Err(SendError::Target(TargetError::Pending {
                        missing: Missing::Secret,
                        plugin: "echo".into(),
                        chat: "general".into(),
                    })),
                },
            ],
            skipped: vec![Skip {
                plugin: "other".into(),
                chat: "general".into(),
                reason: SkipReason::NoInstance,
            }],
            ignored: None,
        };
        assert_eq!(
            answer(&report),
            json!({
                "type": "message.created",
                "deliveries": [
                    {"plugin": "echo", "chat": "general-t1", "thread_id": "general-t1",
                     "start": false, "delivered": true, "status": 202},
                    {"plugin": "echo", "chat": "general", "thread_id": "general-t1",
                     "start": false, "delivered": false, "error": {
                        "code": "instance_pending",
                        "message": "the controller has not made the Secret of plugin echo in chat general yet",
                     }},
                ],
                "skipped": [{"plugin": "other", "chat": "general",
                             "reason": "the plugin has no instance in the chat yet"}],
            })
        );
        let ignored = EventReport {
            kind: "message.created".into(),
            sent: vec![],
            skipped: vec![],
            ignored: Some("events in hidden threads are not sent".into()),
        };
        assert_eq!(
            answer(&ignored)["ignored"],
            "events in hidden threads are not sent"
        );
    }
}
