//! The AgentRun reconciler against a mocked API server: a run waiting its turn is marked
//! `Queued`, with the resourceVersion the decision read, so the write cannot land over a
//! phase someone else wrote since (the API server ending a run, a test patching one).

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use model::resources::{AgentRun, AgentRunSpec};

use super::fixtures::*;
use super::verifier::{Answer, Call};
use crate::runs::reconcile;

/// A run of echo's hidden thread, made and not yet decided on, at `resource_version`.
fn fresh_run(resource_version: &str) -> AgentRun {
    AgentRun {
        metadata: ObjectMeta {
            name: Some("run-1".into()),
            namespace: Some(NS.into()),
            resource_version: Some(resource_version.into()),
            creation_timestamp: Some(Time(
                k8s_openapi::jiff::Timestamp::from_second(1_800_000_000).unwrap(),
            )),
            ..Default::default()
        },
        spec: AgentRunSpec {
            plugin: "echo".into(),
            channel: "general".into(),
            thread: "plugin:echo".into(),
            agent: "helper".into(),
            read_only: false,
            tools: vec![],
            prompt: "hi".into(),
        },
        status: None,
    }
}

/// The world of [`World::echo`] with `run` and no runner configured: the run waits.
fn waiting(run: &AgentRun) -> World {
    let mut world = World::echo();
    world.runs = vec![run.clone()];
    world
}

#[tokio::test]
async fn a_waiting_run_is_queued_at_the_version_the_decision_read() {
    let run = fresh_run("41");
    let world = waiting(&run);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::status(path("agentruns", "run-1"), to_json(&run)).body(|b| {
            assert_eq!(b["status"]["phase"], "Queued");
            assert_eq!(
                b["metadata"]["resourceVersion"], "41",
                "the write names the version it was decided on"
            );
        }),
    ]);
    reconcile(Arc::new(run), ctx).await.expect("the reconcile");
    verifier.done().await;
}

#[tokio::test]
async fn a_queued_write_refused_as_stale_is_dropped_not_retried_over_the_newer_phase() {
    let run = fresh_run("41");
    let world = waiting(&run);
    let (ctx, server) = world.context();
    let verifier = server.expect(vec![
        Call::status(path("agentruns", "run-1"), to_json(&run))
            .answer(Answer::Fail(409, "Conflict")),
    ]);
    reconcile(Arc::new(run), ctx)
        .await
        .expect("a conflict is no error: the newer version's event reconciles again");
    verifier.done().await;
}
