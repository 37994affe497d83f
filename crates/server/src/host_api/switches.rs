//! Composer switches: `GET .../plugins/{plugin}/switches` lists a chat's ([`list`]) and
//! `POST .../switches/{switch}` clicks one ([`click`]), the plugin's answer made into the state
//! the host keeps per chat (`PluginInstance.status.switches`). The rules are pure
//! ([`state_after`], [`with_state`], [`to_json`]).

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::auth::Permission;
use super::error::{Code, HostError, HostResult};
use super::state::{HostState, json_body, what};
use crate::calls::client::PluginRequest;
use crate::calls::{CallKind, Target};
use crate::status::{SwitchChange, SwitchEdit};
use model::manifest::{Capability, ComposerSwitch};
use model::resources::SwitchState;

/// A switch's title (its tooltip), in characters: the reference's limit.
pub const MAX_TITLE: usize = 200;

/// `POST .../switches/{switch}`'s body: the state the click asks for.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Click {
    pub on: bool,
}

/// The plugin's answer: the contract's `SwitchState`, the SDK's type.
use sdk::wire::SwitchState as Answer;

/// The switch's state after the plugin answered: the answer's, keeping the current title when
/// the answer has none. The error, when there is one, becomes the tooltip.
pub fn state_after(
    id: &str,
    current: Option<&SwitchState>,
    answer: &[u8],
) -> Result<SwitchState, String> {
    let answer: Answer = serde_json::from_slice(answer).map_err(|e| {
        format!("the plugin's answer is not a switch state ({{\"on\": bool, \"title\"?, \"error\"?, \"busy\"?}}): {e}")
    })?;
    for (field, text) in [("title", &answer.title), ("error", &answer.error)] {
        if let Some(t) = text
            && t.chars().count() > MAX_TITLE
        {
            return Err(format!(
                "the plugin's {field} has {} characters; at most {MAX_TITLE} are allowed",
                t.chars().count()
            ));
        }
    }
    let title = answer
        .error
        .clone()
        .or(answer.title)
        .or_else(|| current.and_then(|c| c.title.clone()));
    Ok(SwitchState {
        id: id.to_string(),
        on: answer.on,
        title,
        error: answer.error.is_some(),
        busy: answer.busy,
    })
}

/// The switches of a chat with one switch's state replaced (or added).
pub fn with_state(switches: &[SwitchState], state: SwitchState) -> Vec<SwitchState> {
    let mut next: Vec<SwitchState> = switches
        .iter()
        .filter(|s| s.id != state.id)
        .cloned()
        .collect();
    next.push(state);
    next.sort_by(|a, b| a.id.cmp(&b.id));
    next
}

/// A switch state as the host API answers it.
pub fn to_json(state: &SwitchState) -> Value {
    json!({
        "id": state.id,
        "on": state.on,
        "title": state.title,
        "error": state.error,
        "busy": state.busy,
    })
}

/// A switch the plugin declares and may show (`ui.composer_switch` approved).
fn declared_switch<'a>(target: &'a Target, id: &str) -> HostResult<&'a ComposerSwitch> {
    target
        .compiled
        .manifest
        .composer_switch(id)
        .filter(|_| target.approved.contains(&Capability::UiComposerSwitch))
        .ok_or_else(|| {
            HostError::new(
                Code::SwitchNotFound,
                format!(
                    "plugin {} shows no composer switch {id:?} (declared in ui.composer_switches, with ui.composer_switch approved)",
                    target.plugin_name()
                ),
            )
        })
}

/// The switches the plugin shows in the chat, with their state there.
pub async fn list(
    State(s): State<HostState>,
    Path((ns, chat, plugin)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    // An instance not made yet (the plugin enabled a moment ago) keeps no state: all off.
    let target = s
        .authorized_enabled(&headers, (&ns, &chat, &plugin), |ns, i| {
            Permission::switch("get", ns, i)
        })
        .await?;
    let kept = target
        .instance
        .as_ref()
        .and_then(|i| i.status.as_ref())
        .map(|st| st.switches.clone())
        .unwrap_or_default();
    let shown = target.approved.contains(&Capability::UiComposerSwitch);
    let list: Vec<Value> = target
        .compiled
        .manifest
        .ui
        .composer_switches
        .iter()
        .filter(|_| shown)
        .map(|m| {
            let state = kept.iter().find(|k| k.id == m.id);
            json!({
                "id": m.id,
                "label": m.label,
                "icon": m.icon,
                "on": state.is_some_and(|k| k.on),
                "title": state.and_then(|k| k.title.clone()).or_else(|| m.title.clone()),
                "error": state.is_some_and(|k| k.error),
                "busy": state.is_some_and(|k| k.busy),
            })
        })
        .collect();
    Ok(Json(json!({ "switches": list })).into_response())
}

/// Sends the click to the chat's container (10 s) and keeps the state it answers.
pub async fn click(
    State(s): State<HostState>,
    Path((ns, chat, plugin, switch)): Path<(String, String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HostError> {
    let target = s
        .authorized_target(&headers, (&ns, &chat, &plugin), |ns, i| {
            Permission::switch("create", ns, i)
        })
        .await?;
    declared_switch(&target, &switch)?;
    let click: Click = json_body(&body)?;
    let sent = sdk::wire::SwitchRequest {
        on: click.on,
        thread_id: target.thread_id.clone(),
    };
    let limits = s.calls.limits();
    let request = PluginRequest::json(
        CallKind::Switch,
        format!("/switches/{switch}"),
        &sent,
        limits.switch,
        limits.body,
    );
    let what = what(&target, &format!("switch {switch}"));
    let answer = s.call_accepted(&target, &request, &what).await?;
    let current = target
        .instance
        .status
        .as_ref()
        .and_then(|st| st.switches.iter().find(|k| k.id == switch));
    let state = state_after(&switch, current, &answer.body)
        .map_err(|why| HostError::new(Code::InvalidAnswer, format!("{what}: {why}")))?;
    let edit = SwitchEdit::for_plugin(
        SwitchChange::Set(state.clone()),
        &target.compiled.manifest,
        &target.approved,
    );
    s.status.switches(&target.key, &edit).await.map_err(|e| {
        HostError::new(
            Code::Unavailable,
            format!("{what} took the click but its state could not be kept: {e}"),
        )
        .retry_after(1)
    })?;
    Ok(Json(to_json(&state)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(on: bool, title: Option<&str>) -> SwitchState {
        SwitchState {
            id: "mode".into(),
            on,
            title: title.map(Into::into),
            error: false,
            busy: false,
        }
    }

    #[test]
    fn the_answer_is_the_new_state() {
        let s = state_after("mode", None, br#"{"on": true, "title": "Mode is on"}"#).unwrap();
        assert_eq!(s, state(true, Some("Mode is on")));
        // No title: the current one stays.
        let s = state_after("mode", Some(&s), br#"{"on": false}"#).unwrap();
        assert_eq!(s, state(false, Some("Mode is on")));
        // An error: red, with the error as the tooltip.
        let s = state_after(
            "mode",
            None,
            br#"{"on": true, "error": "no disk", "busy": true}"#,
        )
        .unwrap();
        assert!(s.error && s.busy);
        assert_eq!(s.title.as_deref(), Some("no disk"));
    }

    #[test]
    fn a_bad_answer_is_refused() {
        assert!(state_after("mode", None, b"{}").is_err());
        assert!(state_after("mode", None, b"not json").is_err());
        let long = format!(r#"{{"on": true, "title": "{}"}}"#, "x".repeat(201));
        assert!(state_after("mode", None, long.as_bytes()).is_err());
    }

    #[test]
    fn one_switch_is_replaced_the_others_kept() {
        let other = SwitchState {
            id: "a".into(),
            ..state(true, None)
        };
        let next = with_state(
            &[other.clone(), state(false, None)],
            state(true, Some("on")),
        );
        assert_eq!(next, vec![other, state(true, Some("on"))]);
    }
}
