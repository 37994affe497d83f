//! UI commands: a plugin approved for `ui.command` asks the app showing its chat to carry out
//! some steps (`sdk::api::ui_command` defines them and every check), and waits for the app's
//! word on each. A command is an ask (`crate::asks`), kept in the chat's ConfigMap
//! `ui-commands-<chat>` (owned by the Channel, made on the first command), so any API replica
//! takes the plugin's call, streams the command to the app and takes its answer:
//!
//! - the plugin: `POST /api/plugin/v1/ui/commands` waits for the answer, or its timeout (504);
//! - the app: `GET .../channels/{chat}/ui/commands` streams the commands waiting and each new
//!   one; `POST .../ui/commands/{id}` answers one, a result per step.

use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::{Client, Resource};
use serde::{Deserialize, Serialize};

use crate::asks::hub::Hub;
use crate::asks::record::{self, Ask};
use crate::asks::store::{AskStore, KubeStore, MemoryStore, StoreError};
use crate::index::Index;
use model::names;
use sdk::api::ui_command::{self, AppAnswer, Step, UiCommandAnswer};

/// The component label of a chat's UI command ConfigMap.
pub const COMPONENT: &str = "ui-commands";

/// A command as the app gets it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct UiCommand {
    /// The command's id: the app answers it by this.
    pub id: String,
    pub chat: String,
    /// The plugin that sent it.
    pub plugin: String,
    pub steps: Vec<Step>,
    pub created: Timestamp,
    /// Past this the plugin has been told no app answered.
    pub expires: Timestamp,
}

impl Ask for UiCommand {
    fn id(&self) -> &str {
        &self.id
    }
    fn chat(&self) -> &str {
        &self.chat
    }
    fn created(&self) -> Timestamp {
        self.created
    }
    fn expires(&self) -> Timestamp {
        self.expires
    }
}

/// The ConfigMap's name of a chat's UI commands.
pub fn name(chat: &str) -> String {
    names::join_name(&[COMPONENT, chat])
}

/// Why a plugin's command got no answer.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    #[error("chat {chat} is not known in namespace {namespace}")]
    NoChat { namespace: String, chat: String },
    #[error("no app showing chat {chat} answered the UI command within {}s", .wait.as_secs())]
    Timeout { chat: String, wait: Duration },
    #[error("sending the UI command to chat {chat}'s app: {why}")]
    Write { chat: String, why: String },
}

/// Why the app's answer was not taken.
#[derive(Debug, thiserror::Error)]
pub enum AnswerError {
    #[error("{0}")]
    Invalid(String),
    #[error("no UI command {id} to chat {chat} is waiting in namespace {namespace}")]
    NoCommand {
        namespace: String,
        chat: String,
        id: String,
    },
    #[error("answering UI command {id}: {source}")]
    Store {
        id: String,
        #[source]
        source: StoreError,
    },
}

/// Chats' UI commands, kept in an [`AskStore`].
pub struct UiCommands {
    store: Arc<dyn AskStore>,
    index: Arc<Index>,
    hub: Arc<Hub<UiCommand>>,
}

impl UiCommands {
    /// Kept in the cluster: the index's ConfigMaps, read by a hub that runs until `stop`.
    pub fn in_cluster(
        client: Client,
        index: Arc<Index>,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Self {
        let hub = Hub::start(COMPONENT, &index, stop);
        let store = Arc::new(KubeStore::new(client, index.clone()));
        Self { store, index, hub }
    }

    /// Kept in memory (request-level tests).
    pub fn in_memory(index: Arc<Index>) -> Self {
        let hub = Hub::new(COMPONENT);
        let store = Arc::new(MemoryStore::new(hub.clone()));
        Self { store, index, hub }
    }

    pub fn hub(&self) -> &Arc<Hub<UiCommand>> {
        &self.hub
    }

    fn map(&self, namespace: &str, chat: &str) -> Option<Arc<ConfigMap>> {
        self.store.get(namespace, &name(chat))
    }

    /// The commands to the chat waiting for the app at `now`, oldest first.
    pub fn pending(&self, namespace: &str, chat: &str, now: Timestamp) -> Vec<UiCommand> {
        self.map(namespace, chat)
            .map(|map| record::pending(&map, now))
            .unwrap_or_default()
    }

    /// Sends `plugin`'s `steps` to the app showing `chat`, and answers what became of each,
    /// once the app said, or an error past `wait`.
    pub async fn send(
        &self,
        namespace: &str,
        chat: &str,
        plugin: &str,
        steps: Vec<Step>,
        wait: Duration,
    ) -> Result<UiCommandAnswer, CommandError> {
        let id = crate::asks::random_id();
        self.send_as(id, namespace, chat, plugin, steps, wait).await
    }

    /// [`UiCommands::send`], the command's id given (the tests name theirs).
    pub(crate) async fn send_as(
        &self,
        id: String,
        namespace: &str,
        chat: &str,
        plugin: &str,
        steps: Vec<Step>,
        wait: Duration,
    ) -> Result<UiCommandAnswer, CommandError> {
        let channel = self
            .index
            .channel(namespace, chat)
            .ok_or_else(|| CommandError::NoChat {
                namespace: namespace.into(),
                chat: chat.into(),
            })?;
        let write = |e: StoreError| CommandError::Write {
            chat: chat.into(),
            why: e.to_string(),
        };
        let map_name = name(chat);
        let empty = crate::config_map::empty(
            map_name.clone(),
            namespace,
            names::labels("", &channel.spec.project, chat, COMPONENT),
            channel.controller_owner_ref(&()),
        );
        self.store.ensure(&empty).await.map_err(write)?;
        let now = Timestamp::now();
        let command = UiCommand {
            id,
            chat: chat.into(),
            plugin: plugin.into(),
            steps,
            created: now,
            expires: now + wait,
        };
        // The commands that lapsed go with the new one's write.
        let mut patch = self
            .map(namespace, chat)
            .map(|map| record::prune::<UiCommand>(&map, now))
            .unwrap_or_default();
        patch.extend(record::add(&command));
        let answered = self.hub.wait_for(namespace, &map_name, &command.id);
        if let Err(e) = self.store.merge(namespace, &map_name, patch).await {
            self.hub.forget(namespace, &map_name, &command.id);
            return Err(write(e));
        }
        let outcome = tokio::time::timeout(wait, answered).await;
        self.hub.forget(namespace, &map_name, &command.id);
        // Done with, answered or not; a failed removal leaves a command that lapsed, which
        // nobody is sent and the next command's write takes out.
        let _ = self
            .store
            .merge(namespace, &map_name, record::remove(&command.id))
            .await;
        let answer = match outcome {
            Ok(Ok(answer)) => serde_json::from_value::<AppAnswer>(answer).ok(),
            _ => None,
        };
        match answer {
            Some(answer) => Ok(UiCommandAnswer::of(&command.id, &command.steps, &answer)),
            None => Err(CommandError::Timeout {
                chat: chat.into(),
                wait,
            }),
        }
    }

    /// Takes the app's `answer` to command `id` of `chat`.
    pub async fn answer(
        &self,
        namespace: &str,
        chat: &str,
        id: &str,
        answer: &AppAnswer,
    ) -> Result<(), AnswerError> {
        let no_command = || AnswerError::NoCommand {
            namespace: namespace.into(),
            chat: chat.into(),
            id: id.into(),
        };
        // Only a command to this chat: the caller's right is to this chat's commands.
        let command = self
            .pending(namespace, chat, Timestamp::now())
            .into_iter()
            .find(|c| c.id == id)
            .ok_or_else(no_command)?;
        ui_command::check_answer(answer, &command.steps).map_err(AnswerError::Invalid)?;
        let value = serde_json::to_value(answer).expect("an answer serializes");
        match self
            .store
            .merge(namespace, &name(chat), record::answer(id, &value))
            .await
        {
            Ok(()) => Ok(()),
            Err(StoreError::NotFound { .. }) => Err(no_command()),
            Err(source) => Err(AnswerError::Store {
                id: id.into(),
                source,
            }),
        }
    }
}
