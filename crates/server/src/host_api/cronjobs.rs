//! Where the host API reads a chat's CronJobs (its scheduled tasks, `super::tasks`) and writes
//! a task's own options: the cluster, as the API server, with a live label-selected list (its
//! index holds none) and a merge patch of the options' annotation alone, or a list kept in
//! memory for request-level tests.

use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::CronJob;
use serde_json::Value;

/// Where the chat's CronJobs are read and a task's options written: the cluster, as the API
/// server, or a list (tests).
pub trait TaskStore: Send + Sync {
    /// The CronJobs of `namespace` with labels `selector`.
    fn cronjobs<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a str,
    ) -> BoxFuture<'a, Result<Vec<CronJob>, String>>;

    /// Merge-patches CronJob `name` with `patch` (the options' annotation, nothing else: the
    /// caller was authorized for `update channels/tasks` first).
    fn patch_options<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        patch: Value,
    ) -> BoxFuture<'a, Result<(), String>>;
}

impl TaskStore for kube::Client {
    fn patch_options<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        patch: Value,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let api: kube::Api<CronJob> = kube::Api::namespaced(self.clone(), namespace);
            api.patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await
            .map(|_| ())
            .map_err(|e| format!("writing the options on CronJob {namespace}/{name}: {e}"))
        })
    }

    fn cronjobs<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a str,
    ) -> BoxFuture<'a, Result<Vec<CronJob>, String>> {
        Box::pin(async move {
            let api: kube::Api<CronJob> = kube::Api::namespaced(self.clone(), namespace);
            api.list(&kube::api::ListParams::default().labels(selector))
                .await
                .map(|l| l.items)
                .map_err(|e| format!("listing the CronJobs of namespace {namespace}: {e}"))
        })
    }
}

/// CronJobs kept in memory (request-level tests), filtered by the selector's `key=value`s; the
/// option patches written, in order.
#[derive(Default)]
pub struct TaskList(
    pub std::sync::Mutex<Vec<CronJob>>,
    pub std::sync::Mutex<Vec<(String, String, Value)>>,
);

impl TaskStore for TaskList {
    fn patch_options<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        patch: Value,
    ) -> BoxFuture<'a, Result<(), String>> {
        self.1
            .lock()
            .expect("lock")
            .push((namespace.into(), name.into(), patch));
        Box::pin(async { Ok(()) })
    }

    fn cronjobs<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a str,
    ) -> BoxFuture<'a, Result<Vec<CronJob>, String>> {
        let wanted: Vec<(&str, &str)> = selector
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .collect();
        let found = self
            .0
            .lock()
            .expect("lock")
            .iter()
            .filter(|c| c.metadata.namespace.as_deref() == Some(namespace))
            .filter(|c| {
                let labels = c.metadata.labels.clone().unwrap_or_default();
                wanted
                    .iter()
                    .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
            })
            .cloned()
            .collect();
        Box::pin(async move { Ok(found) })
    }
}
