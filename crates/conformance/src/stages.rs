//! Admission's stages on an image (what `plugin verify` runs: crates/operator, under
//! HostConfig's defaults with plugins on) as findings of the `admission` area, one a stage:
//! a refusal fails with the stage's reason and message, a stage not reached is skipped with
//! why. What stopped the image before a Plugin could be made of it (not a plugin image, a
//! manifest that does not parse, a bundle that lacks what it names) is the stage the
//! controller would say it at. Pure.

use admission::{Outcome as Admission, StageState};
use model::resources::AdmissionStage;
use operator::plugins::candidate::CandidateError;

use crate::report::{Area, Finding, Outcome};

/// The policy the stages judge under: no cluster is asked.
pub const UNDER: &str = "HostConfig's defaults, plugins on";

/// One finding per stage of `admission`.
pub fn findings(admission: &Admission) -> Vec<Finding> {
    admission
        .stages
        .iter()
        .map(|s| {
            let said = format!("{}: {}", s.reason, s.message);
            let outcome = match s.state {
                StageState::Passed => Outcome::Pass,
                StageState::Warned => Outcome::Skip(format!("passed with a warning: {said}")),
                StageState::Refused | StageState::Pending => Outcome::Fail(said),
                StageState::NotReached => Outcome::Skip(s.message.clone()),
            };
            finding(s.stage, outcome)
        })
        .collect()
}

/// The image is not a plugin image (or not there): the Image stage's refusal.
pub fn image_refused(reason: &str, error: &dyn std::fmt::Display) -> Finding {
    finding(
        AdmissionStage::Image,
        Outcome::Fail(format!("{reason}: {error}")),
    )
}

/// No Plugin can be made of the image's manifest: the stage that would refuse it.
pub fn manifest_refused(error: &CandidateError) -> Finding {
    let (stage, reason) = match error {
        CandidateError::Bundle(_) => (AdmissionStage::Image, "ImageBundleInvalid"),
        _ => (AdmissionStage::Manifest, "InvalidManifest"),
    };
    finding(stage, Outcome::Fail(format!("{reason}: {error}")))
}

/// The container not started: the host never runs an image admission refuses.
pub fn not_run() -> Finding {
    Finding {
        area: Area::Admission,
        what: "run when admitted".into(),
        at: "container".into(),
        outcome: Outcome::Skip("admission refused the image: the host would never run it".into()),
    }
}

fn finding(stage: AdmissionStage, outcome: Outcome) -> Finding {
    Finding {
        area: Area::Admission,
        what: UNDER.into(),
        at: stage.name().into(),
        outcome,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use admission::StageResult;

    fn stage(stage: AdmissionStage, state: StageState, reason: &str, message: &str) -> StageResult {
        StageResult {
            stage,
            state,
            reason: reason.into(),
            message: message.into(),
        }
    }

    #[test]
    fn a_refused_stage_fails_with_its_reason_and_the_rest_are_skipped() {
        let outcome = Admission {
            stages: vec![
                stage(AdmissionStage::Host, StageState::Passed, "Enabled", "on"),
                stage(
                    AdmissionStage::Manifest,
                    StageState::Refused,
                    "InvalidManifest",
                    "tools[0].name: empty",
                ),
                stage(
                    AdmissionStage::Image,
                    StageState::NotReached,
                    "NotReached",
                    "not checked: the Manifest stage did not pass",
                ),
            ],
            manifest: None,
            image: None,
            tools: vec![],
        };
        let lines: Vec<String> = findings(&outcome).iter().map(Finding::line).collect();
        assert_eq!(
            lines,
            [
                "PASS admission Host (HostConfig's defaults, plugins on)",
                "FAIL admission Manifest (HostConfig's defaults, plugins on): InvalidManifest: tools[0].name: empty",
                "SKIP admission Image (HostConfig's defaults, plugins on): not checked: the Manifest stage did not pass",
            ]
        );
    }

    #[test]
    fn what_stops_a_plugin_being_made_is_its_stages_refusal() {
        let bundle = manifest_refused(&CandidateError::Bundle(
            "ui/main/index.html: missing".into(),
        ));
        assert_eq!(bundle.at, "Image");
        assert!(
            matches!(&bundle.outcome, Outcome::Fail(why) if why.starts_with("ImageBundleInvalid: "))
        );
        let text = manifest_refused(&CandidateError::NotUtf8);
        assert_eq!(text.at, "Manifest");
        assert!(
            matches!(&text.outcome, Outcome::Fail(why) if why.starts_with("InvalidManifest: "))
        );
        let image = image_refused("ImageUserRoot", &"image USER \"0\" is root");
        assert_eq!(
            image.line(),
            "FAIL admission Image (HostConfig's defaults, plugins on): ImageUserRoot: image USER \"0\" is root"
        );
    }
}
