//! `POST .../plugins/{plugin}/actions/{action}` → 202: running an action. The rules of the
//! body and the body the plugin gets are pure ([`check`], [`plugin_body`]); [`post`] is the
//! handler.

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use sdk::wire::ActionRequest;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::auth::Permission;
use super::error::{Code, HostError, HostResult};
use super::state::{HostState, json_body, what};
use crate::calls::CallKind;
use crate::calls::client::PluginRequest;
use crate::cards::host_notes::{self, About};
use crate::tool_calls::is_workflow_run_id;
use model::manifest::Manifest;

/// What ran the action: the contract's own `Trigger`.
pub use sdk::wire::Trigger;

/// `POST .../actions/{action}`'s body.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ActionCall {
    pub trigger: Trigger,
    /// The scheduled task's id (with `schedule`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// `workflow:<run id>:<node id>` (with `workflow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The workflow node's rendered input (with `workflow`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
}

/// Checks the call against the manifest and the trigger's rules.
pub fn check(manifest: &Manifest, action: &str, call: &ActionCall) -> HostResult<()> {
    if manifest.action(action).is_none() {
        return Err(HostError::new(
            Code::ActionNotFound,
            format!("plugin {} has no action {action:?}", manifest.id),
        ));
    }
    let bad = |m: &str| Err(HostError::new(Code::InvalidBody, m.to_string()));
    match call.trigger {
        Trigger::Schedule if call.task_id.as_deref().is_none_or(str::is_empty) => {
            bad("task_id: trigger schedule needs the task's id")
        }
        Trigger::Workflow if !call.run_id.as_deref().is_some_and(is_workflow_run_id) => {
            bad("run_id: trigger workflow needs run_id workflow:<run id>:<node id>")
        }
        Trigger::Manual | Trigger::Schedule if call.run_id.is_some() || call.input.is_some() => {
            bad("run_id and input: only a workflow's call carries them")
        }
        Trigger::Manual | Trigger::Workflow if call.task_id.is_some() => {
            bad("task_id: only a scheduled task's call carries it")
        }
        _ => Ok(()),
    }
}

/// The body the plugin gets: the contract's `ActionRequest`, with the thread's id when the
/// chat is a thread.
pub fn plugin_body(call: ActionCall, thread_id: Option<&str>) -> ActionRequest {
    ActionRequest {
        trigger: call.trigger,
        task_id: call.task_id,
        run_id: call.run_id,
        input: call.input,
        thread_id: thread_id.map(str::to_string),
    }
}

/// Checks the caller and the call, then has the plugin run the action (10 s).
pub async fn post(
    State(s): State<HostState>,
    Path((ns, chat, plugin, action)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HostError> {
    let target = s
        .authorized_target(&headers, (&ns, &chat, &plugin), Permission::action)
        .await?;
    let call: ActionCall = json_body(&body)?;
    check(&target.compiled.manifest, &action, &call)?;
    let scheduled =
        (call.trigger == Trigger::Schedule).then(|| call.task_id.clone().unwrap_or_default());
    let workflow = (call.trigger == Trigger::Workflow)
        .then(|| call.run_id.clone())
        .flatten();
    let limits = s.calls.limits();
    let request = PluginRequest::json(
        CallKind::Action,
        format!("/actions/{action}"),
        &plugin_body(call, target.thread_id.as_deref()),
        limits.action,
        limits.body,
    );
    let called = s
        .call_accepted(
            &target,
            &request,
            &what(&target, &format!("action {action}")),
        )
        .await;
    // A schedule's or a workflow's call that failed is the host's to tell the chat: nobody
    // in it waits on the call.
    if let Err(failed) = &called
        && let Some(chat) = s.index().channel(&ns, &chat)
    {
        let what = format!("action {action}");
        let about = match (&scheduled, &workflow) {
            (Some(task), _) => Some(About::FailedAction {
                plugin: &plugin,
                action: &action,
                task,
                why: &failed.message,
            }),
            (None, Some(run_id)) => Some(About::FailedWorkflowCall {
                plugin: &plugin,
                what: &what,
                run_id,
                why: &failed.message,
            }),
            (None, None) => None,
        };
        if let Some(about) = about {
            let now = crate::clock::rfc3339(jiff::Timestamp::now());
            host_notes::tell(s.marks.as_ref(), s.index(), &chat, &about, &now).await;
        }
    }
    called?;
    Ok((StatusCode::ACCEPTED, Json(json!({ "accepted": true }))).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest() -> Manifest {
        model::manifest::parse_str(
            r#"{"id": "echo", "name": "E", "version": "1", "api": "1", "capabilities": ["schedule"],
                "actions": [{"id": "ping"}]}"#,
        )
        .unwrap()
    }

    fn call(v: Value) -> Result<ActionCall, serde_json::Error> {
        serde_json::from_value(v)
    }

    #[test]
    fn each_trigger_carries_what_it_needs() {
        let m = manifest();
        for ok in [
            json!({"trigger": "manual"}),
            json!({"trigger": "schedule", "task_id": "echo-general-ping"}),
            json!({"trigger": "workflow", "run_id": "workflow:r1:n2", "input": {"a": 1}}),
        ] {
            check(&m, "ping", &call(ok.clone()).unwrap()).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in [
            json!({"trigger": "schedule"}),
            json!({"trigger": "schedule", "task_id": ""}),
            json!({"trigger": "workflow"}),
            json!({"trigger": "workflow", "run_id": "run-1"}),
            json!({"trigger": "manual", "run_id": "workflow:r:n"}),
            json!({"trigger": "manual", "task_id": "t"}),
        ] {
            let e = check(&m, "ping", &call(bad.clone()).unwrap()).unwrap_err();
            assert_eq!(e.code, Code::InvalidBody, "{bad}");
        }
        assert!(call(json!({"trigger": "cron"})).is_err());
        assert!(call(json!({"trigger": "manual", "extra": 1})).is_err());
        let e = check(&m, "nope", &call(json!({"trigger": "manual"})).unwrap()).unwrap_err();
        assert_eq!(e.code, Code::ActionNotFound);
    }

    #[test]
    fn the_plugin_gets_the_call_and_the_thread() {
        let c = call(json!({"trigger": "schedule", "task_id": "t-1"})).unwrap();
        assert_eq!(
            serde_json::to_value(plugin_body(c.clone(), None)).unwrap(),
            json!({"trigger": "schedule", "task_id": "t-1"})
        );
        assert_eq!(
            plugin_body(c, Some("general-t1")).thread_id.as_deref(),
            Some("general-t1")
        );
    }
}
