//! The Channel reconciler against a mocked API server: what it makes on the first reconcile,
//! that a converged chat makes no write, that a hand edit of a child is undone, that one
//! refused write stops nothing else, and that a task whose entry is refused pauses and resumes
//! on its last valid schedule.

use std::collections::BTreeMap;

use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::runtime::controller::Action;
use model::config::{PluginConfig, ScheduleEntry};
use model::resources::{ChannelStatus, PluginInstance};
use model::schedule::ScheduleType;
use serde_json::Value;

use super::fixtures::*;
use super::verifier::{Answer, Call};
use crate::chat::reconcile;

/// The calls of the first reconcile of `general` in [`World::echo`].
fn first_calls(world: &World) -> Vec<Call> {
    let channel = to_json(world.channel("general").as_ref());
    vec![
        Call::create(collection("persistentvolumeclaims")).body(|b| {
            assert_eq!(b["spec"]["resources"]["requests"]["storage"], "1Gi");
            assert_eq!(b["metadata"]["ownerReferences"][0]["kind"], "Channel");
        }),
        Call::create(collection("plugininstances")).body(|b| {
            assert_eq!(b["spec"]["plugin"], "echo");
            assert_eq!(b["spec"]["channel"], "general");
        }),
        Call::event(NS, "PluginEnabled"),
        Call::create(collection("cronjobs")).body(|b| {
            assert_eq!(b["spec"]["schedule"], "*/5 * * * *");
            assert_eq!(b["spec"]["suspend"], false);
        }),
        Call::status(path("channels", "general"), channel).body(|b| {
            let status = &b["status"];
            assert_eq!(status["plugins"], serde_json::json!(["echo"]));
            assert_eq!(status["appliedSchedules"][0]["action"], "tick");
            assert_eq!(condition(status, "SchedulesValid")["status"], "True");
            assert_eq!(condition(status, "Applied")["status"], "True");
        }),
    ]
}

fn condition<'a>(status: &'a Value, kind: &str) -> &'a Value {
    status["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == kind))
        .unwrap_or_else(|| panic!("no {kind} condition in {status}"))
}

/// The world after the first reconcile: its writes, as the API server serves them.
async fn converged() -> World {
    let mut world = World::echo();
    let (ctx, server) = world.context();
    let verifier = server.expect(first_calls(&world));
    reconcile(world.channel("general"), ctx)
        .await
        .expect("the first reconcile");
    let bodies = verifier.done().await;
    world.claims = vec![from_body::<PersistentVolumeClaim>(&bodies[0])];
    world.instances = vec![from_body::<PluginInstance>(&bodies[1])];
    world.cronjobs = vec![from_body::<CronJob>(&bodies[3])];
    let status: ChannelStatus =
        serde_json::from_value(bodies[4]["status"].clone()).expect("a ChannelStatus");
    world.channels[0].status = Some(status);
    world.channels[0].metadata.resource_version = Some("2".into());
    world
}

#[tokio::test]
async fn the_first_reconcile_makes_the_claim_the_instance_the_task_and_applies_the_status() {
    let world = World::echo();
    let (ctx, server) = world.context();
    let verifier = server.expect(first_calls(&world));
    let action = reconcile(world.channel("general"), ctx).await.unwrap();
    assert_eq!(action, Action::await_change());
    verifier.done().await;
}

// Woken again (an admission verdict wakes every chat, its status write's echo) before its
// cache shows what the first reconcile made: it makes none of it again (issue 41: at a cold
// start the API server refused a few instances as AlreadyExists).
#[tokio::test]
async fn a_reconcile_before_the_cache_shows_the_first_ones_writes_makes_nothing_again() {
    let world = World::echo();
    let (ctx, server) = world.context();
    let verifier = server.expect(first_calls(&world));
    reconcile(world.channel("general"), ctx.clone())
        .await
        .expect("the first reconcile");
    verifier.done().await;
    // The same stores: nothing of the first reconcile shows yet. Any call now finds nobody to
    // answer it, and fails the reconcile.
    reconcile(world.channel("general"), ctx)
        .await
        .expect("no write, so nothing to fail");
}

#[tokio::test]
async fn a_converged_chat_makes_no_write() {
    let world = converged().await;
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![]);
    reconcile(world.channel("general"), ctx)
        .await
        .expect("no write, so nothing to fail");
    verifier.done().await;
}

#[tokio::test]
async fn a_hand_edited_task_is_applied_again_though_its_annotations_match() {
    let mut world = converged().await;
    // kubectl edit: another schedule and suspended; every annotation left as it was.
    world.cronjobs[0].spec.schedule = "0 3 * * *".into();
    world.cronjobs[0].spec.suspend = Some(true);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::apply(path("cronjobs", "echo-general-tick")).body(|b| {
            assert_eq!(b["spec"]["schedule"], "*/5 * * * *");
            assert_eq!(b["spec"]["suspend"], false);
        }),
    ]);
    reconcile(world.channel("general"), ctx).await.unwrap();
    verifier.done().await;
}

#[tokio::test]
async fn a_hand_edited_claim_label_is_applied_again() {
    let mut world = converged().await;
    let labels = world.claims[0].metadata.labels.as_mut().unwrap();
    labels.insert("plugins.loop.dev/project".into(), "other".into());
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::apply(path("persistentvolumeclaims", "data-echo-general"))
            .body(|b| assert_eq!(b["metadata"]["labels"]["plugins.loop.dev/project"], "proj")),
    ]);
    reconcile(world.channel("general"), ctx).await.unwrap();
    verifier.done().await;
}

#[tokio::test]
async fn a_plugin_without_the_schedule_capability_approved_gets_no_task() {
    let mut world = World::echo();
    world.plugins = vec![plugin_with(echo_manifest(), &["ui.composer_switch"])];
    let channel = to_json(world.channel("general").as_ref());
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::create(collection("persistentvolumeclaims")),
        Call::create(collection("plugininstances")),
        Call::event(NS, "PluginEnabled"),
        Call::status(path("channels", "general"), channel).body(|b| {
            let valid = condition(&b["status"], "SchedulesValid");
            assert_eq!(valid["status"], "False");
            assert!(
                valid["message"]
                    .as_str()
                    .unwrap()
                    .contains("the schedule capability is not approved"),
                "{valid}"
            );
        }),
        Call::event(NS, "InvalidSchedule"),
    ]);
    reconcile(world.channel("general"), ctx).await.unwrap();
    verifier.done().await;
}

#[tokio::test]
async fn a_refused_task_stops_nothing_else_and_the_status_names_it() {
    let world = World::echo();
    let channel = to_json(world.channel("general").as_ref());
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::create(collection("persistentvolumeclaims")),
        Call::create(collection("plugininstances")),
        Call::event(NS, "PluginEnabled"),
        Call::create(collection("cronjobs")).answer(Answer::Fail(422, "Invalid")),
        Call::status(path("channels", "general"), channel).body(|b| {
            let status = &b["status"];
            assert_eq!(status["plugins"], serde_json::json!(["echo"]));
            // Not made, so not recorded: the next reconcile makes it again.
            assert!(status.get("appliedSchedules").is_none(), "{status}");
            let applied = condition(status, "Applied");
            assert_eq!(applied["status"], "False");
            assert_eq!(applied["reason"], "ApplyFailed");
            assert_eq!(
                applied["message"],
                "creating CronJob echo-general-tick: refused: Invalid (422)"
            );
        }),
        Call::event(NS, "ApplyFailed"),
    ]);
    let err = reconcile(world.channel("general"), ctx)
        .await
        .expect_err("the refused write fails the reconcile");
    assert!(err.is_permanent(), "422 waits for a change: {err}");
    verifier.done().await;
}

/// The project's config for echo, trusted: on or off, its `tick` entry as given.
fn trusted(world: &mut World, enabled: bool, tick: ScheduleEntry) {
    let config = PluginConfig {
        enabled: Some(enabled),
        schedules: BTreeMap::from([("tick".into(), tick)]),
        ..Default::default()
    };
    world.projects = vec![project_with(config.clone())];
    world.trusts = vec![trust_with(config)];
}

/// Reconciles `general` expecting `calls`; the world then holds what they wrote.
async fn step(world: &mut World, calls: Vec<Call>) {
    let (ctx, server) = world.context();
    let paths: Vec<(String, String)> = calls.iter().map(Call::target).collect();
    let verifier = server.expect(calls);
    reconcile(world.channel("general"), ctx)
        .await
        .expect("the reconcile");
    for ((method, path), body) in paths.iter().zip(verifier.done().await) {
        match (method.as_str(), path.as_str()) {
            ("DELETE", p) if p.contains("/plugininstances/") => world.instances.clear(),
            ("POST", p) if p.ends_with("/plugininstances") => {
                world.instances = vec![from_body(&body)]
            }
            ("PATCH", p) if p.contains("/cronjobs/") => world.cronjobs = vec![from_body(&body)],
            ("PATCH", p) if p.ends_with("/status") => {
                let before = to_json(&world.channels[0].status);
                let after = crate::write::merge_patch::tests::apply(&before, &body["status"]);
                world.channels[0].status = Some(serde_json::from_value(after).expect("a status"));
            }
            _ => {}
        }
    }
}

fn suspended(world: &World) -> bool {
    world.cronjobs[0].spec.suspend == Some(true)
}

fn schedules_valid(world: &World) -> String {
    let status = to_json(&world.channels[0].status);
    condition(&status, "SchedulesValid")["message"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Issue 32, as a new user met it: an entry no schedule can mean, then the project stops
/// enabling the plugin and enables it again. The task keeps its last valid schedule running,
/// pauses with the plugin and resumes with it, as any task does; the status says which.
#[tokio::test]
async fn a_task_whose_entry_is_refused_pauses_and_resumes_on_its_last_valid_schedule() {
    let mut world = converged().await;
    let channel = |w: &World| to_json(w.channel("general").as_ref());
    let refused = ScheduleEntry {
        enabled: None,
        kind: Some(ScheduleType::Cron),
        schedule: Some("61 25 * * *".into()),
    };
    // Refused: the task runs on as it was, and the status says so.
    trusted(&mut world, true, refused.clone());
    let calls = vec![
        Call::status(path("channels", "general"), channel(&world)),
        Call::event(NS, "InvalidSchedule"),
    ];
    step(&mut world, calls).await;
    assert!(!suspended(&world));
    let message = schedules_valid(&world);
    assert!(message.contains("\"61 25 * * *\""), "{message}");
    assert!(
        message.contains("its task keeps running on its last valid schedule, cron */5 * * * *,"),
        "{message}"
    );
    // The project stops enabling the plugin: paused, and the status says so.
    trusted(&mut world, false, refused.clone());
    let calls = vec![
        Call::delete(path("plugininstances", "echo-general")),
        Call::event(NS, "PluginDisabled"),
        Call::apply(path("cronjobs", "echo-general-tick"))
            .body(|b| assert_eq!(b["spec"]["suspend"], true)),
        Call::status(path("channels", "general"), channel(&world)),
        Call::event(NS, "InvalidSchedule"),
    ];
    step(&mut world, calls).await;
    assert!(suspended(&world));
    let message = schedules_valid(&world);
    assert!(
        message.contains("is paused while the project does not enable the plugin"),
        "{message}"
    );
    // Enabled again, the entry still refused: resumed on its last valid schedule.
    trusted(&mut world, true, refused);
    let calls = vec![
        Call::create(collection("plugininstances")),
        Call::event(NS, "PluginEnabled"),
        Call::apply(path("cronjobs", "echo-general-tick")).body(|b| {
            assert_eq!(b["spec"]["suspend"], false);
            assert_eq!(b["spec"]["schedule"], "*/5 * * * *");
        }),
        Call::status(path("channels", "general"), channel(&world)),
        Call::event(NS, "InvalidSchedule"),
    ];
    step(&mut world, calls).await;
    assert!(!suspended(&world));
    assert!(schedules_valid(&world).contains("keeps running"));
    // And stays so: nothing more to write.
    step(&mut world, vec![]).await;
}

/// A task its last valid entry turned off stays off through a pause and resume, whatever
/// its entry says now.
#[tokio::test]
async fn a_task_turned_off_by_its_last_valid_entry_stays_off_through_a_pause_and_resume() {
    let mut world = converged().await;
    let channel = |w: &World| to_json(w.channel("general").as_ref());
    let off = ScheduleEntry {
        enabled: Some(false),
        ..Default::default()
    };
    trusted(&mut world, true, off);
    let calls = vec![
        Call::apply(path("cronjobs", "echo-general-tick"))
            .body(|b| assert_eq!(b["spec"]["suspend"], true)),
        Call::status(path("channels", "general"), channel(&world)),
    ];
    step(&mut world, calls).await;
    let refused = ScheduleEntry {
        enabled: Some(true),
        kind: Some(ScheduleType::Interval),
        schedule: Some("30s".into()),
    };
    trusted(&mut world, true, refused.clone());
    let calls = vec![
        Call::status(path("channels", "general"), channel(&world)),
        Call::event(NS, "InvalidSchedule"),
    ];
    step(&mut world, calls).await;
    assert!(suspended(&world));
    let message = schedules_valid(&world);
    assert!(
        message.contains("turned off as that entry says"),
        "{message}"
    );
    trusted(&mut world, false, refused.clone());
    let calls = vec![
        Call::delete(path("plugininstances", "echo-general")),
        Call::event(NS, "PluginDisabled"),
        Call::status(path("channels", "general"), channel(&world)),
        Call::event(NS, "InvalidSchedule"),
    ];
    step(&mut world, calls).await;
    trusted(&mut world, true, refused);
    let calls = vec![
        Call::create(collection("plugininstances")),
        Call::event(NS, "PluginEnabled"),
        Call::status(path("channels", "general"), channel(&world)),
        Call::event(NS, "InvalidSchedule"),
    ];
    step(&mut world, calls).await;
    assert!(suspended(&world), "still off");
}
