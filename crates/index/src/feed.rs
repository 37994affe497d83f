//! The subscribers of one kind's watch, as the streams a kube `Controller` takes: each gets
//! every object the watch applies or deletes. Unlike kube's shared streams, deletions reach
//! them too, so a Pod or a Project that goes away wakes what depends on it.
//!
//! A subscriber may join at any time: it first gets what the store holds (as listed, so it
//! may stand for changes it missed), then every change after. One that joins while the watch
//! lists waits for the list to end and gets the store as listed then, so a join never loses an
//! object. A subscriber may skip the echoes of its own writes ([`Feed::subscribe_without_echoes`])
//! or be woken only when an object's fingerprint, a hash of the parts it acts on, changed
//! ([`Feed::subscribe_on_change`]).

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::{BuildHasher, Hash};
use std::sync::{Arc, Mutex, MutexGuard};

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use futures::{Stream, StreamExt};
use kube::Resource;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;

/// An object as a watch event left it.
struct Touched<K> {
    object: K,
    /// Deleted, rather than made or changed.
    gone: bool,
    /// From a (re)list rather than a change: it may stand for changes the watch missed.
    listed: bool,
}

/// The subscribers of one kind's watch (cheap to clone: clones share them).
pub struct Feed<K: Resource + 'static>
where
    K::DynamicType: Hash + Eq,
{
    shared: Arc<Shared<K>>,
}

struct Shared<K: Resource + 'static>
where
    K::DynamicType: Hash + Eq,
{
    /// The kind's store, which a joining subscriber first gets.
    store: Store<K>,
    subscribers: Mutex<Subscribers<K>>,
}

struct Subscribers<K> {
    /// Those that get each event.
    joined: Vec<UnboundedSender<Touched<K>>>,
    /// Those that joined while the watch listed: they get the store once the list is done.
    waiting: Vec<UnboundedSender<Touched<K>>>,
    /// Between a list's start and its end.
    listing: bool,
}

impl<K: Resource + 'static> Clone for Feed<K>
where
    K::DynamicType: Hash + Eq,
{
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
        }
    }
}

impl<K> Feed<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Hash + Eq + Clone + Default,
{
    /// The subscribers of the watch that fills `store`; none yet.
    pub fn new(store: Store<K>) -> Self {
        Self {
            shared: Arc::new(Shared {
                store,
                subscribers: Mutex::new(Subscribers {
                    joined: Vec::new(),
                    waiting: Vec::new(),
                    listing: false,
                }),
            }),
        }
    }

    /// Gives one event of the watch, once the store holds it, to every subscriber.
    pub fn send(&self, event: &watcher::Event<K>) {
        let mut subscribers = self.lock();
        let (object, gone, listed) = match event {
            watcher::Event::Apply(object) => (object, false, false),
            watcher::Event::InitApply(object) => (object, false, true),
            watcher::Event::Delete(object) => (object, true, false),
            watcher::Event::Init => {
                subscribers.listing = true;
                return;
            }
            watcher::Event::InitDone => {
                subscribers.listing = false;
                let waiting = std::mem::take(&mut subscribers.waiting);
                for subscriber in waiting {
                    if self.give_store(&subscriber) {
                        subscribers.joined.push(subscriber);
                    }
                }
                return;
            }
        };
        subscribers.joined.retain(|subscriber| {
            subscriber
                .unbounded_send(Touched {
                    object: object.clone(),
                    gone,
                    listed,
                })
                .is_ok()
        });
    }

    /// The next subscriber's stream of every object applied or deleted.
    pub fn subscribe(
        &self,
    ) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static + use<K> {
        self.join().map(|touched| Ok(touched.object))
    }

    /// The next subscriber's stream of every object applied or deleted, but the changes
    /// `echo` says are the echo of our own write (a list is never one: it may stand for
    /// changes the watch missed).
    pub fn subscribe_without_echoes<E>(
        &self,
        echo: E,
    ) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static + use<K, E>
    where
        E: Fn(&K) -> bool + Send + 'static,
    {
        self.join().filter_map(move |touched| {
            let skip = !touched.gone && !touched.listed && echo(&touched.object);
            futures::future::ready((!skip).then_some(Ok(touched.object)))
        })
    }

    /// The next subscriber's stream of the objects that appeared, went, or changed in their
    /// `fingerprint` since this stream last gave them.
    pub fn subscribe_on_change<F>(
        &self,
        fingerprint: F,
    ) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static + use<K, F>
    where
        F: Fn(&K) -> u64 + Send + 'static,
    {
        let mut changes = Changes::default();
        self.join().filter_map(move |touched| {
            let wakes = changes.wakes(&touched, &fingerprint);
            futures::future::ready(wakes.then_some(Ok(touched.object)))
        })
    }

    /// A new subscriber: it gets the store now, or once the list under way is done.
    fn join(&self) -> UnboundedReceiver<Touched<K>> {
        let (tx, rx) = unbounded();
        let mut subscribers = self.lock();
        if subscribers.listing {
            subscribers.waiting.push(tx);
        } else if self.give_store(&tx) {
            subscribers.joined.push(tx);
        }
        rx
    }

    /// Sends what the store holds to a subscriber, as listed; false when it is gone.
    fn give_store(&self, subscriber: &UnboundedSender<Touched<K>>) -> bool {
        self.shared.store.state().into_iter().all(|object| {
            subscriber
                .unbounded_send(Touched {
                    object: K::clone(&object),
                    gone: false,
                    listed: true,
                })
                .is_ok()
        })
    }

    fn lock(&self) -> MutexGuard<'_, Subscribers<K>> {
        // A panic while holding the lock leaves the list whole.
        self.shared
            .subscribers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
    }
}

/// The fingerprint last given of each object, by its uid (hashed: at 3,000 instances a
/// subscriber keeps thousands).
#[derive(Default)]
struct Changes {
    last: HashMap<u64, u64>,
    keys: std::collections::hash_map::RandomState,
}

impl Changes {
    fn wakes<K: Resource>(
        &mut self,
        touched: &Touched<K>,
        fingerprint: impl Fn(&K) -> u64,
    ) -> bool {
        let meta = touched.object.meta();
        let key = self.keys.hash_one((
            meta.uid.as_deref(),
            meta.namespace.as_deref(),
            meta.name.as_deref(),
        ));
        if touched.gone {
            self.last.remove(&key);
            return true;
        }
        let fingerprint = fingerprint(&touched.object);
        self.last.insert(key, fingerprint) != Some(fingerprint)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::FutureExt;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;

    fn object(name: &str, generation: i64, version: &str) -> ConfigMap {
        let mut object = ConfigMap::default();
        object.metadata.name = Some(name.into());
        object.metadata.namespace = Some("team".into());
        object.metadata.uid = Some(format!("uid-{name}"));
        object.metadata.generation = Some(generation);
        object.metadata.resource_version = Some(version.into());
        object
    }

    /// What a stream has ready now, as (name, resourceVersion).
    fn ready<S: Stream<Item = Result<ConfigMap, watcher::Error>> + Unpin>(
        stream: &mut S,
    ) -> Vec<(String, String)> {
        let mut got = Vec::new();
        while let Some(Some(object)) = stream.next().now_or_never() {
            let object = object.expect("feeds give no errors");
            got.push((
                object.metadata.name.unwrap(),
                object.metadata.resource_version.unwrap(),
            ));
        }
        got
    }

    /// A store, its writer, and the feed of its watch, fed as the watch task does.
    struct Watched {
        writer: reflector::store::Writer<ConfigMap>,
        feed: Feed<ConfigMap>,
    }

    impl Watched {
        fn new() -> Self {
            let (store, writer) = reflector::store();
            Self {
                writer,
                feed: Feed::new(store),
            }
        }

        fn event(&mut self, event: watcher::Event<ConfigMap>) {
            self.writer.apply_watcher_event(&event);
            self.feed.send(&event);
        }
    }

    fn pairs(of: &[(&str, &str)]) -> Vec<(String, String)> {
        of.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_subscriber_gets_changes_and_deletions_and_a_late_one_the_store_first() {
        let mut watched = Watched::new();
        let mut early = Box::pin(watched.feed.subscribe());
        watched.event(watcher::Event::Init);
        watched.event(watcher::Event::InitApply(object("a", 1, "1")));
        watched.event(watcher::Event::InitDone);
        watched.event(watcher::Event::Apply(object("b", 1, "2")));
        let mut late = Box::pin(watched.feed.subscribe());
        watched.event(watcher::Event::Delete(object("a", 1, "3")));
        assert_eq!(
            ready(&mut early),
            pairs(&[("a", "1"), ("b", "2"), ("a", "3")])
        );
        let mut late_got = ready(&mut late);
        late_got[..2].sort();
        assert_eq!(late_got, pairs(&[("a", "1"), ("b", "2"), ("a", "3")]));
    }

    #[test]
    fn one_that_joins_while_the_watch_lists_gets_the_whole_list_once_it_is_done() {
        let mut watched = Watched::new();
        watched.event(watcher::Event::Init);
        watched.event(watcher::Event::InitApply(object("a", 1, "1")));
        // The store shows nothing of the list yet: joining now would lose `a`.
        let mut joined = Box::pin(watched.feed.subscribe());
        watched.event(watcher::Event::InitApply(object("b", 1, "2")));
        assert_eq!(
            ready(&mut joined),
            pairs(&[]),
            "nothing before the list is done"
        );
        watched.event(watcher::Event::InitDone);
        let mut got = ready(&mut joined);
        got.sort();
        assert_eq!(got, pairs(&[("a", "1"), ("b", "2")]));
        watched.event(watcher::Event::Apply(object("a", 2, "3")));
        assert_eq!(ready(&mut joined), pairs(&[("a", "3")]));
    }

    #[test]
    fn a_subscriber_that_went_away_is_dropped() {
        let mut watched = Watched::new();
        drop(watched.feed.subscribe());
        let mut kept = Box::pin(watched.feed.subscribe());
        watched.event(watcher::Event::Apply(object("a", 1, "1")));
        assert_eq!(watched.feed.lock().joined.len(), 1);
        assert_eq!(ready(&mut kept), pairs(&[("a", "1")]));
    }

    fn touched(object: ConfigMap, gone: bool) -> Touched<ConfigMap> {
        Touched {
            object,
            gone,
            listed: false,
        }
    }

    /// A fingerprint: the generation.
    fn generation(object: &ConfigMap) -> u64 {
        object.metadata.generation.unwrap_or_default() as u64
    }

    #[test]
    fn an_object_wakes_when_first_seen_changed_or_gone_and_not_when_its_fingerprint_stays() {
        let mut changes = Changes::default();
        let mut wakes =
            |object: ConfigMap, gone: bool| changes.wakes(&touched(object, gone), generation);
        assert!(wakes(object("a", 1, "1"), false), "first seen");
        assert!(!wakes(object("a", 1, "2"), false), "status only");
        assert!(wakes(object("a", 2, "3"), false), "spec changed");
        assert!(!wakes(object("a", 2, "3"), false), "the same again");
        assert!(wakes(object("a", 2, "4"), true), "gone");
        assert!(wakes(object("a", 2, "5"), false), "back");
        let mut other = object("a", 2, "6");
        other.metadata.uid = Some("uid-2".into());
        assert!(wakes(other, false), "made again, another uid");
    }

    #[test]
    fn a_change_subscriber_skips_what_keeps_its_fingerprint() {
        let mut watched = Watched::new();
        let mut changed = Box::pin(watched.feed.subscribe_on_change(generation));
        watched.event(watcher::Event::Apply(object("a", 1, "1")));
        watched.event(watcher::Event::Apply(object("a", 1, "2")));
        watched.event(watcher::Event::Apply(object("a", 2, "3")));
        watched.event(watcher::Event::Delete(object("a", 2, "4")));
        assert_eq!(
            ready(&mut changed),
            pairs(&[("a", "1"), ("a", "3"), ("a", "4")])
        );
    }

    #[test]
    fn an_echo_is_skipped_but_never_a_list_or_a_deletion() {
        let mut watched = Watched::new();
        let echo = |o: &ConfigMap| o.metadata.resource_version.as_deref() == Some("ours");
        let mut stream = Box::pin(watched.feed.subscribe_without_echoes(echo));
        watched.event(watcher::Event::Apply(object("a", 1, "theirs")));
        watched.event(watcher::Event::Apply(object("a", 1, "ours")));
        watched.event(watcher::Event::Init);
        watched.event(watcher::Event::InitApply(object("a", 1, "ours")));
        watched.event(watcher::Event::InitDone);
        watched.event(watcher::Event::Delete(object("a", 1, "ours")));
        // The echo of a change is dropped; the same version listed again, or deleted, is not.
        assert_eq!(
            ready(&mut stream),
            pairs(&[("a", "theirs"), ("a", "ours"), ("a", "ours")])
        );
    }
}
