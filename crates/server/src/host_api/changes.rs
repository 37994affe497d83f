//! `GET /namespaces/{namespace}/plugins/changes`: `plugins.changed` to clients, as a stream of
//! server-sent events (the reference sends it "to every client": open panes and Settings →
//! Plugins list the plugins again on it). It follows the index; what each move tells is
//! decided in `crate::delivery::changes`, as for the fan-out that sends the same event to
//! running containers. A client that missed events lists again.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use serde_json::{Value, json};

use super::auth::Permission;
use super::error::HostError;
use super::state::HostState;
use crate::delivery::changes::{
    Configs, EVENT, Seen, changes, config_changes, configs_in, installed, instance_changes,
    instances_in,
};
use crate::index::Index;

/// How often an idle stream says it is still there.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// `GET /namespaces/{namespace}/plugins/changes`.
pub async fn follow(
    State(s): State<HostState>,
    Path(ns): Path<String>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    s.authorize(&headers, &Permission::watch_instances(&ns))
        .await?;
    Ok(Sse::new(stream(s, ns))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response())
}

/// What a stream has seen and has still to send.
struct Follow {
    index: std::sync::Arc<Index>,
    ns: String,
    plugins: tokio::sync::watch::Receiver<u64>,
    instances: tokio::sync::watch::Receiver<u64>,
    configs: tokio::sync::watch::Receiver<u64>,
    known_plugins: BTreeMap<String, i64>,
    known_instances: BTreeMap<String, Seen>,
    known_configs: Configs,
    queue: VecDeque<Event>,
}

impl Follow {
    /// Waits for the next move of the plugins or the namespace's instances and queues its
    /// events; false once the index is gone.
    async fn next_move(&mut self) -> bool {
        let found: Vec<Value> = tokio::select! {
            moved = self.plugins.changed() => {
                if moved.is_err() {
                    return false;
                }
                let now = installed(&self.index);
                let found = changes(&self.known_plugins, &now)
                    .into_iter()
                    .map(|(plugin, change)| json!({ "plugin": plugin, "change": change }))
                    .collect();
                self.known_plugins = now;
                found
            }
            moved = self.instances.changed() => {
                if moved.is_err() {
                    return false;
                }
                let now = instances_in(&self.index, &self.ns);
                let found = instance_changes(&self.known_instances, &now);
                self.known_instances = now;
                found
            }
            moved = self.configs.changed() => {
                if moved.is_err() {
                    return false;
                }
                let now = configs_in(&self.index, &self.ns);
                let found = config_changes(&self.known_configs, &now);
                self.known_configs = now;
                found
            }
        };
        self.queue.extend(
            found
                .into_iter()
                .map(|data| Event::default().event(EVENT).data(data.to_string())),
        );
        true
    }
}

fn stream(s: HostState, ns: String) -> impl Stream<Item = Result<Event, Infallible>> {
    let index = s.index().clone();
    // Subscribed before the first look, so no move falls between the two.
    let (plugins, instances, configs) = (
        index.changed.plugins.subscribe(),
        index.changed.instances.subscribe(),
        index.changed.configs.subscribe(),
    );
    let mut follow = Follow {
        known_plugins: installed(&index),
        known_instances: instances_in(&index, &ns),
        known_configs: configs_in(&index, &ns),
        index,
        ns,
        plugins,
        instances,
        configs,
        queue: VecDeque::new(),
    };
    // Says the stream is there: a client that lists after this misses nothing.
    follow
        .queue
        .push_back(Event::default().comment("following plugins.changed"));
    futures::stream::unfold(follow, |mut f| async move {
        loop {
            if let Some(event) = f.queue.pop_front() {
                return Some((Ok(event), f));
            }
            if !f.next_move().await {
                return None;
            }
        }
    })
}
