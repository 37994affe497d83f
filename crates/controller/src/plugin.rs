//! The Plugin reconciler: admission into status, and the finalizer that purges data when asked.

use std::sync::Arc;
use std::time::Duration;

use kube::runtime::controller::Action;
use kube::runtime::finalizer::{Event as FinalizerEvent, finalizer};
use kube::{Api, ResourceExt};

use super::Context;
use super::admission::{self, Refusal};
use super::apply;
use super::error::{Error, Result};
use model::names;
use model::resources::{
    Condition, ConditionStatus, Plugin, PluginStatus, RegisteredTool, set_condition,
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
pub fn desired_status(
    plugin: &Plugin,
    admission: &admission::Admission,
    now: &str,
) -> PluginStatus {
    let current = plugin.status.clone().unwrap_or_default();
    let mut conditions = current.conditions.clone();
    let generation = plugin.metadata.generation;
    let (status, reason, message, tools) = match admission {
        Ok(manifest) => (
            ConditionStatus::True,
            "Admitted".to_string(),
            format!(
                "{} {} passed every admission stage",
                plugin.name_any(),
                manifest.version
            ),
            manifest
                .tools
                .iter()
                .map(|t| RegisteredTool {
                    name: t.name.clone(),
                    mcp_name: format!("plugin_{}", t.name),
                })
                .collect(),
        ),
        Err(Refusal { stage, message }) => (
            ConditionStatus::False,
            stage.reason().to_string(),
            message.clone(),
            vec![],
        ),
    };
    set_condition(
        &mut conditions,
        Condition {
            r#type: "Admitted".into(),
            status,
            observed_generation: generation,
            last_transition_time: now.into(),
            reason,
            message,
        },
    );
    PluginStatus {
        observed_generation: generation,
        digest: plugin
            .spec
            .image
            .split_once('@')
            .map(|(_, d)| d.to_string()),
        tools,
        conditions,
    }
}

async fn admit(plugin: &Plugin, ctx: &Context) -> Result<Action> {
    let host = ctx.host();
    let admission = admission::admit(&host, plugin);
    let status = desired_status(plugin, &admission, &now_rfc3339());
    let api: Api<Plugin> = Api::all(ctx.client.clone());
    let changed_admission = plugin.status.as_ref().map(|s| admitted(&s.conditions))
        != Some(admitted(&status.conditions));
    let wrote = apply::status(
        ctx,
        &api,
        &plugin.name_any(),
        plugin.status.as_ref(),
        &status,
    )
    .await?;
    if wrote && changed_admission {
        match &admission {
            Ok(_) => {
                ctx.event(
                    plugin,
                    false,
                    "Admitted",
                    "Admit",
                    "passed every admission stage".into(),
                )
                .await
            }
            Err(r) => {
                ctx.event(plugin, true, r.stage.reason(), "Admit", r.message.clone())
                    .await
            }
        }
    }
    Ok(Action::await_change())
}

fn admitted(conditions: &[Condition]) -> Option<(ConditionStatus, String)> {
    conditions
        .iter()
        .find(|c| c.r#type == "Admitted")
        .map(|c| (c.status, c.reason.clone()))
}

/// A deleted Plugin: its instances and CronJobs go with the chats' next reconcile (the Plugin
/// is gone from what they enable); its data volumes go only when purge was asked for.
async fn cleanup(plugin: &Plugin, ctx: &Context) -> Result<Action> {
    if plugin.spec.purge_on_delete {
        let name = plugin.name_any();
        for claim in ctx.stores.claims.state() {
            if claim.labels().get(names::LABEL_PLUGIN) == Some(&name) {
                apply::delete(ctx, claim.as_ref()).await?;
            }
        }
        ctx.event(
            plugin,
            false,
            "Purged",
            "Purge",
            "deleted the plugin's /data volumes".into(),
        )
        .await;
    }
    Ok(Action::requeue(Duration::from_secs(300)))
}
