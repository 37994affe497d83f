//! The thin parts that write: each goes through the [`Writer`](super::writes::Writer) or the
//! [`StatusWriter`](crate::status::StatusWriter), counts itself, remembers what it wrote (so the next request reads it) and turns a failure into a
//! 503 `unavailable`.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::ResourceExt;

use super::auth::Caller;
use super::error::{ApiError, ApiResult, Code};
use super::state::PluginApiState;
use super::writes::{DataPatch, WriteError};
use crate::status::{SwitchChange, SwitchEdit};
use model::resources::{AgentRun, PluginInstance, SwitchState};

fn unavailable(err: WriteError) -> ApiError {
    tracing::warn!(error = %err, "a write failed");
    ApiError::new(
        Code::Unavailable,
        format!("the host could not record this; try again: {err}"),
    )
}

/// The caller's instance as this process knows it newest: what it wrote itself, until the
/// store shows it, else the store's.
fn newest_instance(state: &PluginApiState, caller: &Caller) -> Arc<PluginInstance> {
    state
        .fresh_instances
        .get(
            &state.index.instances,
            &caller.namespace,
            &caller.instance_name(),
            state.clock.now(),
        )
        .unwrap_or_else(|| caller.instance.clone())
}

/// Edits the chat's switches (see [`crate::status`]); answers them as written.
pub async fn edit_switches(
    state: &PluginApiState,
    caller: &Caller,
    change: SwitchChange,
) -> ApiResult<Vec<SwitchState>> {
    let edit = SwitchEdit::for_plugin(change, &caller.manifest, caller.approved());
    let result = state.status.switches(&caller.key(), &edit).await;
    state.metrics.write("PluginInstance/status", result.is_ok());
    let written = result.map_err(|e| unavailable(WriteError::Failed(e.to_string())))?;
    let switches = written
        .status
        .as_ref()
        .map(|s| s.switches.clone())
        .unwrap_or_default();
    state.fresh_instances.remember(written, state.clock.now());
    Ok(switches)
}

/// Sets the chat's live hold; answers it as written.
pub async fn set_live_hold(state: &PluginApiState, caller: &Caller, hold: bool) -> ApiResult<bool> {
    let current = newest_instance(state, caller)
        .status
        .as_ref()
        .is_some_and(|s| s.live_hold);
    if current == hold {
        return Ok(hold);
    }
    let result = state.status.live_hold(&caller.key(), hold).await;
    state.metrics.write("PluginInstance/status", result.is_ok());
    let written = result.map_err(|e| unavailable(WriteError::Failed(e.to_string())))?;
    let held = written.status.as_ref().is_some_and(|s| s.live_hold);
    state.fresh_instances.remember(written, state.clock.now());
    Ok(held)
}

/// The newest copy of a ConfigMap this server keeps.
pub fn config_map(state: &PluginApiState, namespace: &str, name: &str) -> Option<Arc<ConfigMap>> {
    state
        .fresh_maps
        .get(&state.index.config_maps, namespace, name, state.clock.now())
}

/// Merges `data` into the ConfigMap `template` names.
pub async fn merge_config_map(
    state: &PluginApiState,
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
pub async fn create_run(state: &PluginApiState, run: &AgentRun) -> Result<AgentRun, WriteError> {
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
