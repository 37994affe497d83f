//! The verbs of the write door: [`apply`] (a create when the cache shows no such object),
//! [`create`], [`delete`], and [`status`] with its variants. What each skips and why is in the
//! module doc of `write`.

use std::fmt::Debug;

use k8s_openapi::NamespaceResourceScope;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, PropagationPolicy};
use kube::{Api, Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::drift;
use super::merge_patch;
use super::recent_writes::{Target, content_hash, status_hash};
use super::{WriteError, Writes};

type Result<T> = std::result::Result<T, WriteError>;
use model::names::FIELD_MANAGER;

/// The first field we set whose live value differs; `None` when `live` already is what
/// `desired` would make it.
fn difference<K: Serialize>(desired: &K, live: &K) -> Option<String> {
    let json = |k: &K| serde_json::to_value(k).expect("objects serialize");
    drift::difference(&json(desired), &json(live))
}

impl Writes {
    /// Makes `desired` when the cache shows no such object, else applies it unless `live` already
    /// matches it. Returns whether it wrote.
    ///
    /// An absent object is made with a create, not an apply: a create costs the API server less
    /// CPU than an apply making the same object (14.0 against 19.3 CPU-seconds for 5,250 objects
    /// in one run of `make bench-scale`'s two baselines), and a cold start is all creates. The create records the fields
    /// under our field manager; an apply afterwards owns the fields it sets. So a builder sets the
    /// same fields every time (their values vary, the set does not): a field the create set and
    /// a later apply left out would stay, owned by the create.
    pub async fn apply<K>(&self, desired: &K, live: Option<&K>) -> Result<bool>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + Serialize
            + DeserializeOwned
            + Debug,
    {
        let Some(live) = live else {
            return self.create(desired).await;
        };
        let Some(field) = difference(desired, live) else {
            return Ok(false);
        };
        let (ns, name) = names_of(desired)?;
        let target = Target {
            kind: kind::<K>(),
            part: "",
            namespace: &ns,
            name: &name,
        };
        let version = live.resource_version();
        let content = content_hash(desired);
        if self.recent.on_its_way(target, version.as_deref(), content) {
            tracing::debug!(kind = kind::<K>(), %name, %field, "our write is on its way to the cache");
            return Ok(false);
        }
        tracing::info!(kind = kind::<K>(), %name, %field, "applying again: a field we set differs");
        let api: Api<K> = Api::namespaced(self.client.clone(), &ns);
        self.metrics.write(kind::<K>(), "apply");
        let _turn = self.permit().await;
        api.patch(
            &name,
            &PatchParams::apply(FIELD_MANAGER).force(),
            &Patch::Apply(desired),
        )
        .await
        .map_err(|source| WriteError::Apply {
            kind: kind::<K>(),
            name: name.clone(),
            source,
        })?;
        self.recent.record(target, version.as_deref(), content);
        Ok(true)
    }

    /// Creates `object`, which the cache does not show; one that exists already (a cache behind
    /// the server, or one still going away under the same name) counts as made. Returns whether it
    /// made it.
    ///
    /// One this controller is making, or made and the cache does not show yet, is not made again
    /// (`recent_writes`): a reconcile woken again before its cache caught up would otherwise send
    /// the same create for the API server to refuse.
    pub async fn create<K>(&self, object: &K) -> Result<bool>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + Serialize
            + DeserializeOwned
            + Debug,
    {
        let (ns, name) = names_of(object)?;
        let kind = kind::<K>();
        let target = Target {
            kind,
            part: "",
            namespace: &ns,
            name: &name,
        };
        if !self.recent.making(target, std::time::Instant::now()) {
            tracing::debug!(%kind, %name, "made already; the cache does not show it yet");
            return Ok(false);
        }
        let api: Api<K> = Api::namespaced(self.client.clone(), &ns);
        self.metrics.write(kind, "create");
        let _turn = self.permit().await;
        match api
            .create(
                &PostParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..Default::default()
                },
                object,
            )
            .await
        {
            Ok(_) => Ok(true),
            // It exists: awaited too, until the cache shows it.
            Err(kube::Error::Api(status)) if status.is_already_exists() => Ok(false),
            Err(source) => {
                self.recent.not_made(target);
                Err(WriteError::Create {
                    kind,
                    name: name.clone(),
                    source,
                })
            }
        }
    }

    /// Deletes an object we made; one already gone (or going) is fine. Dependents go in the
    /// background. Returns whether it asked for a deletion.
    pub async fn delete<K>(&self, object: &K) -> Result<bool>
    where
        K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + Debug,
    {
        if object.meta().deletion_timestamp.is_some() {
            return Ok(false);
        }
        let (ns, name) = names_of(object)?;
        let api: Api<K> = Api::namespaced(self.client.clone(), &ns);
        self.metrics.write(kind::<K>(), "delete");
        let _turn = self.permit().await;
        let params = DeleteParams {
            propagation_policy: Some(PropagationPolicy::Background),
            preconditions: object.uid().map(|uid| kube::api::Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&name, &params).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(status)) if status.is_not_found() || status.is_conflict() => {
                Ok(false)
            }
            Err(source) => Err(WriteError::Delete {
                kind: kind::<K>(),
                name,
                source,
            }),
        }
    }

    /// The status written with [`StatusWrite::Kept`] over the version of `object` the cache
    /// shows; `None` once the cache moved past it (it shows the write, or something newer).
    pub fn kept_status<K, S>(&self, object: &K) -> Option<S>
    where
        K: Resource<DynamicType = ()>,
        S: DeserializeOwned,
    {
        let meta = object.meta();
        let target = status_target::<K>(
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        );
        self.recent.kept(target, meta.resource_version.as_deref())
    }

    /// Forgets what was written to `object`'s status: it is going.
    pub fn forget_status<K: Resource<DynamicType = ()>>(&self, object: &K) {
        let meta = object.meta();
        self.recent.forget(status_target::<K>(
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        ));
    }

    /// Writes `status` on `object` through `api`, unless it is already what we'd write
    /// (`current`: the part of the live status we own), or we wrote it over the version the cache
    /// still shows. The write is a merge patch of what differs from `current` (see `merge_patch`),
    /// so fields others own in the same status are left as they are; `how` says what more (see
    /// [`StatusWrite`]).
    pub async fn status<K, S>(
        &self,
        api: &Api<K>,
        object: &K,
        current: Option<&S>,
        status: &S,
        how: StatusWrite,
    ) -> Result<bool>
    where
        K: Resource<DynamicType = ()> + Clone + DeserializeOwned + Debug,
        S: Serialize + PartialEq,
    {
        if current == Some(status) {
            return Ok(false);
        }
        let (ns, name) = (object.namespace().unwrap_or_default(), object.name_any());
        let target = status_target::<K>(&ns, &name);
        let version = object.resource_version();
        let content = status_hash(status);
        if self.recent.on_its_way(target, version.as_deref(), content) {
            return Ok(false);
        }
        let json = |s: &S| serde_json::to_value(s).expect("statuses serialize");
        let from = current.map(json).unwrap_or_else(|| serde_json::json!({}));
        let Some(changes) = merge_patch::between(&from, &json(status)) else {
            // Unequal as values, equal as JSON: nothing to write.
            return Ok(false);
        };
        tracing::debug!(kind = kind::<K>(), %name, %changes, "writing the status");
        let mut patch = serde_json::json!({ "status": changes });
        if how == StatusWrite::AtVersion {
            patch["metadata"] = serde_json::json!({ "resourceVersion": version });
        }
        self.metrics.write(kind::<K>(), "status");
        let _turn = self.permit().await;
        let written = match api
            .patch_status(
                &name,
                &PatchParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..Default::default()
                },
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(written) => written,
            Err(kube::Error::Api(refused))
                if how == StatusWrite::AtVersion && refused.is_conflict() =>
            {
                tracing::debug!(kind = kind::<K>(), %name, "the object moved on; not writing");
                return Ok(false);
            }
            Err(source) => {
                return Err(WriteError::Status {
                    kind: kind::<K>(),
                    name: name.clone(),
                    source,
                });
            }
        };
        if how == StatusWrite::Kept {
            self.recent
                .record_kept(target, version.as_deref(), content, status);
        } else {
            self.recent.record(target, version.as_deref(), content);
        }
        self.recent
            .produced(target, written.resource_version().as_deref());
        Ok(true)
    }

    /// Whether `object`, as a watch event shows it, is the echo of our own last status write to
    /// it (see `recent_writes`): the reconciler that wrote it has nothing to do on it.
    pub fn is_status_echo<K: Resource<DynamicType = ()>>(&self, object: &K) -> bool {
        // Every instance event passes here: borrow the names rather than copy them.
        let meta = object.meta();
        let (ns, name) = (meta.namespace.as_deref(), meta.name.as_deref());
        self.recent.is_echo(
            status_target::<K>(ns.unwrap_or_default(), name.unwrap_or_default()),
            meta.resource_version.as_deref(),
        )
    }
}

/// How a status is written, beyond a merge patch of what changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StatusWrite {
    /// Nothing more: the controller is the status's one writer, or writes fields of its own.
    #[default]
    Merge,
    /// For a status others write too, where a write decided on an old version must not land
    /// over a newer one (an AgentRun's phase: the controller's `Queued` decided on a run the
    /// API server or a test has since ended). The patch carries the resourceVersion the
    /// decision read; a conflict writes nothing and answers `false`, and the newer version's
    /// event reconciles again.
    AtVersion,
    /// For a status its reconciler reads back: until the cache shows the write,
    /// [`Writes::kept_status`] answers what was written (the chat's, whose recorded schedule
    /// entries decide what it applies next).
    Kept,
}

/// The namespace and name of a namespaced object we write; a built object without a namespace
/// is a builder's mistake.
fn names_of<K: Resource<DynamicType = ()>>(object: &K) -> Result<(String, String)> {
    let name = object.name_any();
    match object.namespace() {
        Some(ns) => Ok((ns, name)),
        None => Err(WriteError::NoNamespace {
            kind: kind::<K>(),
            name,
        }),
    }
}

/// The status of the `K` named `namespace/name`, for `recent_writes`.
fn status_target<'a, K: Resource<DynamicType = ()>>(
    namespace: &'a str,
    name: &'a str,
) -> Target<'a> {
    Target {
        kind: kind::<K>(),
        part: "status",
        namespace,
        name,
    }
}

fn kind<K: Resource<DynamicType = ()>>() -> &'static str {
    // Kinds are static strings for every type we write.
    match K::kind(&()).as_ref() {
        "Pod" => "Pod",
        "Secret" => "Secret",
        "PersistentVolumeClaim" => "PersistentVolumeClaim",
        "CronJob" => "CronJob",
        "PluginInstance" => "PluginInstance",
        "Plugin" => "Plugin",
        "Channel" => "Channel",
        "Project" => "Project",
        "AgentRun" => "AgentRun",
        "HostConfig" => "HostConfig",
        "NetworkPolicy" => "NetworkPolicy",
        _ => "Other",
    }
}
