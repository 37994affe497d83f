//! What the controller's and the API server's watches hold: each watched kind listed with the
//! same selector, its objects' JSON size as the API server sends them and without their
//! `managedFields` (which the API server's index drops), so a report can say what dominates a
//! process's memory. JSON is smaller than the decoded structs (maps, Strings, Options), but in
//! proportion: the kinds rank the same.

use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret};
use kube::api::ListParams;
use kube::{Api, Client, Resource};
use serde::Serialize;
use serde::de::DeserializeOwned;

use model::names::MANAGED_SELECTOR;
use model::resources::{AgentRun, Channel, HostConfig, Plugin, PluginInstance, Project};

/// One watched kind.
#[derive(Clone, Debug)]
pub struct Held {
    pub kind: &'static str,
    pub objects: usize,
    /// JSON bytes as listed.
    pub bytes: usize,
    /// JSON bytes without managedFields.
    pub compact_bytes: usize,
}

async fn held<K>(client: &Client, selector: Option<&str>) -> anyhow::Result<Held>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let mut params = ListParams::default();
    if let Some(selector) = selector {
        params = params.labels(selector);
    }
    let items = api.list(&params).await?.items;
    let (mut bytes, mut compact_bytes) = (0, 0);
    for mut item in items.iter().cloned() {
        bytes += serde_json::to_vec(&item)?.len();
        item.meta_mut().managed_fields = None;
        compact_bytes += serde_json::to_vec(&item)?.len();
    }
    Ok(Held {
        kind: leak(K::kind(&()).to_string()),
        objects: items.len(),
        bytes,
        compact_bytes,
    })
}

fn leak(s: String) -> &'static str {
    Box::leak(s.into_boxed_str())
}

/// What the controller's watches hold (crates/index/src/kinds.rs's selectors).
pub async fn controller(client: &Client) -> anyhow::Result<Vec<Held>> {
    let managed = Some(MANAGED_SELECTOR);
    Ok(vec![
        held::<HostConfig>(client, None).await?,
        held::<Plugin>(client, None).await?,
        held::<Project>(client, None).await?,
        held::<Channel>(client, None).await?,
        held::<PluginInstance>(client, managed).await?,
        held::<Pod>(client, managed).await?,
        held::<Secret>(client, managed).await?,
        held::<PersistentVolumeClaim>(client, managed).await?,
        held::<CronJob>(client, managed).await?,
    ])
}

/// What the API server's index holds (crates/index/src/kinds.rs's selectors).
pub async fn api(client: &Client) -> anyhow::Result<Vec<Held>> {
    let managed = Some(MANAGED_SELECTOR);
    let tokens = index::kinds::token_secrets_selector();
    let pods = index::kinds::plugin_pods_selector();
    let maps = index::kinds::config_maps_selector();
    Ok(vec![
        held::<HostConfig>(client, None).await?,
        held::<Plugin>(client, None).await?,
        held::<Project>(client, None).await?,
        held::<Channel>(client, None).await?,
        held::<PluginInstance>(client, managed).await?,
        held::<AgentRun>(client, managed).await?,
        held::<ConfigMap>(client, Some(&maps)).await?,
        held::<Secret>(client, Some(&tokens)).await?,
        held::<Pod>(client, Some(&pods)).await?,
    ])
}

/// A table of `held`, biggest first, with the totals.
pub fn table(held: &[Held]) -> String {
    let mut rows = held.to_vec();
    rows.sort_by_key(|h| std::cmp::Reverse(h.bytes));
    let mut out = format!(
        "    {:<24}{:>9}{:>14}{:>20}\n",
        "kind", "objects", "JSON MiB", "without managedFields"
    );
    for h in &rows {
        out.push_str(&format!(
            "    {:<24}{:>9}{:>14.2}{:>20.2}\n",
            h.kind,
            h.objects,
            mib(h.bytes),
            mib(h.compact_bytes)
        ));
    }
    let (bytes, compact): (usize, usize) = rows
        .iter()
        .fold((0, 0), |(b, s), h| (b + h.bytes, s + h.compact_bytes));
    out.push_str(&format!(
        "    {:<24}{:>9}{:>14.2}{:>20.2}\n",
        "total",
        rows.iter().map(|h| h.objects).sum::<usize>(),
        mib(bytes),
        mib(compact)
    ));
    out
}

pub fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// What the two processes both hold: for each kind both watch, the smaller of the two sets
/// (JSON bytes without managedFields, the form both indexes keep). Where the selectors differ
/// (the API's token Secrets and plugin Pods are a subset of the controller's managed ones) the
/// smaller set is the overlap; where they match it is the whole kind. One process with one
/// index for both roles would hold these once instead of twice: this is what sharing saves.
pub fn held_by_both(controller: &[Held], api: &[Held]) -> usize {
    controller
        .iter()
        .filter_map(|c| {
            api.iter()
                .find(|a| a.kind == c.kind)
                .map(|a| a.compact_bytes.min(c.compact_bytes))
        })
        .sum()
}

/// Total JSON bytes: as listed, and without managedFields.
pub fn totals(held: &[Held]) -> (usize, usize) {
    held.iter()
        .fold((0, 0), |(b, s), h| (b + h.bytes, s + h.compact_bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held(kind: &'static str, compact_bytes: usize) -> Held {
        Held {
            kind,
            objects: 1,
            bytes: compact_bytes * 2,
            compact_bytes,
        }
    }

    #[test]
    fn what_both_hold_is_the_smaller_set_of_each_kind_both_watch() {
        let controller = [held("Plugin", 10), held("Pod", 100), held("CronJob", 40)];
        let api = [held("Plugin", 10), held("Pod", 30), held("ConfigMap", 7)];
        assert_eq!(held_by_both(&controller, &api), 10 + 30);
        assert_eq!(held_by_both(&api, &controller), 10 + 30);
        assert_eq!(held_by_both(&controller, &[held("ConfigMap", 7)]), 0);
    }
}
