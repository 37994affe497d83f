//! The PluginInstance reconciler against a mocked API server: the Secret made once, a Pod only
//! on demand, no write once converged, a hand edit undone, and a failed or evicted Pod
//! replaced.

use k8s_openapi::api::core::v1::{Pod, PodCondition, PodStatus, Secret};
use model::resources::{PluginInstanceStatus, SwitchState};
use serde_json::Value;

use super::fixtures::*;
use super::verifier::Call;
use crate::instance::reconcile;

fn now() -> String {
    model::time::now_rfc3339()
}

/// The instance, with demand recorded a moment ago when `wanted`.
fn world_with_instance(wanted: bool) -> World {
    let mut world = World::echo();
    let mut instance = instance();
    if wanted {
        instance.status = Some(PluginInstanceStatus {
            last_activity: Some(now()),
            ..Default::default()
        });
    }
    world.instances = vec![instance];
    world
}

fn phase(status: &Value) -> &str {
    status["status"]["phase"].as_str().unwrap_or_default()
}

/// Puts the status write (a merge patch) on the instance, as the API server would: the API
/// server's part (its last activity) stays.
fn record_status(world: &mut World, body: &Value) {
    let instance = &mut world.instances[0];
    let before = serde_json::to_value(instance.status.clone().unwrap_or_default())
        .expect("statuses serialize");
    let after = crate::write::merge_patch::tests::apply(&before, &body["status"]);
    let written: PluginInstanceStatus = serde_json::from_value(after).expect("an instance status");
    instance.status = Some(written);
}

fn ready(mut pod: Pod) -> Pod {
    pod.status = Some(PodStatus {
        phase: Some("Running".into()),
        conditions: Some(vec![PodCondition {
            type_: "Ready".into(),
            status: "True".into(),
            ..Default::default()
        }]),
        ..Default::default()
    });
    pod
}

/// A wanted instance whose Secret and Ready Pod exist and whose status says so.
async fn running() -> World {
    let mut world = world_with_instance(true);
    let instance = to_json(&world.instances[0]);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::create(collection("secrets")),
        Call::create(collection("pods")),
        Call::event(NS, "Started"),
        Call::status(path("plugininstances", "echo-general"), instance.clone()),
    ]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    let bodies = verifier.done().await;
    world.secrets = vec![from_body::<Secret>(&bodies[0])];
    world.pods = vec![ready(from_body::<Pod>(&bodies[1]))];
    record_status(&mut world, &bodies[3]);
    // The Pod became Ready: the next reconcile says so.
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::status(path("plugininstances", "echo-general"), instance)
            .body(|b| assert_eq!(phase(b), "Running")),
    ]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    let bodies = verifier.done().await;
    record_status(&mut world, &bodies[0]);
    world
}

#[tokio::test]
async fn the_first_reconcile_makes_the_secret_and_no_pod_until_needed() {
    let world = world_with_instance(false);
    let instance = to_json(&world.instances[0]);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::create(collection("secrets")).body(|b| {
            assert_eq!(b["metadata"]["name"], "echo-general-token");
            assert_eq!(b["immutable"], true);
            for key in ["token", "secret"] {
                let value = b["data"][key].as_str().expect("base64");
                assert_eq!(value.len(), 88, "32 random bytes, hex, base64: {key}");
            }
        }),
        Call::status(path("plugininstances", "echo-general"), instance).body(|b| {
            assert_eq!(phase(b), "Stopped");
            assert!(
                b["status"].get("lastActivity").is_none(),
                "not ours to write"
            );
        }),
    ]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
}

// Woken again before its cache shows the Secret it made: it makes no second one (issue 41:
// at a cold start the API server refused a few Secrets as AlreadyExists).
#[tokio::test]
async fn a_reconcile_before_the_cache_shows_the_secret_makes_it_no_second_time() {
    let world = world_with_instance(false);
    let instance = to_json(&world.instances[0]);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::create(collection("secrets")),
        Call::status(path("plugininstances", "echo-general"), instance),
    ]);
    reconcile(world.instance("echo-general"), ctx.clone())
        .await
        .unwrap();
    verifier.done().await;
    // The same stores: neither the Secret nor the status shows yet. Any call now finds
    // nobody to answer it, and fails the reconcile.
    reconcile(world.instance("echo-general"), ctx)
        .await
        .expect("no write, so nothing to fail");
}

/// With HostConfig naming registry credentials, the pull Secret is written first (the Pod
/// names it), then the instance's Secret, then the Pod that names both.
#[tokio::test]
async fn the_pull_secret_goes_first_and_the_pod_names_it() {
    let mut world = world_with_instance(true);
    world
        .host
        .as_mut()
        .unwrap()
        .spec
        .plugins
        .registry
        .credentials_secret = Some("regcred".into());
    let mut credentials = Secret::default();
    credentials.metadata.name = Some("regcred".into());
    credentials.metadata.namespace = Some("loop-plugins-system".into());
    credentials.data = Some(
        [(
            ".dockerconfigjson".to_string(),
            k8s_openapi::ByteString(br#"{"auths":{}}"#.to_vec()),
        )]
        .into(),
    );
    world.registry_secrets = vec![credentials];
    let instance = to_json(&world.instances[0]);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::create(collection("secrets")).body(|b| {
            assert_eq!(b["metadata"]["name"], "echo-general-pull");
            assert_eq!(b["type"], "kubernetes.io/dockerconfigjson");
        }),
        Call::create(collection("secrets"))
            .body(|b| assert_eq!(b["metadata"]["name"], "echo-general-token")),
        Call::create(collection("pods")).body(|b| {
            assert_eq!(
                b["spec"]["imagePullSecrets"][0]["name"],
                "echo-general-pull"
            )
        }),
        Call::event(NS, "Started"),
        Call::status(path("plugininstances", "echo-general"), instance),
    ]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
}

#[tokio::test]
async fn demand_starts_a_pod_running_the_image_by_digest() {
    let world = world_with_instance(true);
    let instance = to_json(&world.instances[0]);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::create(collection("secrets")),
        Call::create(collection("pods")).body(|b| {
            let container = &b["spec"]["containers"][0];
            assert_eq!(
                container["image"],
                format!("registry.local/echo@sha256:{}", "0".repeat(64))
            );
            assert_eq!(
                b["metadata"]["ownerReferences"][0]["kind"],
                "PluginInstance"
            );
        }),
        Call::event(NS, "Started"),
        Call::status(path("plugininstances", "echo-general"), instance)
            .body(|b| assert_eq!(phase(b), "Starting")),
    ]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
}

#[tokio::test]
async fn a_running_instance_makes_no_write() {
    let world = running().await;
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .expect("no write, so nothing to fail");
    verifier.done().await;
}

#[tokio::test]
async fn a_hand_edited_pod_is_applied_again() {
    let mut world = running().await;
    let pod_name = world.pods[0].metadata.name.clone().unwrap();
    let labels = world.pods[0].metadata.labels.as_mut().unwrap();
    labels.insert("app.kubernetes.io/component".into(), "edited".into());
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![Call::apply(path("pods", &pod_name)).body(|b| {
        assert_eq!(
            b["metadata"]["labels"]["app.kubernetes.io/component"],
            "plugin"
        )
    })]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
}

#[tokio::test]
async fn a_hand_edited_secret_label_is_applied_again_with_the_same_token() {
    let mut world = running().await;
    let token = serde_json::to_value(&world.secrets[0].data.as_ref().unwrap()["token"]).unwrap();
    let labels = world.secrets[0].metadata.labels.as_mut().unwrap();
    labels.remove("plugins.loop.dev/channel");
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::apply(path("secrets", "echo-general-token")).body(move |b| {
            assert_eq!(
                b["metadata"]["labels"]["plugins.loop.dev/channel"],
                "general"
            );
            assert_eq!(b["data"]["token"], token, "the token stays");
        }),
    ]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
}

/// The Secret of an earlier instance of the same name (deleted and made again before garbage
/// collection removed its Secret) is deleted, not adopted: its token must not work for the new
/// instance. (Seen on kind: the Secret was re-owned by the new instance, and the removed
/// instance's token kept working.)
#[tokio::test]
async fn the_secret_of_an_earlier_instance_is_replaced_not_adopted() {
    let mut world = running().await;
    world.secrets[0].metadata.owner_references.as_mut().unwrap()[0].uid = "uid-earlier".into();
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![Call::delete(path("secrets", "echo-general-token"))]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
    // Once it is gone, a Secret with a fresh token is made.
    world.secrets.clear();
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![Call::create(collection("secrets"))]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
}

#[tokio::test]
async fn an_evicted_pod_is_replaced() {
    let mut world = running().await;
    let pod_name = world.pods[0].metadata.name.clone().unwrap();
    let instance = to_json(&world.instances[0]);
    // What the kubelet writes when it evicts a Pod.
    let status = world.pods[0].status.as_mut().unwrap();
    status.phase = Some("Failed".into());
    status.reason = Some("Evicted".into());
    status.message = Some("The node was low on resource: memory.".into());
    status.conditions = None;
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::delete(path("pods", &pod_name)),
        Call::event(NS, "PodFailed"),
        Call::status(path("plugininstances", "echo-general"), instance.clone()).body(|b| {
            assert_eq!(phase(b), "Starting");
            assert!(b["status"]["pod"].is_null(), "{b}");
        }),
    ]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    let bodies = verifier.done().await;
    record_status(&mut world, &bodies[2]);
    // Once it is gone, a new one starts.
    world.pods.clear();
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::create(collection("pods")),
        Call::event(NS, "Started"),
    ]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
}

#[tokio::test]
async fn a_pod_that_failed_is_replaced() {
    let mut world = running().await;
    let pod_name = world.pods[0].metadata.name.clone().unwrap();
    let instance = to_json(&world.instances[0]);
    world.pods[0].status.as_mut().unwrap().phase = Some("Failed".into());
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::delete(path("pods", &pod_name)),
        Call::event(NS, "PodFailed"),
        Call::status(path("plugininstances", "echo-general"), instance),
    ]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
}

/// The instance with only these switches on: no activity recorded.
fn world_with_switches(on: &[&str]) -> World {
    let mut world = world_with_instance(false);
    world.instances[0].status = Some(PluginInstanceStatus {
        switches: on
            .iter()
            .map(|id| SwitchState {
                id: (*id).into(),
                on: true,
                title: None,
                error: false,
                busy: false,
            })
            .collect(),
        ..Default::default()
    });
    world
}

/// The calls of a reconcile that starts no Pod: the Secret, and the status Stopped.
fn no_pod(world: &World) -> Vec<Call> {
    vec![
        Call::create(collection("secrets")),
        Call::status(
            path("plugininstances", "echo-general"),
            to_json(&world.instances[0]),
        )
        .body(|b| assert_eq!(phase(b), "Stopped")),
    ]
}

#[tokio::test]
async fn a_switch_that_is_on_starts_a_pod_when_the_controller_starts() {
    let world = world_with_switches(&["mode"]);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::create(collection("secrets")),
        Call::create(collection("pods")),
        Call::event(NS, "Started"),
        Call::status(
            path("plugininstances", "echo-general"),
            to_json(&world.instances[0]),
        ),
    ]);
    let action = reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    // It looks again when the start window closes.
    assert_ne!(action, kube::runtime::controller::Action::await_change());
    verifier.done().await;
}

#[tokio::test]
async fn a_switch_that_is_on_no_longer_keeps_a_pod_past_the_start_window() {
    let world = world_with_switches(&["mode"]);
    let started = jiff::Timestamp::now() - jiff::SignedDuration::from_secs(601);
    let (ctx, server) = world.context_started(started);
    let verifier = server.expect(no_pod(&world));
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
}

#[tokio::test]
async fn stale_switch_state_starts_nothing() {
    // A switch the manifest does not declare.
    let world = world_with_switches(&["ghost"]);
    let (ctx, server) = world.context();
    let verifier = server.expect(no_pod(&world));
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
    // ui.composer_switch no longer approved.
    let mut world = world_with_switches(&["mode"]);
    world.plugins = vec![plugin_with(echo_manifest(), &["schedule", "live.control"])];
    let (ctx, server) = world.context();
    let verifier = server.expect(no_pod(&world));
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
}

#[tokio::test]
async fn a_live_hold_counts_only_while_live_control_is_approved() {
    let mut world = world_with_instance(false);
    world.instances[0].status = Some(PluginInstanceStatus {
        live_hold: true,
        ..Default::default()
    });
    world.plugins = vec![plugin_with(
        echo_manifest(),
        &["schedule", "ui.composer_switch"],
    )];
    let (ctx, server) = world.context();
    let verifier = server.expect(no_pod(&world));
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
}

#[tokio::test]
async fn refused_settings_are_shown_with_their_source_and_why() {
    let mut world = world_with_instance(false);
    let mut config = model::config::PluginConfig {
        enabled: Some(true),
        ..Default::default()
    };
    config
        .settings
        .insert("count".into(), serde_json::json!(11));
    config
        .settings
        .insert("colour".into(), serde_json::json!("red"));
    world.projects = vec![project_with(config.clone())];
    world.trusts = vec![trust_with(config)];
    let global = model::config::PluginConfig {
        settings: [("count".to_string(), serde_json::json!("many"))].into(),
        ..Default::default()
    };
    world.host.as_mut().unwrap().spec.plugins.defaults = [("echo".to_string(), global)].into();
    let instance = to_json(&world.instances[0]);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::create(collection("secrets")),
        Call::status(path("plugininstances", "echo-general"), instance.clone()).body(|b| {
            let refused = &b["status"]["refusedSettings"];
            let shown: Vec<(&str, &str, &Value)> = refused
                .as_array()
                .expect("refused settings")
                .iter()
                .map(|r| {
                    (
                        r["setting"].as_str().unwrap(),
                        r["source"].as_str().unwrap(),
                        &r["value"],
                    )
                })
                .collect();
            assert_eq!(
                shown,
                [
                    ("count", "global", &serde_json::json!("many")),
                    ("colour", "project", &serde_json::json!("red")),
                    ("count", "project", &serde_json::json!(11)),
                ]
            );
            assert_eq!(
                refused[1]["reason"],
                "the manifest declares no such setting"
            );
            assert!(
                refused[2]["reason"]
                    .as_str()
                    .unwrap()
                    .starts_with("its schema refuses it: "),
                "{refused}"
            );
            let valid = b["status"]["conditions"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["type"] == "SettingsValid")
                .expect("a SettingsValid condition");
            assert_eq!(valid["status"], "False");
            assert_eq!(valid["reason"], "SettingsLeftOut");
        }),
        Call::event(NS, "SettingsLeftOut"),
    ]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    let bodies = verifier.done().await;
    record_status(&mut world, &bodies[1]);
    world.secrets = vec![from_body::<Secret>(&bodies[0])];

    // The project fixes its values and the global one goes: nothing is left out any more.
    world.projects = vec![project(true)];
    world.trusts = vec![trust(true)];
    world.host.as_mut().unwrap().spec.plugins.defaults.clear();
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::status(path("plugininstances", "echo-general"), instance).body(|b| {
            assert!(b["status"]["refusedSettings"].is_null(), "{b}");
        }),
        Call::event(NS, "SettingsApplied"),
    ]);
    reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
}
