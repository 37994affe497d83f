//! The controller on the real control plane: instances follow what projects enable (with
//! trust), Pods run on demand and stop when idle, schedules follow every rule of the
//! reference, and removal cleans up.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::ensure;
use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, ResourceExt};
use model::config::ScheduleEntry;
use model::resources::{
    Channel, ChannelKind, InstancePhase, Plugin, PluginInstance, Project, SettingSource,
    SwitchState,
};
use model::schedule::ScheduleType;

use crate::controller_support::*;
use crate::support::{E2eTest, Ns, test, wait};

pub fn tests() -> Vec<E2eTest> {
    let mut tests = crate::controller_repair::tests();
    tests.extend(crate::controller_cold::tests());
    tests.extend([
        test(
            "controller::an_enabled_plugin_gets_one_instance_per_chat_and_no_pod_until_needed",
            enable,
        ),
        test(
            "controller::disabling_stops_the_running_container_within_seconds",
            disable,
        ),
        test(
            "controller::the_project_value_counts_only_once_trusted",
            trust_flip,
        ),
        test(
            "controller::demand_starts_a_pod_and_idleness_stops_it",
            demand_and_idle,
        ),
        test(
            "controller::a_settings_change_restarts_nothing",
            settings_change,
        ),
        test(
            "controller::refused_settings_are_shown_on_the_instance",
            refused_settings,
        ),
        test(
            "controller::a_switch_that_is_on_starts_the_pod_at_start_then_idle_applies",
            switch_at_start,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "controller::schedules_follow_the_reference_rules",
            schedules,
        ),
        test(
            "controller::a_cronjob_deleted_by_hand_comes_back_only_when_its_entry_changes",
            hand_deleted_cronjob,
        ),
        test(
            "controller::a_bad_interval_stops_nothing_else_and_its_task_pauses_and_resumes_on_its_last_valid_schedule",
            bad_interval_then_disabled,
        ),
        test(
            "controller::removing_a_plugin_keeps_data_unless_purged",
            removal,
        ),
        test(
            "controller::deleting_a_chat_or_project_cleans_up",
            owner_deletion,
        ),
        test("controller::the_host_switch_stops_everything", host_switch)
            .timeout(Duration::from_secs(180)),
        test(
            "controller::a_restart_mid_convergence_leaves_no_duplicate",
            restart,
        )
        .timeout(Duration::from_secs(180)),
        test(
            "controller::runs_done_reaches_the_plugin_once_across_a_server_restart",
            done_once,
        )
        .timeout(Duration::from_secs(180)),
        test("controller::a_steady_state_makes_no_write", steady_state)
            .timeout(Duration::from_secs(240))
            .local_only("counts the controller's writes in the audit log of the API server the suite started"),
    ]);
    tests
}

pub(crate) fn instance_name(plugin: &str, channel: &str) -> String {
    model::names::instance_name(plugin, channel)
}

/// A plugin of the test's own, a project enabling it (trusted) and one channel.
pub(crate) async fn world(
    ns: &Ns,
    suffix: &str,
    schedules: &[(&str, ScheduleEntry)],
) -> anyhow::Result<String> {
    setup(ns).await?;
    let id = plugin_id(ns, suffix);
    install(ns, &echo_plugin(&id)?).await?;
    apply_trusted(
        ns,
        "proj",
        BTreeMap::from([(id.clone(), entry(true, schedules))]),
    )
    .await?;
    apply(ns, &channel("general", "proj", ChannelKind::Channel, None)).await?;
    Ok(id)
}

pub(crate) async fn instances_of(
    ns: &Ns,
    plugin: &str,
    count: usize,
) -> anyhow::Result<Vec<PluginInstance>> {
    let label = format!("plugins.loop.dev/plugin={plugin}");
    list_until(
        &ns.api::<PluginInstance>(),
        Some(&label),
        &format!("{count} instances of {plugin}"),
        WAIT,
        |all| all.len() == count,
    )
    .await
}

pub(crate) async fn pods_of(
    ns: &Ns,
    instance: &str,
    count: usize,
    ready: bool,
) -> anyhow::Result<Vec<Pod>> {
    let label = format!("plugins.loop.dev/instance={instance}");
    list_until(
        &ns.api::<Pod>(),
        Some(&label),
        &format!("{count} pods of {instance} (ready: {ready})"),
        WAIT,
        |all| {
            let live: Vec<_> = all
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            all.len() == count
                && live.len() == count
                && (!ready || live.iter().all(|p| pod_ready(p)))
        },
    )
    .await
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn enable(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let id = world(&ns, "en", &[]).await?;
    apply(
        &ns,
        &channel("general-t1", "proj", ChannelKind::Thread, Some("general")),
    )
    .await?;
    apply(
        &ns,
        &channel("general-w1", "proj", ChannelKind::Worktree, Some("general")),
    )
    .await?;
    let instances = instances_of(&ns, &id, 3).await?;
    for chat in ["general", "general-t1", "general-w1"] {
        let name = instance_name(&id, chat);
        ensure!(
            instances.iter().any(|i| i.name_any() == name),
            "no instance {name}"
        );
        let instance = wait::matches(
            &ns.api::<PluginInstance>(),
            &name,
            "phase Stopped",
            WAIT,
            |i: &PluginInstance| {
                i.status.as_ref().and_then(|s| s.phase) == Some(InstancePhase::Stopped)
            },
        )
        .await?;
        ensure!(
            instance
                .owner_references()
                .iter()
                .any(|o| o.kind == "Channel" && o.name == chat)
        );
        // Its /data claim and its Secret exist; no Pod runs until something needs it.
        wait::exists(
            &ns.api::<PersistentVolumeClaim>(),
            &format!("data-{id}-{chat}"),
            WAIT,
        )
        .await?;
        let secret = wait::exists(&ns.api::<Secret>(), &format!("{name}-token"), WAIT).await?;
        let data = secret.data.unwrap_or_default();
        ensure!(
            data.get("token").is_some_and(|t| t.0.len() == 64)
                && data.get("secret").is_some_and(|s| s.0.len() == 64)
        );
    }
    let pods = ns.api::<Pod>().list(&Default::default()).await?;
    ensure!(pods.items.is_empty(), "no Pod runs before demand");
    // The printer columns tell the story.
    let table = ns.kubectl(["get", "plugininstances"]).await?;
    ensure!(
        table.contains("PLUGIN") && table.contains("PHASE") && table.contains("Stopped"),
        "{table}"
    );
    Ok(())
}

async fn disable(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let id = world(&ns, "di", &[]).await?;
    let name = instance_name(&id, "general");
    instances_of(&ns, &id, 1).await?;
    record_demand(&ns, &name).await?;
    pods_of(&ns, &name, 1, true).await?;
    // The owner edits and trusts a config that turns it off.
    let started = std::time::Instant::now();
    apply_trusted(
        &ns,
        "proj",
        BTreeMap::from([(id.clone(), entry(false, &[]))]),
    )
    .await?;
    pods_of(&ns, &name, 0, false).await?;
    instances_of(&ns, &id, 0).await?;
    ensure!(
        started.elapsed() < Duration::from_secs(15),
        "stopped after {:?}",
        started.elapsed()
    );
    Ok(())
}

async fn trust_flip(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    setup(&ns).await?;
    let id = plugin_id(&ns, "tr");
    install(&ns, &echo_plugin(&id)?).await?;
    // Enabled in the config, but the owner trusts only a version that does not enable it.
    apply_trusted(
        &ns,
        "proj",
        BTreeMap::from([(id.clone(), entry(false, &[]))]),
    )
    .await?;
    let edited = BTreeMap::from([(id.clone(), entry(true, &[]))]);
    apply(&ns, &project("proj", edited)).await?;
    apply(&ns, &channel("general", "proj", ChannelKind::Channel, None)).await?;
    wait::matches(
        &ns.api::<Channel>(),
        "general",
        "the chat reconciled",
        WAIT,
        |c: &Channel| c.status.is_some(),
    )
    .await?;
    ensure!(
        ns.api::<PluginInstance>()
            .list(&Default::default())
            .await?
            .items
            .is_empty(),
        "untrusted value counted"
    );
    // The owner trusts it.
    operator::trust_project(ns.client(), ns.name(), "proj", None).await?;
    instances_of(&ns, &id, 1).await?;
    // An untrusted edit turning it off: the approved version still applies.
    let api = ns.api::<Project>();
    let off = serde_json::json!({ "spec": { "plugins": { id.clone(): { "enabled": false } } } });
    let edited = api
        .patch("proj", &PatchParams::default(), &Patch::Merge(&off))
        .await?;
    let reason = |want: &'static str, generation: Option<i64>| {
        move |p: &Project| {
            p.status.as_ref().is_some_and(|s| {
                s.observed_generation == generation
                    && s.conditions
                        .iter()
                        .any(|c| c.r#type == "Trusted" && c.reason == want)
            })
        }
    };
    let generation = edited.metadata.generation;
    wait::matches(
        &api,
        "proj",
        "Trusted: LastApproved for the edit",
        WAIT,
        reason("LastApproved", generation),
    )
    .await?;
    // A chat made now is planned after the controller saw the edit (the status above came
    // from the same stores): it gets the plugin too, and the first chat keeps it.
    apply(&ns, &channel("marker", "proj", ChannelKind::Channel, None)).await?;
    instances_of(&ns, &id, 2).await?;
    operator::trust_project(ns.client(), ns.name(), "proj", None).await?;
    instances_of(&ns, &id, 0).await?;
    wait::matches(
        &api,
        "proj",
        "Trusted: Trusted",
        WAIT,
        reason("Trusted", generation),
    )
    .await?;
    Ok(())
}

async fn demand_and_idle(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let id = world(&ns, "id", &[]).await?;
    let name = instance_name(&id, "general");
    instances_of(&ns, &id, 1).await?;
    record_demand(&ns, &name).await?;
    let pods = pods_of(&ns, &name, 1, true).await?;
    let pod = &pods[0];
    let spec = pod.spec.as_ref().unwrap();
    ensure!(spec.automount_service_account_token == Some(false));
    // Admitted where Pod Security's restricted level is enforced, locked down field by field.
    let namespace = Api::<k8s_openapi::api::core::v1::Namespace>::all(ns.client())
        .get(ns.name())
        .await?;
    ensure!(
        namespace
            .labels()
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str)
            == Some("restricted")
    );
    // As the image's own USER, which admission read from the image.
    let installed = Api::<Plugin>::all(ns.client()).get(&id).await?;
    let user = installed
        .status
        .as_ref()
        .and_then(|s| s.image.as_ref())
        .map(|i| i.run_as_user);
    let psc = spec.security_context.clone().unwrap_or_default();
    ensure!(
        psc.run_as_non_root == Some(true) && user.is_some() && psc.run_as_user == user,
        "{psc:?}, the image's USER {user:?}"
    );
    ensure!(psc.seccomp_profile.as_ref().map(|p| p.type_.as_str()) == Some("RuntimeDefault"));
    let csc = spec.containers[0]
        .security_context
        .clone()
        .unwrap_or_default();
    ensure!(
        csc.allow_privilege_escalation == Some(false)
            && csc.read_only_root_filesystem == Some(true)
            && csc.run_as_non_root == Some(true)
            && csc.capabilities.and_then(|c| c.drop) == Some(vec!["ALL".to_string()]),
        "{:?}",
        spec.containers[0].security_context
    );
    ensure!(spec.containers[0].image.as_deref() == Some(installed.spec.image.as_str()));
    let ip = pod
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap_or_default();
    // The stand-in gives each Pod a 127.x address; a real cluster one from its pod network.
    ensure!(
        !ip.is_empty() && (ip.starts_with("127.") || ns.cluster().existing().is_some()),
        "pod IP {ip}"
    );
    let instance = wait::matches(
        &ns.api::<PluginInstance>(),
        &name,
        "phase Running",
        WAIT,
        |i: &PluginInstance| {
            i.status.as_ref().and_then(|s| s.phase) == Some(InstancePhase::Running)
        },
    )
    .await?;
    ensure!(instance.status.unwrap().pod == Some(pod.name_any()));
    // Idle for longer than the idle timeout: stopped, and its data stays.
    pods_of(&ns, &name, 0, false).await?;
    let stopped = wait::matches(
        &ns.api::<PluginInstance>(),
        &name,
        "phase Stopped",
        WAIT,
        |i: &PluginInstance| {
            i.status.as_ref().and_then(|s| s.phase) == Some(InstancePhase::Stopped)
        },
    )
    .await?;
    // The controller's status write took out the Pod it no longer has and left the field the
    // API server writes (here the test, as it would) where it was.
    let status = stopped.status.unwrap_or_default();
    ensure!(
        status.pod.is_none(),
        "a stopped instance names no Pod: {status:?}"
    );
    ensure!(
        status.last_activity.is_some(),
        "lastActivity kept by the controller's writes: {status:?}"
    );
    wait::exists(
        &ns.api::<PersistentVolumeClaim>(),
        &format!("data-{id}-general"),
        WAIT,
    )
    .await?;
    Ok(())
}

async fn settings_change(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let id = world(&ns, "se", &[]).await?;
    let name = instance_name(&id, "general");
    instances_of(&ns, &id, 1).await?;
    record_demand(&ns, &name).await?;
    let before = pods_of(&ns, &name, 1, true).await?[0].uid();
    let mut config = entry(true, &[]);
    config.settings.insert("verbose".into(), true.into());
    // Settings apply without trust, and only tune the plugin: nothing restarts.
    apply(
        &ns,
        &project("proj", BTreeMap::from([(id.clone(), config)])),
    )
    .await?;
    record_demand(&ns, &name).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = pods_of(&ns, &name, 1, true).await?[0].uid();
    ensure!(before == after, "the Pod was replaced");
    Ok(())
}

/// The reference: "When the daemon starts, it starts the plugin's container in each channel
/// where one of its switches is on, so the plugin can bring back what the switch stands for";
/// then the ordinary idle stop applies, the switch still on.
/// The reference: a value the manifest doesn't declare, or one its schema refuses, "is left
/// out, so the value below it applies, and Settings → Plugins says so". Here the instance's
/// status says so, value by value, with its source and why; `kubectl get` and an Event too.
async fn refused_settings(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let id = world(&ns, "rf", &[]).await?;
    let name = instance_name(&id, "general");
    instances_of(&ns, &id, 1).await?;
    let mut config = entry(true, &[]);
    config.settings.insert("verbose".into(), "yes".into());
    config.settings.insert("colour".into(), 1.into());
    apply_trusted(
        &ns,
        "proj",
        BTreeMap::from([(id.clone(), entry(true, &[]))]),
    )
    .await?;
    // Settings apply without trust: the current (untrusted) config counts for them.
    apply(
        &ns,
        &project("proj", BTreeMap::from([(id.clone(), config)])),
    )
    .await?;
    let shown = wait::matches(
        &ns.api::<PluginInstance>(),
        &name,
        "two refused settings shown",
        WAIT,
        |i: &PluginInstance| {
            i.status
                .as_ref()
                .is_some_and(|s| s.refused_settings.len() == 2)
        },
    )
    .await?
    .status
    .unwrap_or_default();
    let refused: Vec<(&str, String, Option<&serde_json::Value>)> = shown
        .refused_settings
        .iter()
        .map(|r| (r.setting.as_str(), r.source.to_string(), r.value.as_ref()))
        .collect();
    ensure!(
        refused
            == [
                ("colour", "project".to_string(), Some(&serde_json::json!(1))),
                (
                    "verbose",
                    "project".to_string(),
                    Some(&serde_json::json!("yes"))
                ),
            ],
        "{refused:?}"
    );
    ensure!(
        shown.refused_settings[0].reason == "the manifest declares no such setting"
            && shown.refused_settings[1]
                .reason
                .starts_with("its schema refuses it"),
        "{:?}",
        shown.refused_settings
    );
    // The refused value is not where the plugin's value came from: the manifest's default is.
    ensure!(
        shown.setting_sources == BTreeMap::from([("verbose".into(), SettingSource::Default)]),
        "{:?}",
        shown.setting_sources
    );
    let table = ns.kubectl(["get", "plugininstances"]).await?;
    ensure!(
        table.contains("SETTINGS") && table.contains("SettingsLeftOut"),
        "{table}"
    );
    // The Event follows the status write (the controller publishes it after): wait for it.
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let events = ns
            .kubectl([
                "get",
                "events.events.k8s.io",
                "-o",
                "jsonpath={.items[*].reason}",
            ])
            .await?;
        if events.contains("SettingsLeftOut") {
            break;
        }
        ensure!(
            std::time::Instant::now() < deadline,
            "no SettingsLeftOut Event: {events}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    // Fixed: nothing is left out, the condition says so, and the value is the project's.
    let mut fixed = entry(true, &[]);
    fixed.settings.insert("verbose".into(), true.into());
    apply_trusted(&ns, "proj", BTreeMap::from([(id.clone(), fixed)])).await?;
    wait::matches(
        &ns.api::<PluginInstance>(),
        &name,
        "SettingsValid True, nothing refused, verbose from the project",
        WAIT,
        |i: &PluginInstance| {
            i.status.as_ref().is_some_and(|s| {
                s.refused_settings.is_empty()
                    && s.setting_sources.get("verbose") == Some(&SettingSource::Project)
                    && s.conditions
                        .iter()
                        .any(|c| c.r#type == "SettingsValid" && c.reason == "SettingsApplied")
            })
        },
    )
    .await?;
    Ok(())
}

async fn switch_at_start(ns: Ns) -> anyhow::Result<()> {
    let _exclusive = exclusive().await;
    let id = world(&ns, "sw", &[]).await?;
    let name = instance_name(&id, "general");
    instances_of(&ns, &id, 1).await?;
    let switches = vec![SwitchState {
        id: "mode".into(),
        on: true,
        title: None,
        error: false,
        busy: false,
    }];
    let on = serde_json::json!({ "status": { "switches": switches } });
    let api = ns.api::<PluginInstance>();
    api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&on))
        .await?;
    restart_controller(&ns, async {}).await?;
    pods_of(&ns, &name, 1, true).await?;
    // Nothing calls it: once the idle timeout passed since the start, it stops.
    pods_of(&ns, &name, 0, false).await?;
    let instance = api.get(&name).await?;
    ensure!(
        instance
            .status
            .is_some_and(|s| s.switches.iter().any(|w| w.id == "mode" && w.on)),
        "the switch stays on"
    );
    Ok(())
}

pub(crate) fn cron_entry(
    enabled: Option<bool>,
    kind: ScheduleType,
    schedule: &str,
) -> ScheduleEntry {
    ScheduleEntry {
        enabled,
        kind: Some(kind),
        schedule: Some(schedule.into()),
    }
}

pub(crate) async fn cronjob(
    ns: &Ns,
    name: &str,
    what: &str,
    cond: impl Fn(&CronJob) -> bool,
) -> anyhow::Result<CronJob> {
    wait::matches(&ns.api::<CronJob>(), name, what, WAIT, cond).await
}

async fn schedules(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let on = cron_entry(None, ScheduleType::Cron, "0 9 * * *");
    let off = cron_entry(Some(false), ScheduleType::Interval, "30m");
    let id = world(&ns, "sc", &[("tick", on.clone()), ("ping", off.clone())]).await?;
    apply(
        &ns,
        &channel("general-t1", "proj", ChannelKind::Thread, Some("general")),
    )
    .await?;
    let tick = format!("{id}-general-tick");
    let ping = format!("{id}-general-ping");
    let suspended = |c: &CronJob| c.spec.suspend == Some(true);
    cronjob(&ns, &tick, "tick running at 9", |c| {
        c.spec.schedule == "0 9 * * *" && !suspended(c)
    })
    .await?;
    // enabled: false keeps it, suspended; an interval cron can run exactly is converted.
    cronjob(&ns, &ping, "ping suspended every 30m", |c| {
        c.spec.schedule == "*/30 * * * *" && suspended(c)
    })
    .await?;
    // Threads get none.
    let all = ns.api::<CronJob>().list(&Default::default()).await?;
    ensure!(
        all.items.len() == 2,
        "{:?}",
        all.items.iter().map(|c| c.name_any()).collect::<Vec<_>>()
    );

    // The project stops enabling the plugin: both paused. Enabling again resumes all but ping.
    let disabled = |enabled| {
        BTreeMap::from([(
            id.clone(),
            entry(enabled, &[("tick", on.clone()), ("ping", off.clone())]),
        )])
    };
    apply_trusted(&ns, "proj", disabled(false)).await?;
    cronjob(&ns, &tick, "tick suspended", suspended).await?;
    apply_trusted(&ns, "proj", disabled(true)).await?;
    cronjob(&ns, &tick, "tick resumed", |c| !suspended(c)).await?;
    cronjob(&ns, &ping, "ping still off", suspended).await?;

    // An interval no schedule can mean (under a minute) is refused with a clear status;
    // removing the entry deletes the CronJob.
    let bad = cron_entry(None, ScheduleType::Interval, "30s");
    apply_trusted(
        &ns,
        "proj",
        BTreeMap::from([(id.clone(), entry(true, &[("tick", bad)]))]),
    )
    .await?;
    let chat = wait::matches(
        &ns.api::<Channel>(),
        "general",
        "SchedulesValid False naming 30s",
        WAIT,
        |c: &Channel| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.r#type == "SchedulesValid"
                        && c.status == model::resources::ConditionStatus::False
                        && c.message.contains("\"30s\"")
                })
            })
        },
    )
    .await?;
    ensure!(chat.status.is_some());
    wait::deleted(&ns.api::<CronJob>(), &ping, WAIT).await?;
    Ok(())
}

/// Tried as a new user would: a trusted config changes a task to an interval no schedule can
/// mean (under a minute), then stops enabling the plugin, then enables it again. The refused
/// entry is reported, the rest of the chat's reconcile goes on (its other task follows the
/// config), the task the refused entry left behind runs on its last valid schedule, pauses
/// with the plugin and resumes with it, and the chat's status keeps following.
async fn bad_interval_then_disabled(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let good = cron_entry(None, ScheduleType::Cron, "0 9 * * *");
    let other = cron_entry(None, ScheduleType::Cron, "0 10 * * *");
    let id = world(&ns, "bi", &[("tick", good), ("ping", other.clone())]).await?;
    let tick = format!("{id}-general-tick");
    let ping = format!("{id}-general-ping");
    let suspended = |c: &CronJob| c.spec.suspend == Some(true);
    cronjob(&ns, &tick, "tick running at 9", |c| !suspended(c)).await?;
    cronjob(&ns, &ping, "ping running at 10", |c| !suspended(c)).await?;
    // A chat whose name makes long task names gets its tasks too (a CronJob's name has at
    // most 52 characters), and its status.
    let long = "a-chat-whose-name-is-long-enough-to-cut";
    apply(&ns, &channel(long, "proj", ChannelKind::Channel, None)).await?;
    let label = format!("plugins.loop.dev/channel={long}");
    let tasks = list_until(
        &ns.api::<CronJob>(),
        Some(&label),
        &format!("2 CronJobs of {long}"),
        WAIT,
        |all| all.len() == 2,
    )
    .await?;
    ensure!(
        tasks.iter().all(|c| c.name_any().len() <= 52),
        "{:?}",
        tasks.iter().map(|c| c.name_any()).collect::<Vec<_>>()
    );
    wait::matches(
        &ns.api::<Channel>(),
        long,
        "the long-named chat's status",
        WAIT,
        |c: &Channel| {
            c.status
                .as_ref()
                .is_some_and(|s| s.plugins == [id.clone()] && s.applied_schedules.len() == 2)
        },
    )
    .await?;
    let config = |enabled: bool, tick: &str, ping: &str| {
        BTreeMap::from([(
            id.clone(),
            entry(
                enabled,
                &[
                    ("tick", cron_entry(None, ScheduleType::Interval, tick)),
                    ("ping", cron_entry(None, ScheduleType::Interval, ping)),
                ],
            ),
        )])
    };
    // tick's entry breaks (30s), ping's changes: ping follows, tick is reported.
    apply_trusted(&ns, "proj", config(true, "30s", "30m")).await?;
    cronjob(&ns, &ping, "ping every 30m", |c| {
        c.spec.schedule == "*/30 * * * *" && !suspended(c)
    })
    .await?;
    let invalid = |what: &'static str| {
        move |c: &Channel| {
            c.status.as_ref().is_some_and(|s| {
                s.conditions.iter().any(|c| {
                    c.r#type == "SchedulesValid"
                        && c.status == model::resources::ConditionStatus::False
                        && c.message.contains(what)
                })
            })
        }
    };
    wait::matches(
        &ns.api::<Channel>(),
        "general",
        "SchedulesValid False naming 30s",
        WAIT,
        invalid("\"30s\""),
    )
    .await?;
    // The project stops enabling the plugin (with a second bad interval, 45s): every task of
    // the chat pauses, the broken one too, and the status says the plugin no longer runs.
    apply_trusted(&ns, "proj", config(false, "30s", "45s")).await?;
    instances_of(&ns, &id, 0).await?;
    wait::matches(
        &ns.api::<Channel>(),
        "general",
        "status: no plugin runs, SchedulesValid False naming 45s",
        WAIT,
        |c: &Channel| {
            invalid("\"45s\"")(c) && c.status.as_ref().is_some_and(|s| s.plugins.is_empty())
        },
    )
    .await?;
    cronjob(&ns, &tick, "tick paused", suspended).await?;
    cronjob(&ns, &ping, "ping paused", suspended).await?;
    // Enabled again, both entries still refused: both resume on their last valid schedules
    // (issue 32: they stayed paused for good), and the status says so.
    apply_trusted(&ns, "proj", config(true, "30s", "45s")).await?;
    cronjob(&ns, &tick, "tick resumed at 9", |c| {
        c.spec.schedule == "0 9 * * *" && !suspended(c)
    })
    .await?;
    cronjob(&ns, &ping, "ping resumed every 30m", |c| {
        c.spec.schedule == "*/30 * * * *" && !suspended(c)
    })
    .await?;
    wait::matches(
        &ns.api::<Channel>(),
        "general",
        "SchedulesValid False: both keep running on their last valid schedules",
        WAIT,
        |c: &Channel| {
            invalid("keeps running on its last valid schedule, cron 0 9 * * *")(c)
                && invalid("keeps running on its last valid schedule, cron */30 * * * *")(c)
        },
    )
    .await?;
    // Fixed and enabled again: both run at their new schedules, and the status says so.
    apply_trusted(&ns, "proj", config(true, "10m", "1h")).await?;
    cronjob(&ns, &tick, "tick every 10m", |c| {
        c.spec.schedule == "*/10 * * * *" && !suspended(c)
    })
    .await?;
    cronjob(&ns, &ping, "ping hourly", |c| {
        c.spec.schedule == "0 * * * *" && !suspended(c)
    })
    .await?;
    wait::matches(
        &ns.api::<Channel>(),
        "general",
        "SchedulesValid True",
        WAIT,
        |c: &Channel| {
            c.status.as_ref().is_some_and(|s| {
                s.plugins == [id.clone()]
                    && s.conditions.iter().any(|c| {
                        c.r#type == "SchedulesValid"
                            && c.status == model::resources::ConditionStatus::True
                    })
            })
        },
    )
    .await?;
    Ok(())
}

async fn hand_deleted_cronjob(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let id = world(
        &ns,
        "hd",
        &[("tick", cron_entry(None, ScheduleType::Cron, "0 9 * * *"))],
    )
    .await?;
    let tick = format!("{id}-general-tick");
    let first = cronjob(&ns, &tick, "tick exists", |_| true).await?;
    // Deleted by hand once the controller has recorded the entry as applied.
    wait::matches(
        &ns.api::<Channel>(),
        "general",
        "tick recorded as applied",
        WAIT,
        |c: &Channel| {
            c.status
                .as_ref()
                .is_some_and(|s| s.applied_schedules.iter().any(|a| a.action == "tick"))
        },
    )
    .await?;
    ns.api::<CronJob>()
        .delete(&tick, &DeleteParams::default())
        .await?;
    wait::deleted(&ns.api::<CronJob>(), &tick, WAIT).await?;
    // Nudge the chat: its reconcile must not bring the CronJob back.
    apply(
        &ns,
        &channel("general-t1", "proj", ChannelKind::Thread, Some("general")),
    )
    .await?;
    instances_of(&ns, &id, 2).await?;
    tokio::time::sleep(Duration::from_secs(3)).await;
    ensure!(
        ns.api::<CronJob>().get_opt(&tick).await?.is_none(),
        "the deleted CronJob came back unchanged"
    );
    // The entry changes: it comes back.
    let changed = cron_entry(None, ScheduleType::Cron, "0 10 * * *");
    apply_trusted(
        &ns,
        "proj",
        BTreeMap::from([(id.clone(), entry(true, &[("tick", changed)]))]),
    )
    .await?;
    let again = cronjob(&ns, &tick, "tick back at 10", |c| {
        c.spec.schedule == "0 10 * * *"
    })
    .await?;
    ensure!(again.uid() != first.uid());
    Ok(())
}

async fn removal(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let tick = [("tick", cron_entry(None, ScheduleType::Cron, "0 9 * * *"))];
    let kept = world(&ns, "rk", &tick).await?;
    let purged = plugin_id(&ns, "rp");
    let mut plugin = echo_plugin(&purged)?;
    plugin.spec.purge_on_delete = true;
    install(&ns, &plugin).await?;
    apply_trusted(
        &ns,
        "proj",
        BTreeMap::from([
            (kept.clone(), entry(true, &tick)),
            (purged.clone(), entry(true, &tick)),
        ]),
    )
    .await?;
    for id in [&kept, &purged] {
        instances_of(&ns, id, 1).await?;
        record_demand(&ns, &instance_name(id, "general")).await?;
        pods_of(&ns, &instance_name(id, "general"), 1, true).await?;
        cronjob(&ns, &format!("{id}-general-tick"), "tick exists", |_| true).await?;
        // A run of its hidden thread (queued: no runner is configured).
        apply(&ns, &crate::runs::run(id, &format!("{id}-run"), "hello")).await?;
    }
    let plugins: Api<Plugin> = Api::all(ns.client());
    for id in [&kept, &purged] {
        plugins.delete(id, &DeleteParams::default()).await?;
    }
    for id in [&kept, &purged] {
        pods_of(&ns, &instance_name(id, "general"), 0, false).await?;
        instances_of(&ns, id, 0).await?;
        wait::deleted(&ns.api::<CronJob>(), &format!("{id}-general-tick"), WAIT).await?;
        wait::deleted(&plugins, id, WAIT).await?;
    }
    wait::deleted(
        &ns.api::<PersistentVolumeClaim>(),
        &format!("data-{purged}-general"),
        WAIT,
    )
    .await?;
    ensure!(
        ns.api::<PersistentVolumeClaim>()
            .get_opt(&format!("data-{kept}-general"))
            .await?
            .is_some(),
        "kept data was deleted"
    );
    // Purge deletes the hidden thread's runs; a plain remove keeps them.
    let runs = ns.api::<model::resources::AgentRun>();
    wait::deleted(&runs, &format!("{purged}-run"), WAIT).await?;
    ensure!(
        runs.get_opt(&format!("{kept}-run")).await?.is_some(),
        "a plain remove deleted the plugin's runs"
    );
    Ok(())
}

async fn owner_deletion(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    let id = world(
        &ns,
        "ow",
        &[("tick", cron_entry(None, ScheduleType::Cron, "0 9 * * *"))],
    )
    .await?;
    apply(&ns, &channel("other", "proj", ChannelKind::Channel, None)).await?;
    instances_of(&ns, &id, 2).await?;
    cronjob(&ns, &format!("{id}-general-tick"), "tick exists", |_| true).await?;
    // Deleting a chat takes what hung from it: its instance, data claim and CronJobs.
    ns.api::<Channel>()
        .delete("general", &DeleteParams::background())
        .await?;
    wait::deleted(
        &ns.api::<PluginInstance>(),
        &instance_name(&id, "general"),
        WAIT,
    )
    .await?;
    wait::deleted(&ns.api::<CronJob>(), &format!("{id}-general-tick"), WAIT).await?;
    wait::deleted(
        &ns.api::<PersistentVolumeClaim>(),
        &format!("data-{id}-general"),
        WAIT,
    )
    .await?;
    // Deleting the project: its chats run nothing.
    ns.api::<Project>()
        .delete("proj", &DeleteParams::background())
        .await?;
    instances_of(&ns, &id, 0).await?;
    wait::deleted(&ns.api::<CronJob>(), &format!("{id}-other-tick"), WAIT).await?;
    Ok(())
}

async fn host_switch(ns: Ns) -> anyhow::Result<()> {
    let _exclusive = exclusive().await;
    let id = world(&ns, "hs", &[]).await?;
    let name = instance_name(&id, "general");
    instances_of(&ns, &id, 1).await?;
    record_demand(&ns, &name).await?;
    pods_of(&ns, &name, 1, true).await?;
    apply_host(ns.client(), host_spec(false)).await?;
    let result = async {
        pods_of(&ns, &name, 0, false).await?;
        instances_of(&ns, &id, 0).await?;
        let plugins: Api<Plugin> = Api::all(ns.client());
        wait::matches(
            &plugins,
            &id,
            "Admitted False, PluginsDisabled",
            WAIT,
            |p: &Plugin| {
                p.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.r#type == "Admitted" && c.reason == "PluginsDisabled")
                })
            },
        )
        .await?;
        anyhow::Ok(())
    }
    .await;
    apply_host(ns.client(), host_spec(true)).await?;
    result?;
    instances_of(&ns, &id, 1).await?;
    Ok(())
}

async fn restart(ns: Ns) -> anyhow::Result<()> {
    let _exclusive = exclusive().await;
    let id = world(
        &ns,
        "rs",
        &[("tick", cron_entry(None, ScheduleType::Cron, "0 9 * * *"))],
    )
    .await?;
    instances_of(&ns, &id, 1).await?;
    // Twenty more chats at once, and the controller dies while it converges them.
    let chats: Vec<String> = (0..20).map(|i| format!("chat-{i}")).collect();
    for chat in &chats {
        apply(&ns, &channel(chat, "proj", ChannelKind::Channel, None)).await?;
    }
    restart_controller(&ns, tokio::time::sleep(Duration::from_millis(300))).await?;
    // Exactly one of each per chat: names are deterministic, so a duplicate would show as a
    // count above 21 that never settles, and a leak as objects of chats that do not exist.
    instances_of(&ns, &id, 21).await?;
    let label = format!("plugins.loop.dev/plugin={id}");
    list_until(
        &ns.api::<CronJob>(),
        Some(&label),
        "21 CronJobs",
        WAIT,
        |all| all.len() == 21,
    )
    .await?;
    list_until(
        &ns.api::<PersistentVolumeClaim>(),
        Some(&label),
        "21 data claims",
        WAIT,
        |all| all.len() == 21,
    )
    .await?;
    list_until(
        &ns.api::<Secret>(),
        Some(&label),
        "21 Secrets, none leaked",
        WAIT,
        |all| all.len() == 21,
    )
    .await?;
    Ok(())
}

/// 50 chats and 2 plugins, converged: over 30 seconds the API server's audit log records no
/// write by the controller's identity to anything of this test's.
async fn steady_state(ns: Ns) -> anyhow::Result<()> {
    let _shared = shared().await;
    setup(&ns).await?;
    let ids = [plugin_id(&ns, "s1"), plugin_id(&ns, "s2")];
    for id in &ids {
        install(&ns, &echo_plugin(id)?).await?;
    }
    let tick = [("tick", cron_entry(None, ScheduleType::Cron, "0 9 * * *"))];
    let config = ids
        .iter()
        .map(|id| (id.clone(), entry(true, &tick)))
        .collect();
    apply_trusted(&ns, "proj", config).await?;
    for i in 0..50 {
        apply(
            &ns,
            &channel(&format!("chat-{i}"), "proj", ChannelKind::Channel, None),
        )
        .await?;
    }
    let converged = |all: &[PluginInstance]| {
        all.len() == 100
            && all
                .iter()
                .all(|i| i.status.as_ref().and_then(|s| s.phase) == Some(InstancePhase::Stopped))
    };
    list_until(
        &ns.api::<PluginInstance>(),
        None,
        "100 instances, all Stopped",
        Duration::from_secs(120),
        converged,
    )
    .await?;
    list_until(
        &ns.api::<Channel>(),
        None,
        "50 chats with both plugins",
        WAIT,
        |all| {
            all.len() == 50
                && all.iter().all(|c| {
                    c.status
                        .as_ref()
                        .is_some_and(|s| s.plugins.len() == 2 && s.applied_schedules.len() == 2)
                })
        },
    )
    .await?;
    list_until(&ns.api::<CronJob>(), None, "100 CronJobs", WAIT, |all| {
        all.len() == 100
    })
    .await?;
    // Let the last status writes and Events land, then watch 30 seconds of steady state.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let audit = ns
        .cluster()
        .dev()?
        .control_plane()
        .audit_log()
        .to_path_buf();
    let start = std::fs::metadata(&audit)?.len();
    tokio::time::sleep(Duration::from_secs(30)).await;
    let text = std::fs::read(&audit)?;
    let window = String::from_utf8_lossy(&text[start as usize..]);
    let user = controller_user();
    let mut writes = vec![];
    let mut seen = 0usize;
    for line in window.lines() {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        seen += 1;
        let verb = event["verb"].as_str().unwrap_or_default();
        let by_controller = event["user"]["username"].as_str() == Some(user.as_str());
        let object = &event["objectRef"];
        let ours = object["namespace"].as_str() == Some(ns.name())
            || ids
                .iter()
                .any(|id| object["name"].as_str() == Some(id.as_str()));
        if by_controller
            && ours
            && matches!(
                verb,
                "create" | "update" | "patch" | "delete" | "deletecollection"
            )
        {
            writes.push(format!("{verb} {}/{}", object["resource"], object["name"]));
        }
    }
    ensure!(
        seen > 0,
        "the audit log recorded nothing in 30 s; is it on?"
    );
    ensure!(
        writes.is_empty(),
        "the controller wrote {} times in steady state: {writes:?}",
        writes.len()
    );
    Ok(())
}

/// A run that ends while no API server runs: once one leads the fan-out, `POST
/// /runs/{id}/done` reaches the plugin, exactly once, also across a restart of the server.
async fn done_once(ns: Ns) -> anyhow::Result<()> {
    use model::resources::{AgentRun, AgentRunSpec};
    // Alone: no other test's API server may lead the fan-out meanwhile.
    let _exclusive = exclusive().await;
    let id = world(&ns, "dn", &[]).await?;
    let instance = instance_name(&id, "general");
    instances_of(&ns, &id, 1).await?;
    let mut run = AgentRun::new(
        "run-1",
        AgentRunSpec {
            plugin: id.clone(),
            channel: "general".into(),
            thread: format!("plugin:{id}"),
            agent: "say".into(),
            read_only: true,
            tools: vec!["plugin_echo".into()],
            prompt: "say hello".into(),
        },
    );
    // As POST /runs labels it.
    let mut labels = model::names::labels(&id, "proj", "general", "run");
    labels.insert(model::names::LABEL_INSTANCE.into(), instance.clone());
    run.metadata.labels = Some(labels);
    apply(&ns, &run).await?;
    let runs = ns.api::<AgentRun>();
    let patch = serde_json::json!({ "status": { "phase": "Succeeded", "result": "hello" } });
    runs.patch_status("run-1", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let host = crate::host::host(&ns).await?;
    wait::matches(
        &runs,
        "run-1",
        "/done delivered",
        Duration::from_secs(90),
        |r: &AgentRun| r.status.as_ref().is_some_and(|s| s.done_delivered),
    )
    .await?;
    // A restart of the server delivers nothing again.
    drop(host);
    let host = crate::host::host(&ns).await?;
    let token = crate::host::caller_token(&ns, "app", crate::host::Grant::All).await?;
    let caller = crate::host::Caller::new(&host, &ns, Some(token));
    let until = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let done = caller.journal("general", &id, "/runs/run-1/done").await?;
        ensure!(
            done.len() == 1,
            "/done reached the plugin {} times: {done:?}",
            done.len()
        );
        ensure!(
            done[0]["body"]["status"] == "done" && done[0]["body"]["result"] == "hello",
            "{done:?}"
        );
        if tokio::time::Instant::now() > until {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    pods_of(&ns, &instance, 1, true).await?;
    Ok(())
}
