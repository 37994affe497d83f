//! Nothing doubled, nothing leaked: every Pod, /data claim, token Secret and CronJob of the
//! run's namespaces has exactly one owner reference, to the live object (same UID) that made
//! it, carries the name that owner gives it, and is wanted: a claim by its chat (data outlives
//! a plugin's disabling), a Secret by its instance, a CronJob by its chat's plan, a Pod by its
//! instance (one at most). Instances themselves are checked by [`super::converge`].

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::batch::v1::CronJob;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Secret};
use kube::api::ListParams;
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;

use model::names;
use model::resources::{Channel, PluginInstance};

use super::converge::ChatWants;

/// What a check found: problems (empty when all is well) and what it counted.
#[derive(Clone, Debug, Default)]
pub struct Found {
    pub problems: Vec<String>,
    /// Objects by kind, not being deleted.
    pub counts: BTreeMap<&'static str, usize>,
    /// Objects being deleted, by kind (garbage collection at work).
    pub terminating: BTreeMap<&'static str, usize>,
}

async fn list<K>(client: &Client, namespaces: &BTreeSet<String>) -> anyhow::Result<Vec<K>>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let api: Api<K> = Api::all(client.clone());
    let params = ListParams::default().labels(names::MANAGED_SELECTOR);
    Ok(api
        .list(&params)
        .await?
        .items
        .into_iter()
        .filter(|o| o.namespace().is_some_and(|ns| namespaces.contains(&ns)))
        .collect())
}

/// The one owner `object` may have: `kind` `name` with `uid`; a problem otherwise.
fn owned_by<K: Resource<DynamicType = ()>>(
    object: &K,
    kind: &str,
    name: &str,
    uid: Option<&str>,
) -> Option<String> {
    let what = format!(
        "{} {}/{}",
        K::kind(&()),
        object.namespace().unwrap_or_default(),
        object.name_any()
    );
    let owners = object.owner_references();
    let [owner] = owners else {
        return Some(format!("{what} has {} owner references", owners.len()));
    };
    if owner.kind != kind || owner.name != name || owner.controller != Some(true) {
        return Some(format!(
            "{what} is owned by {} {} (controller {:?}), not {kind} {name}",
            owner.kind, owner.name, owner.controller
        ));
    }
    match uid {
        None => Some(format!("{what}: its owner {kind} {name} is gone (leaked)")),
        Some(uid) if uid != owner.uid => Some(format!(
            "{what}: owned by an earlier {kind} {name} (uid {}, now {uid}): leaked",
            owner.uid
        )),
        Some(_) => None,
    }
}

fn label<'a, K: Resource>(object: &'a K, key: &str) -> &'a str {
    object
        .meta()
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
        .unwrap_or_default()
}

/// Checks the children of the run's `namespaces` against `wants` (the chats' plans).
pub async fn check(
    client: &Client,
    namespaces: &[String],
    wants: &[ChatWants],
) -> anyhow::Result<Found> {
    let namespaces: BTreeSet<String> = namespaces.iter().cloned().collect();
    let channels: Vec<Channel> = {
        let api: Api<Channel> = Api::all(client.clone());
        api.list(&ListParams::default())
            .await?
            .items
            .into_iter()
            .filter(|c| c.namespace().is_some_and(|ns| namespaces.contains(&ns)))
            .collect()
    };
    let chat_uid: BTreeMap<(String, String), String> = channels
        .iter()
        .filter(|c| c.metadata.deletion_timestamp.is_none())
        .map(|c| {
            (
                (c.namespace().unwrap_or_default(), c.name_any()),
                c.uid().unwrap_or_default(),
            )
        })
        .collect();
    let instances: Vec<PluginInstance> = list(client, &namespaces).await?;
    let instance_uid: BTreeMap<(String, String), String> = instances
        .iter()
        .filter(|i| i.metadata.deletion_timestamp.is_none())
        .map(|i| {
            (
                (i.namespace().unwrap_or_default(), i.name_any()),
                i.uid().unwrap_or_default(),
            )
        })
        .collect();
    let wanted_cronjobs: BTreeSet<(String, String)> = wants
        .iter()
        .flat_map(|w| {
            w.cronjobs
                .keys()
                .chain(&w.kept)
                .map(move |name| (w.namespace.clone(), name.clone()))
        })
        .collect();

    let mut found = Found::default();
    let note = |found: &mut Found, kind: &'static str, terminating: bool| {
        let counts = if terminating {
            &mut found.terminating
        } else {
            &mut found.counts
        };
        *counts.entry(kind).or_default() += 1;
    };
    *found.counts.entry("PluginInstance").or_default() += instance_uid.len();

    for claim in list::<PersistentVolumeClaim>(client, &namespaces).await? {
        let terminating = claim.metadata.deletion_timestamp.is_some();
        note(&mut found, "PersistentVolumeClaim", terminating);
        if terminating {
            continue;
        }
        let ns = claim.namespace().unwrap_or_default();
        let (plugin, chat) = (
            label(&claim, names::LABEL_PLUGIN),
            label(&claim, names::LABEL_CHANNEL),
        );
        if claim.name_any() != names::data_claim_name(plugin, chat) {
            found.problems.push(format!(
                "claim {ns}/{} is not its chat's name for it",
                claim.name_any()
            ));
        }
        let uid = chat_uid.get(&(ns, chat.to_string())).map(String::as_str);
        found
            .problems
            .extend(owned_by(&claim, "Channel", chat, uid));
    }
    for secret in list::<Secret>(client, &namespaces).await? {
        let terminating = secret.metadata.deletion_timestamp.is_some();
        note(&mut found, "Secret", terminating);
        if terminating {
            continue;
        }
        let ns = secret.namespace().unwrap_or_default();
        let instance = label(&secret, names::LABEL_INSTANCE);
        if secret.name_any() != names::secret_name(instance) {
            found.problems.push(format!(
                "Secret {ns}/{} is not its instance's name for it",
                secret.name_any()
            ));
        }
        let uid = instance_uid
            .get(&(ns, instance.to_string()))
            .map(String::as_str);
        found
            .problems
            .extend(owned_by(&secret, "PluginInstance", instance, uid));
    }
    for cronjob in list::<CronJob>(client, &namespaces).await? {
        let terminating = cronjob.metadata.deletion_timestamp.is_some();
        note(&mut found, "CronJob", terminating);
        if terminating {
            continue;
        }
        let ns = cronjob.namespace().unwrap_or_default();
        let chat = label(&cronjob, names::LABEL_CHANNEL);
        let uid = chat_uid
            .get(&(ns.clone(), chat.to_string()))
            .map(String::as_str);
        found
            .problems
            .extend(owned_by(&cronjob, "Channel", chat, uid));
        if !wanted_cronjobs.contains(&(ns.clone(), cronjob.name_any())) {
            found.problems.push(format!(
                "CronJob {ns}/{} is not in its chat's plan",
                cronjob.name_any()
            ));
        }
    }
    let mut pods_of: BTreeMap<(String, String), usize> = BTreeMap::new();
    for pod in list::<Pod>(client, &namespaces).await? {
        let terminating = pod.metadata.deletion_timestamp.is_some();
        note(&mut found, "Pod", terminating);
        if terminating {
            continue;
        }
        let ns = pod.namespace().unwrap_or_default();
        let instance = label(&pod, names::LABEL_INSTANCE).to_string();
        let uid = instance_uid
            .get(&(ns.clone(), instance.clone()))
            .map(String::as_str);
        found
            .problems
            .extend(owned_by(&pod, "PluginInstance", &instance, uid));
        *pods_of.entry((ns, instance)).or_default() += 1;
    }
    for ((ns, instance), n) in pods_of {
        if n > 1 {
            found
                .problems
                .push(format!("instance {ns}/{instance} has {n} Pods"));
        }
    }
    Ok(found)
}
