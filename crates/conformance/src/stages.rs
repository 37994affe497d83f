//! Admission's stages on an image (what `plugin verify` runs: crates/operator, under
//! HostConfig's defaults with plugins on) as findings of the `admission` area, one a stage:
//! a refusal fails with the stage's reason and message and the sentence of the reference the
//! stage enforces ([`rule`]), a pass with a warning (permissive signatures) warns, a stage not
//! reached (or not decided now) is skipped with why. What stopped the image before a Plugin
//! could be made of it (not a plugin image, a manifest that does not parse, a bundle that lacks
//! what it names) is the stage the controller would say it at. Pure.

use admission::conflicts::TOOL_NAME_RESERVED;
use admission::{Outcome as Admission, StageState};
use model::resources::AdmissionStage;
use operator::plugins::candidate::CandidateError;

use crate::reference::{self, Rule};
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
                StageState::Warned => Outcome::Warn(format!("passed with a warning: {said}")),
                StageState::Refused => Outcome::fail(said, rule(s.stage, &s.reason)),
                // `check_image` stops with an error before a report has one.
                StageState::Pending => Outcome::Skip(format!("not decided now: {said}")),
                StageState::NotReached => Outcome::Skip(s.message.clone()),
            };
            finding(s.stage, outcome)
        })
        .collect()
}

/// The sentence of the reference a stage's refusal with `reason` enforces.
pub fn rule(stage: AdmissionStage, reason: &str) -> Rule {
    match stage {
        AdmissionStage::Host => reference::PLUGINS_ENABLED,
        AdmissionStage::Manifest => reference::MALFORMED_MANIFEST,
        AdmissionStage::Image => match reason {
            "ImageLabelMissing" | "ImageUserRoot" | "ImageUserNotNumeric" => {
                reference::IMAGE_LABEL_USER
            }
            "ImageLoopPluginTooBig" => reference::LOOP_PLUGIN_CAP,
            "ImageLoopPluginMissing" | "ImagePluginJsonMissing" | "ImagePluginJsonInvalid" => {
                reference::LAYOUT_MANIFEST
            }
            "ImageDataMissing" | "ImageDataOwner" => reference::LAYOUT_DATA,
            "ImageBundleInvalid" => reference::LAYOUT_UI,
            _ => reference::IMAGE,
        },
        AdmissionStage::Signature => reference::SIGNATURE_POLICY,
        AdmissionStage::Capabilities => reference::CAPABILITIES_APPROVED,
        AdmissionStage::Names if reason == TOOL_NAME_RESERVED => reference::NAME_RESERVED,
        AdmissionStage::Names => reference::NAME_CONFLICT,
    }
}

/// The image is not a plugin image (or not there): the Image stage's refusal.
pub fn image_refused(reason: &str, error: &dyn std::fmt::Display) -> Finding {
    let outcome = Outcome::fail(
        format!("{reason}: {error}"),
        rule(AdmissionStage::Image, reason),
    );
    finding(AdmissionStage::Image, outcome)
}

/// No Plugin can be made of the image's manifest: the stage that would refuse it.
pub fn manifest_refused(error: &CandidateError) -> Finding {
    let (stage, reason) = match error {
        CandidateError::Bundle(_) => (AdmissionStage::Image, "ImageBundleInvalid"),
        _ => (AdmissionStage::Manifest, "InvalidManifest"),
    };
    let outcome = Outcome::fail(format!("{reason}: {error}"), rule(stage, reason));
    finding(stage, outcome)
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
                "FAIL admission Manifest (HostConfig's defaults, plugins on): InvalidManifest: tools[0].name: empty; the reference (zeroclaw): \"A malformed manifest is skipped with a warning, never loaded.\"",
                "SKIP admission Image (HostConfig's defaults, plugins on): not checked: the Manifest stage did not pass",
            ]
        );
    }

    #[test]
    fn a_permissive_signature_warns_and_each_refusal_names_its_stages_sentence() {
        let warned = Admission {
            stages: vec![stage(
                AdmissionStage::Signature,
                StageState::Warned,
                "Unsigned",
                "no signature",
            )],
            manifest: None,
            image: None,
            tools: vec![],
        };
        assert_eq!(
            findings(&warned)[0].outcome,
            Outcome::Warn("passed with a warning: Unsigned: no signature".into())
        );
        for (stage, reason, rule_) in [
            (
                AdmissionStage::Image,
                "ImageUserRoot",
                reference::IMAGE_LABEL_USER,
            ),
            (
                AdmissionStage::Image,
                "ImageLoopPluginTooBig",
                reference::LOOP_PLUGIN_CAP,
            ),
            (
                AdmissionStage::Image,
                "ImageDataOwner",
                reference::LAYOUT_DATA,
            ),
            (AdmissionStage::Image, "CommandMismatch", reference::IMAGE),
            (
                AdmissionStage::Names,
                TOOL_NAME_RESERVED,
                reference::NAME_RESERVED,
            ),
            (
                AdmissionStage::Names,
                "plugin_tool_name_conflict",
                reference::NAME_CONFLICT,
            ),
            (
                AdmissionStage::Signature,
                "UntrustedKey",
                reference::SIGNATURE_POLICY,
            ),
        ] {
            assert_eq!(rule(stage, reason), rule_, "{stage} {reason}");
        }
    }

    #[test]
    fn what_stops_a_plugin_being_made_is_its_stages_refusal() {
        let bundle = manifest_refused(&CandidateError::Bundle(
            "ui/main/index.html: missing".into(),
        ));
        assert_eq!(bundle.at, "Image");
        assert!(
            matches!(&bundle.outcome, Outcome::Fail(b) if b.why().starts_with("ImageBundleInvalid: ") && b.rule() == reference::LAYOUT_UI)
        );
        let text = manifest_refused(&CandidateError::NotUtf8);
        assert_eq!(text.at, "Manifest");
        assert!(
            matches!(&text.outcome, Outcome::Fail(b) if b.why().starts_with("InvalidManifest: "))
        );
        let image = image_refused("ImageUserRoot", &"image USER \"0\" is root");
        assert_eq!(
            image.line(),
            "FAIL admission Image (HostConfig's defaults, plugins on): ImageUserRoot: image USER \"0\" is root; the reference: \"The image carries the label dev.loop.plugin=1, runs as a non-root USER (a numeric uid:gid works) and serves HTTP on $LOOP_PLUGIN_PORT.\""
        );
    }
}
