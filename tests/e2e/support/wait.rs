//! Waits on the cluster's state, driven by watches, each with a time limit. On a timeout the
//! error shows the last state seen.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::watch_object;
use kube::{Api, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Waits until `cond` holds for the object (None while it does not exist); returns the object.
pub async fn until<K, F>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    cond: F,
) -> anyhow::Result<Option<K>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Serialize + Send + 'static,
    F: Fn(Option<&K>) -> bool,
{
    let mut last: Option<K> = None;
    let mut last_error = None;
    let stream = watch_object(api.clone(), name).default_backoff();
    futures::pin_mut!(stream);
    let waited = tokio::time::timeout(timeout, async {
        while let Some(item) = stream.next().await {
            match item {
                Ok(obj) => {
                    if cond(obj.as_ref()) {
                        return Ok(obj);
                    }
                    last = obj;
                }
                // The watcher retries with backoff; the error shows on a timeout.
                Err(e) => last_error = Some(e.to_string()),
            }
        }
        Err(anyhow::anyhow!("the watch on {name} ended"))
    })
    .await;
    match waited {
        Ok(result) => result,
        Err(_) => {
            let seen = match &last {
                Some(obj) => serde_json::to_string_pretty(obj).unwrap_or_default(),
                None => "(it does not exist)".into(),
            };
            let error = last_error
                .map(|e| format!(" (last watch error: {e})"))
                .unwrap_or_default();
            anyhow::bail!(
                "timed out after {timeout:?} waiting for {what}{error}; last seen:\n{seen}"
            )
        }
    }
}

/// Waits until the object exists.
pub async fn exists<K>(api: &Api<K>, name: &str, timeout: Duration) -> anyhow::Result<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Serialize + Send + 'static,
{
    let what = format!("{name} to exist");
    let found = until(api, name, &what, timeout, |o| o.is_some()).await?;
    found.ok_or_else(|| anyhow::anyhow!("{name} vanished"))
}

/// Waits until the object is gone.
pub async fn deleted<K>(api: &Api<K>, name: &str, timeout: Duration) -> anyhow::Result<()>
where
    K: Resource + Clone + DeserializeOwned + Debug + Serialize + Send + 'static,
{
    let what = format!("{name} to be deleted");
    until(api, name, &what, timeout, |o| o.is_none()).await?;
    Ok(())
}

/// Waits until `cond` holds for the (existing) object; returns it.
pub async fn matches<K, F>(
    api: &Api<K>,
    name: &str,
    what: &str,
    timeout: Duration,
    cond: F,
) -> anyhow::Result<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Serialize + Send + 'static,
    F: Fn(&K) -> bool,
{
    let found = until(api, name, what, timeout, |o| o.is_some_and(&cond)).await?;
    found.ok_or_else(|| anyhow::anyhow!("{name} vanished"))
}
