//! `POST /runs` and `GET /runs/{run_id}`: agent runs in the chat's hidden `plugin:<id>` thread.

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Resource, ResourceExt};
use rand::Rng;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{PREFIX, check_length, json_body};
use crate::clock::{from_kube, rfc3339};
use crate::plugin_api::apply::{create_run, write_failed};
use crate::plugin_api::auth::Caller;
use crate::plugin_api::error::{ApiError, ApiResult, Code};
use crate::plugin_api::quota::{self, Quota, Started};
use crate::plugin_api::state::PluginApiState;
use model::manifest::{Agent, Capability, MCP_TOOL_PREFIX};
use model::names;
use model::resources::{AgentRun, AgentRunPhase, AgentRunSpec};

/// The longest prompt and agent id, in characters.
pub use sdk::api::limits::{MAX_AGENT, MAX_PROMPT};

#[derive(Deserialize)]
struct RunRequest {
    agent: String,
    prompt: String,
}

/// The hidden thread a plugin's runs go in.
pub fn thread_of(plugin: &str) -> String {
    format!("plugin:{plugin}")
}

/// The AgentRun for `agent` of the caller's plugin, named `name`.
pub fn build_run(caller: &Caller, agent: &Agent, prompt: &str, name: &str) -> AgentRun {
    let plugin = caller.plugin_id();
    let channel = caller.channel_name();
    let mut labels = names::labels(&plugin, caller.project_name(), &channel, "run");
    labels.insert(names::LABEL_INSTANCE.into(), caller.instance_name());
    AgentRun {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some(caller.namespace.clone()),
            labels: Some(labels),
            // The run belongs to the chat: its thread's history goes with it.
            owner_references: caller.channel.owner_ref(&()).map(|o| vec![o]),
            ..Default::default()
        },
        spec: AgentRunSpec {
            plugin: plugin.clone(),
            channel,
            thread: thread_of(&plugin),
            agent: agent.id.clone(),
            read_only: agent.read_only,
            tools: agent
                .tools
                .iter()
                .map(|t| format!("{MCP_TOOL_PREFIX}{t}"))
                .collect(),
            prompt: prompt.into(),
        },
        status: None,
    }
}

/// The capability an agent needs.
pub fn capability_for(agent: &Agent) -> Capability {
    if agent.read_only {
        Capability::AgentReadonly
    } else {
        Capability::AgentWrite
    }
}

fn random_run_name(plugin: &str) -> String {
    let bytes: [u8; 8] = rand::rng().random();
    format!("{plugin}-{}", hex::encode(bytes))
}

pub async fn create(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    body: Bytes,
) -> ApiResult<Response> {
    if !caller.approved().contains(&Capability::AgentReadonly)
        && !caller.approved().contains(&Capability::AgentWrite)
    {
        caller.require(Capability::AgentReadonly)?;
    }
    let req: RunRequest = json_body(&body)?;
    check_length("agent", &req.agent, MAX_AGENT, true)?;
    check_length("prompt", &req.prompt, MAX_PROMPT, true)?;
    let agent = caller.manifest.agent(&req.agent).ok_or_else(|| {
        let known: Vec<&str> = caller
            .manifest
            .agents
            .iter()
            .map(|a| a.id.as_str())
            .collect();
        ApiError::new(
            Code::UnknownAgent,
            format!(
                "agent \"{}\" is not one of the manifest's agents ({})",
                req.agent,
                known.join(", ")
            ),
        )
    })?;
    caller.require(capability_for(agent))?;

    let plugin = caller.plugin_id();
    let _quota = state.locks.lock(&format!("quota/{plugin}")).await;
    let now = state.clock.now();
    let in_store: Vec<Started> = state
        .index
        .runs
        .state()
        .iter()
        .filter(|r| r.spec.plugin == plugin)
        .filter_map(|r| {
            Some(Started {
                namespace: r.namespace()?,
                name: r.name_any(),
                at: from_kube(r.meta().creation_timestamp.as_ref()?)?,
            })
        })
        .collect();
    let started = state.ledger.with_unseen(&plugin, in_store, now);
    let limit = caller.host.spec.plugins.daily_runs;
    let name = random_run_name(&plugin);
    let run = Started {
        namespace: caller.namespace.clone(),
        name: name.clone(),
        at: now,
    };
    let quota = match &state.shared_runs {
        Some(shared) => shared
            .reserve(&plugin, &run, &started, limit, now)
            .await
            .map_err(write_failed)?,
        None => quota::decide(&started, limit, now),
    };
    if let Quota::Full {
        started,
        retry_after,
    } = quota
    {
        return Err(ApiError::new(
            Code::DailyRunsExceeded,
            format!(
                "plugin {plugin} started {started} runs in the last 24 hours; plugins.daily_runs allows {limit}"
            ),
        )
        .retry_after(retry_after.as_secs()));
    }

    // 64 random bits: a name taken already is not worth a retry (and the shared record holds
    // this one).
    let created = match create_run(&state, &build_run(&caller, agent, &req.prompt, &name)).await {
        Ok(created) => created,
        Err(refused) => {
            // Not started, so not counted.
            if let Some(shared) = &state.shared_runs
                && let Err(e) = shared.release(&plugin, &run).await
            {
                tracing::warn!(error = %e, run = %name, "the refused run still counts");
            }
            return Err(write_failed(refused));
        }
    };
    let id = created.name_any();
    state.ledger.record(&plugin, run);
    let location = HeaderValue::from_str(&format!("{PREFIX}/runs/{id}")).ok();
    let mut response = (StatusCode::ACCEPTED, Json(view(&created))).into_response();
    if let Some(location) = location {
        response.headers_mut().insert(header::LOCATION, location);
    }
    Ok(response)
}

pub async fn get(
    caller: Caller,
    State(state): State<Arc<PluginApiState>>,
    Path(run_id): Path<String>,
) -> ApiResult<Json<Value>> {
    if !caller.approved().contains(&Capability::AgentWrite) {
        caller.require(Capability::AgentReadonly)?;
    }
    let run = state
        .fresh_runs
        .get(
            &state.index.runs,
            &caller.namespace,
            &run_id,
            state.clock.now(),
        )
        .filter(|r| r.spec.plugin == caller.plugin_id() && r.spec.channel == caller.channel_name())
        .ok_or_else(|| {
            ApiError::new(
                Code::RunNotFound,
                format!("this chat has no run {run_id} of this plugin"),
            )
        })?;
    Ok(Json(view(&run)))
}

/// A run as the API answers it.
pub fn view(run: &AgentRun) -> Value {
    let status = run.status.as_ref();
    let phase = match status.and_then(|s| s.phase) {
        None | Some(AgentRunPhase::Queued) => "queued",
        Some(AgentRunPhase::Running) => "running",
        Some(AgentRunPhase::Succeeded) => "succeeded",
        Some(AgentRunPhase::Failed) => "failed",
    };
    let mut answer = json!({
        "id": run.name_any(),
        "agent": run.spec.agent,
        "thread": run.spec.thread,
        "read_only": run.spec.read_only,
        "tools": run.spec.tools,
        "status": phase,
        "done_delivered": status.is_some_and(|s| s.done_delivered),
    });
    if let Some(result) = status.and_then(|s| s.result.as_ref()) {
        answer["result"] = json!(result);
    }
    if let Some(created) = run.meta().creation_timestamp.as_ref().and_then(from_kube) {
        answer["created"] = json!(rfc3339(created));
    }
    answer
}
