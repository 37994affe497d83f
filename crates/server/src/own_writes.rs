//! A short-lived overlay of the objects this process just wrote over the index's stores, so a
//! plugin reads its own writes before the watch brings them back. Nothing here calls the API
//! server.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Resource, ResourceExt};

/// How long an object this process wrote is preferred over a store that has not seen it yet.
pub const FRESH_FOR: Duration = Duration::from_secs(30);

/// Objects by (namespace, name), with when they were written.
type ByName<K> = HashMap<(String, String), (Timestamp, Arc<K>)>;

/// Objects this process wrote, by (namespace, name), with when they were written.
pub struct OwnWrites<K> {
    objects: Mutex<ByName<K>>,
}

impl<K> Default for OwnWrites<K> {
    fn default() -> Self {
        Self {
            objects: Mutex::new(HashMap::new()),
        }
    }
}

impl<K> OwnWrites<K>
where
    K: Resource<DynamicType = ()> + Clone,
{
    /// Remembers what a write returned.
    pub fn remember(&self, object: K, now: Timestamp) {
        let key = (object.namespace().unwrap_or_default(), object.name_any());
        let mut objects = self.objects.lock().expect("fresh lock");
        objects.retain(|_, (at, _)| age(*at, now) < FRESH_FOR);
        objects.insert(key, (now, Arc::new(object)));
    }

    /// The newer of the store's object and the one this process wrote.
    pub fn get(
        &self,
        store: &Store<K>,
        namespace: &str,
        name: &str,
        now: Timestamp,
    ) -> Option<Arc<K>> {
        let stored = store.get(&ObjectRef::new(name).within(namespace));
        let objects = self.objects.lock().expect("fresh lock");
        let written = objects
            .get(&(namespace.to_string(), name.to_string()))
            .filter(|(at, _)| age(*at, now) < FRESH_FOR)
            .map(|(_, o)| o.clone());
        newer(stored, written)
    }

    /// The objects this process wrote recently that the store does not hold yet.
    pub fn unseen(&self, store: &Store<K>, now: Timestamp) -> Vec<Arc<K>> {
        let objects = self.objects.lock().expect("fresh lock");
        objects
            .iter()
            .filter(|(_, (at, _))| age(*at, now) < FRESH_FOR)
            .filter(|((ns, name), _)| store.get(&ObjectRef::new(name).within(ns)).is_none())
            .map(|(_, (_, o))| o.clone())
            .collect()
    }
}

fn age(at: Timestamp, now: Timestamp) -> Duration {
    Duration::try_from(now.duration_since(at)).unwrap_or(Duration::ZERO)
}

/// The object with the higher resourceVersion; the store's when they cannot be compared.
fn newer<K: Resource>(stored: Option<Arc<K>>, written: Option<Arc<K>>) -> Option<Arc<K>> {
    let rv = |k: &Arc<K>| {
        k.meta()
            .resource_version
            .as_deref()
            .and_then(|v| v.parse::<u64>().ok())
    };
    match (stored, written) {
        (Some(s), Some(w)) => match (rv(&s), rv(&w)) {
            (Some(a), Some(b)) if b > a => Some(w),
            _ => Some(s),
        },
        (s, w) => s.or(w),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::{reflector, watcher};

    use super::*;

    fn cm(name: &str, rv: &str, value: &str) -> ConfigMap {
        let mut c = ConfigMap::default();
        c.metadata.name = Some(name.into());
        c.metadata.namespace = Some("ns".into());
        c.metadata.resource_version = Some(rv.into());
        c.data = Some([("k".to_string(), value.to_string())].into());
        c
    }

    fn value(c: &ConfigMap) -> &str {
        &c.data.as_ref().unwrap()["k"]
    }

    #[test]
    fn the_newer_write_wins_until_the_store_catches_up() {
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let fresh = OwnWrites::default();
        let t0: Timestamp = "2026-01-01T00:00:00Z".parse().unwrap();
        assert!(fresh.get(&store, "ns", "a", t0).is_none());

        fresh.remember(cm("a", "5", "written"), t0);
        assert_eq!(value(&fresh.get(&store, "ns", "a", t0).unwrap()), "written");
        assert_eq!(fresh.unseen(&store, t0).len(), 1);

        writer.apply_watcher_event(&watcher::Event::Apply(cm("a", "4", "old")));
        assert_eq!(value(&fresh.get(&store, "ns", "a", t0).unwrap()), "written");
        assert!(fresh.unseen(&store, t0).is_empty());

        writer.apply_watcher_event(&watcher::Event::Apply(cm("a", "6", "newer")));
        assert_eq!(value(&fresh.get(&store, "ns", "a", t0).unwrap()), "newer");

        // A write long ago no longer counts.
        writer.apply_watcher_event(&watcher::Event::Delete(cm("a", "6", "newer")));
        let later = t0 + FRESH_FOR + Duration::from_secs(1);
        assert!(fresh.get(&store, "ns", "a", later).is_none());
    }
}
