//! The Plugin reconciler against a mocked API server: the finalizer goes on first; admission's
//! verdict is written in status (a condition per stage, then the summary) with its Event, and
//! nothing is written while it stands; a deleted Plugin's data volumes are purged only when
//! asked, and the finalizer is let go after.

use std::sync::Arc;

use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use kube::Resource;
use kube::runtime::controller::Action;
use model::resources::{Plugin, PluginStatus};
use serde_json::{Value, json};

use super::fixtures::*;
use super::verifier::Call;
use crate::plugin::{FINALIZER, reconcile};
use crate::pod::build_data_claim;

/// The echo plugin as just installed: admission has not judged it yet.
fn installed() -> Plugin {
    let mut plugin = echo_plugin();
    plugin.status = None;
    plugin
}

/// `plugin` with our finalizer on it, as the first reconcile leaves it.
fn finalized(mut plugin: Plugin) -> Plugin {
    plugin.metadata.finalizers = Some(vec![FINALIZER.into()]);
    plugin
}

/// [`World::echo`] with `plugin`, and plugins off in HostConfig: admission stops at its first
/// stage, before anything reads the registry.
fn plugins_off(plugin: Plugin) -> World {
    let mut world = World::echo();
    world.host.as_mut().unwrap().spec.plugins.enabled = false;
    world.plugins = vec![plugin];
    world
}

/// (type, status, reason) of each condition in a status body, in order.
fn conditions(status: &Value) -> Vec<(String, String, String)> {
    status["conditions"]
        .as_array()
        .expect("conditions")
        .iter()
        .map(|c| {
            let text = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (text("type"), text("status"), text("reason"))
        })
        .collect()
}

#[tokio::test]
async fn a_new_plugin_gets_the_finalizer_before_anything_else() {
    let plugin = installed();
    let world = plugins_off(plugin.clone());
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::json_patch(plugin_path("echo"), to_json(&finalized(plugin.clone()))).body(|b| {
            assert_eq!(
                b,
                &json!([
                    { "op": "test", "path": "/metadata/finalizers", "value": null },
                    { "op": "add", "path": "/metadata/finalizers", "value": [FINALIZER] },
                ])
            );
        }),
    ]);
    let action = reconcile(Arc::new(plugin), ctx).await.unwrap();
    // The patch brings the Plugin back; admission runs then.
    assert_eq!(action, Action::await_change());
    verifier.done().await;
}

#[tokio::test]
async fn admission_writes_each_stage_and_its_verdict_then_nothing_while_it_stands() {
    let mut world = plugins_off(finalized(installed()));
    let plugin = to_json(&world.plugins[0]);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::status(plugin_path("echo"), plugin).body(|b| {
            let status = &b["status"];
            let not_reached = |kind: &str| (kind.into(), "Unknown".into(), "NotReached".into());
            assert_eq!(
                conditions(status),
                [
                    (
                        "HostEnabled".into(),
                        "False".into(),
                        "PluginsDisabled".into()
                    ),
                    not_reached("ManifestValid"),
                    not_reached("ImageVerified"),
                    not_reached("SignatureAccepted"),
                    not_reached("CapabilitiesApproved"),
                    not_reached("NamesRegistered"),
                    ("Admitted".into(), "False".into(), "PluginsDisabled".into()),
                ]
            );
            assert_eq!(status["stage"], "Host");
            assert_eq!(status["observedGeneration"], 1);
            assert_eq!(status["digest"], format!("sha256:{}", "0".repeat(64)));
            assert!(status.get("image").is_none(), "no image read: {status}");
        }),
        Call::event("default", "PluginsDisabled"),
    ]);
    let action = reconcile(world.plugins[0].clone().into(), ctx.clone())
        .await
        .unwrap();
    let refused = |ctx: &crate::Context| {
        ctx.metrics
            .admission_refusals
            .get_or_create(&crate::metrics::StageLabels { stage: "Host" })
            .get()
    };
    assert_eq!(refused(&ctx), 1, "the new refusal is counted");
    assert_eq!(
        action,
        Action::await_change(),
        "refused: waits for a change"
    );
    let bodies = verifier.done().await;

    // The verdict stands: nothing to write, nothing to say.
    let status: PluginStatus =
        serde_json::from_value(bodies[0]["status"].clone()).expect("a PluginStatus");
    world.plugins[0].status = Some(status);
    world.plugins[0].metadata.resource_version = Some("2".into());
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![]);
    reconcile(world.plugins[0].clone().into(), ctx.clone())
        .await
        .expect("no write, so nothing to fail");
    verifier.done().await;
    assert_eq!(
        refused(&ctx),
        0,
        "a refusal that stands is not counted again"
    );
}

/// The plugin's data volume in `general`, and another plugin's beside it.
fn claims() -> Vec<PersistentVolumeClaim> {
    let owner = channel("general").controller_owner_ref(&()).unwrap();
    ["echo", "other"]
        .into_iter()
        .map(|plugin| {
            served(build_data_claim(
                plugin,
                "proj",
                "general",
                NS,
                owner.clone(),
            ))
        })
        .collect()
}

/// The echo plugin being deleted, `purge_on_delete` as given, with its data volume and
/// another plugin's.
fn deleted(purge_on_delete: bool) -> (World, Plugin) {
    let mut plugin = finalized(echo_plugin());
    plugin.spec.purge_on_delete = purge_on_delete;
    plugin.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
    let mut world = World::echo();
    world.plugins = vec![plugin.clone()];
    world.claims = claims();
    world.runs = ["echo", "other"]
        .iter()
        .map(|plugin| model::resources::AgentRun {
            metadata: ObjectMeta {
                name: Some(format!("{plugin}-run")),
                namespace: Some(NS.into()),
                uid: Some(format!("uid-{plugin}-run")),
                ..Default::default()
            },
            spec: model::resources::AgentRunSpec {
                plugin: (*plugin).into(),
                channel: "general".into(),
                thread: format!("plugin:{plugin}"),
                agent: "say".into(),
                read_only: true,
                tools: vec![],
                prompt: "hi".into(),
            },
            status: None,
        })
        .collect();
    (world, plugin)
}

/// The finalizer helper's patch taking our finalizer (the first) off.
fn let_go(plugin: &Plugin) -> Call {
    let mut after = plugin.clone();
    after.metadata.finalizers = None;
    Call::json_patch(plugin_path("echo"), to_json(&after)).body(|b| {
        assert_eq!(
            b,
            &json!([
                { "op": "test", "path": "/metadata/finalizers/0", "value": FINALIZER },
                { "op": "remove", "path": "/metadata/finalizers/0" },
            ])
        );
    })
}

#[tokio::test]
async fn a_deleted_plugin_purges_its_data_volumes_when_asked_then_lets_go() {
    let (world, plugin) = deleted(true);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        // Only its own volume, by the uid it was read with.
        Call::delete(path("persistentvolumeclaims", "data-echo-general")).body(|b| {
            assert_eq!(b["propagationPolicy"], "Background");
            assert_eq!(b["preconditions"]["uid"], "uid-data-echo-general");
        }),
        // Only its own runs: their Jobs and Secrets go with them (owned).
        Call::delete(path("agentruns", "echo-run")).body(|b| {
            assert_eq!(b["preconditions"]["uid"], "uid-echo-run");
        }),
        Call::event("default", "Purged"),
        let_go(&plugin),
    ]);
    let action = reconcile(Arc::new(plugin), ctx).await.unwrap();
    assert_eq!(action, Action::requeue(std::time::Duration::from_secs(300)));
    verifier.done().await;
}

#[tokio::test]
async fn a_deleted_plugin_keeps_its_data_volumes_unless_purge_was_asked() {
    let (world, plugin) = deleted(false);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![let_go(&plugin)]);
    reconcile(Arc::new(plugin), ctx).await.unwrap();
    verifier.done().await;
}
