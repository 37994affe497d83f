//! The Plugin reconciler: gathers admission's facts (`images`), runs the stages
//! (`admission`), writes one condition per stage, the summary and what the image is into
//! status, and says what changed in Events. The finalizer purges data when asked.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::{Api, ResourceExt};

use admission::conflicts::Holder;
use admission::{Facts, ImageFinding, Outcome, SignatureFinding, StageState};

use super::context::Context;
use super::error::{AdmitError, Error, Result};
use super::write::StatusWrite;
use model::names;
use model::resources::{
    ADMITTED, AdmissionStage, Condition, ConditionStatus, HostConfigSpec, Plugin, PluginStatus,
    set_condition,
};
use model::time::now_rfc3339;

/// Keeps a deleted Plugin until its data is purged, when purge was asked for.
pub const FINALIZER: &str = "plugins.loop.dev/purge";

pub async fn reconcile(plugin: Arc<Plugin>, ctx: Arc<Context>) -> Result<Action> {
    let api: Api<Plugin> = Api::all(ctx.client.clone());
    finalizer(&api, FINALIZER, plugin, |event| async {
        match event {
            FinalizerEvent::Apply(plugin) => admit(&plugin, &ctx).await,
            FinalizerEvent::Cleanup(plugin) => cleanup(&plugin, &ctx).await,
        }
    })
    .await
    .map_err(|e| Error::Finalizer(Box::new(e)))
}

/// The desired status of a Plugin after admission.
pub fn desired_status(plugin: &Plugin, outcome: &Outcome, now: &str) -> PluginStatus {
    let current = plugin.status.clone().unwrap_or_default();
    let mut conditions = current.conditions.clone();
    let generation = plugin.metadata.generation;
    for stage in &outcome.stages {
        let status = match stage.state {
            StageState::Passed | StageState::Warned => ConditionStatus::True,
            StageState::Refused => ConditionStatus::False,
            StageState::Pending | StageState::NotReached => ConditionStatus::Unknown,
        };
        set_condition(
            &mut conditions,
            Condition {
                r#type: stage.stage.condition_type().into(),
                status,
                observed_generation: generation,
                last_transition_time: now.into(),
                reason: stage.reason.clone(),
                message: stage.message.clone(),
            },
        );
    }
    let (status, reason, message, stage) = match outcome.stopped_at() {
        None => {
            let warned: Vec<&str> = outcome.warnings().map(|w| w.reason.as_str()).collect();
            let what = outcome
                .manifest
                .as_ref()
                .map(|m| format!("{} {} ", m.id, m.version))
                .unwrap_or_default();
            let message = if warned.is_empty() {
                format!("{what}passed every admission stage")
            } else {
                format!(
                    "{what}passed every admission stage, with warnings: {}",
                    warned.join(", ")
                )
            };
            (
                ConditionStatus::True,
                "Admitted".to_string(),
                message,
                "Admitted".to_string(),
            )
        }
        Some(stopped) => (
            if stopped.state == StageState::Pending {
                ConditionStatus::Unknown
            } else {
                ConditionStatus::False
            },
            stopped.reason.clone(),
            format!("{} stage: {}", stopped.stage, stopped.message),
            stopped.stage.name().to_string(),
        ),
    };
    set_condition(
        &mut conditions,
        Condition {
            r#type: ADMITTED.into(),
            status,
            observed_generation: generation,
            last_transition_time: now.into(),
            reason,
            message,
        },
    );
    // Stage conditions first, in order, then the summary: `kubectl describe` reads well.
    conditions.sort_by_key(|c| {
        AdmissionStage::ALL
            .iter()
            .position(|s| s.condition_type() == c.r#type)
            .unwrap_or(AdmissionStage::ALL.len())
    });
    PluginStatus {
        observed_generation: generation,
        digest: plugin.pinned_digest().map(str::to_string),
        stage: Some(stage),
        // What the image is stays recorded while only later stages change.
        image: outcome.image.clone().or_else(|| {
            current
                .image
                .filter(|i| Some(i.digest.as_str()) == plugin.pinned_digest())
        }),
        tools: if outcome.admitted() {
            outcome.tools.clone()
        } else {
            vec![]
        },
        conditions,
    }
}

/// The plugins admitted before `plugin`, with the names they hold.
fn earlier_holders(ctx: &Context, plugin: &Plugin) -> Vec<Holder> {
    let installed = ctx.stores.plugins.state();
    admission::earlier_holders(plugin, installed.iter().map(|p| p.as_ref()))
}

/// Reads what admission needs from the registry, unless a cheap stage already refuses.
async fn gather(
    ctx: &Context,
    host: &HostConfigSpec,
    plugin: &Plugin,
) -> (Option<ImageFinding>, SignatureFinding) {
    let early = admission::evaluate(&Facts {
        host,
        plugin,
        image: None,
        signatures: &SignatureFinding::NotRead,
        earlier: &[],
    });
    let reached_image = early
        .stopped_at()
        .is_some_and(|s| s.stage == AdmissionStage::Image);
    if !reached_image {
        return (None, SignatureFinding::NotRead);
    }
    let registry_config = &host.plugins.registry;
    let registry = super::images::credentials(
        registry_config,
        &ctx.options.namespace,
        &ctx.stores.registry_secrets,
    )
    .and_then(|creds| ctx.images.registry(registry_config, creds.as_deref()));
    let registry = match registry {
        Ok(r) => r,
        Err(e) => {
            let finding = ImageFinding::Unavailable {
                reason: "RegistryConfigInvalid".into(),
                message: e.to_string(),
            };
            return (Some(finding), SignatureFinding::NotRead);
        }
    };
    let image = ctx.images.read(&registry, plugin).await;
    let signatures = match &image {
        ImageFinding::Read(_) | ImageFinding::Recorded { .. } => {
            ctx.images.signatures(&registry, host, plugin).await
        }
        _ => SignatureFinding::NotRead,
    };
    (Some(image), signatures)
}

async fn admit(plugin: &Plugin, ctx: &Context) -> Result<Action> {
    let host = ctx.host();
    let (image, signatures) = gather(ctx, &host, plugin).await;
    let earlier = earlier_holders(ctx, plugin);
    let outcome = admission::evaluate(&Facts {
        host: &host,
        plugin,
        image: image.as_ref(),
        signatures: &signatures,
        earlier: &earlier,
    });
    let status = desired_status(plugin, &outcome, &now_rfc3339());
    let api: Api<Plugin> = Api::all(ctx.client.clone());
    let before = plugin.status.clone().unwrap_or_default();
    let wrote = ctx
        .writes
        .status(
            &api,
            plugin,
            plugin.status.as_ref(),
            &status,
            StatusWrite::Merge,
        )
        .await?;
    if wrote {
        announce(ctx, plugin, &before, &status, &outcome).await;
    }
    if let Some(stopped) = outcome.stopped_at()
        && stopped.state == StageState::Pending
    {
        return Err(AdmitError::Pending {
            name: plugin.name_any(),
            message: stopped.message.clone(),
        }
        .into());
    }
    Ok(Action::await_change())
}

/// Events for what changed: admission's verdict (Normal when admitted, Warning naming the
/// stage otherwise) and each warning (permissive signatures) when it is new. The warnings
/// have an action of their own: the events recorder folds an Event into an earlier one of the
/// same type, reason and action (its series), which would hide a permissive warning behind
/// the strict refusal of the same reason before it.
async fn announce(
    ctx: &Context,
    plugin: &Plugin,
    before: &PluginStatus,
    after: &PluginStatus,
    outcome: &Outcome,
) {
    let summary = |s: &PluginStatus| {
        s.conditions
            .iter()
            .find(|c| c.r#type == ADMITTED)
            .map(|c| (c.status, c.reason.clone(), c.message.clone()))
    };
    if summary(before) != summary(after)
        && let Some((status, reason, message)) = summary(after)
    {
        let warning = status != ConditionStatus::True;
        ctx.event(plugin, warning, &reason, "Admit", message).await;
        if let Some(stopped) = outcome.stopped_at()
            && stopped.state == StageState::Refused
        {
            ctx.metrics.refused(stopped.stage.name());
        }
    }
    for warned in outcome.warnings() {
        let was = before
            .conditions
            .iter()
            .find(|c| c.r#type == warned.stage.condition_type())
            .map(|c| (c.reason.as_str(), c.message.as_str()));
        if was != Some((warned.reason.as_str(), warned.message.as_str())) {
            ctx.event(
                plugin,
                true,
                &warned.reason,
                "AdmitWithWarning",
                warned.message.clone(),
            )
            .await;
        }
    }
}

/// A deleted Plugin: its instances and CronJobs go with the chats' next reconcile (the Plugin
/// is gone from what they enable); its data volumes and its hidden threads' agent runs (their
/// Jobs and Secrets with them) go only when purge was asked for.
async fn cleanup(plugin: &Plugin, ctx: &Context) -> Result<Action> {
    if let Some(uid) = plugin.uid() {
        ctx.manifests.forget(&uid);
    }
    if plugin.spec.purge_on_delete {
        let name = plugin.name_any();
        for claim in ctx.stores.claims.state() {
            if claim.label(names::LABEL_PLUGIN).as_ref() == Some(&name) {
                ctx.writes.delete(claim.as_ref()).await?;
            }
        }
        for run in ctx.stores.runs.state() {
            if run.spec.plugin == name {
                ctx.writes.delete(run.as_ref()).await?;
            }
        }
        ctx.event(
            plugin,
            false,
            "Purged",
            "Purge",
            "deleted the plugin's /data volumes and its agent runs".into(),
        )
        .await;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use admission::StageResult;

    fn outcome(states: &[(StageState, &str)]) -> Outcome {
        Outcome {
            stages: AdmissionStage::ALL
                .iter()
                .zip(states)
                .map(|(stage, (state, reason))| StageResult {
                    stage: *stage,
                    state: *state,
                    reason: reason.to_string(),
                    message: format!("{stage} says {reason}"),
                })
                .collect(),
            manifest: None,
            image: None,
            tools: vec![],
        }
    }

    fn plugin() -> Plugin {
        let manifest = serde_json::from_value(serde_json::json!({"id": "echo"})).unwrap();
        let mut p = Plugin::new(
            "echo",
            model::resources::PluginSpec {
                image: format!("r.test/echo@sha256:{}", "a".repeat(64)),
                command: vec![],
                manifest,
                approved_capabilities: vec![],
                signature: None,
                purge_on_delete: false,
            },
        );
        p.metadata.generation = Some(3);
        p
    }

    #[test]
    fn each_stage_has_its_condition_and_the_summary_names_the_stage() {
        use StageState::*;
        let o = outcome(&[
            (Passed, "PluginsEnabled"),
            (Passed, "Valid"),
            (Refused, "ImageUserRoot"),
            (NotReached, "NotReached"),
            (NotReached, "NotReached"),
            (NotReached, "NotReached"),
        ]);
        let status = desired_status(&plugin(), &o, "2026-01-01T00:00:00Z");
        let types: Vec<&str> = status
            .conditions
            .iter()
            .map(|c| c.r#type.as_str())
            .collect();
        assert_eq!(
            types,
            [
                "HostEnabled",
                "ManifestValid",
                "ImageVerified",
                "SignatureAccepted",
                "CapabilitiesApproved",
                "NamesRegistered",
                "Admitted"
            ]
        );
        let admitted = status.conditions.last().unwrap();
        assert_eq!(admitted.status, ConditionStatus::False);
        assert_eq!(admitted.reason, "ImageUserRoot");
        assert!(
            admitted.message.starts_with("Image stage:"),
            "{}",
            admitted.message
        );
        assert_eq!(status.stage.as_deref(), Some("Image"));
        assert_eq!(status.conditions[3].status, ConditionStatus::Unknown);
        assert_eq!(status.observed_generation, Some(3));
        assert_eq!(status.digest, Some(format!("sha256:{}", "a".repeat(64))));
    }

    #[test]
    fn a_pending_stage_leaves_admission_unknown() {
        use StageState::*;
        let o = outcome(&[
            (Passed, "PluginsEnabled"),
            (Passed, "Valid"),
            (Pending, "RegistryUnavailable"),
            (NotReached, "NotReached"),
            (NotReached, "NotReached"),
            (NotReached, "NotReached"),
        ]);
        let status = desired_status(&plugin(), &o, "t");
        assert_eq!(
            status.conditions.last().unwrap().status,
            ConditionStatus::Unknown
        );
        assert!(o.pending());
    }

    #[test]
    fn an_unchanged_outcome_makes_the_same_status() {
        use StageState::*;
        let o = outcome(&[
            (Passed, "PluginsEnabled"),
            (Passed, "Valid"),
            (Passed, "ImageVerified"),
            (Warned, "Unsigned"),
            (Passed, "Approved"),
            (Passed, "Registered"),
        ]);
        let mut p = plugin();
        let first = desired_status(&p, &o, "t1");
        p.status = Some(first.clone());
        assert_eq!(
            desired_status(&p, &o, "t2"),
            first,
            "no write when nothing changed"
        );
        assert_eq!(first.stage.as_deref(), Some("Admitted"));
        assert!(
            first
                .conditions
                .last()
                .unwrap()
                .message
                .contains("Unsigned")
        );
    }

    /// The status admission writes, whole, as a reviewer reads it (`src/snapshots/`): a
    /// plugin admitted with a warning, then its next generation refused at the Image stage
    /// (only the conditions that flipped take the later time; what the image is stays).
    #[test]
    fn the_status_snapshot() {
        use StageState::*;
        use model::resources::{ImageStatus, RegisteredTool};
        let mut admitted = outcome(&[
            (Passed, "PluginsEnabled"),
            (Passed, "Valid"),
            (Passed, "ImageVerified"),
            (Warned, "Unsigned"),
            (Passed, "Approved"),
            (Passed, "Registered"),
        ]);
        let manifest = serde_json::json!({
            "id": "echo", "name": "Echo", "version": "0.1.0", "api": "1",
            "capabilities": ["files.read"],
        });
        admitted.manifest = Some(model::manifest::from_value(&manifest).unwrap());
        admitted.image = Some(ImageStatus {
            digest: format!("sha256:{}", "a".repeat(64)),
            run_as_user: 65532,
            run_as_group: None,
            command: vec!["/echo-plugin".into()],
            plugin_json_sha256: "b".repeat(64),
            manifest_hash: format!("sha256:{}", "c".repeat(64)),
            publisher_key: None,
        });
        admitted.tools = vec![RegisteredTool {
            name: "ping".into(),
            mcp_name: "plugin_ping".into(),
        }];
        let mut p = plugin();
        let status = desired_status(&p, &admitted, "2026-01-01T10:00:00Z");
        insta::assert_yaml_snapshot!("plugin_status_admitted", status);

        p.status = Some(status);
        p.metadata.generation = Some(4);
        let refused = outcome(&[
            (Passed, "PluginsEnabled"),
            (Passed, "Valid"),
            (Refused, "ImageUserRoot"),
            (NotReached, "NotReached"),
            (NotReached, "NotReached"),
            (NotReached, "NotReached"),
        ]);
        insta::assert_yaml_snapshot!(
            "plugin_status_refused",
            desired_status(&p, &refused, "2026-01-01T11:00:00Z")
        );
    }
}
