//! The PluginInstance reconciler: the instance's Secret, its Pod while it is wanted, and the
//! container's observed state in status.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use rand::Rng;

use super::Context;
use super::admission;
use super::apply;
use super::demand::{self, Demand};
use super::error::{Error, Result};
use super::plugin_pod;
use super::pod::{PodInputs, build_pod, build_secret};
use model::names;
use model::resources::{
    Channel, Condition, ConditionStatus, InstancePhase, Plugin, PluginInstance,
    PluginInstanceStatus, set_condition,
};
use model::time::now_rfc3339;

/// The idle timeout when HostConfig's cannot be read.
const DEFAULT_IDLE: Duration = Duration::from_secs(600);

pub async fn reconcile(instance: Arc<PluginInstance>, ctx: Arc<Context>) -> Result<Action> {
    let ns = instance
        .namespace()
        .ok_or_else(|| Error::NoNamespace(instance.name_any()))?;
    let name = instance.name_any();
    if instance.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let host = ctx.host();
    let plugin = ctx
        .stores
        .plugins
        .get(&ObjectRef::<Plugin>::new(&instance.spec.plugin));
    let channel = ctx
        .stores
        .channels
        .get(&ObjectRef::<Channel>::new(&instance.spec.channel).within(&ns));
    let pods: Vec<Arc<Pod>> = ctx
        .stores
        .pods
        .state()
        .into_iter()
        .filter(|p| {
            p.namespace().as_deref() == Some(&ns)
                && p.labels().get(names::LABEL_INSTANCE) == Some(&name)
        })
        .collect();

    let idle = model::schedule::parse_interval(&host.plugins.idle_timeout).unwrap_or(DEFAULT_IDLE);
    let now = jiff::Timestamp::now();
    let want = demand::demand(instance.status.as_ref(), idle, now);

    // The Pod we would run, or why none can run.
    let mut gated = None;
    let desired = match (&plugin, &channel) {
        (Some(plugin), Some(channel)) => match admission::admit(&host, plugin) {
            Ok(manifest) => match plugin_pod::parts(
                &host,
                &ctx.settings.self_image,
                plugin,
                &manifest,
                &ns,
                &instance.spec.channel,
            ) {
                Ok(parts) => {
                    gated = Some(parts.gate.is_some());
                    let (memory, cpu) = manifest.resources_as_quantities();
                    let owner = instance
                        .controller_owner_ref(&())
                        .expect("instances have a uid");
                    let working_tree = channel_working_tree(&ctx, channel);
                    let api_url = ctx.api_url(&host);
                    let labels = names::labels(
                        &instance.spec.plugin,
                        &instance.spec.project,
                        &instance.spec.channel,
                        "pull",
                    );
                    let pull_secret = plugin_pod::ensure_pull_secret(
                        &ctx,
                        &host,
                        &name,
                        &ns,
                        labels,
                        owner.clone(),
                    )
                    .await?;
                    let inputs = PodInputs {
                        instance: &name,
                        namespace: &ns,
                        owner,
                        plugin: &instance.spec.plugin,
                        project: &instance.spec.project,
                        channel: &instance.spec.channel,
                        image: &plugin.spec.image,
                        command: &parts.command,
                        run_as: parts.run_as,
                        image_pull_secret: pull_secret.as_deref(),
                        memory,
                        cpu,
                        api_url: &api_url,
                        working_tree: working_tree.as_ref(),
                        gate: parts.gate.as_ref().map(|g| g.inputs()),
                    };
                    ensure_secret(&ctx, &inputs).await?;
                    build_pod(&inputs).map_err(|e| e.to_string())
                }
                Err(why) => Err(why),
            },
            Err(refusal) => Err(format!(
                "Plugin {} is not admitted: {}",
                instance.spec.plugin, refusal.message
            )),
        },
        (None, _) => Err(format!("Plugin {} is not installed", instance.spec.plugin)),
        (_, None) => Err(format!("Channel {} does not exist", instance.spec.channel)),
    };

    // Make the Pods match: the desired one while wanted, none otherwise.
    let keep = match (&desired, want.wanted()) {
        (Ok(pod), true) => pod.metadata.name.clone(),
        _ => None,
    };
    let mut stopped = false;
    for pod in &pods {
        if Some(pod.name_any()) != keep {
            stopped |= apply::delete(&ctx, pod.as_ref()).await?;
        }
    }
    let running = match (&desired, want.wanted()) {
        (Ok(pod), true) => {
            let live = pods.iter().find(|p| p.metadata.name == pod.metadata.name);
            if live.is_none() {
                apply::create(&ctx, pod).await?;
                ctx.event(
                    instance.as_ref(),
                    false,
                    "Started",
                    "StartPod",
                    format!("started Pod {}: {}", pod.name_any(), reason(want)),
                )
                .await;
            }
            live.cloned()
        }
        _ => None,
    };
    if stopped {
        let why = if want.wanted() {
            "its spec changed"
        } else {
            "idle"
        };
        let note = format!("stopped the container: {why}");
        ctx.event(instance.as_ref(), false, "Stopped", "StopPod", note)
            .await;
    }

    let status = desired_status(
        &instance,
        running.as_deref(),
        keep.is_some(),
        &desired.as_ref().err(),
        gated,
        &now_rfc3339(),
    );
    let api: Api<PluginInstance> = Api::namespaced(ctx.client.clone(), &ns);
    apply::status(
        &ctx,
        &api,
        &name,
        instance.status.as_ref().map(observed_part).as_ref(),
        &status,
    )
    .await?;

    Ok(match want.recheck_after(now) {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}

fn reason(want: Demand) -> &'static str {
    match want {
        Demand::ActiveUntil(_) => "a call or an event needs it",
        Demand::SwitchOn => "a composer switch is on",
        Demand::LiveHold => "the plugin holds the live session",
        Demand::Idle => "idle",
    }
}

/// The part of an instance's status the controller owns (the API server owns the rest).
fn observed_part(status: &PluginInstanceStatus) -> PluginInstanceStatus {
    PluginInstanceStatus {
        observed_generation: status.observed_generation,
        phase: status.phase,
        pod: status.pod.clone(),
        conditions: status.conditions.clone(),
        ..Default::default()
    }
}

/// The controller's part of an instance's status.
fn desired_status(
    instance: &PluginInstance,
    pod: Option<&Pod>,
    want_pod: bool,
    problem: &Option<&String>,
    gated: Option<bool>,
    now: &str,
) -> PluginInstanceStatus {
    let current = instance
        .status
        .as_ref()
        .map(observed_part)
        .unwrap_or_default();
    let ready = pod.is_some_and(pod_ready);
    let phase = match (pod, want_pod) {
        (Some(_), _) if ready => InstancePhase::Running,
        (_, true) => InstancePhase::Starting,
        _ => InstancePhase::Stopped,
    };
    let mut conditions = current.conditions.clone();
    let (status, reason, message) = match problem {
        Some(problem) => (ConditionStatus::False, "CannotRun", (*problem).clone()),
        None if ready => (
            ConditionStatus::True,
            "Running",
            "the container is Ready".to_string(),
        ),
        None if want_pod => (
            ConditionStatus::False,
            "Starting",
            "waiting for the Pod to be Ready".to_string(),
        ),
        None => (
            ConditionStatus::True,
            "Idle",
            "no container runs until a call, an event, a switch or a schedule needs one"
                .to_string(),
        ),
    };
    set_condition(
        &mut conditions,
        Condition {
            r#type: "Ready".into(),
            status,
            observed_generation: instance.metadata.generation,
            last_transition_time: now.into(),
            reason: reason.into(),
            message,
        },
    );
    if let Some(gated) = gated {
        set_condition(&mut conditions, gate_condition(gated, instance, now));
    }
    PluginInstanceStatus {
        observed_generation: instance.metadata.generation,
        phase: Some(phase),
        pod: pod.map(|p| p.name_any()),
        conditions,
        ..Default::default()
    }
}

/// `Gated`: whether the container runs under the gate (HostConfig gates.agentgate.enabled).
fn gate_condition(gated: bool, instance: &PluginInstance, now: &str) -> Condition {
    let (status, reason, message) = if gated {
        (
            ConditionStatus::True,
            "GateOn",
            "the plugin runs under the gate: Landlock, seccomp and the audit",
        )
    } else {
        (
            ConditionStatus::False,
            "GateOff",
            "gates.agentgate.enabled is off in HostConfig default: the plugin's command runs without the gate",
        )
    };
    Condition {
        r#type: "Gated".into(),
        status,
        observed_generation: instance.metadata.generation,
        last_transition_time: now.into(),
        reason: reason.into(),
        message: message.into(),
    }
}

/// Whether a Pod's Ready condition is True.
pub fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

/// A thread without a working tree of its own uses its channel's.
fn channel_working_tree(ctx: &Context, channel: &Channel) -> Option<model::resources::WorkingTree> {
    if let Some(tree) = &channel.spec.working_tree {
        return Some(tree.clone());
    }
    let parent = channel.spec.parent.as_ref()?;
    let ns = channel.namespace()?;
    ctx.stores
        .channels
        .get(&ObjectRef::<Channel>::new(parent).within(&ns))?
        .spec
        .working_tree
        .clone()
}

/// Makes the instance's Secret once, with a fresh random token and secret.
async fn ensure_secret(ctx: &Context, inputs: &PodInputs<'_>) -> Result<()> {
    let name = names::secret_name(inputs.instance);
    let exists = ctx
        .stores
        .secrets
        .state()
        .iter()
        .any(|s| s.name_any() == name && s.namespace().as_deref() == Some(inputs.namespace));
    if exists {
        return Ok(());
    }
    let secret = build_secret(inputs, &random_token(), &random_token());
    apply::create(ctx, &secret).await
}

/// 32 random bytes, hex-encoded.
fn random_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    hex::encode(bytes)
}
