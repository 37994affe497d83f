//! UI commands (`POST /ui/commands`, capability `ui.command`): a plugin asks the app showing
//! its chat to carry out a few steps, and waits for the app's answer for each. The reference
//! names the capability ("run UI commands in the app"), the SDK's `RunUI` (waiting as long as
//! the command's timeout, past the client's own) and the fake host answering that every step
//! ran; the steps are ours, one for each thing the reference's app shows a person in a chat:
//!
//! | step | what the app does |
//! |---|---|
//! | `select_chat` | brings the chat into view |
//! | `open_panel` `{panel}` | adds a pane of one of the plugin's own panels (a singleton's pane already open is brought forward) |
//! | `open_drawer` | opens the chat's notification drawer |
//! | `notify` `{message, level?}` | shows a passing message (`info`, `success`, `warning`, `error`) |
//! | `open_file` `{path, line?}` | shows a file of the chat's working tree |
//! | `compose` `{text}` | puts text in the chat's composer, for the person to send or not |
//!
//! The app answers each step `ran`, `failed` (with why), `unsupported` (this app cannot do it)
//! or `skipped` (an earlier step failed: the steps stop at the first that fails). No app
//! answering within the command's timeout is 504 `timeout`. Every check here is shared by the
//! host, the fake host and `conformance`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::limits::{MAX_PATH, check_length};
use super::wire::Level;
use manifest::{Capability, Manifest};

/// The most steps a command has.
pub const MAX_STEPS: usize = 16;
/// How long the host waits for the app when the command names no timeout.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest timeout a command may name (a person may take a while to look).
pub const MAX_TIMEOUT: Duration = Duration::from_secs(300);
/// A `notify` step's message, in characters.
pub const MAX_MESSAGE: usize = 500;
/// A `compose` step's text, in characters.
pub const MAX_COMPOSE: usize = 16 * 1024;
/// An error the app gives for a step, in characters.
pub const MAX_STEP_ERROR: usize = 500;

/// `POST /ui/commands`' body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UiCommandRequest {
    /// 1 to [`MAX_STEPS`] steps, carried out in order.
    pub steps: Vec<Step>,
    /// How long to wait for the app, 1 to [`MAX_TIMEOUT`] seconds ([`DEFAULT_TIMEOUT`] when
    /// absent).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        deserialize_with = "whole"
    )]
    pub timeout_seconds: Option<u64>,
}

/// One step of a command.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum Step {
    SelectChat {},
    OpenPanel {
        panel: String,
    },
    OpenDrawer {},
    Notify {
        message: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        level: Option<Level>,
    },
    OpenFile {
        path: String,
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            deserialize_with = "whole"
        )]
        line: Option<u32>,
    },
    Compose {
        text: String,
    },
}

/// A whole number as JSON writes it, `3` or `3.0` alike (JSON Schema's integer), or null; a
/// fraction or one out of `T`'s range is refused.
fn whole<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    use serde::de::Error;
    let Some(n) = Option::<serde_json::Number>::deserialize(d)? else {
        return Ok(None);
    };
    let whole = n.as_u64().or_else(|| {
        n.as_f64()
            .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f <= u64::MAX as f64)
            .map(|f| f as u64)
    });
    whole
        .and_then(|w| T::try_from(w).ok())
        .map(Some)
        .ok_or_else(|| D::Error::custom(format!("{n} is not a whole number in range")))
}

impl Step {
    /// The step's `type`.
    pub fn kind(&self) -> &'static str {
        match self {
            Step::SelectChat {} => "select_chat",
            Step::OpenPanel { .. } => "open_panel",
            Step::OpenDrawer {} => "open_drawer",
            Step::Notify { .. } => "notify",
            Step::OpenFile { .. } => "open_file",
            Step::Compose { .. } => "compose",
        }
    }
}

/// What became of a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StepStatus {
    Ran,
    Failed,
    Unsupported,
    Skipped,
}

/// The app's word on one step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StepResult {
    pub status: StepStatus,
    /// Why it failed or is unsupported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The app's answer to a command (the host API's `POST .../ui/commands/{id}` body).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AppAnswer {
    /// One per step, in the command's order.
    pub steps: Vec<StepResult>,
}

/// One step's outcome as the plugin gets it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepOutcome {
    /// The step's `type`.
    #[serde(rename = "type")]
    pub kind: String,
    pub status: StepStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `POST /ui/commands`' answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UiCommandAnswer {
    /// The command's id.
    pub id: String,
    pub steps: Vec<StepOutcome>,
    /// Whether every step ran.
    pub ran: bool,
}

impl UiCommandAnswer {
    /// The plugin's answer to command `id` of `steps`, from the app's `answer` (checked by
    /// [`check_answer`]).
    pub fn of(id: &str, steps: &[Step], answer: &AppAnswer) -> Self {
        let steps: Vec<StepOutcome> = steps
            .iter()
            .zip(&answer.steps)
            .map(|(step, result)| StepOutcome {
                kind: step.kind().into(),
                status: result.status,
                error: result.error.clone(),
            })
            .collect();
        Self {
            id: id.into(),
            ran: steps.iter().all(|s| s.status == StepStatus::Ran),
            steps,
        }
    }

    /// What the fake host answers: every step ran.
    pub fn all_ran(id: &str, steps: &[Step]) -> Self {
        let ran = AppAnswer {
            steps: steps
                .iter()
                .map(|_| StepResult {
                    status: StepStatus::Ran,
                    error: None,
                })
                .collect(),
        };
        Self::of(id, steps, &ran)
    }
}

/// Why a command is refused, naming the field: a body the spec's schema refuses (400
/// `invalid_body`), or a step the schema takes that the manifest or the working tree does not
/// allow (422 `invalid_step`: a panel it does not declare or may not show, a path out of the
/// tree).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    Invalid(String),
    Step(String),
}

impl Refusal {
    /// The API's error code for it.
    pub fn code(&self) -> super::ErrorCode {
        match self {
            Refusal::Invalid(_) => super::ErrorCode::InvalidBody,
            Refusal::Step(_) => super::ErrorCode::InvalidStep,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            Refusal::Invalid(m) | Refusal::Step(m) => m,
        }
    }
}

/// The command's timeout when `request` is one `manifest`'s plugin (approved for `approved`)
/// may send; otherwise the refusal, naming the field.
pub fn check(
    request: &UiCommandRequest,
    manifest: &Manifest,
    approved: &[Capability],
) -> Result<Duration, Refusal> {
    if request.steps.is_empty() || request.steps.len() > MAX_STEPS {
        return Err(Refusal::Invalid(format!(
            "steps: a command has 1 to {MAX_STEPS} steps, not {}",
            request.steps.len()
        )));
    }
    let timeout = match request.timeout_seconds {
        None => DEFAULT_TIMEOUT,
        Some(s) if (1..=MAX_TIMEOUT.as_secs()).contains(&s) => Duration::from_secs(s),
        Some(s) => {
            return Err(Refusal::Invalid(format!(
                "timeout_seconds: {s} is not between 1 and {}",
                MAX_TIMEOUT.as_secs()
            )));
        }
    };
    for (i, step) in request.steps.iter().enumerate() {
        check_step(step, manifest, approved).map_err(|r| match r {
            Refusal::Invalid(why) => Refusal::Invalid(format!("steps[{i}].{why}")),
            Refusal::Step(why) => Refusal::Step(format!("steps[{i}].{why}")),
        })?;
    }
    Ok(timeout)
}

fn check_step(step: &Step, manifest: &Manifest, approved: &[Capability]) -> Result<(), Refusal> {
    let invalid = Refusal::Invalid;
    match step {
        Step::SelectChat {} | Step::OpenDrawer {} => Ok(()),
        Step::OpenPanel { panel } => {
            let declared = manifest.ui.panels.iter().any(|p| &p.id == panel);
            if !declared {
                return Err(Refusal::Step(format!(
                    "panel: {panel:?} is not one of the manifest's ui.panels"
                )));
            }
            if !approved.contains(&Capability::UiPanel) {
                return Err(Refusal::Step(format!(
                    "panel: {panel:?} is not shown: the plugin is not approved for ui.panel"
                )));
            }
            Ok(())
        }
        Step::Notify { message, .. } => {
            check_length("message", message, MAX_MESSAGE, true).map_err(invalid)
        }
        Step::OpenFile { path, line } => {
            check_length("path", path, MAX_PATH, true).map_err(invalid)?;
            if path.starts_with('/') {
                return Err(invalid(format!("path: {path:?} is not relative")));
            }
            if *line == Some(0) {
                return Err(invalid("line: lines count from 1".into()));
            }
            if path.split('/').any(|c| c == ".." || c.is_empty()) {
                return Err(Refusal::Step(format!(
                    "path: {path:?} is not a path inside the working tree"
                )));
            }
            Ok(())
        }
        Step::Compose { text } => check_length("text", text, MAX_COMPOSE, true).map_err(invalid),
    }
}

/// Whether `answer` answers a command of `steps` (400 `invalid_body` naming the field).
pub fn check_answer(answer: &AppAnswer, steps: &[Step]) -> Result<(), String> {
    if answer.steps.len() != steps.len() {
        return Err(format!(
            "steps: the command has {} steps, the answer {}",
            steps.len(),
            answer.steps.len()
        ));
    }
    for (i, result) in answer.steps.iter().enumerate() {
        if let Some(error) = &result.error {
            check_length(&format!("steps[{i}].error"), error, MAX_STEP_ERROR, false)?;
        }
        if matches!(result.status, StepStatus::Failed) && result.error.is_none() {
            return Err(format!("steps[{i}].error: a failed step says why"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn manifest() -> Manifest {
        manifest::parse_str(include_str!("../../../../examples/echo-plugin/plugin.json")).unwrap()
    }

    fn request(steps: serde_json::Value) -> UiCommandRequest {
        serde_json::from_value(json!({ "steps": steps })).unwrap()
    }

    #[test]
    fn steps_read_by_their_type_and_unknown_fields_are_refused() {
        let r = request(json!([
            {"type": "select_chat"},
            {"type": "notify", "message": "hi", "level": "warning"},
            {"type": "open_file", "path": "src/main.rs", "line": 3},
        ]));
        assert_eq!(r.steps[1].kind(), "notify");
        assert!(
            serde_json::from_value::<UiCommandRequest>(
                json!({"steps": [{"type": "select_chat", "x": 1}]})
            )
            .is_err()
        );
        assert!(
            serde_json::from_value::<UiCommandRequest>(json!({"steps": [{"type": "rm_rf"}]}))
                .is_err()
        );
    }

    #[test]
    fn a_whole_number_may_be_written_with_a_point_and_null_is_absent() {
        let r: UiCommandRequest = serde_json::from_value(json!({
            "steps": [{"type": "open_file", "path": "a", "line": 7.0}], "timeout_seconds": null
        }))
        .unwrap();
        assert_eq!(r.timeout_seconds, None);
        assert!(matches!(r.steps[0], Step::OpenFile { line: Some(7), .. }));
        let r: UiCommandRequest = serde_json::from_value(json!({
            "steps": [{"type": "select_chat"}], "timeout_seconds": 116.0
        }))
        .unwrap();
        assert_eq!(r.timeout_seconds, Some(116));
        for bad in [json!(7.5), json!(-1), json!(4294967296_u64), json!("7")] {
            let body = json!({"steps": [{"type": "open_file", "path": "a", "line": bad}]});
            assert!(
                serde_json::from_value::<UiCommandRequest>(body).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_command_is_held_to_its_bounds_and_the_refusal_names_the_step() {
        let m = manifest();
        let all = Capability::ALL.to_vec();
        assert_eq!(
            check(&request(json!([{"type": "select_chat"}])), &m, &all),
            Ok(DEFAULT_TIMEOUT)
        );
        let none = request(json!([]));
        assert!(
            check(&none, &m, &all)
                .unwrap_err()
                .message()
                .starts_with("steps:")
        );
        let many = request(json!(vec![json!({"type": "open_drawer"}); MAX_STEPS + 1]));
        assert!(check(&many, &m, &all).is_err());
        let long = request(
            json!([{"type": "select_chat"}, {"type": "notify", "message": "x".repeat(MAX_MESSAGE + 1)}]),
        );
        let refused = check(&long, &m, &all).unwrap_err();
        assert!(refused.message().starts_with("steps[1].message"));
        assert_eq!(refused.code(), crate::api::ErrorCode::InvalidBody);
        for (path, code) in [
            ("/etc/passwd", crate::api::ErrorCode::InvalidBody),
            ("", crate::api::ErrorCode::InvalidBody),
            ("../x", crate::api::ErrorCode::InvalidStep),
            ("a//b", crate::api::ErrorCode::InvalidStep),
        ] {
            let r = request(json!([{"type": "open_file", "path": path}]));
            let refused = check(&r, &m, &all).unwrap_err();
            assert!(refused.message().starts_with("steps[0].path"), "{path}");
            assert_eq!(refused.code(), code, "{path}");
        }
        let mut slow = request(json!([{"type": "select_chat"}]));
        slow.timeout_seconds = Some(MAX_TIMEOUT.as_secs() + 1);
        assert!(
            check(&slow, &m, &all)
                .unwrap_err()
                .message()
                .starts_with("timeout_seconds")
        );
        slow.timeout_seconds = Some(120);
        assert_eq!(check(&slow, &m, &all), Ok(Duration::from_secs(120)));
    }

    #[test]
    fn a_panel_step_needs_a_declared_panel_and_ui_panel() {
        let m = manifest();
        let panel = m.ui.panels[0].id.clone();
        let r = request(json!([{"type": "open_panel", "panel": panel}]));
        assert!(check(&r, &m, &Capability::ALL).is_ok());
        let without: Vec<Capability> = Capability::ALL
            .into_iter()
            .filter(|c| *c != Capability::UiPanel)
            .collect();
        let refused = check(&r, &m, &without).unwrap_err();
        assert!(refused.message().contains("ui.panel"));
        assert_eq!(refused.code(), crate::api::ErrorCode::InvalidStep);
        let other = request(json!([{"type": "open_panel", "panel": "nope"}]));
        assert!(
            check(&other, &m, &Capability::ALL)
                .unwrap_err()
                .message()
                .contains("ui.panels")
        );
    }

    #[test]
    fn an_answer_has_one_result_per_step_and_a_failure_says_why() {
        let steps =
            request(json!([{"type": "select_chat"}, {"type": "compose", "text": "x"}])).steps;
        let ok: AppAnswer = serde_json::from_value(json!({"steps": [
            {"status": "ran"}, {"status": "unsupported", "error": "no composer"}
        ]}))
        .unwrap();
        assert_eq!(check_answer(&ok, &steps), Ok(()));
        let answer = UiCommandAnswer::of("c1", &steps, &ok);
        assert!(!answer.ran);
        assert_eq!(answer.steps[1].kind, "compose");
        let short: AppAnswer =
            serde_json::from_value(json!({"steps": [{"status": "ran"}]})).unwrap();
        assert!(check_answer(&short, &steps).is_err());
        let silent: AppAnswer = serde_json::from_value(json!({"steps": [
            {"status": "failed"}, {"status": "skipped"}
        ]}))
        .unwrap();
        assert!(
            check_answer(&silent, &steps)
                .unwrap_err()
                .starts_with("steps[0].error")
        );
        assert!(UiCommandAnswer::all_ran("c2", &steps).ran);
    }
}
