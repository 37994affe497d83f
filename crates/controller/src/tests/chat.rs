//! The Channel reconciler against a mocked API server: what it makes on the first reconcile,
//! that a converged chat makes no write, that a hand edit of a child is undone, and that one
//! refused write stops nothing else.

use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::runtime::controller::Action;
use model::resources::{ChannelStatus, PluginInstance};
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
