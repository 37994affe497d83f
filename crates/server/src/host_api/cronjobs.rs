//! Where the host API reads a chat's CronJobs (its scheduled tasks, `super::tasks`): the cluster,
//! as the API server, with a live label-selected list (its index holds none), or a list kept
//! in memory for request-level tests.

use futures::future::BoxFuture;
use k8s_openapi::api::batch::v1::CronJob;

/// Where the chat's CronJobs are read: the cluster, as the API server, or a list (tests).
pub trait TaskReader: Send + Sync {
    /// The CronJobs of `namespace` with labels `selector`.
    fn cronjobs<'a>(
        &'a self,
        namespace: &'a str,
        selector: &'a str,
    ) -> BoxFuture<'a, Result<Vec<CronJob>, String>>;
}

impl TaskReader for kube::Client {
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

/// CronJobs kept in memory (request-level tests), filtered by the selector's `key=value`s.
#[derive(Default)]
pub struct TaskList(pub std::sync::Mutex<Vec<CronJob>>);

impl TaskReader for TaskList {
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
