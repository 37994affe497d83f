//! The AgentRun reconciler: when a run ends, `POST /runs/{run_id}/done` reaches the plugin's
//! container in the run's chat, once. Only the Lease holder reconciles, and
//! `status.doneDelivered` is written only after the plugin answered, so a run that ended while
//! the controller was down is delivered when it is back, and a delivered one never again.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, ResourceExt};

use super::Context;
use super::error::{Error, Result};
use super::instance::pod_ready;
use model::contract::{PLUGIN_PORT, SECRET_KEY};
use model::names;
use model::resources::{AgentRun, AgentRunPhase, PluginInstance};

/// The reference's time limit for `/runs/{run_id}/done`.
pub const DONE_TIMEOUT: Duration = Duration::from_secs(10);
/// How soon to try again while the container starts or did not answer.
const RETRY: Duration = Duration::from_secs(2);

/// The body the plugin gets for a run that ended in `phase`.
pub fn done_body(phase: AgentRunPhase, result: Option<&str>) -> serde_json::Value {
    match phase {
        AgentRunPhase::Succeeded => {
            serde_json::json!({ "status": "done", "result": result.unwrap_or_default() })
        }
        _ => serde_json::json!({ "status": "failed", "error": result.unwrap_or("the run failed") }),
    }
}

pub async fn reconcile(run: Arc<AgentRun>, ctx: Arc<Context>) -> Result<Action> {
    let status = run.status.clone().unwrap_or_default();
    let Some(phase) = status.phase.filter(|p| p.is_final()) else {
        return Ok(Action::await_change());
    };
    if status.done_delivered {
        return Ok(Action::await_change());
    }
    let ns = run
        .namespace()
        .ok_or_else(|| Error::NoNamespace(run.name_any()))?;
    let instance = names::instance_name(&run.spec.plugin, &run.spec.channel);
    let ready = ctx.stores.pods.state().into_iter().find(|p: &Arc<Pod>| {
        p.namespace().as_deref() == Some(&ns)
            && p.labels().get(names::LABEL_INSTANCE) == Some(&instance)
            && p.metadata.deletion_timestamp.is_none()
            && pod_ready(p)
    });
    let Some(pod) = ready else {
        // The call needs the container: record demand, as a call through the API server does.
        let api: Api<PluginInstance> = Api::namespaced(ctx.client.clone(), &ns);
        let now = model::time::now_rfc3339();
        let patch = serde_json::json!({ "status": { "lastActivity": now } });
        ctx.metrics.write("PluginInstance", "status");
        if let Err(err) = api
            .patch_status(&instance, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            tracing::debug!(%err, instance, "could not record demand for /done");
        }
        return Ok(Action::requeue(RETRY));
    };
    let secret = ctx
        .stores
        .secrets
        .get(&ObjectRef::new(&names::secret_name(&instance)).within(&ns))
        .and_then(|s| s.data.as_ref()?.get(SECRET_KEY).cloned())
        .map(|b| String::from_utf8_lossy(&b.0).trim().to_string());
    let (Some(secret), Some(ip)) = (secret, pod.status.as_ref().and_then(|s| s.pod_ip.clone()))
    else {
        return Ok(Action::requeue(RETRY));
    };
    let url = format!("http://{ip}:{PLUGIN_PORT}/runs/{}/done", run.name_any());
    let body = done_body(phase, status.result.as_deref());
    let answer = ctx
        .http
        .post(&url)
        .bearer_auth(secret)
        .timeout(DONE_TIMEOUT)
        .json(&body)
        .send()
        .await;
    match answer {
        Ok(answer) if answer.status().is_success() => {
            let api: Api<AgentRun> = Api::namespaced(ctx.client.clone(), &ns);
            let patch = serde_json::json!({ "status": { "doneDelivered": true } });
            ctx.metrics.write("AgentRun", "status");
            api.patch_status(
                &run.name_any(),
                &PatchParams {
                    field_manager: Some(names::FIELD_MANAGER.into()),
                    ..Default::default()
                },
                &Patch::Merge(&patch),
            )
            .await
            .map_err(|source| Error::Status {
                kind: "AgentRun",
                name: run.name_any(),
                source,
            })?;
            ctx.event(
                run.as_ref(),
                false,
                "DoneDelivered",
                "DeliverDone",
                format!(
                    "POST /runs/{}/done answered {}",
                    run.name_any(),
                    answer.status()
                ),
            )
            .await;
            Ok(Action::await_change())
        }
        Ok(answer) => {
            tracing::warn!(run = %run.name_any(), status = %answer.status(), "the plugin refused /done; trying again");
            Ok(Action::requeue(RETRY * 5))
        }
        Err(err) => {
            tracing::warn!(run = %run.name_any(), %err, "could not deliver /done; trying again");
            Ok(Action::requeue(RETRY))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_body_says_how_the_run_ended() {
        assert_eq!(
            done_body(AgentRunPhase::Succeeded, Some("42"))["status"],
            "done"
        );
        assert_eq!(
            done_body(AgentRunPhase::Succeeded, Some("42"))["result"],
            "42"
        );
        let failed = done_body(AgentRunPhase::Failed, None);
        assert_eq!(failed["status"], "failed");
        assert!(failed["error"].is_string());
    }
}
