//! Binds every unscheduled Pod to the stand-in's Node (no kube-scheduler runs here).

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Binding, ObjectReference, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};

/// Watches Pods without a node and binds each to `node`, for as long as the task runs.
pub async fn run(client: Client, node: String) {
    let pods: Api<Pod> = Api::all(client.clone());
    let config = watcher::Config::default().fields("spec.nodeName=");
    let mut events = watcher(pods, config)
        .default_backoff()
        .applied_objects()
        .boxed();
    while let Some(event) = events.next().await {
        match event {
            Ok(pod) if wants_binding(&pod) => bind(&client, &pod, &node).await,
            Ok(_) => {}
            Err(e) => tracing::warn!(error = %e, "watching unscheduled pods"),
        }
    }
}

/// Pods the default scheduler would place: not deleted, not gated, for the default scheduler.
fn wants_binding(pod: &Pod) -> bool {
    let Some(spec) = &pod.spec else { return false };
    pod.metadata.deletion_timestamp.is_none()
        && spec.node_name.as_deref().unwrap_or_default().is_empty()
        && spec.scheduling_gates.as_ref().is_none_or(Vec::is_empty)
        && spec
            .scheduler_name
            .as_deref()
            .is_none_or(|s| s == "default-scheduler")
}

async fn bind(client: &Client, pod: &Pod, node: &str) {
    let namespace = pod.namespace().unwrap_or_default();
    let name = pod.name_any();
    let api: Api<Pod> = Api::namespaced(client.clone(), &namespace);
    let binding = Binding {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace.clone()),
            uid: pod.uid(),
            ..Default::default()
        },
        target: ObjectReference {
            api_version: Some("v1".into()),
            kind: Some("Node".into()),
            name: Some(node.to_string()),
            ..Default::default()
        },
    };
    for attempt in 1..=5u32 {
        // The answer is a Status, not a Binding.
        let result = api
            .create_subresource::<Binding, serde_json::Value>(
                "binding",
                &name,
                &PostParams::default(),
                &binding,
            )
            .await;
        match result {
            Ok(_) => return tracing::debug!(pod = %format!("{namespace}/{name}"), %node, "bound"),
            // Already bound (a conflict) or gone: the watch brings the next state.
            Err(kube::Error::Api(s)) if s.is_conflict() || s.is_not_found() => return,
            Err(e) => {
                tracing::warn!(pod = %format!("{namespace}/{name}"), error = %e, attempt, "binding failed");
                tokio::time::sleep(std::time::Duration::from_millis(200 * u64::from(attempt)))
                    .await;
            }
        }
    }
}
