//! Watches the Pods bound to the stand-in's Node and gives each its own worker.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use tokio::sync::watch;
use tokio::task::JoinSet;

use super::{Shared, worker};

/// Dispatches every change of our Pods to their workers, for as long as the task runs.
/// Dropping the task drops the workers, whose containers are then killed.
pub async fn run(shared: Arc<Shared>) {
    let api: Api<Pod> = Api::all(shared.client.clone());
    let config = watcher::Config::default().fields(&format!("spec.nodeName={}", shared.node));
    let mut events = watcher(api, config).default_backoff().boxed();
    let mut workers: HashMap<String, watch::Sender<Option<Pod>>> = HashMap::new();
    let mut tasks = JoinSet::new();
    let mut relisted: Option<HashSet<String>> = None;
    loop {
        tokio::select! {
            event = events.next() => {
                let Some(event) = event else { break };
                match event {
                    Ok(watcher::Event::Init) => relisted = Some(HashSet::new()),
                    Ok(watcher::Event::InitApply(pod)) => {
                        if let Some(seen) = relisted.as_mut() {
                            seen.insert(pod.uid().unwrap_or_default());
                        }
                        dispatch(&shared, &mut workers, &mut tasks, pod);
                    }
                    Ok(watcher::Event::InitDone) => {
                        // Pods that vanished while the watch was down are gone.
                        let seen = relisted.take().unwrap_or_default();
                        workers.retain(|uid, tx| {
                            let keep = seen.contains(uid);
                            if !keep {
                                tx.send_replace(None);
                            }
                            keep
                        });
                    }
                    Ok(watcher::Event::Apply(pod)) => dispatch(&shared, &mut workers, &mut tasks, pod),
                    Ok(watcher::Event::Delete(pod)) => {
                        if let Some(tx) = workers.remove(&pod.uid().unwrap_or_default()) {
                            tx.send_replace(None);
                        }
                    }
                    Err(e) => tracing::warn!(error = %e, "watching the node's pods"),
                }
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {}
        }
    }
}

fn dispatch(
    shared: &Arc<Shared>,
    workers: &mut HashMap<String, watch::Sender<Option<Pod>>>,
    tasks: &mut JoinSet<()>,
    pod: Pod,
) {
    let uid = pod.uid().unwrap_or_default();
    match workers.get(&uid) {
        Some(tx) => {
            tx.send_replace(Some(pod));
        }
        None => {
            let (tx, rx) = watch::channel(Some(pod));
            workers.insert(uid, tx);
            tasks.spawn(worker::run(shared.clone(), rx));
        }
    }
}
