//! The thin parts that write: each goes through the [`Writer`](super::writes::Writer), counts
//! itself, remembers what it wrote (so the next request reads it) and turns a failure into a
//! 503 `unavailable`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;

use super::auth::Caller;
use super::error::{ApiError, ApiResult, Code};
use super::instance_state::{self, ApiPart, Change};
use super::state::AppState;
use super::writes::{DataPatch, WriteError};
use model::resources::AgentRun;

fn unavailable(err: WriteError) -> ApiError {
    tracing::warn!(error = %err, "a write failed");
    ApiError::new(
        Code::Unavailable,
        format!("the host could not record this; try again: {err}"),
    )
}

/// Records the caller's activity, at most once per instance every few seconds. A failure is
/// logged and counted, never answered: the call itself goes on.
pub async fn touch(state: &AppState, caller: &Caller) {
    let now = state.clock.now();
    let recorded = caller
        .instance
        .status
        .as_ref()
        .and_then(|s| s.last_activity.as_deref())
        .and_then(|t| t.parse().ok());
    if !state.activity.claim(&caller.instance_uid(), recorded, now) {
        return;
    }
    if let Err(err) = update_instance(state, caller, Change::Touch).await {
        tracing::warn!(instance = %caller.instance_name(), error = %err, "could not record activity");
    }
}

/// Applies `change` to the API server's part of the caller's instance status, under the
/// instance's lock, from the newest status this process knows.
pub async fn update_instance(
    state: &AppState,
    caller: &Caller,
    change: Change,
) -> ApiResult<ApiPart> {
    let ns = &caller.namespace;
    let name = caller.instance_name();
    let _guard = state.locks.lock(&format!("instance/{ns}/{name}")).await;
    let now = state.clock.now();
    let current = state
        .fresh_instances
        .get(&state.stores.instances, ns, &name, now)
        .unwrap_or_else(|| caller.instance.clone());
    let part = ApiPart::of(current.status.as_ref());
    let next = instance_state::apply(&part, &change, &caller.manifest, &caller.approved, now);
    let result = state
        .writer
        .apply_instance_status(ns, &name, &next.to_status())
        .await;
    state.metrics.write("PluginInstance/status", result.is_ok());
    let written = result.map_err(unavailable)?;
    state.fresh_instances.remember(written, now);
    state.activity.wrote(&caller.instance_uid(), now);
    Ok(next)
}

/// The newest copy of a ConfigMap this server keeps.
pub fn config_map(state: &AppState, namespace: &str, name: &str) -> Option<Arc<ConfigMap>> {
    state.fresh_maps.get(
        &state.stores.config_maps,
        namespace,
        name,
        state.clock.now(),
    )
}

/// Merges `data` into the ConfigMap `template` names.
pub async fn merge_config_map(
    state: &AppState,
    template: &ConfigMap,
    data: &DataPatch,
) -> ApiResult<ConfigMap> {
    let result = state.writer.merge_config_map(template, data).await;
    state.metrics.write("ConfigMap", result.is_ok());
    let written = result.map_err(unavailable)?;
    state
        .fresh_maps
        .remember(written.clone(), state.clock.now());
    Ok(written)
}

/// Creates a run.
pub async fn create_run(state: &AppState, run: &AgentRun) -> Result<AgentRun, WriteError> {
    let result = state.writer.create_run(run).await;
    state.metrics.write("AgentRun", result.is_ok());
    if let Ok(created) = &result {
        state
            .fresh_runs
            .remember(created.clone(), state.clock.now());
        tracing::info!(run = %created.name_any(), plugin = %created.spec.plugin, "agent run created");
    }
    result
}

/// A 503 for a failed write.
pub fn write_failed(err: WriteError) -> ApiError {
    unavailable(err)
}
