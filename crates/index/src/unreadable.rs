//! Objects a watch cannot read, kept out of the stores while every other object of their kind
//! is served (as linkerd's policy controller skips invalid objects).
//!
//! kube's watcher reads a list or a watch event as the type of its store, and one object that
//! does not parse fails the whole list (kube-rs#774): a Plugin whose `purgeOnDelete` a newer CRD
//! lets be a string, or whose manifest nests deeper than serde_json's 128 levels (the API
//! server takes thousands), stopped every Plugin from being read. So each watch reads its kind
//! as [`Guarded`], which always parses: the object as its type, or, when it does not parse, its
//! name and version and why. [`Guard`] then turns the watch's events into events of the type:
//!
//! | the watch sees | the store gets | [`Unreadables`] |
//! |---|---|---|
//! | an object that parses (listed, made, changed) | it | forgets it, if it held it |
//! | an object that does not parse, listed | nothing: the relist leaves it out | holds it |
//! | an object that does not parse, made or changed | a deletion of what the store held of it, if anything | holds it |
//! | a deletion | the deletion, if the store held it | forgets it |
//! | a list's end | the list | forgets what the list did not show |
//!
//! [`Unreadables`] is what the process knows it left out: it logs each object once per
//! version (warn, with its kind, namespace/name and the parse error), counts them by kind for
//! the metrics, and tells a subscriber when that changed (the controller publishes an Event
//! on each, once per version).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;
use serde_path_to_error::Segment;
use tokio::sync::watch;

/// How much of the path to the field that does not parse an error names: a path into an
/// object nested past the recursion limit is 128 fields long.
const PATH_SHOWN: usize = 8;
/// How much of a parse error an [`Unreadable`] keeps (an Event's note holds 1 kB).
const ERROR_KEPT: usize = 512;

/// An object of a watched kind as a watch reads it: its type, or why it is not.
#[derive(Clone, Debug)]
pub enum Guarded<K> {
    Readable(K),
    /// Boxed: rare, and the objects kept compact are smaller.
    Unreadable(Box<Unreadable>),
}

/// An object that does not parse as its type: who it is, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct Unreadable {
    /// Its name, namespace, uid, resourceVersion and generation; nothing else.
    pub metadata: ObjectMeta,
    /// The parse error, with the path to the field it is about.
    pub error: String,
}

impl<K: DeserializeOwned> Guarded<K> {
    /// Reads one object's JSON. Fails only when not even its metadata reads (which the API
    /// server never sends).
    pub fn read(json: &str) -> Result<Self, serde_json::Error> {
        match serde_json::from_str::<K>(json) {
            Ok(object) => Ok(Guarded::Readable(object)),
            Err(error) => {
                // Ignored fields are skipped without recursion, so this reads at any depth.
                let identity: Identity = serde_json::from_str(json)?;
                Ok(Guarded::Unreadable(Box::new(Unreadable {
                    metadata: identity.metadata.into(),
                    error: describe::<K>(json, error),
                })))
            }
        }
    }
}

/// The error of reading `json` as `K`, led by the path to the field it is about.
fn describe<K: DeserializeOwned>(json: &str, error: serde_json::Error) -> String {
    let mut de = serde_json::Deserializer::from_str(json);
    let text = match serde_path_to_error::deserialize::<_, K>(&mut de) {
        Err(traced) => {
            let segments: Vec<&Segment> = traced.path().iter().collect();
            let mut path = String::new();
            for segment in segments.iter().take(PATH_SHOWN) {
                match segment {
                    Segment::Seq { index } => path.push_str(&format!("[{index}]")),
                    named => {
                        if !path.is_empty() {
                            path.push('.');
                        }
                        path.push_str(&named.to_string());
                    }
                }
            }
            if segments.len() > PATH_SHOWN {
                path.push_str(&format!("... ({} levels)", segments.len()));
            }
            match path.as_str() {
                "" | "?" => traced.into_inner().to_string(),
                _ => format!("{path}: {}", traced.into_inner()),
            }
        }
        Ok(_) => error.to_string(),
    };
    truncate(text, ERROR_KEPT)
}

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// The metadata of an object that does not parse.
#[derive(Deserialize)]
struct Identity {
    #[serde(default)]
    metadata: Ids,
}

#[derive(Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Ids {
    name: Option<String>,
    namespace: Option<String>,
    uid: Option<String>,
    resource_version: Option<String>,
    generation: Option<i64>,
}

impl From<Ids> for ObjectMeta {
    fn from(ids: Ids) -> Self {
        ObjectMeta {
            name: ids.name,
            namespace: ids.namespace,
            uid: ids.uid,
            resource_version: ids.resource_version,
            generation: ids.generation,
            ..Default::default()
        }
    }
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Guarded<K> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        // The object's text as sent, taken without recursion: a value nested past the
        // recursion limit is captured whole, and only reading it as `K` refuses it. kube reads
        // lists and watch events with serde_json, which hands each item here directly.
        let raw = Box::<RawValue>::deserialize(deserializer)?;
        Self::read(raw.get())
            .map_err(|e| D::Error::custom(format!("not even its metadata reads: {e}")))
    }
}

impl<K: Resource> Resource for Guarded<K> {
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &K::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &K::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &K::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn api_version(dt: &K::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }

    fn plural(dt: &K::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn url_path(dt: &K::DynamicType, namespace: Option<&str>) -> String {
        K::url_path(dt, namespace)
    }

    fn meta(&self) -> &ObjectMeta {
        match self {
            Guarded::Readable(object) => object.meta(),
            Guarded::Unreadable(unreadable) => &unreadable.metadata,
        }
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Guarded::Readable(object) => object.meta_mut(),
            Guarded::Unreadable(unreadable) => &mut unreadable.metadata,
        }
    }
}

/// One object a watch of this process left out.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct UnreadableObject {
    pub kind: String,
    pub api_version: String,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub error: String,
}

impl UnreadableObject {
    /// `namespace/name`, or the name of a cluster-scoped object.
    pub fn key(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{ns}/{}", self.name),
            None => self.name.clone(),
        }
    }

    /// The object, as an Event's `regarding` names it.
    pub fn reference(&self) -> ObjectReference {
        ObjectReference {
            api_version: Some(self.api_version.clone()),
            kind: Some(self.kind.clone()),
            name: Some(self.name.clone()),
            namespace: self.namespace.clone(),
            uid: self.uid.clone(),
            resource_version: self.resource_version.clone(),
            ..Default::default()
        }
    }
}

/// Which watch of the process an entry is from: two watches may read one kind (the
/// controller's Secrets and its namespace's), and each list forgets only its own.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WatchId(u32);

/// The objects every watch of the process left out, and a count of the changes to them.
#[derive(Debug)]
pub struct Unreadables {
    inner: Mutex<Inner>,
    changed: watch::Sender<u64>,
}

#[derive(Debug, Default)]
struct Inner {
    watches: u32,
    /// By watch, namespace and name.
    held: BTreeMap<(WatchId, Option<String>, String), UnreadableObject>,
    /// The watches listing now, and the objects their list showed that do not parse (those
    /// that parse are forgotten as they come, those the list did not show are gone).
    listing: BTreeMap<WatchId, BTreeSet<(Option<String>, String)>>,
}

impl Default for Unreadables {
    fn default() -> Self {
        Self {
            inner: Mutex::default(),
            changed: watch::channel(0).0,
        }
    }
}

impl Unreadables {
    /// A new watch's id.
    pub fn watch(&self) -> WatchId {
        let mut inner = self.lock();
        inner.watches += 1;
        WatchId(inner.watches)
    }

    /// Every object left out, once each (however many watches left it out).
    pub fn objects(&self) -> Vec<UnreadableObject> {
        let inner = self.lock();
        let mut seen = BTreeSet::new();
        inner
            .held
            .values()
            .filter(|o| seen.insert((o.kind.clone(), o.namespace.clone(), o.name.clone())))
            .cloned()
            .collect()
    }

    /// How many objects of each kind are left out.
    pub fn counts(&self) -> BTreeMap<String, i64> {
        let mut counts = BTreeMap::new();
        for object in self.objects() {
            *counts.entry(object.kind).or_default() += 1;
        }
        counts
    }

    /// Changes each time an object is left out, or is no longer.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock leaves maps that are still whole.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bump(&self) {
        self.changed.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// `object` of `watch` does not parse: held (and logged) unless this version already is.
    fn left_out(&self, watch: WatchId, object: UnreadableObject) {
        let mut inner = self.lock();
        let at = (object.namespace.clone(), object.name.clone());
        if let Some(listed) = inner.listing.get_mut(&watch) {
            listed.insert(at.clone());
        }
        let key = (watch, at.0, at.1);
        if inner.held.get(&key) == Some(&object) {
            return;
        }
        tracing::warn!(
            kind = %object.kind,
            object = %object.key(),
            resource_version = object.resource_version.as_deref().unwrap_or_default(),
            error = %object.error,
            "an object that does not parse is left out of the index until it changes"
        );
        inner.held.insert(key, object);
        drop(inner);
        self.bump();
    }

    /// The object at `namespace`/`name` of `watch` parses, or is gone.
    fn forget(&self, watch: WatchId, kind: &str, namespace: Option<&str>, name: &str, gone: bool) {
        let mut inner = self.lock();
        if inner.held.is_empty() {
            return;
        }
        let key = (watch, namespace.map(String::from), name.to_string());
        if inner.held.remove(&key).is_none() {
            return;
        }
        let object = namespace.map_or_else(|| name.to_string(), |ns| format!("{ns}/{name}"));
        match gone {
            true => tracing::info!(%kind, %object, "an object that did not parse is gone"),
            false => tracing::info!(%kind, %object, "an object that did not parse now does"),
        }
        drop(inner);
        self.bump();
    }

    /// `watch` lists again.
    fn list_started(&self, watch: WatchId) {
        self.lock().listing.insert(watch, BTreeSet::new());
    }

    /// `watch`'s list is done: what it did not show is gone.
    fn list_done(&self, watch: WatchId) {
        let mut inner = self.lock();
        let listed = inner.listing.remove(&watch).unwrap_or_default();
        let before = inner.held.len();
        inner
            .held
            .retain(|(w, ns, name), _| *w != watch || listed.contains(&(ns.clone(), name.clone())));
        let changed = inner.held.len() != before;
        drop(inner);
        if changed {
            self.bump();
        }
    }
}

/// Turns one watch's events of [`Guarded`] objects into events of their type (the table in
/// the module doc), recording what it leaves out in [`Unreadables`].
pub struct Guard<K> {
    kind: String,
    api_version: String,
    watch: WatchId,
    unreadables: Arc<Unreadables>,
    _kind: PhantomData<fn() -> K>,
}

impl<K> Guard<K>
where
    K: Resource + Clone,
    K::DynamicType: Default,
{
    /// The guard of a new watch of `K`, recording in `unreadables`.
    pub fn new(unreadables: Arc<Unreadables>) -> Self {
        let dt = K::DynamicType::default();
        Self {
            kind: K::kind(&dt).into_owned(),
            api_version: K::api_version(&dt).into_owned(),
            watch: unreadables.watch(),
            unreadables,
            _kind: PhantomData,
        }
    }

    /// The event the store gets for `event`, if any; `stored` answers what the store holds.
    pub fn convert(
        &mut self,
        event: watcher::Event<Guarded<K>>,
        stored: impl Fn(&ObjectRef<K>) -> Option<Arc<K>>,
    ) -> Option<watcher::Event<K>> {
        use watcher::Event;
        match event {
            Event::Init => {
                self.unreadables.list_started(self.watch);
                Some(Event::Init)
            }
            Event::InitDone => {
                self.unreadables.list_done(self.watch);
                Some(Event::InitDone)
            }
            Event::InitApply(Guarded::Readable(object)) => {
                self.readable(&object, false);
                Some(Event::InitApply(object))
            }
            Event::Apply(Guarded::Readable(object)) => {
                self.readable(&object, false);
                Some(Event::Apply(object))
            }
            Event::Delete(Guarded::Readable(object)) => {
                self.readable(&object, true);
                Some(Event::Delete(object))
            }
            Event::InitApply(Guarded::Unreadable(unreadable)) => {
                self.left_out(unreadable);
                None
            }
            Event::Apply(Guarded::Unreadable(unreadable)) => {
                let held = stored(&self.object_ref(&unreadable.metadata));
                self.left_out(unreadable);
                held.map(|object| Event::Delete((*object).clone()))
            }
            Event::Delete(Guarded::Unreadable(unreadable)) => {
                let meta = &unreadable.metadata;
                let name = meta.name.as_deref().unwrap_or_default();
                let ns = meta.namespace.as_deref();
                self.unreadables
                    .forget(self.watch, &self.kind, ns, name, true);
                let held = stored(&self.object_ref(meta));
                held.map(|object| Event::Delete((*object).clone()))
            }
        }
    }

    fn object_ref(&self, meta: &ObjectMeta) -> ObjectRef<K> {
        let name = meta.name.as_deref().unwrap_or_default();
        let at = ObjectRef::new_with(name, K::DynamicType::default());
        match meta.namespace.as_deref() {
            Some(ns) => at.within(ns),
            None => at,
        }
    }

    fn readable(&self, object: &K, gone: bool) {
        let meta = object.meta();
        let name = meta.name.as_deref().unwrap_or_default();
        self.unreadables.forget(
            self.watch,
            &self.kind,
            meta.namespace.as_deref(),
            name,
            gone,
        );
    }

    fn left_out(&self, unreadable: Box<Unreadable>) {
        let Unreadable { metadata, error } = *unreadable;
        self.unreadables.left_out(
            self.watch,
            UnreadableObject {
                kind: self.kind.clone(),
                api_version: self.api_version.clone(),
                namespace: metadata.namespace,
                name: metadata.name.unwrap_or_default(),
                uid: metadata.uid,
                resource_version: metadata.resource_version,
                error,
            },
        );
    }
}

impl fmt::Display for UnreadableObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.kind, self.key(), self.error)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::{ObjectList, WatchEvent};
    use model::resources::Plugin;
    use serde_json::{Value, json};

    /// `{"a": {"a": ... 1}}`, `levels` deep.
    fn deep(levels: usize) -> String {
        format!("{}1{}", "{\"a\":".repeat(levels), "}".repeat(levels))
    }

    fn plugin_json(name: &str, version: &str) -> Value {
        json!({
            "apiVersion": "plugins.loop.dev/v1alpha1", "kind": "Plugin",
            "metadata": {"name": name, "uid": format!("uid-{name}"), "resourceVersion": version,
                         "generation": 1},
            "spec": {
                "image": format!("r.test/{name}@sha256:{}", "a".repeat(64)),
                "manifest": {"id": name, "name": name, "version": "0.1.0", "api": "1"},
            }
        })
    }

    /// A Plugin whose manifest nests `levels` deep, as JSON text (serde_json's `Value` could
    /// not even hold it for long: dropping it recurses).
    fn deep_plugin(name: &str, version: &str, levels: usize) -> String {
        let mut json = plugin_json(name, version);
        json["spec"]["manifest"]["deep"] = json!("DEEP");
        json.to_string().replace("\"DEEP\"", &deep(levels))
    }

    fn read(json: &str) -> Guarded<Plugin> {
        Guarded::read(json).expect("its metadata reads")
    }

    fn unreadable(guarded: Guarded<Plugin>) -> Unreadable {
        match guarded {
            Guarded::Unreadable(u) => *u,
            Guarded::Readable(p) => panic!("read {}", p.metadata.name.unwrap_or_default()),
        }
    }

    #[test]
    fn an_object_that_parses_is_read_as_its_type() {
        match read(&plugin_json("echo", "1").to_string()) {
            Guarded::Readable(plugin) => assert_eq!(plugin.spec.manifest.id, "echo"),
            Guarded::Unreadable(u) => panic!("{}", u.error),
        }
    }

    #[test]
    fn an_object_nested_thousands_deep_is_named_with_why() {
        let left_out = unreadable(read(&deep_plugin("deep", "7", 5_000)));
        assert_eq!(left_out.metadata.name.as_deref(), Some("deep"));
        assert_eq!(left_out.metadata.uid.as_deref(), Some("uid-deep"));
        assert_eq!(left_out.metadata.resource_version.as_deref(), Some("7"));
        assert!(
            left_out.error.contains("recursion limit exceeded"),
            "{}",
            left_out.error
        );
        // The path to it, cut short.
        assert!(
            left_out
                .error
                .starts_with("spec.manifest.deep.a.a.a.a.a... ("),
            "{}",
            left_out.error
        );
        assert!(left_out.error.len() <= ERROR_KEPT + '…'.len_utf8());
    }

    #[test]
    fn a_value_a_newer_schema_allows_is_named_with_its_field() {
        let mut json = plugin_json("loose", "3");
        json["spec"]["purgeOnDelete"] = json!("yes");
        let left_out = unreadable(read(&json.to_string()));
        assert!(
            left_out.error.starts_with(
                "spec.purgeOnDelete: invalid type: string \"yes\", expected a boolean"
            ),
            "{}",
            left_out.error
        );
    }

    #[test]
    fn an_object_without_metadata_fails_to_read() {
        assert!(Guarded::<Plugin>::read(r#"{"metadata": 5}"#).is_err());
    }

    // kube reads a list and a watch event with serde_json, the object's own text reaching
    // `Guarded` (a list's type fields are flattened, its items are not; an event's `type` comes
    // first from the API server): a deep item fails neither.
    #[test]
    fn lists_and_watch_events_with_a_deep_object_read_as_kube_reads_them() {
        let list = format!(
            r#"{{"kind":"PluginList","apiVersion":"plugins.loop.dev/v1alpha1","metadata":{{"resourceVersion":"9"}},"items":[{},{}]}}"#,
            plugin_json("good", "8"),
            deep_plugin("deep", "9", 5_000)
        );
        let list: ObjectList<Guarded<Plugin>> = serde_json::from_str(&list).expect("the list");
        assert!(matches!(list.items[0], Guarded::Readable(_)));
        assert!(matches!(list.items[1], Guarded::Unreadable(_)));

        let event = format!(
            r#"{{"type":"ADDED","object":{}}}"#,
            deep_plugin("deep", "9", 300)
        );
        match serde_json::from_str::<WatchEvent<Guarded<Plugin>>>(&event).expect("the event") {
            WatchEvent::Added(guarded) => {
                assert_eq!(guarded.meta().resource_version.as_deref(), Some("9"))
            }
            other => panic!("{other:?}"),
        }
    }

    /// A watch of Plugins over a store, as `Watch::spawn` runs one.
    struct Run {
        guard: Guard<Plugin>,
        store: kube::runtime::reflector::Store<Plugin>,
        writer: kube::runtime::reflector::store::Writer<Plugin>,
        unreadables: Arc<Unreadables>,
    }

    impl Run {
        fn new(unreadables: &Arc<Unreadables>) -> Self {
            let (store, writer) = kube::runtime::reflector::store();
            Self {
                guard: Guard::new(unreadables.clone()),
                store,
                writer,
                unreadables: unreadables.clone(),
            }
        }

        /// Gives `event` to the guard, and what comes out of it to the store.
        fn see(
            &mut self,
            event: watcher::Event<Guarded<Plugin>>,
        ) -> Option<watcher::Event<Plugin>> {
            let store = self.store.clone();
            let out = self.guard.convert(event, |at| store.get(at));
            if let Some(event) = &out {
                self.writer.apply_watcher_event(event);
            }
            out
        }

        fn stored(&self) -> Vec<String> {
            let mut names: Vec<String> = self
                .store
                .state()
                .iter()
                .map(|p| p.metadata.name.clone().unwrap_or_default())
                .collect();
            names.sort();
            names
        }

        fn held(&self) -> Vec<(String, String)> {
            self.unreadables
                .objects()
                .into_iter()
                .map(|o| (o.name, o.resource_version.unwrap_or_default()))
                .collect()
        }
    }

    fn good(name: &str, version: &str) -> Guarded<Plugin> {
        read(&plugin_json(name, version).to_string())
    }

    fn bad(name: &str, version: &str) -> Guarded<Plugin> {
        read(&deep_plugin(name, version, 200))
    }

    fn list(run: &mut Run, objects: Vec<Guarded<Plugin>>) {
        run.see(watcher::Event::Init);
        for object in objects {
            run.see(watcher::Event::InitApply(object));
        }
        run.see(watcher::Event::InitDone);
    }

    #[test]
    fn a_listed_object_that_does_not_parse_is_left_out_and_the_rest_stored() {
        let unreadables = Arc::default();
        let mut run = Run::new(&unreadables);
        list(
            &mut run,
            vec![good("a", "1"), bad("b", "2"), good("c", "3")],
        );
        assert_eq!(run.stored(), ["a", "c"]);
        assert_eq!(run.held(), [("b".to_string(), "2".to_string())]);
        let object = &unreadables.objects()[0];
        assert_eq!(object.kind, "Plugin");
        assert_eq!(object.api_version, "plugins.loop.dev/v1alpha1");
        assert_eq!(object.namespace, None);
        assert_eq!(object.uid.as_deref(), Some("uid-b"));
        assert_eq!(unreadables.counts(), BTreeMap::from([("Plugin".into(), 1)]));
        let reference = object.reference();
        assert_eq!(reference.kind.as_deref(), Some("Plugin"));
        assert_eq!(reference.resource_version.as_deref(), Some("2"));
    }

    #[test]
    fn a_stored_object_changed_into_one_that_does_not_parse_is_forgotten() {
        let unreadables = Arc::default();
        let mut run = Run::new(&unreadables);
        list(&mut run, vec![good("a", "1"), good("b", "2")]);
        let out = run.see(watcher::Event::Apply(bad("b", "5")));
        assert!(
            matches!(&out, Some(watcher::Event::Delete(p)) if p.metadata.name.as_deref() == Some("b")),
            "{out:?}"
        );
        assert_eq!(run.stored(), ["a"]);
        assert_eq!(run.held(), [("b".to_string(), "5".to_string())]);
        // Another version that does not parse: nothing more to forget, and it is held anew.
        assert!(run.see(watcher::Event::Apply(bad("b", "6"))).is_none());
        assert_eq!(run.held(), [("b".to_string(), "6".to_string())]);
        // One made that does not parse never reaches the store.
        assert!(run.see(watcher::Event::Apply(bad("c", "7"))).is_none());
        assert_eq!(run.stored(), ["a"]);
    }

    #[test]
    fn once_fixed_it_enters_the_store_and_is_no_longer_held() {
        let unreadables: Arc<Unreadables> = Arc::default();
        let mut run = Run::new(&unreadables);
        list(&mut run, vec![bad("b", "2")]);
        let mut changes = unreadables.subscribe();
        changes.mark_unchanged();
        let out = run.see(watcher::Event::Apply(good("b", "3")));
        assert!(matches!(out, Some(watcher::Event::Apply(_))));
        assert_eq!(run.stored(), ["b"]);
        assert!(run.held().is_empty());
        assert!(changes.has_changed().unwrap(), "the subscriber hears it");
        assert!(unreadables.counts().is_empty());
    }

    #[test]
    fn a_deleted_object_that_did_not_parse_is_no_longer_held() {
        let unreadables = Arc::default();
        let mut run = Run::new(&unreadables);
        list(&mut run, vec![good("a", "1"), bad("b", "2")]);
        assert!(run.see(watcher::Event::Delete(bad("b", "3"))).is_none());
        assert!(run.held().is_empty());
        assert_eq!(run.stored(), ["a"]);
    }

    #[test]
    fn a_relist_holds_each_version_once_and_forgets_what_it_no_longer_shows() {
        let unreadables: Arc<Unreadables> = Arc::default();
        let mut run = Run::new(&unreadables);
        list(&mut run, vec![bad("b", "2"), bad("c", "3")]);
        let mut changes = unreadables.subscribe();
        changes.mark_unchanged();
        // The same versions again: nothing new to tell.
        list(&mut run, vec![bad("b", "2"), bad("c", "3")]);
        assert!(!changes.has_changed().unwrap());
        // c went while the watch was away.
        list(&mut run, vec![bad("b", "2")]);
        assert!(changes.has_changed().unwrap());
        assert_eq!(run.held(), [("b".to_string(), "2".to_string())]);
    }

    #[test]
    fn a_list_forgets_only_what_its_own_watch_held() {
        let unreadables: Arc<Unreadables> = Arc::default();
        let mut one = Run::new(&unreadables);
        let mut other = Run::new(&unreadables);
        list(&mut one, vec![bad("b", "2")]);
        list(&mut other, vec![bad("b", "2")]);
        list(&mut other, vec![]);
        assert_eq!(one.held(), [("b".to_string(), "2".to_string())]);
        assert_eq!(unreadables.counts(), BTreeMap::from([("Plugin".into(), 1)]));
    }
}
