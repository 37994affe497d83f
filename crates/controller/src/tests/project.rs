//! The Project reconciler against a mocked API server: the Trusted condition and the config's
//! hash are written from the same-named ProjectTrust, with an Event when trust flips, and
//! nothing is written while they hold.

use std::sync::Arc;

use model::resources::{Project, ProjectStatus};
use serde_json::Value;

use super::fixtures::*;
use super::verifier::Call;
use crate::project::reconcile;

fn trusted_condition(body: &Value) -> (&str, &str) {
    let condition = body["status"]["conditions"]
        .as_array()
        .and_then(|all| all.iter().find(|c| c["type"] == "Trusted"))
        .unwrap_or_else(|| panic!("no Trusted condition in {body}"));
    (
        condition["status"].as_str().unwrap_or_default(),
        condition["reason"].as_str().unwrap_or_default(),
    )
}

/// Reconciles the project of `world`, expecting `calls`; their bodies.
async fn reconcile_project(world: &World, calls: Vec<Call>) -> Vec<Value> {
    let (ctx, server) = world.context();
    let verifier = server.expect(calls);
    reconcile(Arc::new(world.projects[0].clone()), ctx)
        .await
        .expect("the reconcile");
    verifier.done().await
}

/// Puts a status write on the project, as the API server would.
fn record(world: &mut World, body: &Value) {
    let status: ProjectStatus =
        serde_json::from_value(body["status"].clone()).expect("a ProjectStatus");
    let project = &mut world.projects[0];
    project.status = Some(status);
    project.metadata.resource_version = Some("2".into());
}

/// [`World::echo`] after its project's first reconcile: trusted, and its status says so.
async fn trusted() -> World {
    let mut world = World::echo();
    let project = to_json(&world.projects[0]);
    let hash = world.trusts[0].spec.hash.clone();
    let bodies = reconcile_project(
        &world,
        vec![
            Call::status(path("projects", "proj"), project).body(move |b| {
                assert_eq!(trusted_condition(b), ("True", "Trusted"));
                assert_eq!(b["status"]["configHash"], hash.as_str());
                assert_eq!(b["status"]["observedGeneration"], 1);
            }),
            Call::event(NS, "Trusted"),
        ],
    )
    .await;
    record(&mut world, &bodies[0]);
    world
}

#[tokio::test]
async fn the_trusted_condition_is_written_from_the_project_trust_once() {
    let world = trusted().await;
    let bodies = reconcile_project(&world, vec![]).await;
    assert!(bodies.is_empty(), "nothing written while trust holds");
}

#[tokio::test]
async fn a_config_changed_since_it_was_trusted_is_last_approved_with_a_warning() {
    let mut world = trusted().await;
    let status = world.projects[0].status.clone();
    // The owner's trust names the config that enabled echo; now it is off.
    world.projects[0] = Project {
        status,
        ..project(false)
    };
    let project = to_json(&world.projects[0]);
    let bodies = reconcile_project(
        &world,
        vec![
            Call::status(path("projects", "proj"), project)
                .body(|b| assert_eq!(trusted_condition(b), ("False", "LastApproved"))),
            Call::event(NS, "LastApproved"),
        ],
    )
    .await;
    // Only what changed is sent: the condition and the hash, not the generation.
    let sent = bodies[0]["status"].as_object().unwrap();
    let mut keys: Vec<&str> = sent.keys().map(String::as_str).collect();
    keys.sort();
    assert_eq!(keys, ["conditions", "configHash"]);
}

#[tokio::test]
async fn a_project_without_a_project_trust_is_never_trusted() {
    let mut world = World::echo();
    world.trusts.clear();
    let project = to_json(&world.projects[0]);
    reconcile_project(
        &world,
        vec![
            Call::status(path("projects", "proj"), project)
                .body(|b| assert_eq!(trusted_condition(b), ("False", "NeverTrusted"))),
            Call::event(NS, "NeverTrusted"),
        ],
    )
    .await;
}
