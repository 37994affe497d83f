//! Plugin admission: ordered stages over facts gathered beforehand, in the order of the trust
//! model (zeroclaw's lifecycle, bound to the image). A plugin that fails a stage never reaches
//! the next; each stage has its own condition on the Plugin.
//!
//! | stage | refuses when | reasons |
//! |---|---|---|
//! | Host | HostConfig `plugins.enabled` is off | `PluginsDisabled` |
//! | Manifest | `spec.manifest` breaks a rule of plugin.json, or has a gate rule the gate cannot enforce | `InvalidManifest`, `InvalidGateRules` |
//! | Image | the image (pulled by digest) is not a plugin image, its plugin.json is not `spec.manifest`, its command is not `spec.command`, or its bundle lacks what the manifest names | oci's `Image*`/`Registry*`, `ManifestMismatch`, `CommandMismatch`, `ImageBundleInvalid` |
//! | Signature | the signature policy refuses (or, permissive, warns) | oci's `Unsigned`, `UntrustedKey`, `InvalidSignature`, `SignatureDigestMismatch`, `SignatureManifestMismatch` |
//! | Capabilities | an approved capability is unknown or not declared | `UnknownCapability`, `CapabilityNotDeclared` |
//! | Names | its name or a tool name is held by an admitted plugin before it in package-name order, or a tool name has `__` | zeroclaw's error keys |
//!
//! This crate decides, over values: it never holds a client. Who gathers the facts and acts on
//! the outcome: the controller's Plugin reconciler (its `images` pulls through the oci crate,
//! cached by digest; its `plugin` writes the status and Events), and the operator's `plugin
//! install|verify`, which run the same stages before anything is written.
//!
//! - this file: [`Facts`], [`evaluate`] (the one entry point) and each stage;
//! - [`findings`]: what gathering found (the image, the signatures), and [`view_of`];
//! - [`gate_policy`]: the manifest's `gate` rules compiled for the gate (the Manifest stage
//!   checks them; the controller writes them into each Pod);
//! - [`conflicts`]: the Names stage's rules;
//! - [`verdict`]: what the status this pipeline wrote says now ([`admit`], what the other
//!   reconcilers ask), and the names admitted plugins hold.

pub mod conflicts;
pub mod findings;
pub mod gate_policy;
pub mod verdict;

pub use findings::{ImageFinding, ImageView, SignatureFinding, view_of};
pub use verdict::{Admission, Refusal, admit, earlier_holders, holder};

use model::config::hash_json;
use model::manifest::bundle;
use model::manifest::{self, Capability, Manifest};
use model::resources::{
    AdmissionStage, HostConfigSpec, ImageStatus, Plugin, RegisteredTool, SignatureMode,
};
use oci::signing::policy::{self as signature_policy, Subject, Verdict};
use oci::{Digest, ImageRef};

use conflicts::Holder;

/// Everything admission decides on.
#[derive(Clone, Copy, Debug)]
pub struct Facts<'a> {
    pub host: &'a HostConfigSpec,
    pub plugin: &'a Plugin,
    /// None when not read (an earlier stage refused, so nobody asked).
    pub image: Option<&'a ImageFinding>,
    pub signatures: &'a SignatureFinding,
    /// The admitted plugins before this one in package-name order, in that order.
    pub earlier: &'a [Holder],
}

/// How a stage ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageState {
    Passed,
    /// Passed with a warning (permissive signatures): a Warning Event goes with it.
    Warned,
    Refused,
    /// Could not be decided now (the registry is unreachable): looked at again soon.
    Pending,
    /// An earlier stage did not pass.
    NotReached,
}

/// One stage's result, as its condition says it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StageResult {
    pub stage: AdmissionStage,
    pub state: StageState,
    pub reason: String,
    pub message: String,
}

/// The whole of admission.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    /// Every stage, in order.
    pub stages: Vec<StageResult>,
    /// The manifest, when the Manifest stage passed.
    pub manifest: Option<Manifest>,
    /// The image facts to record, when the Image stage passed.
    pub image: Option<ImageStatus>,
    /// The tools registered, when admitted.
    pub tools: Vec<RegisteredTool>,
}

impl Outcome {
    pub fn admitted(&self) -> bool {
        self.stages
            .iter()
            .all(|s| matches!(s.state, StageState::Passed | StageState::Warned))
    }

    /// The stage that stopped admission (refused or pending).
    pub fn stopped_at(&self) -> Option<&StageResult> {
        self.stages
            .iter()
            .find(|s| matches!(s.state, StageState::Refused | StageState::Pending))
    }

    /// Whether admission waits on something that may pass on its own.
    pub fn pending(&self) -> bool {
        self.stopped_at()
            .is_some_and(|s| s.state == StageState::Pending)
    }

    /// Stages that passed with a warning.
    pub fn warnings(&self) -> impl Iterator<Item = &StageResult> {
        self.stages.iter().filter(|s| s.state == StageState::Warned)
    }
}

/// What a stage decided: go on (with what it found), or stop.
enum Step<T> {
    Go(T, StageResult),
    Stop(StageResult),
}

fn result(stage: AdmissionStage, state: StageState, reason: &str, message: String) -> StageResult {
    StageResult {
        stage,
        state,
        reason: reason.into(),
        message,
    }
}

/// Runs the stages in order.
pub fn evaluate(facts: &Facts) -> Outcome {
    let mut stages = Vec::with_capacity(AdmissionStage::ALL.len());
    let mut outcome = Outcome {
        stages: Vec::new(),
        manifest: None,
        image: None,
        tools: Vec::new(),
    };
    let finish = |mut stages: Vec<StageResult>, outcome: Outcome| {
        for stage in AdmissionStage::ALL.iter().skip(stages.len()) {
            let stopper = stages
                .iter()
                .find(|s: &&StageResult| {
                    matches!(s.state, StageState::Refused | StageState::Pending)
                })
                .map(|s| s.stage.name())
                .unwrap_or("an earlier");
            stages.push(result(
                *stage,
                StageState::NotReached,
                "NotReached",
                format!("not checked: the {stopper} stage did not pass"),
            ));
        }
        Outcome { stages, ..outcome }
    };

    match host_stage(facts) {
        Step::Go((), r) => stages.push(r),
        Step::Stop(r) => {
            stages.push(r);
            return finish(stages, outcome);
        }
    }
    let manifest = match manifest_stage(facts) {
        Step::Go(m, r) => {
            stages.push(r);
            m
        }
        Step::Stop(r) => {
            stages.push(r);
            return finish(stages, outcome);
        }
    };
    outcome.manifest = Some(manifest.clone());
    let image = match image_stage(facts, &manifest) {
        Step::Go(i, r) => {
            stages.push(r);
            i
        }
        Step::Stop(r) => {
            stages.push(r);
            return finish(stages, outcome);
        }
    };
    let key = match signature_stage(facts, &manifest, &image) {
        Step::Go(key, r) => {
            stages.push(r);
            key
        }
        Step::Stop(r) => {
            stages.push(r);
            outcome.image = Some(image);
            return finish(stages, outcome);
        }
    };
    outcome.image = Some(ImageStatus {
        publisher_key: key,
        ..image
    });
    match capabilities_stage(facts, &manifest) {
        Step::Go((), r) => stages.push(r),
        Step::Stop(r) => {
            stages.push(r);
            return finish(stages, outcome);
        }
    }
    match names_stage(facts, &manifest) {
        Step::Go(tools, r) => {
            stages.push(r);
            outcome.tools = tools;
        }
        Step::Stop(r) => stages.push(r),
    }
    finish(stages, outcome)
}

fn host_stage(facts: &Facts) -> Step<()> {
    let stage = AdmissionStage::Host;
    if facts.host.plugins.enabled {
        Step::Go(
            (),
            result(
                stage,
                StageState::Passed,
                "PluginsEnabled",
                "plugins.enabled is on".into(),
            ),
        )
    } else {
        Step::Stop(result(
            stage,
            StageState::Refused,
            "PluginsDisabled",
            "plugins.enabled is off in HostConfig default".into(),
        ))
    }
}

fn manifest_stage(facts: &Facts) -> Step<Manifest> {
    let stage = AdmissionStage::Manifest;
    let manifest = match manifest::from_value(&facts.plugin.spec.manifest.to_json()) {
        Ok(m) => m,
        Err(err) => {
            return Step::Stop(result(
                stage,
                StageState::Refused,
                "InvalidManifest",
                err.to_string(),
            ));
        }
    };
    if let Err(err) = gate_policy::rules(manifest.gate.as_ref()) {
        return Step::Stop(result(
            stage,
            StageState::Refused,
            "InvalidGateRules",
            err.to_string(),
        ));
    }
    let message = format!(
        "{} {}: every rule of plugin.json holds",
        manifest.id, manifest.version
    );
    Step::Go(
        manifest,
        result(stage, StageState::Passed, "Valid", message),
    )
}

fn image_stage(facts: &Facts, manifest: &Manifest) -> Step<ImageStatus> {
    let stage = AdmissionStage::Image;
    let stop =
        |state, reason: &str, message: String| Step::Stop(result(stage, state, reason, message));
    let spec = &facts.plugin.spec;
    let spec_hash = hash_json(&spec.manifest.to_json());
    let Some(finding) = facts.image else {
        return stop(
            StageState::Pending,
            "ImageNotRead",
            format!("image {} not read yet", spec.image),
        );
    };
    let (facts_seen, note) = match finding {
        ImageFinding::Unavailable { reason, message } => {
            return stop(StageState::Pending, reason, message.clone());
        }
        ImageFinding::Refused { reason, message } => {
            return stop(StageState::Refused, reason, message.clone());
        }
        ImageFinding::Recorded { facts, why } => (
            facts.clone(),
            format!(
                "; the registry is unreachable ({why}), so the facts recorded for this digest stand"
            ),
        ),
        ImageFinding::Read(view) => {
            let text = match std::str::from_utf8(&view.plugin_json) {
                Ok(t) => t,
                Err(_) => {
                    return stop(
                        StageState::Refused,
                        "ImagePluginJsonInvalid",
                        "the image's /loop-plugin/plugin.json is not UTF-8 text".into(),
                    );
                }
            };
            let shipped = match manifest::json5_value(text) {
                Ok(v) => v,
                Err(e) => {
                    return stop(
                        StageState::Refused,
                        "ImagePluginJsonInvalid",
                        format!("the image's /loop-plugin/plugin.json: {e}"),
                    );
                }
            };
            let image_hash = hash_json(&shipped);
            if image_hash != spec_hash {
                return stop(
                    StageState::Refused,
                    "ManifestMismatch",
                    format!(
                        "spec.manifest is not the plugin.json image {} ships (first difference at {}): what runs must be what was checked; reinstall from the image",
                        spec.image,
                        first_difference(&spec.manifest.to_json(), &shipped)
                    ),
                );
            }
            let problems = bundle::check(manifest, &view.bundle);
            if !problems.is_empty() {
                let list: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
                return stop(
                    StageState::Refused,
                    "ImageBundleInvalid",
                    format!("the image's /loop-plugin: {}", list.join("; ")),
                );
            }
            (
                ImageStatus {
                    digest: view.digest.clone(),
                    run_as_user: view.run_as.uid,
                    run_as_group: view.run_as.gid,
                    command: view.command.clone(),
                    plugin_json_sha256: view.plugin_json_sha256.clone(),
                    manifest_hash: image_hash,
                    publisher_key: None,
                },
                String::new(),
            )
        }
    };
    if facts_seen.manifest_hash != spec_hash {
        return stop(
            StageState::Refused,
            "ManifestMismatch",
            format!(
                "spec.manifest is not the plugin.json image {} ships: what runs must be what was checked; reinstall from the image",
                spec.image
            ),
        );
    }
    if Some(facts_seen.digest.as_str()) != facts.plugin.pinned_digest() {
        return stop(
            StageState::Refused,
            "ImageDigestMismatch",
            format!(
                "spec.image pins {}, but the registry gave {}",
                facts.plugin.pinned_digest().unwrap_or("no digest"),
                facts_seen.digest
            ),
        );
    }
    if !spec.command.is_empty() && spec.command != facts_seen.command {
        return stop(
            StageState::Refused,
            "CommandMismatch",
            format!(
                "spec.command {:?} is not the image's entrypoint and cmd {:?}",
                spec.command, facts_seen.command
            ),
        );
    }
    let message = format!(
        "{} checked: a plugin image, USER {}, plugin.json is spec.manifest{note}",
        spec.image,
        facts_seen.run_as(),
    );
    Step::Go(
        facts_seen,
        result(stage, StageState::Passed, "ImageVerified", message),
    )
}

/// The first JSON path at which two values differ, for the mismatch message.
fn first_difference(a: &serde_json::Value, b: &serde_json::Value) -> String {
    use serde_json::Value;
    fn walk(a: &Value, b: &Value, at: String) -> Option<String> {
        match (a, b) {
            (Value::Object(x), Value::Object(y)) => {
                let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
                keys.into_iter().find_map(|k| {
                    let here = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    match (x.get(k), y.get(k)) {
                        (Some(p), Some(q)) => walk(p, q, here),
                        _ => Some(here),
                    }
                })
            }
            (Value::Array(x), Value::Array(y)) => {
                if x.len() != y.len() {
                    return Some(at);
                }
                x.iter()
                    .zip(y)
                    .enumerate()
                    .find_map(|(i, (p, q))| walk(p, q, format!("{at}[{i}]")))
            }
            _ if hash_json(a) == hash_json(b) => None,
            _ => Some(at),
        }
    }
    walk(a, b, String::new()).unwrap_or_else(|| "(the whole document)".into())
}

fn signature_stage(
    facts: &Facts,
    manifest: &Manifest,
    image: &ImageStatus,
) -> Step<Option<String>> {
    let stage = AdmissionStage::Signature;
    let mode = &facts.host.plugins.signature_mode;
    let records = match facts.signatures {
        SignatureFinding::Unavailable(why) => {
            return Step::Stop(result(
                stage,
                StageState::Pending,
                "RegistryUnavailable",
                format!(
                    "reading the signatures published for {}: {why}",
                    image.digest
                ),
            ));
        }
        SignatureFinding::NotRead => &[][..],
        SignatureFinding::Records(r) => r.as_slice(),
    };
    let Ok(digest) = Digest::parse(&image.digest) else {
        return Step::Stop(result(
            stage,
            StageState::Refused,
            "ImageDigestMismatch",
            format!("{:?} is not a sha256 digest", image.digest),
        ));
    };
    let repository = ImageRef::parse(&facts.plugin.spec.image)
        .map(|r| r.name())
        .unwrap_or_default();
    let subject = Subject {
        plugin: manifest.id.clone(),
        version: manifest.version.clone(),
        repository,
        manifest_digest: digest,
        plugin_json_sha256: image.plugin_json_sha256.clone(),
    };
    let keys = &facts.host.plugins.trusted_publisher_keys;
    let decision = signature_policy::decide(
        &signature_policy::SignatureMode::parse(mode.as_str()),
        keys,
        signature_policy::pick(records, keys),
        &subject,
    );
    let state = match decision.verdict {
        Verdict::Admit => StageState::Passed,
        Verdict::Warn => StageState::Warned,
        Verdict::Refuse => StageState::Refused,
    };
    let r = result(stage, state, decision.reason(), decision.message.clone());
    // A mode we do not know acts as strict; the message says so (the policy's prefix).
    debug_assert!(!matches!(mode, SignatureMode::Unknown(_)) || decision.unknown_mode.is_some());
    if state == StageState::Refused {
        Step::Stop(r)
    } else {
        Step::Go(decision.key, r)
    }
}

fn capabilities_stage(facts: &Facts, manifest: &Manifest) -> Step<()> {
    let stage = AdmissionStage::Capabilities;
    let approved = &facts.plugin.spec.approved_capabilities;
    for (i, name) in approved.iter().enumerate() {
        let Some(capability) = Capability::parse(name) else {
            return Step::Stop(result(
                stage,
                StageState::Refused,
                "UnknownCapability",
                format!(
                    "spec.approvedCapabilities[{i}]: unknown capability {name:?}: one of {}",
                    Capability::names()
                ),
            ));
        };
        if !manifest.declares_capability(capability) {
            return Step::Stop(result(
                stage,
                StageState::Refused,
                "CapabilityNotDeclared",
                format!(
                    "spec.approvedCapabilities[{i}]: {name} is approved but the manifest does not declare it"
                ),
            ));
        }
    }
    let not_approved: Vec<&str> = manifest
        .capabilities
        .iter()
        .map(|c| c.as_str())
        .filter(|c| !approved.iter().any(|a| a == c))
        .collect();
    let message = if not_approved.is_empty() {
        format!(
            "every capability the manifest declares is approved ({})",
            manifest.capabilities.len()
        )
    } else {
        format!(
            "approved {} of {}; not approved (calls needing them answer 403): {}",
            manifest.capabilities.len() - not_approved.len(),
            manifest.capabilities.len(),
            not_approved.join(", ")
        )
    };
    Step::Go((), result(stage, StageState::Passed, "Approved", message))
}

fn names_stage(facts: &Facts, manifest: &Manifest) -> Step<Vec<RegisteredTool>> {
    let stage = AdmissionStage::Names;
    let tools: Vec<String> = manifest.tools.iter().map(|t| t.name.clone()).collect();
    match conflicts::register(&manifest.id, &tools, facts.earlier) {
        Ok(registered) => {
            let message = if registered.is_empty() {
                format!("plugin {:?} registered (no tools)", manifest.id)
            } else {
                format!(
                    "plugin {:?} registered with tools {}",
                    manifest.id,
                    registered
                        .iter()
                        .map(|t| t.mcp_name.as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            Step::Go(
                registered,
                result(stage, StageState::Passed, "Registered", message),
            )
        }
        Err(refusal) => Step::Stop(result(
            stage,
            StageState::Refused,
            refusal.key,
            refusal.message,
        )),
    }
}

#[cfg(test)]
mod tests;
