//! How the index keeps the children the controller watches in bulk (Secrets, data claims,
//! CronJobs): the metadata the stores index and the controllers map by typed (name, namespace,
//! uid, resourceVersion, owners, deletion), and the rest as compact JSON: labels, annotations,
//! finalizers and the creation time apart, then spec, status and data as the API server sent
//! them. A reconcile that reads one turns it into the full type ([`Compact::typed`]).
//!
//! At 3,000 instances the stores held about 10,500 such children; as k8s-openapi structs each
//! costs several times its JSON (every optional field takes its room inline, a CronJob carries a
//! whole PodSpec and its Containers, a map of six labels is a B-tree node of eleven), and they
//! were most of the controller's memory. Heap per object, measured on objects like the bench's:
//! a CronJob 11.2 KB typed, a claim 5.1 KB, a Secret 2.9 KB.

use std::fmt;
use std::marker::PhantomData;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::reflector::{ObjectRef, Store};
use serde::de::{DeserializeOwned, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};

/// A stored child: part of `metadata` typed, everything else as JSON.
pub struct Compact<K> {
    /// Without labels, annotations, finalizers and creationTimestamp (they are in
    /// `described`): read labels with [`Compact::label`], the rest from [`Compact::typed`].
    pub metadata: ObjectMeta,
    /// A JSON object of the metadata fields taken out of `metadata`.
    described: Box<str>,
    /// A JSON object of the top-level fields but apiVersion, kind and metadata.
    body: Box<str>,
    kind: PhantomData<fn() -> K>,
}

/// The metadata fields a `Compact` keeps as JSON.
fn describe(metadata: &mut ObjectMeta) -> Box<str> {
    let described = ObjectMeta {
        labels: metadata.labels.take(),
        annotations: metadata.annotations.take(),
        finalizers: metadata.finalizers.take(),
        creation_timestamp: metadata.creation_timestamp.take(),
        ..Default::default()
    };
    serde_json::to_string(&described)
        .expect("ObjectMeta serializes")
        .into_boxed_str()
}

/// A stored child that no longer parses as its type.
#[derive(Debug, thiserror::Error)]
#[error("the stored {kind} {name} does not parse: {source}")]
pub struct NotParsed {
    pub kind: &'static str,
    pub name: String,
    #[source]
    pub source: serde_json::Error,
}

impl<K> Compact<K>
where
    K: k8s_openapi::Resource + k8s_openapi::Metadata<Ty = ObjectMeta> + DeserializeOwned,
{
    /// The object as its full type, parsed from what is kept.
    pub fn typed(&self) -> Result<K, NotParsed> {
        let not_parsed = |source| NotParsed {
            kind: K::KIND,
            name: self.metadata.name.clone().unwrap_or_default(),
            source,
        };
        let described: ObjectMeta = serde_json::from_str(&self.described).map_err(not_parsed)?;
        let metadata = ObjectMeta {
            labels: described.labels,
            annotations: described.annotations,
            finalizers: described.finalizers,
            creation_timestamp: described.creation_timestamp,
            ..self.metadata.clone()
        };
        let meta = serde_json::to_string(&metadata).expect("ObjectMeta serializes");
        let mut json = String::with_capacity(meta.len() + self.body.len() + 16);
        json.push_str("{\"metadata\":");
        json.push_str(&meta);
        if self.body.len() > 2 {
            json.push(',');
            json.push_str(&self.body[1..]);
        } else {
            json.push('}');
        }
        serde_json::from_str(&json).map_err(not_parsed)
    }

    /// What the store would hold for `object` (the stores of the controller's tests).
    pub fn of(object: &K) -> Self
    where
        K: serde::Serialize,
    {
        let json = serde_json::to_string(object).expect("objects serialize");
        serde_json::from_str(&json).expect("a serialized object reads back")
    }
}

impl<K> Compact<K> {
    /// The JSON object of the metadata fields kept apart: labels, annotations, finalizers and
    /// the creation time.
    pub fn described(&self) -> &str {
        &self.described
    }

    /// The JSON object of the top-level fields but apiVersion, kind and metadata.
    pub fn body(&self) -> &str {
        &self.body
    }

    /// The value of the label `key`.
    pub fn label(&self, key: &str) -> Option<String> {
        #[derive(Deserialize)]
        struct Labels {
            #[serde(default)]
            labels: std::collections::BTreeMap<String, String>,
        }
        let mut labels = serde_json::from_str::<Labels>(&self.described).ok()?.labels;
        labels.remove(key)
    }
}

/// The child named `name` in `namespace`, as its full type; `None` when the store has none.
pub fn get<K>(
    store: &Store<Compact<K>>,
    name: &str,
    namespace: &str,
) -> Result<Option<K>, NotParsed>
where
    K: k8s_openapi::Resource<Scope = k8s_openapi::NamespaceResourceScope>
        + k8s_openapi::Metadata<Ty = ObjectMeta>
        + DeserializeOwned,
{
    store
        .get(&ObjectRef::new(name).within(namespace))
        .map(|compact| compact.typed())
        .transpose()
}

impl<K> Clone for Compact<K> {
    fn clone(&self) -> Self {
        Compact {
            metadata: self.metadata.clone(),
            described: self.described.clone(),
            body: self.body.clone(),
            kind: PhantomData,
        }
    }
}

impl<K: k8s_openapi::Resource> fmt::Debug for Compact<K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct(K::KIND)
            .field("metadata", &self.metadata)
            .field("described", &self.described)
            .field("body", &self.body)
            .finish()
    }
}

impl<K: k8s_openapi::Resource> k8s_openapi::Resource for Compact<K> {
    const API_VERSION: &'static str = K::API_VERSION;
    const GROUP: &'static str = K::GROUP;
    const KIND: &'static str = K::KIND;
    const VERSION: &'static str = K::VERSION;
    const URL_PATH_SEGMENT: &'static str = K::URL_PATH_SEGMENT;
    type Scope = K::Scope;
}

impl<K: k8s_openapi::Resource> k8s_openapi::Metadata for Compact<K> {
    type Ty = ObjectMeta;

    fn metadata(&self) -> &ObjectMeta {
        &self.metadata
    }

    fn metadata_mut(&mut self) -> &mut ObjectMeta {
        &mut self.metadata
    }
}

impl<'de, K> Deserialize<'de> for Compact<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(CompactVisitor(PhantomData))
    }
}

struct CompactVisitor<K>(PhantomData<fn() -> K>);

impl<'de, K> Visitor<'de> for CompactVisitor<K> {
    type Value = Compact<K>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a Kubernetes object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Compact<K>, A::Error> {
        let mut metadata = ObjectMeta::default();
        let mut body = Vec::with_capacity(256);
        body.push(b'{');
        while let Some(key) = map.next_key::<String>()? {
            match key.as_str() {
                "metadata" => metadata = map.next_value::<ObjectMeta>()?,
                "apiVersion" | "kind" => {
                    map.next_value::<IgnoredAny>()?;
                }
                _ => {
                    next_item(&mut body, 1);
                    serde_json::to_writer(&mut body, &key).expect("strings serialize");
                    body.push(b':');
                    map.next_value_seed(ToJson(&mut body))?;
                }
            }
        }
        body.push(b'}');
        let body = String::from_utf8(body).expect("serde_json writes UTF-8");
        let described = describe(&mut metadata);
        Ok(Compact {
            metadata,
            described,
            body: body.into_boxed_str(),
            kind: PhantomData,
        })
    }
}

/// Starts the next item of the JSON array or object whose first item would start at `start`:
/// a comma unless it is the first. Returns where the item starts, to take back the comma when
/// there is no item after all.
fn next_item(out: &mut Vec<u8>, start: usize) -> usize {
    let mark = out.len();
    if mark > start {
        out.push(b',');
    }
    mark
}

/// Writes the value it deserializes as JSON, with no tree in between. It works from any
/// deserializer: serde buffers a watch event's object when its `type` comes after it.
struct ToJson<'a>(&'a mut Vec<u8>);

impl<'de> DeserializeSeed<'de> for ToJson<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl ToJson<'_> {
    fn write<T: serde::Serialize + ?Sized, E>(self, value: &T) -> Result<(), E> {
        serde_json::to_writer(self.0, value).expect("plain values serialize");
        Ok(())
    }
}

impl<'de> Visitor<'de> for ToJson<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<(), E> {
        self.write(&v)
    }

    fn visit_i64<E>(self, v: i64) -> Result<(), E> {
        self.write(&v)
    }

    fn visit_u64<E>(self, v: u64) -> Result<(), E> {
        self.write(&v)
    }

    fn visit_f64<E>(self, v: f64) -> Result<(), E> {
        self.write(&v)
    }

    fn visit_str<E>(self, v: &str) -> Result<(), E> {
        self.write(v)
    }

    fn visit_unit<E>(self) -> Result<(), E> {
        self.write(&())
    }

    fn visit_none<E>(self) -> Result<(), E> {
        self.write(&())
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.0.push(b'[');
        let start = self.0.len();
        loop {
            let mark = next_item(self.0, start);
            if seq.next_element_seed(ToJson(self.0))?.is_none() {
                self.0.truncate(mark);
                break;
            }
        }
        self.0.push(b']');
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.0.push(b'{');
        let start = self.0.len();
        loop {
            let mark = next_item(self.0, start);
            if map.next_key_seed(ToJson(self.0))?.is_none() {
                self.0.truncate(mark);
                break;
            }
            self.0.push(b':');
            map.next_value_seed(ToJson(self.0))?;
        }
        self.0.push(b'}');
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::CronJob;
    use k8s_openapi::api::core::v1::Secret;
    use kube::core::{ObjectList, WatchEvent};

    fn cronjob() -> serde_json::Value {
        serde_json::json!({
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {
                "name": "tick", "namespace": "p", "uid": "u-1", "resourceVersion": "7",
                "labels": {"loop.dev/plugin": "echo"},
                "annotations": {"loop.dev/entry": "abc"},
                "finalizers": ["loop.dev/keep"],
                "creationTimestamp": "2026-12-03T09:00:00Z",
                "ownerReferences": [{"apiVersion": "plugins.loop.dev/v1alpha1", "kind": "Channel",
                    "name": "general", "uid": "u-0", "controller": true}],
                "managedFields": [{"manager": "loop-plugins", "operation": "Update"}]
            },
            "spec": {
                "schedule": "*/5 * * * *",
                "suspend": false,
                "jobTemplate": {"spec": {"template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "trigger", "image": "img@sha256:00", "args": ["a \"quoted\" arg"]}]
                }}}}
            },
            "status": {"lastScheduleTime": "2026-12-03T10:00:00Z"}
        })
    }

    #[test]
    fn reads_back_as_the_object_the_api_server_sent() {
        let sent: CronJob = serde_json::from_value(cronjob()).unwrap();
        let compact: Compact<CronJob> = serde_json::from_value(cronjob()).unwrap();
        assert_eq!(compact.typed().unwrap(), sent);
        assert_eq!(Compact::of(&sent).typed().unwrap(), sent);
        assert_eq!(compact.label("loop.dev/plugin").as_deref(), Some("echo"));
        assert_eq!(compact.label("loop.dev/channel"), None);
        // What the store and the owner mapping read is there; the rest is not, so nothing
        // reads labels from `metadata` by mistake.
        assert_eq!(compact.metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(compact.metadata.resource_version.as_deref(), Some("7"));
        assert_eq!(
            compact.metadata.owner_references,
            sent.metadata.owner_references
        );
        assert!(compact.metadata.labels.is_none() && compact.metadata.annotations.is_none());
        assert!(
            compact.metadata.creation_timestamp.is_none() && compact.metadata.finalizers.is_none()
        );
    }

    #[test]
    fn keeps_less_than_the_typed_object_would() {
        let compact: Compact<CronJob> = serde_json::from_value(cronjob()).unwrap();
        assert!(!compact.body.contains("metadata") && !compact.body.contains("apiVersion"));
        assert!(compact.body.starts_with("{\"spec\":") && compact.body.contains("\"status\":"));
        assert!(std::mem::size_of::<Compact<CronJob>>() * 4 < std::mem::size_of::<CronJob>());
    }

    #[test]
    fn an_object_with_only_metadata_reads_back() {
        let json =
            serde_json::json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}});
        let compact: Compact<Secret> = serde_json::from_value(json.clone()).unwrap();
        assert_eq!(&*compact.body, "{}");
        assert_eq!(
            compact.typed().unwrap(),
            serde_json::from_value::<Secret>(json).unwrap()
        );
    }

    // kube reads lists, watch events and deletion answers with `serde_json::from_slice`; a
    // list's flattened type fields, or an event whose `type` comes last (as here: `json!`
    // sorts keys), make serde buffer the object before it reaches `Compact`.
    #[test]
    fn reads_from_lists_and_watch_events_as_kube_does() {
        let list = serde_json::json!({
            "apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": "9"},
            "items": [cronjob(), cronjob()]
        });
        let bytes = serde_json::to_vec(&list).unwrap();
        let list: ObjectList<Compact<CronJob>> = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(list.items.len(), 2);
        assert_eq!(list.items[1].typed().unwrap().spec.schedule, "*/5 * * * *");

        let event = serde_json::json!({"type": "MODIFIED", "object": cronjob()});
        let bytes = serde_json::to_vec(&event).unwrap();
        match serde_json::from_slice::<WatchEvent<Compact<CronJob>>>(&bytes).unwrap() {
            WatchEvent::Modified(compact) => {
                assert_eq!(compact.metadata.resource_version.as_deref(), Some("7"))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_body_that_is_not_the_type_names_the_object() {
        let mut json = cronjob();
        json["spec"]["schedule"] = serde_json::json!(42);
        let compact: Compact<CronJob> = serde_json::from_value(json).unwrap();
        let err = compact.typed().unwrap_err();
        assert!(
            err.to_string()
                .starts_with("the stored CronJob tick does not parse"),
            "{err}"
        );
    }
}
