//! What the host API's handlers share: who may call ([`Auth`]), the index the answers read,
//! the one way to call a plugin ([`Calls`]), the writes it makes; the steps every handler takes (check the caller,
//! find the instance, read the body, call the plugin); and how a call's failures become the
//! host API's answers.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::http::HeaderMap;
use prometheus_client::registry::Registry;
use serde::de::DeserializeOwned;
use tokio::sync::watch;

use super::auth::{Auth, Lookup, Permission, Reviewer};
use super::error::{Code, HostError, HostResult};
use super::metrics::{HostMetrics, ResultLabels};
use crate::calls::client::{PluginAnswer, PluginRequest};
use crate::calls::{CallError, CallOptions, Calls, Target, failure};
use crate::cards::marks::MarkWriter;
use crate::delivery::target;
use crate::index::Index;
use crate::quality::Quality;
use crate::status::StatusWriter;
use crate::tool_calls::ToolCalls;
use crate::tool_calls::approval::ApprovalDesk;
use crate::ui::link::LinkKeys;
use model::names;

/// How long a TokenReview or SubjectAccessReview answer is reused, by default.
pub const REVIEW_TTL: Duration = Duration::from_secs(30);

/// Everything the host API's handlers share. Cheap to clone.
#[derive(Clone)]
pub struct HostState {
    pub calls: Calls,
    /// The writes of the instances' status fields the host API changes (switches).
    pub status: Arc<dyn StatusWriter>,
    /// The writes of the chats' read marks (the card drawer).
    pub marks: Arc<dyn MarkWriter>,
    pub auth: Arc<Auth>,
    pub metrics: Arc<HostMetrics>,
    /// The keys the UI's links are signed with (None until read: [`crate::ui::key_store`]).
    pub links: watch::Receiver<Option<LinkKeys>>,
    /// Chats' live sessions (None: a server without a cluster keeps none).
    pub live: Option<Arc<crate::live::Live>>,
    /// Chats' UI commands (None: a server without a cluster carries none).
    pub ui_commands: Option<Arc<crate::ui_commands::UiCommands>>,
    /// The writes a person makes with their own token (None: a server without a cluster).
    pub person: Option<crate::person::SharedPerson>,
    /// Where a plugin's next version is pulled for a person's upgrade review (None: a server
    /// without a cluster pulls none).
    pub images: Option<Arc<dyn crate::ui::source::ImagePuller>>,
    /// Where chats' scheduled tasks (CronJobs) are read (None: a server without a cluster).
    pub tasks: Option<Arc<dyn super::cronjobs::TaskStore>>,
    /// The one path of a tool call, with the approval desk an agent's call waits at.
    pub tools: ToolCalls,
    /// Chats' quality scans: the app's writes, shared with the Plugin API that reads them
    /// (in memory until `serve` shares the cluster's).
    pub quality: Arc<Quality>,
    /// Agent runs' transcripts (None: a server without a cluster keeps none, and a run shows
    /// no calls).
    pub transcripts: Option<Arc<dyn crate::transcript::store::TranscriptStore>>,
}

impl HostState {
    pub fn new(
        calls: Calls,
        status: Arc<dyn StatusWriter>,
        marks: Arc<dyn MarkWriter>,
        reviewer: Arc<dyn Reviewer>,
        review_ttl: Duration,
        metrics: Arc<HostMetrics>,
        desk: ApprovalDesk,
    ) -> Self {
        Self {
            quality: Arc::new(Quality::in_memory(calls.index().clone())),
            tools: ToolCalls::new(calls.clone(), desk),
            calls,
            status,
            marks,
            auth: Arc::new(Auth::new(reviewer, review_ttl)),
            metrics,
            links: watch::channel(None).1,
            live: None,
            ui_commands: None,
            person: None,
            images: None,
            tasks: None,
            transcripts: None,
        }
    }

    /// The host API's metrics (reviews), registered in `registry`.
    pub fn register_metrics(registry: &mut Registry) -> Arc<HostMetrics> {
        Arc::new(HostMetrics::new(registry))
    }

    pub fn index(&self) -> &Arc<Index> {
        self.calls.index()
    }

    /// The keys the UI's links are signed with (503 until they were read).
    pub fn link_keys(&self) -> HostResult<LinkKeys> {
        self.links.borrow().clone().ok_or_else(|| {
            HostError::new(
                Code::Unavailable,
                "the UI's link keys have not been read yet; try again",
            )
            .retry_after(1)
        })
    }

    /// Checks the caller (401) and RBAC (403).
    pub async fn authorize(&self, headers: &HeaderMap, permission: &Permission) -> HostResult<()> {
        self.authorized_user(headers, permission).await.map(|_| ())
    }

    /// Checks the caller (401) and RBAC (403); who the caller is.
    pub async fn authorized_user(
        &self,
        headers: &HeaderMap,
        permission: &Permission,
    ) -> HostResult<Arc<super::auth::User>> {
        let (user, lookup) = self.auth.check(headers, permission).await?;
        let result = match lookup {
            Lookup::Cached => "cached",
            Lookup::Reviewed => "reviewed",
        };
        self.metrics
            .reviews
            .get_or_create(&ResultLabels { result })
            .inc();
        Ok(user)
    }

    /// The plugin's instance in a chat (404, 409, 503).
    pub fn resolve(&self, namespace: &str, chat: &str, plugin: &str) -> HostResult<Target> {
        Ok(target::resolve(self.index(), namespace, chat, plugin)?)
    }

    /// Checks the caller (401, 403) for `permission` on the plugin's instance in the chat, then
    /// finds the plugin the chat's project enables (404, 409), with its instance if made yet.
    pub async fn authorized_enabled(
        &self,
        headers: &HeaderMap,
        (ns, chat, plugin): (&str, &str, &str),
        permission: impl FnOnce(&str, &str) -> Permission,
    ) -> HostResult<target::Enabled> {
        let instance = names::instance_name(plugin, chat);
        self.authorize(headers, &permission(ns, &instance)).await?;
        Ok(target::resolve_enabled(self.index(), ns, chat, plugin)?)
    }

    /// Checks the caller (401, 403) for `permission` on the plugin's instance in the chat, then
    /// finds the instance (404, 409, 503).
    pub async fn authorized_target(
        &self,
        headers: &HeaderMap,
        (ns, chat, plugin): (&str, &str, &str),
        permission: impl FnOnce(&str, &str) -> Permission,
    ) -> HostResult<Target> {
        let instance = names::instance_name(plugin, chat);
        self.authorize(headers, &permission(ns, &instance)).await?;
        self.resolve(ns, chat, plugin)
    }

    /// Has the target's container (starting it), then calls it; the failure as the host API
    /// answers it.
    pub async fn call_target(
        &self,
        target: &Target,
        request: &PluginRequest,
    ) -> Result<PluginAnswer, CallError> {
        self.calls
            .call_target(target, request, CallOptions::DEMAND)
            .await
    }

    /// Calls the target (starting it), and answers its 2xx answer or the error, naming the
    /// call `what`.
    pub async fn call_accepted(
        &self,
        target: &Target,
        request: &PluginRequest,
        what: &str,
    ) -> HostResult<PluginAnswer> {
        let answer = self
            .call_target(target, request)
            .await
            .map_err(|e| HostError::from(failure::of_error(target, what, &e)))?;
        if !answer.status.is_success() {
            return Err(failure::of_answer(what, &answer).into());
        }
        Ok(answer)
    }
}

/// The body as `T`, or 400 `invalid_body` naming what is wrong.
pub fn json_body<T: DeserializeOwned>(body: &Bytes) -> HostResult<T> {
    crate::http::json_object(body).map_err(|message| HostError::new(Code::InvalidBody, message))
}

/// How the answers name a call: `thing` of the target's plugin in its chat.
pub fn what(target: &Target, thing: &str) -> String {
    format!(
        "{thing} of plugin {} in chat {}",
        target.plugin_name(),
        target.chat
    )
}
