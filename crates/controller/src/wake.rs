//! Which changes of a watched object wake a reconciler that does not own it as its primary,
//! and which objects they wake.
//!
//! What a change wakes is a mapping from the changed object to the objects to reconcile, read
//! from the stores: every Plugin, chat or instance ([`every`]) for a HostConfig change, the
//! Plugins sharing a name with a changed one ([`plugins_sharing_names`]), the chats of a
//! project ([`chats_of_project`]), the instances of a plugin, a chat or a project
//! ([`instances_of_plugin`], [`instances_of_chat`], [`instances_of_project`]), the Project of
//! a ProjectTrust ([`project_of_trust`]), the Plugins and instances a NetworkPolicy concerns
//! ([`plugins_of_policy`], [`instances_of_policy`]). `controllers` says which controller takes
//! which.
//!
//! A change wakes only when the reconciler could act on it. Each is a fingerprint, a hash of
//! the parts that reconciler reads or writes; an event whose fingerprint is the one last seen
//! for the object wakes nobody (see `index::Feed::subscribe_on_change`). Appearing and going
//! always wake.
//!
//! - A chat's children (instances, /data claims, CronJobs) wake it when what the chat sets on
//!   them could differ: their labels, annotations, owners, finalizers, deletion and spec, but
//!   not their status (an instance's phase, a claim's binding, a CronJob's last run), nor the
//!   fields the cluster fills in after the fact (a claim's `spec.volumeName`, annotations in the
//!   `kubernetes.io` domains). The chat reads none of those: `drift` compares only the fields
//!   its builders set, and none of them sets such a field (tested below).
//! - A chat wakes its plugins' instances when its spec or its deletion changes: an instance
//!   reads its chat's working tree and nothing of the chat's status.
//!
//! At a cold start of 1,000 chats each child is written two to four times after it is made
//! (its status; a claim's binding and Bound phase), and each of those woke a chat reconcile
//! that found nothing to do; each chat's status write woke its three instances the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::hash::{DefaultHasher, Hash, Hasher};

use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde::Deserialize;
use serde_json::value::RawValue;

use super::egress;
use admission::conflicts::declared_names;
use index::compact::Compact;
use model::resources::{Channel, Plugin, PluginInstance, Project, ProjectTrust};

/// A hash of the parts of an object a reconciler acts on.
pub trait Fingerprint {
    fn fingerprint(&self) -> u64;
}

/// Whether an annotation is one the cluster sets (`pv.kubernetes.io/bind-completed`,
/// `kubectl.kubernetes.io/last-applied-configuration`, ...): its key's prefix is a
/// `kubernetes.io` or `k8s.io` domain.
pub fn clusters_annotation(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    ["kubernetes.io", "k8s.io"]
        .iter()
        .any(|domain| prefix == *domain || prefix.ends_with(&format!(".{domain}")))
}

/// The metadata a chat sets on its children, hashed: labels, annotations but the cluster's,
/// owners, finalizers, and whether it is going.
fn hash_metadata(
    hasher: &mut DefaultHasher,
    metadata: &ObjectMeta,
    labels: Option<&BTreeMap<String, String>>,
    annotations: Option<&BTreeMap<String, String>>,
    finalizers: Option<&Vec<String>>,
) {
    labels.hash(hasher);
    if let Some(annotations) = annotations {
        for (key, value) in annotations {
            if !clusters_annotation(key) {
                (key, value).hash(hasher);
            }
        }
    }
    finalizers.hash(hasher);
    metadata.deletion_timestamp.is_some().hash(hasher);
    if let Some(owners) = &metadata.owner_references {
        for owner in owners {
            (
                &owner.api_version,
                &owner.kind,
                &owner.name,
                &owner.uid,
                owner.controller,
            )
                .hash(hasher);
        }
    }
}

/// The spec fields of a kept child that the cluster fills in after it is made (a claim's
/// volume, bound by the binder), by kind: left out of its fingerprint.
fn clusters_spec_fields(kind: &str) -> &'static [&'static str] {
    match kind {
        "PersistentVolumeClaim" => &["volumeName"],
        _ => &[],
    }
}

/// The top-level fields of a kept child's body but its status, with the spec's fields the
/// cluster fills in left out.
fn hash_body(hasher: &mut DefaultHasher, kind: &str, body: &str) {
    let Ok(fields) = serde_json::from_str::<BTreeMap<&str, &RawValue>>(body) else {
        // Not an object: the whole of it (it cannot be kept so, but hashing it is safe).
        body.hash(hasher);
        return;
    };
    for (field, value) in fields {
        match field {
            "status" => {}
            "spec" if !clusters_spec_fields(kind).is_empty() => {
                let Ok(mut spec) = serde_json::from_str::<BTreeMap<&str, &RawValue>>(value.get())
                else {
                    (field, value.get()).hash(hasher);
                    continue;
                };
                for left_out in clusters_spec_fields(kind) {
                    spec.remove(left_out);
                }
                field.hash(hasher);
                for (key, value) in spec {
                    (key, value.get()).hash(hasher);
                }
            }
            _ => (field, value.get()).hash(hasher),
        }
    }
}

impl<K: k8s_openapi::Resource> Fingerprint for Compact<K> {
    fn fingerprint(&self) -> u64 {
        #[derive(Deserialize, Default)]
        struct Described {
            labels: Option<BTreeMap<String, String>>,
            annotations: Option<BTreeMap<String, String>>,
            finalizers: Option<Vec<String>>,
        }
        let mut hasher = DefaultHasher::new();
        let described: Described = serde_json::from_str(self.described()).unwrap_or_default();
        hash_metadata(
            &mut hasher,
            &self.metadata,
            described.labels.as_ref(),
            described.annotations.as_ref(),
            described.finalizers.as_ref(),
        );
        hash_body(&mut hasher, K::KIND, self.body());
        hasher.finish()
    }
}

impl Fingerprint for PluginInstance {
    /// Its spec by its generation (an instance has a status subresource: a status write leaves
    /// the generation as it is).
    fn fingerprint(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        let meta = self.meta();
        hash_metadata(
            &mut hasher,
            meta,
            meta.labels.as_ref(),
            meta.annotations.as_ref(),
            meta.finalizers.as_ref(),
        );
        meta.generation.hash(&mut hasher);
        hasher.finish()
    }
}

impl Fingerprint for Channel {
    /// What an instance reads of its chat: the spec (by its generation) and whether it is
    /// going.
    fn fingerprint(&self) -> u64 {
        let mut hasher = DefaultHasher::new();
        let meta = self.meta();
        meta.generation.hash(&mut hasher);
        meta.deletion_timestamp.is_some().hash(&mut hasher);
        hasher.finish()
    }
}

/// The instances a change of `chat` wakes: its own, and its threads' (a thread without a
/// working tree of its own runs its plugins in its chat's). Called on every change of a chat's
/// spec: compared in place, nothing copied per instance.
pub fn instances_of_chat<'a>(
    chat: &Channel,
    chats: impl Iterator<Item = &'a Channel>,
    instances: impl Iterator<Item = &'a PluginInstance>,
) -> Vec<ObjectRef<PluginInstance>> {
    let namespace = &chat.metadata.namespace;
    let Some(name) = chat.metadata.name.as_ref() else {
        return Vec::new();
    };
    let threads: std::collections::HashSet<&str> = chats
        .filter(|c| c.metadata.namespace == *namespace && c.spec.parent.as_ref() == Some(name))
        .filter_map(|c| c.metadata.name.as_deref())
        .collect();
    instances
        .filter(|i| i.metadata.namespace == *namespace)
        .filter(|i| i.spec.channel == *name || threads.contains(i.spec.channel.as_str()))
        .map(ObjectRef::from)
        .collect()
}

/// Every object of a kind: what a change that concerns them all wakes (a HostConfig change
/// every Plugin, chat and instance; a change of a Secret of the controller's namespace, where
/// HostConfig's registry credentials are, every Plugin; a Plugin change every chat).
pub fn every<'a, K>(objects: impl IntoIterator<Item = &'a K>) -> Vec<ObjectRef<K>>
where
    K: Resource<DynamicType = ()> + 'a,
{
    objects.into_iter().map(ObjectRef::from).collect()
}

/// The other Plugins whose admission a change of `changed` can change: those sharing a name
/// with it (the first in package-name order holds a name, so one admitted takes a name over
/// from a later one, and one going gives it back), and those refused at the Names stage.
pub fn plugins_sharing_names<'a>(
    changed: &Plugin,
    plugins: impl IntoIterator<Item = &'a Plugin>,
) -> Vec<ObjectRef<Plugin>> {
    let names = declared_names(changed);
    let name = changed.name_any();
    plugins
        .into_iter()
        .filter(|p| p.name_any() != name)
        .filter(|p| {
            p.status.as_ref().and_then(|s| s.stage.as_deref()) == Some("Names")
                || declared_names(p).iter().any(|n| names.contains(n))
        })
        .map(ObjectRef::from)
        .collect()
}

/// The chats of the project `project` in `namespace`: what a change of the Project or of its
/// trust (a ProjectTrust has its Project's name) wakes.
pub fn chats_of_project<'a>(
    namespace: Option<&str>,
    project: &str,
    chats: impl IntoIterator<Item = &'a Channel>,
) -> Vec<ObjectRef<Channel>> {
    chats
        .into_iter()
        .filter(|c| c.metadata.namespace.as_deref() == namespace && c.spec.project == project)
        .map(ObjectRef::from)
        .collect()
}

/// The instances of `plugin`, in every chat.
pub fn instances_of_plugin<'a>(
    plugin: &Plugin,
    instances: impl IntoIterator<Item = &'a PluginInstance>,
) -> Vec<ObjectRef<PluginInstance>> {
    let name = plugin.name_any();
    instances
        .into_iter()
        .filter(|i| i.spec.plugin == name)
        .map(ObjectRef::from)
        .collect()
}

/// The instances of `project`'s chats: its settings show on them (the values left out).
pub fn instances_of_project<'a>(
    project: &Project,
    instances: impl IntoIterator<Item = &'a PluginInstance>,
) -> Vec<ObjectRef<PluginInstance>> {
    let (namespace, name) = (&project.metadata.namespace, project.metadata.name.as_ref());
    instances
        .into_iter()
        .filter(|i| i.metadata.namespace == *namespace && Some(&i.spec.project) == name)
        .map(ObjectRef::from)
        .collect()
}

/// The Plugin owning `policy`, when it is a plugin's egress policy (ours): by its owner
/// reference, as kube's `owns` wakes an owner (which it cannot for a cluster-wide owner of a
/// namespaced child: it looks for the owner in the child's namespace).
fn owning_plugin(policy: &NetworkPolicy) -> Option<String> {
    if !egress::ours(policy) {
        return None;
    }
    let (kind, api_version) = (Plugin::kind(&()), Plugin::api_version(&()));
    policy
        .owner_references()
        .iter()
        .find(|o| o.kind == kind && o.api_version == api_version)
        .map(|o| o.name.clone())
}

/// The Plugins a change of a NetworkPolicy wakes (their egress): its owner, when it is a
/// plugin's egress policy; otherwise every plugin with an instance in its namespace, as it may
/// close (or no longer close) their Pods' egress.
pub fn plugins_of_policy<'a>(
    policy: &NetworkPolicy,
    instances: impl IntoIterator<Item = &'a PluginInstance>,
) -> Vec<ObjectRef<Plugin>> {
    if let Some(owner) = owning_plugin(policy) {
        return vec![ObjectRef::new(&owner)];
    }
    if egress::ours(policy) {
        return Vec::new();
    }
    let namespace = &policy.metadata.namespace;
    let plugins: BTreeSet<&str> = instances
        .into_iter()
        .filter(|i| i.metadata.namespace == *namespace)
        .map(|i| i.spec.plugin.as_str())
        .collect();
    plugins.into_iter().map(ObjectRef::new).collect()
}

/// The instances a change of a NetworkPolicy wakes (their status shows their egress, and their
/// Pods wait for a policy that is due): those of its plugin in its namespace, when it is a
/// plugin's egress policy; otherwise every instance in its namespace.
pub fn instances_of_policy<'a>(
    policy: &NetworkPolicy,
    instances: impl IntoIterator<Item = &'a PluginInstance>,
) -> Vec<ObjectRef<PluginInstance>> {
    let namespace = &policy.metadata.namespace;
    let plugin = owning_plugin(policy);
    if plugin.is_none() && egress::ours(policy) {
        return Vec::new();
    }
    instances
        .into_iter()
        .filter(|i| i.metadata.namespace == *namespace)
        .filter(|i| plugin.as_ref().is_none_or(|p| i.spec.plugin == *p))
        .map(ObjectRef::from)
        .collect()
}

/// The Project whose trust `trust` is: the one of its name, in its namespace.
pub fn project_of_trust(trust: &ProjectTrust) -> ObjectRef<Project> {
    let project = ObjectRef::new(&trust.name_any());
    match trust.namespace() {
        Some(namespace) => project.within(&namespace),
        None => project,
    }
}
