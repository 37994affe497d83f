//! What a PluginInstance should have, decided from values the reconciler gathered: whether it
//! can run (its Plugin installed and admitted, its Channel there, its egress policy there when
//! one is due), whether its container is wanted now (`pod_wanted`), the settings that apply,
//! what its plugin's egress opens here, the inputs of its Pod, and what to do with its Secret
//! and with each of its live Pods. Pure: nothing here takes a client or the
//! Context; `instance` reads the stores into [`Facts`], `desired` builds the children, and
//! `instance` carries the steps out.
//!
//! | step | decides | from |
//! |---|---|---|
//! | [`decide`] | runnable or why not, demand, the Pod's parts, settings, egress | [`Facts`], the time |
//! | [`pod_inputs`] | what the Pod is built from (`pod::build_pod`, in `desired`) | the decision, the pull Secret's name |
//! | [`secret_step`] | make, replace, keep or leave the Secret | the live Secret, the owner |
//! | [`pod_steps`] | which live Pods go, and whether the desired one is made or put right | the desired Pod, the live ones |

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;

use crate::egress::{self, Here};
use crate::plugin_pod::{self, PluginParts};
use crate::pod::PodInputs;
use crate::pod_wanted::{self, Demand, DemandInputs, PodProgress};
use index::manifests::Parsed;
use model::contract::{SECRET_KEY, TOKEN_KEY};
use model::manifest::{Capability, Manifest};
use model::names;
use model::resolve::{self, ResolvedSettings};
use model::resources::{Channel, HostConfigSpec, Plugin, PluginInstance, Project, WorkingTree};

/// The idle timeout when HostConfig's cannot be read.
const DEFAULT_IDLE: Duration = Duration::from_secs(600);

/// What one reconcile of an instance decides from: the instance and what the stores hold for
/// it (read by `instance::gather`).
pub struct Facts<'a> {
    pub instance: &'a PluginInstance,
    pub name: &'a str,
    pub namespace: &'a str,
    pub host: HostConfigSpec,
    /// The instance's Plugin, with its manifest as parsed.
    pub plugin: Option<(Arc<Plugin>, Parsed)>,
    pub channel: Option<Arc<Channel>>,
    /// The channel a thread belongs to: a thread without a working tree of its own uses its
    /// channel's.
    pub parent_channel: Option<Arc<Channel>>,
    pub project: Option<Arc<Project>>,
    /// The instance's Pods (see [`owned_by`]).
    pub pods: Vec<Arc<Pod>>,
    /// The NetworkPolicies of its namespace: its plugin's egress policy, and those that close
    /// plugin Pods' egress.
    pub policies: Vec<Arc<NetworkPolicy>>,
    /// Its Secret, as the cache shows it.
    pub secret: Option<Secret>,
    /// Its pull Secret, as the cache shows it.
    pub pull_secret: Option<Secret>,
    /// HostConfig's registry credentials (`.dockerconfigjson`), which its Pod is pulled with;
    /// `None` when HostConfig names none, or they cannot be read (the Plugin's Image stage says
    /// why).
    pub pull_credentials: Option<Vec<u8>>,
    /// Our own image: the gate's, unless HostConfig names another.
    pub self_image: &'a str,
    /// LOOP_API_URL as the plugin's Pod sees it.
    pub api_url: String,
    /// When this controller started reconciling.
    pub started: Timestamp,
}

/// An instance that can run: its Plugin, admitted, with the manifest admission passed, and
/// its Channel.
pub struct Runnable<'a> {
    pub plugin: &'a Plugin,
    pub manifest: Arc<Manifest>,
    pub channel: &'a Channel,
}

/// What the reconcile decided, before it writes anything.
pub struct Decision<'a> {
    /// What the instance runs and what its Pod takes from the Plugin and HostConfig; or why no
    /// Pod can run.
    pub pod: Result<(Runnable<'a>, PluginParts), String>,
    /// Whether its container is wanted now, and until when.
    pub demand: Demand,
    /// The settings the plugin sees here, and the values left out (shown, never dropped
    /// silently); `None` without a manifest to check them against.
    pub settings: Option<ResolvedSettings>,
    /// The destinations the plugin's egress policy opens here; `None` while it cannot run or
    /// its policy is awaited.
    pub egress: Option<Vec<String>>,
}

/// Decides what the instance should have now.
pub fn decide<'a>(facts: &'a Facts, now: Timestamp) -> Decision<'a> {
    let instance = facts.instance;
    let runnable = runnable(facts);
    let demand = match &runnable {
        Ok(run) => demand_on(facts, run, now),
        Err(_) => Demand::Idle,
    };
    // A project's settings apply without trust, so its current config counts.
    let settings = runnable.as_ref().ok().map(|run| {
        let plugin = &instance.spec.plugin;
        resolve::resolve_settings(
            &run.manifest,
            facts.host.plugins.defaults.get(plugin),
            facts
                .project
                .as_ref()
                .and_then(|p| p.spec.plugins.get(plugin)),
        )
    });
    // Before its container runs: what the plugin may reach beyond the host.
    let here = runnable
        .as_ref()
        .ok()
        .map(|run| egress::here(run.plugin, &run.manifest, &facts.policies));
    let pod = runnable.and_then(|run| {
        if here == Some(Here::Awaited) {
            return Err(format!(
                "waiting for NetworkPolicy {}: plugin Pods' egress is closed here, and it opens the plugin's approved egress",
                egress::name(&instance.spec.plugin)
            ));
        }
        let parts = plugin_pod::parts(
            &facts.host,
            facts.self_image,
            run.plugin,
            &run.manifest,
            facts.namespace,
            &instance.spec.channel,
        )?;
        Ok((run, parts))
    });
    let egress = match here {
        Some(Here::Open(open)) => Some(open),
        Some(Here::Awaited) | None => None,
    };
    Decision {
        pod,
        demand,
        settings,
        egress,
    }
}

/// What the instance runs, or why it cannot run.
fn runnable<'a>(facts: &'a Facts) -> Result<Runnable<'a>, String> {
    let spec = &facts.instance.spec;
    match (&facts.plugin, &facts.channel) {
        (Some((plugin, manifest)), Some(channel)) => {
            admission::admit(&facts.host, plugin, manifest)
                .map(|manifest| Runnable {
                    plugin,
                    manifest,
                    channel,
                })
                .map_err(|refusal| {
                    format!(
                        "Plugin {} is not admitted: {}",
                        spec.plugin, refusal.message
                    )
                })
        }
        (None, _) => Err(format!("Plugin {} is not installed", spec.plugin)),
        (_, None) => Err(format!("Channel {} does not exist", spec.channel)),
    }
}

/// Whether the container is wanted now: composer switches count only while
/// `ui.composer_switch` is approved, a live hold only while `live.control` is.
fn demand_on(facts: &Facts, run: &Runnable, now: Timestamp) -> Demand {
    let approved = resolve::approved_capabilities(run.plugin, &run.manifest);
    let switches: Vec<&str> = if approved.contains(&Capability::UiComposerSwitch) {
        run.manifest
            .ui
            .composer_switches
            .iter()
            .map(|s| s.id.as_str())
            .collect()
    } else {
        vec![]
    };
    let idle =
        model::schedule::parse_interval(&facts.host.plugins.idle_timeout).unwrap_or(DEFAULT_IDLE);
    pod_wanted::demand(&DemandInputs {
        status: facts.instance.status.as_ref(),
        switches: &switches,
        live_control: approved.contains(&Capability::LiveControl),
        idle_timeout: idle,
        pod: progress(&facts.pods),
        started: facts.started,
        now,
    })
}

/// How far the instance's live Pod got: the newest one not going away and not failed.
pub fn progress(pods: &[Arc<Pod>]) -> PodProgress {
    let live = pods
        .iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none() && failed(p).is_none())
        .max_by_key(|p| p.metadata.creation_timestamp.as_ref().map(|t| t.0));
    let Some(pod) = live else {
        return PodProgress::None;
    };
    let status = pod.status.as_ref();
    if let Some(ready) = index::pods::ready_condition(pod) {
        // Ready since an unknown time: no later start to count from, and no grace.
        return match ready.last_transition_time.as_ref().and_then(|t| ours(t.0)) {
            Some(since) => PodProgress::Ready { since },
            None => PodProgress::Running,
        };
    }
    // Pending (placed, its volume bound, its image pulled), or running for the first time and
    // not Ready yet; a container that restarted is failing, not starting.
    let phase = status.and_then(|s| s.phase.as_deref());
    let restarts: i32 = status
        .and_then(|s| s.container_statuses.as_ref())
        .map(|cs| cs.iter().map(|c| c.restart_count).sum())
        .unwrap_or(0);
    let starting = match phase {
        None | Some("Pending") => true,
        Some("Running") => restarts == 0,
        Some(_) => false,
    };
    match (
        starting,
        pod.metadata
            .creation_timestamp
            .as_ref()
            .and_then(|t| ours(t.0)),
    ) {
        (true, Some(since)) => PodProgress::Starting { since },
        _ => PodProgress::Running,
    }
}

/// k8s-openapi's timestamp (its own jiff) as ours.
fn ours(t: k8s_openapi::jiff::Timestamp) -> Option<Timestamp> {
    Timestamp::from_nanosecond(t.as_nanosecond()).ok()
}

/// Why a started Pod runs, for its Event.
pub fn started_because(demand: Demand) -> &'static str {
    match demand {
        Demand::ActiveUntil(_) => "a call or an event needs it",
        Demand::SwitchOnAtStart(_) => {
            "a composer switch is on, so the plugin can bring back what it stands for"
        }
        Demand::LiveHold => "the plugin holds the live session",
        Demand::Starting(_) => "it is still starting",
        Demand::Idle => "idle",
    }
}

/// Why containers were stopped, for the Event: a Pod still wanted was replaced by one of
/// another spec; otherwise the instance went idle.
pub fn stopped_because(demand: Demand) -> &'static str {
    if demand.wanted() {
        "its spec changed"
    } else {
        "idle"
    }
}

/// What the instance's Pod is built from: the instance, what it runs and the parts that come
/// with it, and the pull Secret made for it (when HostConfig names registry credentials).
pub fn pod_inputs<'a>(
    facts: &'a Facts,
    run: &'a Runnable,
    parts: &'a PluginParts,
    owner: OwnerReference,
    pull_secret: Option<&'a str>,
) -> PodInputs<'a> {
    let spec = &facts.instance.spec;
    let (memory, cpu) = run.manifest.resources_as_quantities();
    PodInputs {
        instance: facts.name,
        namespace: facts.namespace,
        owner,
        plugin: &spec.plugin,
        project: &spec.project,
        channel: &spec.channel,
        image: &run.plugin.spec.image,
        command: &parts.command,
        run_as: parts.run_as,
        image_pull_secret: pull_secret,
        memory,
        cpu,
        api_url: &facts.api_url,
        working_tree: working_tree(run.channel, facts.parent_channel.as_deref()),
        gate: parts.gate.as_ref().map(|g| g.inputs()),
    }
}

/// The chat's working tree: its own, or, for a thread without one, its channel's (`parent`,
/// as the store holds the channel `channel.spec.parent` names).
pub fn working_tree<'a>(
    channel: &'a Channel,
    parent: Option<&'a Channel>,
) -> Option<&'a WorkingTree> {
    if let Some(tree) = &channel.spec.working_tree {
        return Some(tree);
    }
    let parent_name = channel.spec.parent.as_deref()?;
    parent
        .filter(|p| p.metadata.name.as_deref() == Some(parent_name))?
        .spec
        .working_tree
        .as_ref()
}

/// What to do with the instance's Secret.
#[derive(Clone, Debug, PartialEq)]
pub enum SecretStep<'a> {
    /// There is none: make it, with a fresh random token and secret.
    Make,
    /// It is an earlier instance's (this one was deleted and made again before garbage
    /// collection took its Secret): delete it, never adopt it, so the removed instance's token
    /// dies with it. Once it is gone (the watch on Secrets brings us back), a fresh one is made.
    ReplaceEarlier(&'a Secret),
    /// It is ours: apply it again with the token and secret it holds, which puts right a hand
    /// edit of what we set (its labels).
    Keep {
        live: &'a Secret,
        token: String,
        secret: String,
    },
    /// It lacks its token or secret: not ours to fill in (the Pod's mount fails, which shows).
    Leave,
}

/// What to do with `live`, the instance's Secret as the cache shows it, for the instance
/// `owner` names.
pub fn secret_step<'a>(live: Option<&'a Secret>, owner: &OwnerReference) -> SecretStep<'a> {
    let Some(live) = live else {
        return SecretStep::Make;
    };
    let earlier = live
        .owner_references()
        .iter()
        .any(|o| o.controller == Some(true) && o.uid != owner.uid);
    if earlier {
        return SecretStep::ReplaceEarlier(live);
    }
    let value = |key: &str| {
        let bytes = &live.data.as_ref()?.get(key)?.0;
        String::from_utf8(bytes.clone()).ok()
    };
    match (value(TOKEN_KEY), value(SECRET_KEY)) {
        (Some(token), Some(secret)) => SecretStep::Keep {
            live,
            token,
            secret,
        },
        _ => SecretStep::Leave,
    }
}

/// A live Pod that goes.
#[derive(Debug, PartialEq)]
pub enum Removal<'a> {
    /// It will not run again (see [`failed`]): deleted, with an Event saying so (`note`).
    Failed { pod: &'a Pod, note: String },
    /// Not the Pod wanted now (none is, or one of another spec is): deleted.
    Unwanted(&'a Pod),
}

/// What to do about the Pod the instance should run.
#[derive(Debug, PartialEq)]
pub enum Start<'a> {
    /// None is wanted, or none can be built.
    Nothing,
    /// None of its name is there: create it.
    Create(&'a Pod),
    /// One of its name failed (it goes with the removals) or is going away: its replacement
    /// comes once it is gone.
    AwaitGone,
    /// It is there: apply the desired Pod over it should a field we set differ.
    PutRight {
        desired: &'a Pod,
        live: &'a Arc<Pod>,
    },
}

/// What to do with the instance's Pods: the removals in the order of `live`, then the start.
#[derive(Debug, PartialEq)]
pub struct PodSteps<'a> {
    pub removals: Vec<Removal<'a>>,
    pub start: Start<'a>,
}

/// Makes the live Pods match `keep`, the desired Pod while one is wanted and can be built. A
/// Pod that failed (evicted by its node, or ended) is deleted, and a new one replaces it once
/// it is gone.
pub fn pod_steps<'a>(keep: Option<&'a Pod>, live: &'a [Arc<Pod>]) -> PodSteps<'a> {
    let keep_name = keep.and_then(|p| p.metadata.name.as_deref());
    let removals = live
        .iter()
        .filter_map(|pod| {
            if let Some(why) = failed(pod) {
                let next = if keep.is_some() {
                    "a new one replaces it"
                } else {
                    "none is needed now"
                };
                let note = format!("Pod {} {why}; {next}", pod.name_any());
                Some(Removal::Failed { pod, note })
            } else if pod.metadata.name.as_deref() != keep_name {
                Some(Removal::Unwanted(pod))
            } else {
                None
            }
        })
        .collect();
    let start = match keep {
        None => Start::Nothing,
        Some(desired) => match live
            .iter()
            .find(|p| p.metadata.name == desired.metadata.name)
        {
            None => Start::Create(desired),
            Some(live) if failed(live).is_some() || live.metadata.deletion_timestamp.is_some() => {
                Start::AwaitGone
            }
            Some(live) => Start::PutRight { desired, live },
        },
    };
    PodSteps { removals, start }
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

/// Whether a Pod is the instance's: by its label, or by its owner (should the label be edited
/// away by hand, the Pod is still found and put right).
pub fn owned_by(pod: &Pod, instance: &PluginInstance) -> bool {
    let uid = instance.uid();
    pod.labels().get(names::LABEL_INSTANCE) == Some(&instance.name_any())
        || pod
            .owner_references()
            .iter()
            .any(|o| o.controller == Some(true) && Some(&o.uid) == uid.as_ref())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::PodStatus;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
    use kube::Resource;
    use model::config::{ConfigLevel, PluginConfig};
    use model::resources::{ChannelKind, PluginInstanceStatus, SwitchState};

    use super::*;
    use crate::tests::fixtures;

    fn at(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    /// When the controller started, in every case.
    const STARTED: &str = "2026-01-01T10:00:00Z";

    /// The facts of `instance` in [`fixtures::World::echo`]: echo installed and admitted,
    /// the channel `general` and the project there, no Pods.
    fn facts(instance: &PluginInstance) -> Facts<'_> {
        let plugin = fixtures::echo_plugin();
        plugin_facts(instance, plugin)
    }

    fn plugin_facts(instance: &PluginInstance, plugin: Plugin) -> Facts<'_> {
        fixtures::instance_facts(instance, plugin, at(STARTED))
    }

    fn why_not(facts: &Facts) -> Option<String> {
        decide(facts, at(STARTED)).pod.err()
    }

    #[test]
    fn an_instance_runs_only_with_its_plugin_admitted_and_its_channel_there() {
        let instance = fixtures::instance();
        assert_eq!(why_not(&facts(&instance)), None);
        let mut gone = facts(&instance);
        gone.plugin = None;
        assert_eq!(
            why_not(&gone).as_deref(),
            Some("Plugin echo is not installed")
        );
        let mut gone = facts(&instance);
        gone.channel = None;
        assert_eq!(
            why_not(&gone).as_deref(),
            Some("Channel general does not exist")
        );
        let mut off = facts(&instance);
        off.host.plugins.enabled = false;
        assert_eq!(
            why_not(&off).as_deref(),
            Some("Plugin echo is not admitted: plugins.enabled is off in HostConfig default")
        );
        // Nothing is wanted of it, and no settings are checked without a manifest.
        let decision = decide(&off, at(STARTED));
        assert_eq!(decision.demand, Demand::Idle);
        assert!(decision.settings.is_none());
    }

    #[test]
    fn the_pod_runs_what_admission_recorded_and_no_pod_runs_without_it() {
        let instance = fixtures::instance();
        let facts = facts(&instance);
        let (run, parts) = decide(&facts, at(STARTED)).pod.expect("runnable");
        assert_eq!(run.plugin.spec.image, fixtures::echo_plugin().spec.image);
        assert_eq!(parts.command, ["/echo-plugin"]);
        assert_eq!(parts.run_as.uid, 65532);
        assert!(parts.gate.is_none(), "the gate is off in the fixture");
        // Admitted, but without facts for the digest it pins: no Pod, and it says why.
        let mut plugin = fixtures::echo_plugin();
        plugin
            .status
            .as_mut()
            .unwrap()
            .image
            .as_mut()
            .unwrap()
            .digest = "sha256:other".into();
        let why = why_not(&plugin_facts(&instance, plugin)).expect("no Pod");
        assert!(why.contains("has no image facts"), "{why}");
    }

    #[test]
    fn activity_and_switches_make_it_wanted_only_as_the_plugin_may_use_them() {
        let mut instance = fixtures::instance();
        let now = at("2026-01-01T10:01:00Z");
        let demand = |instance: &PluginInstance, plugin: Plugin| {
            decide(&plugin_facts(instance, plugin), now).demand
        };
        assert_eq!(demand(&instance, fixtures::echo_plugin()), Demand::Idle);
        instance.status = Some(PluginInstanceStatus {
            last_activity: Some("2026-01-01T10:00:30Z".into()),
            ..Default::default()
        });
        // HostConfig's idle timeout (10m in the fixture) counts from the last activity.
        assert_eq!(
            demand(&instance, fixtures::echo_plugin()),
            Demand::ActiveUntil(at("2026-01-01T10:10:30Z"))
        );
        instance.status = Some(PluginInstanceStatus {
            switches: vec![SwitchState {
                id: "mode".into(),
                on: true,
                title: None,
                error: false,
                busy: false,
            }],
            live_hold: true,
            ..Default::default()
        });
        assert_eq!(demand(&instance, fixtures::echo_plugin()), Demand::LiveHold);
        let without_live = fixtures::plugin_with(
            fixtures::echo_manifest(),
            &["schedule", "ui.composer_switch"],
        );
        assert_eq!(
            demand(&instance, without_live),
            Demand::SwitchOnAtStart(at("2026-01-01T10:10:00Z"))
        );
        let neither = fixtures::plugin_with(fixtures::echo_manifest(), &["schedule"]);
        assert_eq!(demand(&instance, neither), Demand::Idle);
    }

    #[test]
    fn a_pods_progress_is_read_from_its_phase_readiness_and_restarts() {
        use k8s_openapi::api::core::v1::{ContainerStatus, PodCondition};
        let pod = |phase: &str, ready: Option<&str>, restarts: i32, going: bool| {
            let mut p = Pod::default();
            let time = |t: &str| Time(t.parse().expect("a timestamp"));
            p.metadata.creation_timestamp = Some(time("2026-01-01T10:00:00Z"));
            if going {
                p.metadata.deletion_timestamp = Some(time("2026-01-01T10:00:05Z"));
            }
            p.status = Some(PodStatus {
                phase: Some(phase.into()),
                conditions: ready.map(|since| {
                    vec![PodCondition {
                        type_: "Ready".into(),
                        status: "True".into(),
                        last_transition_time: Some(time(since)),
                        ..Default::default()
                    }]
                }),
                container_statuses: Some(vec![ContainerStatus {
                    restart_count: restarts,
                    ..Default::default()
                }]),
                ..Default::default()
            });
            Arc::new(p)
        };
        let made = at("2026-01-01T10:00:00Z");
        assert_eq!(progress(&[]), PodProgress::None);
        assert_eq!(
            progress(&[pod("Pending", None, 0, false)]),
            PodProgress::Starting { since: made }
        );
        assert_eq!(
            progress(&[pod("Running", None, 0, false)]),
            PodProgress::Starting { since: made }
        );
        assert_eq!(
            progress(&[pod("Running", None, 2, false)]),
            PodProgress::Running
        );
        assert_eq!(
            progress(&[pod("Running", Some("2026-01-01T10:00:20Z"), 0, false)]),
            PodProgress::Ready {
                since: at("2026-01-01T10:00:20Z")
            }
        );
        // Ready since a time nobody wrote: neither counted from nor starting.
        let mut untimed = pod("Running", Some("2026-01-01T10:00:20Z"), 0, false);
        Arc::make_mut(&mut untimed)
            .status
            .as_mut()
            .and_then(|s| s.conditions.as_mut())
            .expect("conditions")[0]
            .last_transition_time = None;
        assert_eq!(progress(&[untimed]), PodProgress::Running);
        // One going away, or one that ended, is not the one that runs.
        assert_eq!(
            progress(&[pod("Running", None, 0, true)]),
            PodProgress::None
        );
        assert_eq!(
            progress(&[pod("Failed", None, 0, false)]),
            PodProgress::None
        );
    }

    #[test]
    fn settings_come_from_the_projects_current_config_and_show_what_is_left_out() {
        let instance = fixtures::instance();
        let mut facts = facts(&instance);
        let config = PluginConfig {
            settings: BTreeMap::from([("count".to_string(), serde_json::json!(11))]),
            ..Default::default()
        };
        // Not trusted: settings apply without trust.
        facts.project = Some(Arc::new(fixtures::project_with(config)));
        let settings = decide(&facts, at(STARTED)).settings.expect("a manifest");
        assert_eq!(
            settings.values["count"],
            serde_json::json!(3),
            "the default"
        );
        assert_eq!(settings.left_out.len(), 1);
        assert_eq!(settings.left_out[0].level, ConfigLevel::Project);
        assert_eq!(settings.left_out[0].setting, "count");
    }

    fn working_tree_of(claim: &str) -> WorkingTree {
        WorkingTree {
            claim_name: claim.into(),
            sub_path: None,
        }
    }

    #[test]
    fn a_thread_without_a_working_tree_uses_its_channels() {
        let mut general = fixtures::channel("general");
        general.spec.working_tree = Some(working_tree_of("general-tree"));
        let mut thread = fixtures::channel("t1");
        thread.spec.kind = ChannelKind::Thread;
        thread.spec.parent = Some("general".into());
        assert_eq!(
            working_tree(&thread, Some(&general)),
            Some(&working_tree_of("general-tree"))
        );
        assert_eq!(working_tree(&thread, None), None, "its channel is gone");
        let other = fixtures::channel("other");
        assert_eq!(working_tree(&thread, Some(&other)), None, "not its channel");
        thread.spec.working_tree = Some(working_tree_of("own"));
        assert_eq!(
            working_tree(&thread, Some(&general)),
            Some(&working_tree_of("own"))
        );
        let plain = fixtures::channel("plain");
        assert_eq!(working_tree(&plain, Some(&general)), None, "no parent");
    }

    #[test]
    fn the_pod_inputs_name_the_pull_secret_and_the_threads_working_tree() {
        let mut instance = fixtures::instance();
        instance.spec.channel = "t1".into();
        let mut facts = facts(&instance);
        let mut thread = fixtures::channel("t1");
        thread.spec.parent = Some("general".into());
        let mut general = fixtures::channel("general");
        general.spec.working_tree = Some(working_tree_of("general-tree"));
        facts.channel = Some(Arc::new(thread));
        facts.parent_channel = Some(Arc::new(general));
        let decision = decide(&facts, at(STARTED));
        let (run, parts) = decision.pod.as_ref().expect("runnable");
        let owner = instance.controller_owner_ref(&()).unwrap();
        let inputs = pod_inputs(&facts, run, parts, owner, Some("echo-general-pull"));
        assert_eq!(inputs.image_pull_secret, Some("echo-general-pull"));
        assert_eq!(inputs.working_tree, Some(&working_tree_of("general-tree")));
        assert_eq!(inputs.channel, "t1");
        assert_eq!(inputs.api_url, "http://api:8080");
        assert_eq!(inputs.owner.kind, "PluginInstance");
        assert!(
            inputs.memory.is_some() && inputs.cpu.is_some(),
            "{inputs:?}"
        );
    }

    fn secret(owner_uid: &str, keys: &[(&str, &str)]) -> Secret {
        Secret {
            metadata: ObjectMeta {
                owner_references: Some(vec![OwnerReference {
                    uid: owner_uid.into(),
                    controller: Some(true),
                    ..Default::default()
                }]),
                ..Default::default()
            },
            data: Some(
                keys.iter()
                    .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        }
    }

    #[test]
    fn the_secret_is_made_once_kept_and_never_adopted() {
        let owner = fixtures::instance().controller_owner_ref(&()).unwrap();
        assert_eq!(secret_step(None, &owner), SecretStep::Make);
        let ours = secret(&owner.uid, &[("token", "t"), ("secret", "s")]);
        assert_eq!(
            secret_step(Some(&ours), &owner),
            SecretStep::Keep {
                live: &ours,
                token: "t".into(),
                secret: "s".into()
            }
        );
        let earlier = secret("uid-earlier", &[("token", "t"), ("secret", "s")]);
        assert_eq!(
            secret_step(Some(&earlier), &owner),
            SecretStep::ReplaceEarlier(&earlier)
        );
        let emptied = secret(&owner.uid, &[("token", "t")]);
        assert_eq!(secret_step(Some(&emptied), &owner), SecretStep::Leave);
    }

    fn pod(name: &str, phase: &str) -> Arc<Pod> {
        Arc::new(Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            spec: None,
            status: Some(PodStatus {
                phase: Some(phase.into()),
                ..Default::default()
            }),
        })
    }

    fn names_of(removals: &[Removal]) -> Vec<String> {
        removals
            .iter()
            .map(|r| match r {
                Removal::Failed { pod, .. } => format!("failed {}", pod.name_any()),
                Removal::Unwanted(pod) => format!("unwanted {}", pod.name_any()),
            })
            .collect()
    }

    #[test]
    fn the_wanted_pod_is_made_or_put_right_and_every_other_goes() {
        let desired = pod("echo-general-aaaa", "Pending");
        // Nothing there: it is made.
        let steps = pod_steps(Some(&desired), &[]);
        assert_eq!(steps.start, Start::Create(&desired));
        assert!(steps.removals.is_empty());
        // One of an older spec is there beside it: that one goes, ours is put right.
        let live = [
            pod("echo-general-old", "Running"),
            pod("echo-general-aaaa", "Running"),
        ];
        let steps = pod_steps(Some(&desired), &live);
        assert_eq!(names_of(&steps.removals), ["unwanted echo-general-old"]);
        assert_eq!(
            steps.start,
            Start::PutRight {
                desired: &desired,
                live: &live[1]
            }
        );
        // None wanted: every one goes.
        let steps = pod_steps(None, &live);
        assert_eq!(
            names_of(&steps.removals),
            ["unwanted echo-general-old", "unwanted echo-general-aaaa"]
        );
        assert_eq!(steps.start, Start::Nothing);
    }

    #[test]
    fn a_failed_pod_goes_and_its_replacement_waits_until_it_is_gone() {
        let desired = pod("echo-general-aaaa", "Pending");
        let live = [pod("echo-general-aaaa", "Failed")];
        let steps = pod_steps(Some(&desired), &live);
        assert_eq!(
            steps.removals,
            [Removal::Failed {
                pod: &live[0],
                note: "Pod echo-general-aaaa ended (Failed); a new one replaces it".into()
            }]
        );
        assert_eq!(steps.start, Start::AwaitGone);
        let steps = pod_steps(None, &live);
        assert_eq!(
            steps.removals,
            [Removal::Failed {
                pod: &live[0],
                note: "Pod echo-general-aaaa ended (Failed); none is needed now".into()
            }]
        );
        // One going away under the desired name is left to go.
        let mut going = (*pod("echo-general-aaaa", "Running")).clone();
        going.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let live = [Arc::new(going)];
        let steps = pod_steps(Some(&desired), &live);
        assert!(steps.removals.is_empty());
        assert_eq!(steps.start, Start::AwaitGone);
    }

    #[test]
    fn a_pod_fails_when_its_node_evicts_it_or_it_ends() {
        assert_eq!(failed(&pod("p", "Running")), None);
        assert_eq!(
            failed(&pod("p", "Succeeded")).as_deref(),
            Some("ended (Succeeded)")
        );
        let mut evicted = (*pod("p", "Failed")).clone();
        let status = evicted.status.as_mut().unwrap();
        status.reason = Some("Evicted".into());
        status.message = Some("The node was low on resource: memory.".into());
        assert_eq!(
            failed(&evicted).as_deref(),
            Some("was evicted: The node was low on resource: memory.")
        );
    }

    #[test]
    fn a_pod_is_the_instances_by_its_label_or_its_owner() {
        let instance = fixtures::instance();
        let mut labelled = (*pod("p", "Running")).clone();
        labelled.metadata.labels = Some(BTreeMap::from([(
            names::LABEL_INSTANCE.to_string(),
            "echo-general".to_string(),
        )]));
        assert!(owned_by(&labelled, &instance));
        let mut owned = (*pod("p", "Running")).clone();
        owned.metadata.owner_references = Some(vec![instance.controller_owner_ref(&()).unwrap()]);
        assert!(owned_by(&owned, &instance));
        assert!(!owned_by(&pod("p", "Running"), &instance));
    }
}
