//! Composer switch clicks: the plugin's answer made into the state the host keeps per chat
//! (`PluginInstance.status.switches`). Pure.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use model::resources::SwitchState;

/// A switch's title (its tooltip), in characters: the reference's limit.
pub const MAX_TITLE: usize = 200;

/// `POST .../switches/{switch}`'s body: the state the click asks for.
#[derive(Clone, Debug, Deserialize, Serialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Click {
    pub on: bool,
}

/// The plugin's answer: the contract's `SwitchState`.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Answer {
    pub on: bool,
    #[serde(default)]
    pub title: Option<String>,
    /// Set when what the switch stands for failed.
    #[serde(default)]
    pub error: Option<String>,
    #[serde(default)]
    pub busy: bool,
}

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
    serde_json::json!({
        "id": state.id,
        "on": state.on,
        "title": state.title,
        "error": state.error,
        "busy": state.busy,
    })
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
