//! One watch per kind, feeding a reflector store and any number of controllers. Unlike kube's
//! shared streams, deletions reach the controllers too, so a Pod or a Project that goes away
//! wakes what depends on it. A subscriber may ask to be woken only when an object's
//! fingerprint changes (see `wake`).

use std::collections::HashMap;
use std::fmt::Debug;
use std::hash::{BuildHasher, Hash};

use futures::channel::mpsc::{UnboundedReceiver, UnboundedSender, unbounded};
use futures::{Stream, StreamExt};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

use super::wake::Fingerprint;

/// An object as a watch event left it.
struct Touched<K> {
    object: K,
    /// Deleted, rather than made or changed.
    gone: bool,
    /// From a (re)list rather than a change: it may stand for changes the watch missed.
    listed: bool,
}

/// A store and the streams of touched objects, one per subscriber.
pub struct Watched<K: Resource + 'static>
where
    K::DynamicType: Hash + Eq,
{
    pub store: Store<K>,
    subscribers: Vec<UnboundedReceiver<Touched<K>>>,
}

impl<K> Watched<K>
where
    K: Resource + Clone + Debug + Send + Sync + 'static,
    K::DynamicType: Hash + Eq + Clone + Default,
{
    /// The next subscriber's stream of every object applied or deleted.
    pub fn subscribe(
        &mut self,
    ) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static + use<K> {
        self.subscribers
            .pop()
            .expect("enough subscribers were asked for")
            .map(|touched| Ok(touched.object))
    }

    /// The next subscriber's stream of every object applied or deleted, but the changes
    /// `echo` says are the echo of our own write (a list is never one: it may stand for
    /// changes the watch missed).
    pub fn subscribe_without_echoes<E>(
        &mut self,
        echo: E,
    ) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static + use<K, E>
    where
        E: Fn(&K) -> bool + Send + 'static,
    {
        self.subscribers
            .pop()
            .expect("enough subscribers were asked for")
            .filter_map(move |touched| {
                let skip = !touched.gone && !touched.listed && echo(&touched.object);
                futures::future::ready((!skip).then_some(Ok(touched.object)))
            })
    }

    /// The next subscriber's stream of the objects that appeared, went, or changed in their
    /// fingerprint since this stream last gave them.
    pub fn subscribe_on_change(
        &mut self,
    ) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static + use<K>
    where
        K: Fingerprint,
    {
        let mut changes = Changes::default();
        self.subscribers
            .pop()
            .expect("enough subscribers were asked for")
            .filter_map(move |touched| {
                let wakes = changes.wakes(&touched);
                futures::future::ready(wakes.then_some(Ok(touched.object)))
            })
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
    fn wakes<K: Resource + Fingerprint>(&mut self, touched: &Touched<K>) -> bool {
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
        let fingerprint = touched.object.fingerprint();
        self.last.insert(key, fingerprint) != Some(fingerprint)
    }
}

/// Starts watching `api` (selected by `config`) for `subscribers` controllers.
pub fn watch<K>(api: Api<K>, config: watcher::Config, subscribers: usize) -> Watched<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Hash + Eq + Clone + Default,
{
    let (store, writer) = reflector::store();
    type Channel<K> = (UnboundedSender<Touched<K>>, UnboundedReceiver<Touched<K>>);
    let (senders, receivers): (Vec<_>, Vec<_>) = (0..subscribers)
        .map(|_| -> Channel<K> { unbounded() })
        .unzip();
    let stream = watcher(api, config)
        .default_backoff()
        // Nothing reads managedFields: they were 40% of what the stores held.
        .modify(|object| object.meta_mut().managed_fields = None)
        .reflect(writer);
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    let (object, gone, listed) = match event {
                        watcher::Event::Apply(object) => (object, false, false),
                        watcher::Event::InitApply(object) => (object, false, true),
                        watcher::Event::Delete(object) => (object, true, false),
                        watcher::Event::Init | watcher::Event::InitDone => continue,
                    };
                    for sender in &senders {
                        let _ = sender.unbounded_send(Touched {
                            object: object.clone(),
                            gone,
                            listed,
                        });
                    }
                }
                Err(err) => {
                    tracing::warn!(%err, kind = %K::kind(&Default::default()), "watch failed; retrying")
                }
            }
        }
    });
    Watched {
        store,
        subscribers: receivers,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::fixtures::channel;
    use model::resources::Channel;

    fn chat(generation: i64, status_plugins: &[&str]) -> Channel {
        let mut chat = channel("general");
        chat.metadata.uid = Some("uid-1".into());
        chat.metadata.generation = Some(generation);
        chat.status = Some(model::resources::ChannelStatus {
            plugins: status_plugins.iter().map(|p| p.to_string()).collect(),
            ..Default::default()
        });
        chat
    }

    fn touched(object: Channel, gone: bool) -> Touched<Channel> {
        Touched {
            object,
            gone,
            listed: false,
        }
    }

    #[test]
    fn an_object_wakes_when_first_seen_changed_or_gone_and_not_when_its_fingerprint_stays() {
        let mut changes = Changes::default();
        assert!(changes.wakes(&touched(chat(1, &[]), false)), "first seen");
        assert!(
            !changes.wakes(&touched(chat(1, &["echo"]), false)),
            "status only"
        );
        assert!(
            changes.wakes(&touched(chat(2, &["echo"]), false)),
            "spec changed"
        );
        assert!(
            !changes.wakes(&touched(chat(2, &["echo"]), false)),
            "the same again"
        );
        assert!(changes.wakes(&touched(chat(2, &["echo"]), true)), "gone");
        assert!(changes.wakes(&touched(chat(2, &["echo"]), false)), "back");
        let mut other = chat(2, &["echo"]);
        other.metadata.uid = Some("uid-2".into());
        assert!(
            changes.wakes(&touched(other, false)),
            "made again, another uid"
        );
    }

    #[tokio::test]
    async fn an_echo_is_skipped_but_never_a_list_or_a_deletion() {
        let (tx, rx) = unbounded();
        let mut watched = Watched::<Channel> {
            store: reflector::store().0,
            subscribers: vec![rx],
        };
        let echo = |c: &Channel| c.metadata.resource_version.as_deref() == Some("ours");
        let stream = watched.subscribe_without_echoes(echo);
        let at = |version: &str, gone: bool, listed: bool| {
            let mut object = chat(1, &[]);
            object.metadata.resource_version = Some(version.into());
            Touched {
                object,
                gone,
                listed,
            }
        };
        for t in [
            at("theirs", false, false),
            at("ours", false, false),
            at("ours", false, true),
            at("ours", true, false),
        ] {
            tx.unbounded_send(t).unwrap();
        }
        drop(tx);
        let passed: Vec<String> = stream
            .map(|c| c.unwrap().metadata.resource_version.unwrap())
            .collect()
            .await;
        // The echo of a change is dropped; the same version listed again, or deleted, is not.
        assert_eq!(passed, ["theirs", "ours", "ours"]);
    }
}
