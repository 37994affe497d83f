//! One watch of one kind, the only way the index reads the cluster: it lists and watches the
//! kind (retrying with backoff), reads each object as [`Guarded`] so that one which does not
//! parse is left out rather than failing the list ([`crate::unreadable`]), shows each event of
//! the objects that parse to the `before` hooks, trims the object ([`crate::trim`]), puts it in
//! the kind's store, then shows the event to the `after` hooks: the derived indexes, the change
//! counters, the kind's subscribers ([`crate::feed`]). It runs until its stop signal turns true
//! or the signal's sender goes.

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::Arc;

use futures::{StreamExt, TryStreamExt};
use kube::runtime::reflector::store::Writer;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch as signal;

use super::feed::Feed;
use super::trim;
use super::unreadable::{Guard, Guarded, Unreadables};

/// Sees one event of a watch.
type Hook<K> = Box<dyn FnMut(&watcher::Event<K>) + Send>;

/// A watch not started yet: what it lists, what a stored object loses, who sees its events.
pub struct Watch<K: Resource> {
    api: Api<Guarded<K>>,
    config: watcher::Config,
    unreadables: Arc<Unreadables>,
    trim: fn(&mut K),
    before: Vec<Hook<K>>,
    after: Vec<Hook<K>>,
}

impl<K> Watch<K>
where
    K: Resource + Clone + Debug + DeserializeOwned + Send + Sync + 'static,
    K::DynamicType: Hash + Eq + Clone + Default,
{
    /// A watch of what `api` and `config` select, leaving out (and recording in
    /// `unreadables`) the objects that do not parse; stored objects lose their managedFields.
    pub fn new(
        api: Api<Guarded<K>>,
        config: watcher::Config,
        unreadables: &Arc<Unreadables>,
    ) -> Self {
        Self {
            api,
            config,
            unreadables: unreadables.clone(),
            trim: trim::managed_fields,
            before: Vec::new(),
            after: Vec::new(),
        }
    }

    /// What a stored object loses, instead of its managedFields alone.
    pub fn trim(mut self, trim: fn(&mut K)) -> Self {
        self.trim = trim;
        self
    }

    /// Shows each event, untrimmed, to `hook` before the store takes it.
    pub fn before(mut self, hook: impl FnMut(&watcher::Event<K>) + Send + 'static) -> Self {
        self.before.push(Box::new(hook));
        self
    }

    /// Shows each event to `hook` once the store holds it.
    pub fn after(mut self, hook: impl FnMut(&watcher::Event<K>) + Send + 'static) -> Self {
        self.after.push(Box::new(hook));
        self
    }

    /// Calls `wake` for each event once the store holds it: how a change counter is bumped, so
    /// that whoever it wakes reads the event in the store. (Bumped before, a waiter could read
    /// the store before it changed, then sleep through the change it was woken for.)
    pub fn wakes(self, mut wake: impl FnMut() + Send + 'static) -> Self {
        self.after(move |_| wake())
    }

    /// Gives each event to `feed`'s subscribers once the store holds it.
    pub fn feeding(self, feed: &Feed<K>) -> Self {
        let feed = feed.clone();
        self.after(move |event| feed.send(event))
    }

    /// Starts the watch in the background, filling `writer`'s store until `stop` turns true or
    /// its sender goes.
    pub fn spawn(self, writer: Writer<K>, stop: &signal::Receiver<bool>) {
        let kind = K::kind(&Default::default()).to_string();
        let events = watcher(self.api.clone(), self.config.clone()).default_backoff();
        let (stream, mut after) = self.through(events, writer);
        let mut stop = stop.clone();
        tokio::spawn(async move {
            futures::pin_mut!(stream);
            loop {
                if *stop.borrow_and_update() {
                    return;
                }
                tokio::select! {
                    event = stream.next() => match event {
                        Some(Ok(event)) => {
                            for hook in &mut after {
                                hook(&event);
                            }
                        }
                        Some(Err(err)) => tracing::warn!(%err, %kind, "watch failed; retrying"),
                        None => return,
                    },
                    changed = stop.changed() => {
                        if changed.is_err() {
                            return;
                        }
                    }
                }
            }
        });
    }

    /// The watch's `events` made what the store takes: unreadable objects left out, shown to
    /// the `before` hooks, trimmed, stored by `writer`. Each event the stream then yields is
    /// held by the store: the `after` hooks (returned) see it so.
    #[allow(clippy::type_complexity)]
    fn through<S>(
        self,
        events: S,
        writer: Writer<K>,
    ) -> (
        impl futures::Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
        Vec<Hook<K>>,
    )
    where
        S: futures::Stream<Item = Result<watcher::Event<Guarded<K>>, watcher::Error>>
            + Send
            + 'static,
    {
        let Self {
            unreadables,
            trim,
            mut before,
            after,
            ..
        } = self;
        let mut guard = Guard::new(unreadables);
        let stored = writer.as_reader();
        let stream = events
            .filter_map(move |result| {
                let event = match result {
                    Ok(event) => guard.convert(event, |at| stored.get(at)).map(Ok),
                    Err(err) => Some(Err(err)),
                };
                futures::future::ready(event)
            })
            .map_ok(move |event| {
                for hook in &mut before {
                    hook(&event);
                }
                event
            })
            .modify(trim)
            .reflect(writer);
        (stream, after)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector::{self, ObjectRef};

    use super::*;

    fn config_map(name: &str) -> ConfigMap {
        let mut cm = ConfigMap::default();
        cm.metadata.name = Some(name.into());
        cm.metadata.namespace = Some("ns".into());
        cm
    }

    /// Drives `watch` through `events` as `spawn` does; answers what each woken reader saw of
    /// `cm` in the store.
    async fn woken_reads(
        hook_before: bool,
        events: Vec<watcher::Event<Guarded<ConfigMap>>>,
    ) -> Vec<bool> {
        let client = kube::Client::try_from(kube::Config::new(
            "http://127.0.0.1:9".parse().expect("a URL"),
        ))
        .expect("a client");
        let (reader, writer) = reflector::store::<ConfigMap>();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let wake = {
            let seen = seen.clone();
            move || {
                let held = reader.get(&ObjectRef::new("cm").within("ns")).is_some();
                seen.lock().expect("seen").push(held);
            }
        };
        let watch = Watch::new(
            Api::all(client),
            watcher::Config::default(),
            &Arc::new(Default::default()),
        );
        let watch = if hook_before {
            watch.before(move |_| wake())
        } else {
            watch.wakes(wake)
        };
        let (stream, mut after) =
            watch.through(futures::stream::iter(events.into_iter().map(Ok)), writer);
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            let event = event.expect("no error");
            for hook in &mut after {
                hook(&event);
            }
        }
        seen.lock().expect("seen").clone()
    }

    #[tokio::test]
    async fn a_counter_wakes_its_waiters_once_the_store_holds_the_event() {
        let applied = vec![watcher::Event::Apply(Guarded::Readable(config_map("cm")))];
        assert_eq!(woken_reads(false, applied.clone()).await, vec![true]);
        // The hook before the store (how the approvals' counter was bumped) wakes a reader
        // who finds the store as it was: the waiter for a person's decision slept through it.
        assert_eq!(woken_reads(true, applied).await, vec![false]);
    }
}
