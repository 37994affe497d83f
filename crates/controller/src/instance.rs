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
use super::apply;
use super::demand::{self, Demand, DemandInputs};
use super::error::{Error, Result};
use super::plugin_pod;
use super::pod::{PodInputs, build_pod, build_secret};
use super::slim;
use model::contract::{SECRET_KEY, TOKEN_KEY};
use model::manifest::Capability;
use model::names;
use model::resolve::{self, LeftOut};
use model::resources::{
    Channel, Condition, ConditionStatus, InstancePhase, Plugin, PluginInstance,
    PluginInstanceStatus, Project, set_condition,
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
        .filter(|p| p.metadata.namespace.as_deref() == Some(&ns) && owned_by(p, &instance))
        .collect();

    // What the instance runs, or why it cannot run.
    let runnable = match (&plugin, &channel) {
        (Some(plugin), Some(channel)) => admission::admit(&host, plugin, &ctx.manifests.of(plugin))
            .map(|manifest| (plugin, channel, manifest))
            .map_err(|refusal| {
                format!(
                    "Plugin {} is not admitted: {}",
                    instance.spec.plugin, refusal.message
                )
            }),
        (None, _) => Err(format!("Plugin {} is not installed", instance.spec.plugin)),
        (_, None) => Err(format!("Channel {} does not exist", instance.spec.channel)),
    };

    let idle = model::schedule::parse_interval(&host.plugins.idle_timeout).unwrap_or(DEFAULT_IDLE);
    let now = jiff::Timestamp::now();
    let want = match &runnable {
        Ok((plugin, _, manifest)) => {
            let approved = resolve::approved_capabilities(plugin, manifest);
            let switches: Vec<&str> = if approved.contains(&Capability::UiComposerSwitch) {
                manifest
                    .ui
                    .composer_switches
                    .iter()
                    .map(|s| s.id.as_str())
                    .collect()
            } else {
                vec![]
            };
            demand::demand(&DemandInputs {
                status: instance.status.as_ref(),
                switches: &switches,
                live_control: approved.contains(&Capability::LiveControl),
                idle_timeout: idle,
                started: ctx.started,
                now,
            })
        }
        Err(_) => Demand::Idle,
    };

    // The Pod we would run, or why none can run.
    let mut gated = None;
    let desired = match &runnable {
        Ok((plugin, channel, manifest)) => match plugin_pod::parts(
            &host,
            &ctx.settings.self_image,
            plugin,
            manifest,
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
                let pull_secret =
                    plugin_pod::ensure_pull_secret(&ctx, &host, &name, &ns, labels, owner.clone())
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
        Err(why) => Err(why.clone()),
    };

    // Make the Pods match: the desired one while wanted, none otherwise. A Pod that failed
    // (evicted by its node, or ended) is deleted, and a new one replaces it once it is gone.
    let keep = match (&desired, want.wanted()) {
        (Ok(pod), true) => pod.metadata.name.clone(),
        _ => None,
    };
    let mut stopped = false;
    for pod in &pods {
        if let Some(why) = failed(pod) {
            if apply::delete(&ctx, pod.as_ref()).await? {
                let next = if keep.is_some() {
                    "a new one replaces it"
                } else {
                    "none is needed now"
                };
                let note = format!("Pod {} {why}; {next}", pod.name_any());
                ctx.event(instance.as_ref(), true, "PodFailed", "ReplacePod", note)
                    .await;
            }
        } else if Some(pod.name_any()) != keep {
            stopped |= apply::delete(&ctx, pod.as_ref()).await?;
        }
    }
    let running = match (&desired, want.wanted()) {
        (Ok(pod), true) => {
            let same_name = pods.iter().find(|p| p.metadata.name == pod.metadata.name);
            match same_name {
                None => {
                    if apply::create(&ctx, pod).await? {
                        ctx.event(
                            instance.as_ref(),
                            false,
                            "Started",
                            "StartPod",
                            format!("started Pod {}: {}", pod.name_any(), reason(want)),
                        )
                        .await;
                    }
                    None
                }
                // Failed (deleted above) or going away: its replacement comes once it is gone.
                Some(live)
                    if failed(live).is_some() || live.metadata.deletion_timestamp.is_some() =>
                {
                    None
                }
                Some(live) => {
                    put_right(&ctx, pod, live).await?;
                    Some(live.clone())
                }
            }
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

    // The settings the plugin sees here, and the values left out: shown, never dropped
    // silently. A project's settings apply without trust, so its current config counts.
    let settings = runnable.as_ref().ok().map(|(_, _, manifest)| {
        let plugin = &instance.spec.plugin;
        let project = ctx
            .stores
            .projects
            .get(&ObjectRef::<Project>::new(&instance.spec.project).within(&ns));
        resolve::resolve_settings(
            manifest,
            host.plugins.defaults.get(plugin),
            project.as_ref().and_then(|p| p.spec.plugins.get(plugin)),
        )
    });

    let status = desired_status(
        &instance,
        running.as_deref(),
        keep.is_some(),
        &desired.as_ref().err(),
        settings.as_ref().map(|s| s.left_out.as_slice()),
        gated,
        &now_rfc3339(),
    );
    let api: Api<PluginInstance> = Api::namespaced(ctx.client.clone(), &ns);
    let before = instance
        .status
        .as_ref()
        .map(observed_part)
        .unwrap_or_default();
    if apply::status(&ctx, &api, instance.as_ref(), Some(&before), &status).await?
        && before.refused_settings != status.refused_settings
    {
        match status
            .conditions
            .iter()
            .find(|c| c.r#type == SETTINGS_VALID)
        {
            Some(c) if c.status == ConditionStatus::False => {
                let note = c.message.clone();
                ctx.event(instance.as_ref(), true, &c.reason, "ResolveSettings", note)
                    .await;
            }
            Some(c) => {
                let note = c.message.clone();
                ctx.event(instance.as_ref(), false, &c.reason, "ResolveSettings", note)
                    .await;
            }
            None => {}
        }
    }

    Ok(match want.recheck_after(now) {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}

fn reason(want: Demand) -> &'static str {
    match want {
        Demand::ActiveUntil(_) => "a call or an event needs it",
        Demand::SwitchOnAtStart(_) => {
            "a composer switch is on, so the plugin can bring back what it stands for"
        }
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
        refused_settings: status.refused_settings.clone(),
        conditions: status.conditions.clone(),
        ..Default::default()
    }
}

/// The condition that says whether every configured setting value applies.
const SETTINGS_VALID: &str = "SettingsValid";

/// The controller's part of an instance's status.
fn desired_status(
    instance: &PluginInstance,
    pod: Option<&Pod>,
    want_pod: bool,
    problem: &Option<&String>,
    left_out: Option<&[LeftOut]>,
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
    // Without a manifest to check them against, what was shown stays.
    let refused_settings = match left_out {
        Some(left_out) => {
            let (status, reason, message) = if left_out.is_empty() {
                (
                    ConditionStatus::True,
                    "SettingsApplied",
                    "every configured setting value applies".to_string(),
                )
            } else {
                let each: Vec<String> = left_out.iter().map(|l| l.to_string()).collect();
                (
                    ConditionStatus::False,
                    "SettingsLeftOut",
                    format!("{}; the value below each applies", each.join("; ")),
                )
            };
            set_condition(
                &mut conditions,
                Condition {
                    r#type: SETTINGS_VALID.into(),
                    status,
                    observed_generation: instance.metadata.generation,
                    last_transition_time: now.into(),
                    reason: reason.into(),
                    message,
                },
            );
            left_out.iter().map(LeftOut::to_refused).collect()
        }
        None => current.refused_settings.clone(),
    };
    if let Some(gated) = gated {
        set_condition(&mut conditions, gate_condition(gated, instance, now));
    }
    PluginInstanceStatus {
        observed_generation: instance.metadata.generation,
        phase: Some(phase),
        pod: pod.map(|p| p.name_any()),
        refused_settings,
        conditions,
        ..Default::default()
    }
}

/// Why a Pod will not run again, if it will not: its node evicted it, or it ended. Its
/// containers restart in place otherwise.
pub fn failed(pod: &Pod) -> Option<String> {
    let status = pod.status.as_ref()?;
    let phase = status.phase.as_deref().unwrap_or_default();
    let evicted = status.reason.as_deref() == Some("Evicted");
    if !evicted && phase != "Failed" && phase != "Succeeded" {
        return None;
    }
    let how = if evicted {
        "was evicted".to_string()
    } else {
        format!("ended ({phase})")
    };
    Some(match status.message.as_deref().filter(|m| !m.is_empty()) {
        Some(message) => format!("{how}: {message}"),
        None => how,
    })
}

/// Applies the desired Pod over a live one that differs in a field we set (a hand edit): only
/// mutable fields can differ under the same name, as the name carries the spec's hash. Should
/// the API server refuse it anyway, the Pod is replaced.
async fn put_right(ctx: &Context, desired: &Pod, live: &Pod) -> Result<()> {
    match apply::apply(ctx, desired, Some(live)).await {
        Err(err) if err.is_permanent() => {
            tracing::warn!(pod = %live.name_any(), error = %err, "replacing a Pod that cannot be put right");
            apply::delete(ctx, live).await.map(|_| ())
        }
        other => other.map(|_| ()),
    }
}

/// Whether a Pod is the instance's: by its label, or by its owner (should the label be edited
/// away by hand, the Pod is still found and put right).
fn owned_by(pod: &Pod, instance: &PluginInstance) -> bool {
    let uid = instance.uid();
    pod.labels().get(names::LABEL_INSTANCE) == Some(&instance.name_any())
        || pod
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && Some(&o.uid) == uid.as_ref())
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

/// Makes the instance's Secret once, with a fresh random token and secret; afterwards puts
/// right a hand edit of what we set (its labels), keeping its token and secret.
async fn ensure_secret(ctx: &Context, inputs: &PodInputs<'_>) -> Result<()> {
    let name = names::secret_name(inputs.instance);
    let live = slim::get(&ctx.stores.secrets, &name, inputs.namespace)?;
    let Some(live) = live else {
        let secret = build_secret(inputs, &random_token(), &random_token());
        return apply::create(ctx, &secret).await.map(|_| ());
    };
    // An earlier instance's Secret (the instance was deleted and made again before garbage
    // collection took its Secret): never adopted, so the removed instance's token dies with
    // it. Once it is gone (the watch on Secrets brings us back), a fresh one is made.
    let earlier = live
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid != inputs.owner.uid);
    if earlier {
        return apply::delete(ctx, &live).await.map(|_| ());
    }
    let value = |key: &str| {
        let bytes = &live.data.as_ref()?.get(key)?.0;
        String::from_utf8(bytes.clone()).ok()
    };
    match (value(TOKEN_KEY), value(SECRET_KEY)) {
        (Some(token), Some(secret)) => {
            let desired = build_secret(inputs, &token, &secret);
            apply::apply(ctx, &desired, Some(&live)).await.map(|_| ())
        }
        // Not ours to fill in: a Secret without them fails the Pod's mount, which shows.
        _ => Ok(()),
    }
}

/// 32 random bytes, hex-encoded.
fn random_token() -> String {
    let bytes: [u8; 32] = rand::rng().random();
    hex::encode(bytes)
}
