//! The Project reconciler: status says whether the owner trusts the current config (the
//! same-named ProjectTrust names its hash), and which version's values apply meanwhile.

use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::context::Context;
use super::error::{GatherError, Result};
use super::write::StatusWrite;
use model::resolve::{ProjectView, TrustState, approved_plugins};
use model::resources::{
    Condition, ConditionStatus, Project, ProjectStatus, ProjectTrust, set_condition,
};
use model::time::now_rfc3339;

pub async fn reconcile(project: Arc<Project>, ctx: Arc<Context>) -> Result<Action> {
    let ns = project
        .namespace()
        .ok_or_else(|| GatherError::NoNamespace(project.name_any()))?;
    let trust = ctx
        .stores
        .project_trusts
        .get(&ObjectRef::<ProjectTrust>::new(&project.name_any()).within(&ns));
    let status = desired_status(&project, trust.as_deref(), &now_rfc3339());
    let api: Api<Project> = Api::namespaced(ctx.client.clone(), &ns);
    let flipped = trusted(project.status.as_ref()) != trusted(Some(&status));
    if ctx
        .writes
        .status(
            &api,
            project.as_ref(),
            project.status.as_ref(),
            &status,
            StatusWrite::Merge,
        )
        .await?
        && flipped
    {
        let condition = status
            .conditions
            .iter()
            .find(|c| c.r#type == "Trusted")
            .expect("set below");
        let warning = condition.status != ConditionStatus::True;
        ctx.event(
            project.as_ref(),
            warning,
            &condition.reason,
            "Trust",
            condition.message.clone(),
        )
        .await;
    }
    Ok(Action::await_change())
}

fn trusted(status: Option<&ProjectStatus>) -> Option<(ConditionStatus, String)> {
    status?
        .conditions
        .iter()
        .find(|c| c.r#type == "Trusted")
        .map(|c| (c.status, c.reason.clone()))
}

/// The status of a project: its config hash and a Trusted condition, from the Project and
/// its ProjectTrust.
pub fn desired_status(project: &Project, trust: Option<&ProjectTrust>, now: &str) -> ProjectStatus {
    let approved = approved_plugins(ProjectView::new(project, trust));
    let name = project.name_any();
    let (status, reason, message) = match &approved.state {
        TrustState::Trusted => (
            ConditionStatus::True,
            approved.state.reason(),
            "the owner trusts the current config".to_string(),
        ),
        TrustState::LastApproved => (
            ConditionStatus::False,
            approved.state.reason(),
            format!(
                "the config changed since the owner trusted it: enabled and schedules come from the last approved version (ProjectTrust {name}); settings apply as they are"
            ),
        ),
        TrustState::NeverTrusted => (
            ConditionStatus::False,
            approved.state.reason(),
            format!(
                "the owner has not trusted a config (no ProjectTrust {name}): the project's enabled values and schedules do not apply (run `loop-plugins project trust {name}`)"
            ),
        ),
        TrustState::ApprovedHashMismatch { stated, actual } => (
            ConditionStatus::False,
            approved.state.reason(),
            format!(
                "ProjectTrust {name} names hash {stated} but its config hashes to {actual}: it is not used"
            ),
        ),
        TrustState::OtherProject { owner_uid } => (
            ConditionStatus::False,
            approved.state.reason(),
            format!(
                "ProjectTrust {name} was made for another Project of this name (uid {owner_uid}): it is not used (run `loop-plugins project trust {name}`)"
            ),
        ),
    };
    let mut conditions = project
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    set_condition(
        &mut conditions,
        Condition {
            r#type: "Trusted".into(),
            status,
            observed_generation: project.metadata.generation,
            last_transition_time: now.into(),
            reason: reason.into(),
            message,
        },
    );
    ProjectStatus {
        observed_generation: project.metadata.generation,
        config_hash: Some(approved.current_hash.clone()),
        conditions,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use model::config::{PluginConfig, PluginsConfig, config_hash};
    use model::resources::ProjectSpec;

    fn config(enabled: bool) -> PluginsConfig {
        BTreeMap::from([(
            "echo".to_string(),
            PluginConfig {
                enabled: Some(enabled),
                ..Default::default()
            },
        )])
    }

    fn project(current_enabled: bool) -> Project {
        let mut p = Project::new(
            "proj",
            ProjectSpec {
                plugins: config(current_enabled),
            },
        );
        p.metadata.uid = Some("uid-proj".into());
        p
    }

    fn reason(p: &Project, trust: Option<&ProjectTrust>) -> String {
        desired_status(p, trust, "t").conditions[0].reason.clone()
    }

    #[test]
    fn the_trusted_condition_follows_the_owners_approval() {
        let trust = |e| ProjectTrust::of("proj", &config(e));
        assert_eq!(reason(&project(true), Some(&trust(true))), "Trusted");
        assert_eq!(reason(&project(true), Some(&trust(false))), "LastApproved");
        assert_eq!(reason(&project(true), None), "NeverTrusted");
        let mut tampered = trust(false);
        tampered.spec.plugins = config(true);
        assert_eq!(
            reason(&project(true), Some(&tampered)),
            "ApprovedHashMismatch"
        );
        let mut earlier = trust(true);
        earlier.metadata.owner_references = Some(vec![
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                api_version: "plugins.loop.dev/v1alpha1".into(),
                kind: "Project".into(),
                name: "proj".into(),
                uid: "uid-earlier".into(),
                ..Default::default()
            },
        ]);
        assert_eq!(
            reason(&project(true), Some(&earlier)),
            "TrustOfAnotherProject"
        );
        let status = desired_status(&project(true), Some(&trust(true)), "t");
        assert_eq!(status.config_hash, Some(config_hash(&config(true))));
    }

    /// The status, whole, as a reviewer reads it (`src/snapshots/`): trusted, then the
    /// config changed since the owner trusted it.
    #[test]
    fn the_status_snapshot() {
        let trust = ProjectTrust::of("proj", &config(true));
        let mut p = project(true);
        let trusted = desired_status(&p, Some(&trust), "2026-01-01T10:00:00Z");
        insta::assert_yaml_snapshot!("project_status_trusted", trusted);
        p.status = Some(trusted);
        p.spec.plugins = config(false);
        insta::assert_yaml_snapshot!(
            "project_status_last_approved",
            desired_status(&p, Some(&trust), "2026-01-01T11:00:00Z")
        );
    }
}
