//! Chats' live sessions (the claude process a chat's turns run in). The app owns the session;
//! the host API lets it open one for a chat (`PUT .../live`, renewed as a heartbeat, closed by
//! `DELETE` or when its lease lapses), take the plugins' control requests (a stream) and
//! answer them; a plugin's `POST /channel/live/control` waits for that answer.
//!
//! Everything goes through the cluster, so any API replica serves any of it: a ConfigMap per
//! chat holds the session, each waiting control request and the app's answer to it, each
//! written by a merge patch of its own keys, and every replica sees them through the index's
//! ConfigMap watch. The requests are asks (`crate::asks`: their keys, hub and store).
//!
//! - [`session`], [`request`]: the two records, and every decision on them, pure;
//! - [`LiveSessions`], the plugin side; [`Live`], the app's writes and the plugin's wait.

pub mod request;
pub mod session;

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use jiff::Timestamp;
use kube::{Client, Resource, ResourceExt};
use serde::Serialize;
use serde_json::Value;

use crate::asks::hub::Hub;
use crate::asks::record;
use crate::asks::store::{AskStore, KubeStore, MemoryStore, StoreError};
use crate::index::Index;
use model::manifest::Capability;
use model::resources::Channel;
use request::ControlRequest;
use session::{Closed, Open, Session};

/// A chat, as live sessions name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatRef {
    pub namespace: String,
    pub channel: String,
}

/// Why a control request got no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ControlError {
    #[error("chat {chat} has no live session")]
    NotLive { chat: String },
    #[error(
        "chat {chat}'s live session does not take control subtype {subtype:?} (it takes {takes:?})"
    )]
    NotTaken {
        chat: String,
        subtype: String,
        takes: Vec<String>,
    },
    #[error("chat {chat}'s live session did not answer within {}s", .wait.as_secs())]
    Timeout { chat: String, wait: Duration },
    #[error("sending the control request to chat {chat}'s live session: {why}")]
    Write { chat: String, why: String },
}

/// Where plugins' control requests go.
pub trait LiveSessions: Send + Sync {
    /// Sends `plugin`'s control request of `subtype` to the chat's live session; answers its
    /// response.
    fn control<'a>(
        &'a self,
        chat: &'a ChatRef,
        plugin: &'a str,
        subtype: &'a str,
        request: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ControlError>>;
}

/// Why a write of the app's failed.
#[derive(Debug, thiserror::Error)]
pub enum LiveError {
    #[error("{0}")]
    Invalid(String),
    #[error("chat {chat} is not known in namespace {namespace}")]
    NoChat { namespace: String, chat: String },
    #[error("no control request {id} to chat {chat} is waiting in namespace {namespace}")]
    NoRequest {
        namespace: String,
        chat: String,
        id: String,
    },
    #[error("{what}: {source}")]
    Store {
        what: String,
        #[source]
        source: StoreError,
    },
}

/// The session and holds of a chat, as the app sees them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct View {
    pub chat: String,
    /// The session, open or lapsed; none when never opened or closed.
    pub session: Option<Session>,
    pub live: bool,
    /// The plugins holding the session (`PUT /channel/live/hold`) that may still use it.
    pub holds: Vec<String>,
    /// The control requests waiting for the app's answer.
    pub pending: Vec<ControlRequest>,
}

/// Chats' live sessions, kept in a [`AskStore`].
pub struct Live {
    store: Arc<dyn AskStore>,
    index: Arc<Index>,
    hub: Arc<Hub<ControlRequest>>,
    /// How long a plugin's control request waits for the app.
    wait: Duration,
}

impl Live {
    pub fn new(
        store: Arc<dyn AskStore>,
        index: Arc<Index>,
        hub: Arc<Hub<ControlRequest>>,
        wait: Duration,
    ) -> Self {
        Self {
            store,
            index,
            hub,
            wait,
        }
    }

    /// Kept in the cluster: the index's ConfigMaps, read by a hub that runs until `stop`.
    pub fn in_cluster(
        client: Client,
        index: Arc<Index>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        let hub = Hub::start(session::COMPONENT, &index, stop);
        let store = Arc::new(KubeStore::new(client, index.clone()));
        Self::new(store, index, hub, sdk::api::limits::REQUEST_TIMEOUT)
    }

    /// Kept in memory (request-level tests), control requests waiting `wait`.
    pub fn in_memory(index: Arc<Index>, wait: Duration) -> Self {
        let hub = Hub::new(session::COMPONENT);
        let store = Arc::new(MemoryStore::new(hub.clone()));
        Self::new(store, index, hub, wait)
    }

    pub fn hub(&self) -> &Arc<Hub<ControlRequest>> {
        &self.hub
    }

    pub fn store(&self) -> &Arc<dyn AskStore> {
        &self.store
    }

    fn chat(&self, namespace: &str, chat: &str) -> Result<Arc<Channel>, LiveError> {
        self.index
            .channel(namespace, chat)
            .ok_or_else(|| LiveError::NoChat {
                namespace: namespace.into(),
                chat: chat.into(),
            })
    }

    /// The chat's live ConfigMap.
    fn map(
        &self,
        namespace: &str,
        chat: &str,
    ) -> Option<Arc<k8s_openapi::api::core::v1::ConfigMap>> {
        self.store.get(namespace, &session::name(chat))
    }

    /// The chat's session.
    pub fn session(&self, namespace: &str, chat: &str) -> Option<Session> {
        self.map(namespace, chat)
            .and_then(|map| session::read(&map))
    }

    /// The control requests of the chat waiting for the app at `now`, oldest first.
    pub fn pending(&self, namespace: &str, chat: &str, now: Timestamp) -> Vec<ControlRequest> {
        self.map(namespace, chat)
            .map(|map| record::pending(&map, now))
            .unwrap_or_default()
    }

    /// What the app sees of the chat.
    pub fn view(&self, namespace: &str, chat: &str) -> View {
        let now = Timestamp::now();
        let session = self.session(namespace, chat);
        View {
            chat: chat.into(),
            live: session.as_ref().is_some_and(|s| s.is_open(now)),
            session,
            holds: self.holds(namespace, chat),
            pending: self.pending(namespace, chat, now),
        }
    }

    /// The plugins holding the chat's session that may still use it there: enabled in the
    /// chat (their instance is there) and approved for `live.control`.
    fn holds(&self, namespace: &str, chat: &str) -> Vec<String> {
        let mut holds: Vec<String> = self
            .index
            .instances
            .state()
            .iter()
            .filter(|i| i.namespace().as_deref() == Some(namespace) && i.spec.channel == chat)
            .filter(|i| i.status.as_ref().is_some_and(|s| s.live_hold))
            .filter(|i| may_use_live(&self.index, &i.spec.plugin))
            .map(|i| i.spec.plugin.clone())
            .collect();
        holds.sort();
        holds.dedup();
        holds
    }

    /// Opens or renews the chat's session (and takes out the requests that lapsed).
    pub async fn open(
        &self,
        namespace: &str,
        chat: &str,
        open: &Open,
    ) -> Result<Session, LiveError> {
        let lease = session::check(open).map_err(LiveError::Invalid)?;
        let channel = self.chat(namespace, chat)?;
        let now = Timestamp::now();
        let previous = self.session(namespace, chat);
        let opened = session::opened(previous.as_ref(), open, lease, now);
        let store = |source| LiveError::Store {
            what: format!("opening chat {chat}'s live session"),
            source,
        };
        let empty = session::config_map(
            namespace,
            chat,
            &channel.spec.project,
            channel.controller_owner_ref(&()),
        );
        self.store.ensure(&empty).await.map_err(store)?;
        let mut patch = session::write(Some(&opened));
        if let Some(map) = self.map(namespace, chat) {
            patch.extend(record::prune::<ControlRequest>(&map, now));
        }
        self.store
            .merge(namespace, &session::name(chat), patch)
            .await
            .map_err(store)?;
        Ok(opened)
    }

    /// Closes the chat's session, and drops the requests waiting for it.
    pub async fn close(&self, namespace: &str, chat: &str) -> Result<(), LiveError> {
        let Some(map) = self.map(namespace, chat) else {
            return Ok(());
        };
        let mut patch = session::write(None);
        patch.extend(record::remove_all(&map));
        match self
            .store
            .merge(namespace, &session::name(chat), patch)
            .await
        {
            Ok(()) | Err(StoreError::NotFound { .. }) => Ok(()),
            Err(source) => Err(LiveError::Store {
                what: format!("closing chat {chat}'s live session"),
                source,
            }),
        }
    }

    /// Answers control request `id` of chat `chat` with `response`.
    pub async fn answer(
        &self,
        namespace: &str,
        chat: &str,
        id: &str,
        response: &Value,
    ) -> Result<(), LiveError> {
        let no_request = || LiveError::NoRequest {
            namespace: namespace.into(),
            chat: chat.into(),
            id: id.into(),
        };
        // Only a request to this chat: the caller's right is to this chat's session.
        let waiting = self
            .pending(namespace, chat, Timestamp::now())
            .iter()
            .any(|r| r.id == id);
        if !waiting {
            return Err(no_request());
        }
        match self
            .store
            .merge(
                namespace,
                &session::name(chat),
                record::answer(id, response),
            )
            .await
        {
            Ok(()) => Ok(()),
            Err(StoreError::NotFound { .. }) => Err(no_request()),
            Err(source) => Err(LiveError::Store {
                what: format!("answering control request {id}"),
                source,
            }),
        }
    }

    async fn send(
        &self,
        chat: &ChatRef,
        plugin: &str,
        subtype: &str,
        body: &Value,
    ) -> Result<Value, ControlError> {
        let (namespace, name) = (&chat.namespace, &chat.channel);
        let now = Timestamp::now();
        let open = self.session(namespace, name);
        session::takes(open.as_ref(), subtype, now).map_err(|closed| match closed {
            Closed::NotLive => ControlError::NotLive { chat: name.clone() },
            Closed::NotTaken { takes } => ControlError::NotTaken {
                chat: name.clone(),
                subtype: subtype.into(),
                takes,
            },
        })?;
        let id = crate::asks::random_id();
        let control = ControlRequest::new(
            id.clone(),
            name,
            plugin,
            subtype,
            body.clone(),
            now,
            self.wait,
        );
        let map_name = session::name(name);
        let answered = self.hub.wait_for(namespace, &map_name, &id);
        if let Err(e) = self
            .store
            .merge(namespace, &map_name, record::add(&control))
            .await
        {
            self.hub.forget(namespace, &map_name, &id);
            return Err(match e {
                // The session was closed meanwhile.
                StoreError::NotFound { .. } => ControlError::NotLive { chat: name.clone() },
                e => ControlError::Write {
                    chat: name.clone(),
                    why: e.to_string(),
                },
            });
        }
        let outcome = tokio::time::timeout(self.wait, answered).await;
        self.hub.forget(namespace, &map_name, &id);
        // The request is done with, answered or not; a failed removal leaves a request that
        // lapsed, which nobody is sent and the next renewal takes out.
        let _ = self
            .store
            .merge(namespace, &map_name, record::remove(&id))
            .await;
        match outcome {
            Ok(Ok(response)) => Ok(response),
            _ => Err(ControlError::Timeout {
                chat: name.clone(),
                wait: self.wait,
            }),
        }
    }
}

impl LiveSessions for Live {
    fn control<'a>(
        &'a self,
        chat: &'a ChatRef,
        plugin: &'a str,
        subtype: &'a str,
        request: &'a Value,
    ) -> BoxFuture<'a, Result<Value, ControlError>> {
        Box::pin(self.send(chat, plugin, subtype, request))
    }
}

/// Whether plugin `name` may still use a live session: installed, plugins on, and approved
/// for `live.control`.
fn may_use_live(index: &Index, name: &str) -> bool {
    crate::delivery::target::installed(index, &index.host_config().spec, name).is_ok_and(
        |(plugin, compiled)| {
            crate::delivery::target::approved(&plugin, &compiled).contains(&Capability::LiveControl)
        },
    )
}
