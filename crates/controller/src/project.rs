//! The Project reconciler: status says whether the owner trusts the current config, and which
//! version's values apply meanwhile.

use std::sync::Arc;

use kube::runtime::controller::Action;
use kube::{Api, ResourceExt};

use super::Context;
use super::apply;
use super::error::{Error, Result};
use model::resolve::{TrustState, approved_plugins};
use model::resources::{Condition, ConditionStatus, Project, ProjectStatus, set_condition};
use model::time::now_rfc3339;

pub async fn reconcile(project: Arc<Project>, ctx: Arc<Context>) -> Result<Action> {
    let ns = project
        .namespace()
        .ok_or_else(|| Error::NoNamespace(project.name_any()))?;
    let status = desired_status(&project, &now_rfc3339());
    let api: Api<Project> = Api::namespaced(ctx.client.clone(), &ns);
    let flipped = trusted(project.status.as_ref()) != trusted(Some(&status));
    if apply::status(
        &ctx,
        &api,
        &project.name_any(),
        project.status.as_ref(),
        &status,
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

/// The status of a project: its config hash and a Trusted condition.
pub fn desired_status(project: &Project, now: &str) -> ProjectStatus {
    let approved = approved_plugins(&project.spec);
    let (status, reason, message) = match &approved.state {
        TrustState::Trusted => (ConditionStatus::True, "Trusted", "the owner trusts the current config".to_string()),
        TrustState::LastApproved => (
            ConditionStatus::False,
            "LastApproved",
            "the config changed since the owner trusted it: enabled and schedules come from the last approved version; settings apply as they are".to_string(),
        ),
        TrustState::NeverTrusted => (
            ConditionStatus::False,
            "NeverTrusted",
            "the owner has not trusted a config: the project's enabled values and schedules do not apply (run `loop-plugins project trust`)".to_string(),
        ),
        TrustState::ApprovedHashMismatch { stated, actual } => (
            ConditionStatus::False,
            "ApprovedHashMismatch",
            format!("spec.trusted.hash is {stated} but its config hashes to {actual}: it is not used"),
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
    use model::config::{PluginConfig, config_hash};
    use model::resources::{ProjectSpec, TrustedConfig};

    fn project(trusted_enabled: Option<bool>, current_enabled: bool) -> Project {
        let config = |enabled| {
            BTreeMap::from([(
                "echo".to_string(),
                PluginConfig {
                    enabled: Some(enabled),
                    ..Default::default()
                },
            )])
        };
        let trusted = trusted_enabled.map(|e| TrustedConfig {
            hash: config_hash(&config(e)),
            plugins: config(e),
        });
        Project::new(
            "proj",
            ProjectSpec {
                plugins: config(current_enabled),
                trusted,
            },
        )
    }

    fn reason(p: &Project) -> String {
        desired_status(p, "t").conditions[0].reason.clone()
    }

    #[test]
    fn the_trusted_condition_follows_the_owners_approval() {
        assert_eq!(reason(&project(Some(true), true)), "Trusted");
        assert_eq!(reason(&project(Some(false), true)), "LastApproved");
        assert_eq!(reason(&project(None, true)), "NeverTrusted");
        let status = desired_status(&project(Some(true), true), "t");
        assert_eq!(
            status.config_hash,
            Some(config_hash(&project(None, true).spec.plugins))
        );
    }
}
