//! The egress reconciler against a mocked API server: a plugin's policy made where it runs and
//! its Pods' egress is closed, no write once converged, a hand edit undone, the policy gone with
//! the approval or the plugin's last instance there; and an instance waiting for a policy that
//! is due, then showing what it opens.

use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::runtime::controller::Action;
use serde_json::json;

use super::fixtures::*;
use super::verifier::Call;
use crate::egress::reconcile;

const POLICY: &str = "loop-plugin-egress-echo";

/// Echo with egress (approved or not) and its instance in `general`; the chart's policy closes
/// plugin Pods' egress in the namespace when `closed`.
fn world(approved: bool, closed: bool) -> World {
    let mut world = World::echo();
    world.plugins = vec![egress_plugin(approved)];
    world.instances = vec![instance()];
    if closed {
        world.network_policies = vec![closing_policy()];
    }
    world
}

fn plugin(world: &World) -> std::sync::Arc<model::resources::Plugin> {
    std::sync::Arc::new(world.plugins[0].clone())
}

/// Reconciles the plugin of `world`, expecting no call.
async fn makes_no_write(world: &World) {
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![]);
    reconcile(plugin(world), ctx)
        .await
        .expect("no write, so nothing to fail");
    verifier.done().await;
}

/// The world after the egress reconciler made the policy.
async fn converged() -> World {
    let mut world = world(true, true);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![Call::create(collection("networkpolicies"))]);
    reconcile(plugin(&world), ctx).await.expect("made");
    let bodies = verifier.done().await;
    world
        .network_policies
        .push(from_body::<NetworkPolicy>(&bodies[0]));
    world
}

#[tokio::test]
async fn the_policy_opens_the_approved_egress_where_the_plugins_pods_are_closed() {
    let world = world(true, true);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![Call::create(collection("networkpolicies")).body(
        |b| {
            assert_eq!(b["metadata"]["name"], POLICY);
            assert_eq!(b["metadata"]["ownerReferences"][0]["kind"], "Plugin");
            assert_eq!(b["metadata"]["ownerReferences"][0]["uid"], "uid-echo");
            assert_eq!(
                b["spec"]["egress"],
                json!([{
                    "to": [{ "ipBlock": { "cidr": "10.20.0.0/16" } }],
                    "ports": [{ "protocol": "TCP", "port": 5432 }],
                }])
            );
            assert_eq!(
                b["metadata"]["annotations"]["plugins.loop.dev/egress-open"],
                "10.20.0.0/16:5432"
            );
        },
    )]);
    let action = reconcile(plugin(&world), ctx).await.unwrap();
    assert_eq!(action, Action::await_change(), "no host to resolve again");
    verifier.done().await;
}

#[tokio::test]
async fn a_converged_egress_makes_no_write_and_a_hand_edit_is_undone() {
    let mut world = converged().await;
    makes_no_write(&world).await;

    let ours = world.network_policies.last_mut().unwrap();
    ours.spec.as_mut().unwrap().egress = Some(vec![]);
    let (ctx, server) = world.context();
    let verifier = server
        .expect(vec![Call::apply(path("networkpolicies", POLICY)).body(
            |b| assert_eq!(b["spec"]["egress"][0]["ports"][0]["port"], 5432),
        )]);
    reconcile(plugin(&world), ctx).await.unwrap();
    verifier.done().await;
}

#[tokio::test]
async fn no_policy_where_nothing_closes_the_pods_or_nothing_is_approved() {
    for world in [world(true, false), world(false, true)] {
        makes_no_write(&world).await;
    }
}

#[tokio::test]
async fn the_policy_goes_with_the_approval_or_the_plugins_last_instance_there() {
    let converged = converged().await;
    let mut unapproved = converged.clone();
    unapproved.plugins = vec![egress_plugin(false)];
    let mut gone = converged.clone();
    gone.instances.clear();
    let mut open = converged;
    open.network_policies.remove(0);
    for world in [unapproved, gone, open] {
        let (ctx, server) = world.context();
        let verifier = server.expect(vec![Call::delete(path("networkpolicies", POLICY))]);
        reconcile(plugin(&world), ctx).await.unwrap();
        verifier.done().await;
    }
}

/// The status patch of the instance, answered over the instance as the world holds it.
fn status_call(world: &World) -> Call {
    Call::status(
        path("plugininstances", "echo-general"),
        to_json(&world.instances[0]),
    )
}

#[tokio::test]
async fn an_instance_waits_for_a_policy_that_is_due_then_shows_what_it_opens() {
    let mut world = world(true, true);
    let (ctx, server) = world.context();
    // No Secret, so no Pod, until the policy is there.
    let verifier = server.expect(vec![status_call(&world).body(|b| {
        let ready = &b["status"]["conditions"][0];
        assert_eq!(ready["reason"], "CannotRun");
        let message = ready["message"].as_str().unwrap();
        assert!(
            message.contains("waiting for NetworkPolicy loop-plugin-egress-echo"),
            "{message}"
        );
    })]);
    crate::instance::reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;

    world.network_policies = converged().await.network_policies;
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::create(collection("secrets")),
        status_call(&world).body(|b| {
            assert_eq!(b["status"]["egress"], json!(["10.20.0.0/16:5432"]));
            assert_eq!(b["status"]["conditions"][0]["reason"], "Idle");
        }),
    ]);
    crate::instance::reconcile(world.instance("echo-general"), ctx)
        .await
        .unwrap();
    verifier.done().await;
}
