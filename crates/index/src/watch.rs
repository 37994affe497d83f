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

    /// Gives each event to `feed`'s subscribers once the store holds it.
    pub fn feeding(self, feed: &Feed<K>) -> Self {
        let feed = feed.clone();
        self.after(move |event| feed.send(event))
    }

    /// Starts the watch in the background, filling `writer`'s store until `stop` turns true or
    /// its sender goes.
    pub fn spawn(self, writer: Writer<K>, stop: &signal::Receiver<bool>) {
        let Self {
            api,
            config,
            unreadables,
            trim,
            mut before,
            mut after,
        } = self;
        let kind = K::kind(&Default::default()).to_string();
        let mut guard = Guard::new(unreadables);
        let stored = writer.as_reader();
        let stream = watcher(api, config)
            .default_backoff()
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
}
