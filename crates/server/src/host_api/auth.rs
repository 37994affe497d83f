//! Who calls the host API, and whether RBAC lets them: the caller's Kubernetes bearer token
//! goes to a TokenReview (401 unless the cluster accepts it), then a SubjectAccessReview asks
//! whether that user may do the route's verb on the route's resource of group
//! `plugins.loop.dev` in the chat's namespace (403 unless allowed). Answers are reused for a
//! short while, keyed by a digest of the token (never the token itself).
//!
//! | route | verb | resource | name |
//! |---|---|---|---|
//! | `POST .../actions/{action}` | `create` | `plugininstances/actions` | the instance |
//! | `POST .../tools/{tool}` | `create` | `plugininstances/tools` | the instance |
//! | `POST .../switches/{switch}` | `create` | `plugininstances/switches` | the instance |
//! | `GET .../switches` | `get` | `plugininstances/switches` | the instance |
//! | `GET`/`POST`/`PUT`/`PATCH`/`DELETE .../x/{path}` | `get`/`create`/`update`/`patch`/`delete` | `plugininstances/x` | the instance |
//! | `GET .../panels` | `get` | `plugininstances/panels` | the instance |
//! | `POST .../channels/{channel}/events` | `create` | `channels/events` | the chat |
//! | `GET .../channels/{channel}/cards` | `get` | `channels/cards` | the chat |
//! | `POST .../channels/{channel}/cards/read` | `update` | `channels/cards` | the chat |
//! | `GET .../channels/{channel}/quality` | `get` | `channels/quality` | the chat |
//! | `PUT .../channels/{channel}/quality` | `update` | `channels/quality` | the chat |
//! | `GET /namespaces/{ns}/cards/unread` | `list` | `channels/cards` | (every chat) |
//! | `GET /namespaces/{ns}/chats` | `list` | `channels` | (every chat) |
//! | `GET /namespaces/{ns}/plugins/changes` | `watch` | `plugininstances` | (every instance) |
//! | `GET .../channels/{channel}/runs` | `list` | `agentruns` | (every run) |
//! | `GET .../channels/{channel}/runs/{run}` | `get` | `agentruns` | the run |
//! | `GET .../settings` | `get` | `plugininstances/settings` | the instance |
//! | `POST .../stop` | `create` | `plugininstances/stop` | the instance |

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::http::{HeaderMap, Method, header};
use futures::future::BoxFuture;
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use kube::api::PostParams;
use kube::{Api, Client};
use sha2::{Digest, Sha256};

use super::error::{Code, HostError, HostResult};
use model::resources::{GROUP, VERSION};

/// What a route asks RBAC for.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Permission {
    pub verb: &'static str,
    pub resource: &'static str,
    pub subresource: &'static str,
    pub namespace: String,
    pub name: String,
}

impl Permission {
    fn on_instance(verb: &'static str, sub: &'static str, ns: &str, instance: &str) -> Self {
        Self {
            verb,
            resource: "plugininstances",
            subresource: sub,
            namespace: ns.into(),
            name: instance.into(),
        }
    }

    /// `create plugininstances/actions`.
    pub fn action(ns: &str, instance: &str) -> Self {
        Self::on_instance("create", "actions", ns, instance)
    }

    /// `create plugininstances/tools`.
    pub fn tool(ns: &str, instance: &str) -> Self {
        Self::on_instance("create", "tools", ns, instance)
    }

    /// `create plugininstances/switches` (a click), `get` (reading them).
    pub fn switch(verb: &'static str, ns: &str, instance: &str) -> Self {
        Self::on_instance(verb, "switches", ns, instance)
    }

    /// `get plugininstances/panels`: the panes a chat may open, with their links.
    pub fn panels(ns: &str, instance: &str) -> Self {
        Self::on_instance("get", "panels", ns, instance)
    }

    /// `plugininstances/x`, the verb by the method.
    pub fn x(method: &Method, ns: &str, instance: &str) -> Self {
        Self::on_instance(verb_of(method), "x", ns, instance)
    }

    fn on_chat(verb: &'static str, sub: &'static str, ns: &str, chat: &str) -> Self {
        Self {
            verb,
            resource: "channels",
            subresource: sub,
            namespace: ns.into(),
            name: chat.into(),
        }
    }

    /// `create channels/events`.
    pub fn events(ns: &str, chat: &str) -> Self {
        Self::on_chat("create", "events", ns, chat)
    }

    /// `get channels/cards`: a chat's card drawer.
    pub fn read_drawer(ns: &str, chat: &str) -> Self {
        Self::on_chat("get", "cards", ns, chat)
    }

    /// `update channels/cards`: marking a chat's cards read.
    pub fn mark_cards(ns: &str, chat: &str) -> Self {
        Self::on_chat("update", "cards", ns, chat)
    }

    /// `get channels/notifications`: reading a chat's notifications.
    pub fn read_notifications(ns: &str, chat: &str) -> Self {
        Self::on_chat("get", "notifications", ns, chat)
    }

    /// `update channels/notifications`: marking a chat's notifications read.
    pub fn mark_notifications(ns: &str, chat: &str) -> Self {
        Self::on_chat("update", "notifications", ns, chat)
    }

    /// `get channels/tasks`: a chat's scheduled tasks (the Tasks panel); `update` sets a
    /// task's own options.
    pub fn tasks(ns: &str, chat: &str) -> Self {
        Self::on_chat("get", "tasks", ns, chat)
    }

    /// `update channels/tasks`: setting a task's own options (then written with the caller's
    /// own token, `patch cronjobs` deciding too).
    pub fn task_options(ns: &str, chat: &str) -> Self {
        Self::on_chat("update", "tasks", ns, chat)
    }

    /// `<verb> channels/quality`: a chat's quality scan (`update` posts one, `get` reads it
    /// back).
    pub fn quality(verb: &'static str, ns: &str, chat: &str) -> Self {
        Self::on_chat(verb, "quality", ns, chat)
    }

    /// `<verb> channels/live`: a chat's live session (get, update, delete; watch for the
    /// stream of control requests).
    pub fn live(verb: &'static str, ns: &str, chat: &str) -> Self {
        Self::on_chat(verb, "live", ns, chat)
    }

    /// `<verb> channels/uicommands`: a chat's UI commands (watch for their stream, create to
    /// answer one).
    pub fn ui_commands(verb: &'static str, ns: &str, chat: &str) -> Self {
        Self::on_chat(verb, "uicommands", ns, chat)
    }

    /// `list channels/cards` of every chat of a namespace: their unread counts.
    pub fn count_cards(ns: &str) -> Self {
        Self::on_chat("list", "cards", ns, "")
    }

    /// `list channels`: a namespace's chats, with their plugins' instances (the console's
    /// sidebar). The same grant lets the caller list the Channels themselves.
    pub fn list_chats(ns: &str) -> Self {
        Self::on_chat("list", "", ns, "")
    }

    /// `watch plugininstances`: the stream of `plugins.changed` to a namespace's clients.
    pub fn watch_instances(ns: &str) -> Self {
        Self::on_instance("watch", "", ns, "")
    }

    /// `<verb> projects` of one Project: reading (`get`) or editing (`patch`) its plugin
    /// config (Settings → Plugins).
    pub fn project(verb: &'static str, ns: &str, name: &str) -> Self {
        Self {
            verb,
            resource: "projects",
            subresource: "",
            namespace: ns.into(),
            name: name.into(),
        }
    }

    /// `patch projecttrusts` of a project: trusting its config (the chart's
    /// `loop-plugins-project-trustee` role).
    pub fn project_trust(ns: &str, name: &str) -> Self {
        Self {
            verb: "patch",
            resource: "projecttrusts",
            subresource: "",
            namespace: ns.into(),
            name: name.into(),
        }
    }

    /// `<verb> plugins` of one Plugin (cluster-scoped): `update` to review and upgrade it,
    /// `delete` to remove it (the chart's `plugin-operator` role has both).
    pub fn plugin(verb: &'static str, name: &str) -> Self {
        Self {
            verb,
            resource: "plugins",
            subresource: "",
            namespace: String::new(),
            name: name.into(),
        }
    }

    /// `<verb> hostconfigs` of `default`: the global config (cluster-scoped).
    pub fn host_config(verb: &'static str) -> Self {
        Self {
            verb,
            resource: "hostconfigs",
            subresource: "",
            namespace: String::new(),
            name: model::resources::HOST_CONFIG_NAME.into(),
        }
    }

    /// `list agentruns`: a chat's agent runs.
    pub fn list_runs(ns: &str) -> Self {
        Self {
            verb: "list",
            resource: "agentruns",
            subresource: "",
            namespace: ns.into(),
            name: String::new(),
        }
    }

    /// `get agentruns`, the run: one run with its prompt and transcript (the console's agent
    /// view). The same grant lets the caller get the AgentRun itself.
    pub fn get_run(ns: &str, run: &str) -> Self {
        Self {
            verb: "get",
            resource: "agentruns",
            subresource: "",
            namespace: ns.into(),
            name: run.into(),
        }
    }

    /// `get plugininstances/settings`: the plugin's effective settings in a chat (a pane's
    /// `settings.get`).
    pub fn settings(ns: &str, instance: &str) -> Self {
        Self::on_instance("get", "settings", ns, instance)
    }

    /// `create plugininstances/stop`: the Stop button (`loop-plugins plugin stop`).
    pub fn stop(ns: &str, instance: &str) -> Self {
        Self::on_instance("create", "stop", ns, instance)
    }

    /// `list` or `watch toolcallapprovals`: the agents' calls waiting for a person.
    pub fn approvals(verb: &'static str, ns: &str) -> Self {
        Self {
            verb,
            resource: "toolcallapprovals",
            subresource: "",
            namespace: ns.into(),
            name: String::new(),
        }
    }

    /// `approve toolcallapprovals`: deciding an agent's call (a verb of its own, as
    /// Kubernetes has `approve` for CertificateSigningRequests).
    pub fn approve(ns: &str, name: &str) -> Self {
        Self {
            verb: "approve",
            resource: "toolcallapprovals",
            subresource: "",
            namespace: ns.into(),
            name: name.into(),
        }
    }

    /// The resource as RBAC rules name it: `resource` or `resource/subresource`.
    pub fn rule_resource(&self) -> String {
        if self.subresource.is_empty() {
            self.resource.to_string()
        } else {
            format!("{}/{}", self.resource, self.subresource)
        }
    }
}

impl std::fmt::Display for Permission {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {} {:?}", self.verb, self.rule_resource(), self.name)?;
        // A cluster-scoped resource (HostConfig) is in no namespace.
        if !self.namespace.is_empty() {
            write!(f, " in namespace {}", self.namespace)?;
        }
        write!(f, " (group {GROUP})")
    }
}

/// The RBAC verb for an HTTP method, as Kubernetes maps them.
pub fn verb_of(method: &Method) -> &'static str {
    match *method {
        Method::GET | Method::HEAD => "get",
        Method::PUT => "update",
        Method::PATCH => "patch",
        Method::DELETE => "delete",
        _ => "create",
    }
}

/// The user a token belongs to.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct User {
    pub username: String,
    pub uid: String,
    pub groups: Vec<String>,
    pub extra: BTreeMap<String, Vec<String>>,
}

/// The reviews, made by the cluster.
pub trait Reviewer: Send + Sync {
    /// The token's user; `None` when the cluster does not accept it.
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<User>, String>>;

    /// Whether RBAC lets the user do it; the reason when it does not.
    fn authorize<'a>(
        &'a self,
        user: &'a User,
        permission: &'a Permission,
    ) -> BoxFuture<'a, Result<Result<(), String>, String>>;
}

/// TokenReview and SubjectAccessReview through the Kubernetes API.
#[derive(Clone)]
pub struct KubeReviewer {
    client: Client,
}

impl KubeReviewer {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

impl Reviewer for KubeReviewer {
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<User>, String>> {
        Box::pin(async move {
            let review = TokenReview {
                spec: TokenReviewSpec {
                    token: token.to_string(),
                    audiences: None,
                },
                ..Default::default()
            };
            let answer = Api::<TokenReview>::all(self.client.clone())
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| format!("TokenReview: {e}"))?;
            let status = answer.status.unwrap_or_default();
            if status.authenticated != Some(true) {
                return Ok(None);
            }
            let user = status.user.unwrap_or_default();
            Ok(Some(User {
                username: user.username.unwrap_or_default(),
                uid: user.uid.unwrap_or_default(),
                groups: user.groups.unwrap_or_default(),
                extra: user.extra.unwrap_or_default(),
            }))
        })
    }

    fn authorize<'a>(
        &'a self,
        user: &'a User,
        permission: &'a Permission,
    ) -> BoxFuture<'a, Result<Result<(), String>, String>> {
        Box::pin(async move {
            let review = SubjectAccessReview {
                spec: SubjectAccessReviewSpec {
                    user: Some(user.username.clone()),
                    uid: Some(user.uid.clone()).filter(|u| !u.is_empty()),
                    groups: Some(user.groups.clone()),
                    extra: Some(user.extra.clone()).filter(|e| !e.is_empty()),
                    resource_attributes: Some(ResourceAttributes {
                        group: Some(GROUP.into()),
                        version: Some(VERSION.into()),
                        resource: Some(permission.resource.into()),
                        subresource: Some(permission.subresource.into())
                            .filter(|s: &String| !s.is_empty()),
                        verb: Some(permission.verb.into()),
                        namespace: Some(permission.namespace.clone()),
                        name: Some(permission.name.clone()).filter(|n| !n.is_empty()),
                        ..Default::default()
                    }),
                    ..Default::default()
                },
                ..Default::default()
            };
            let answer = Api::<SubjectAccessReview>::all(self.client.clone())
                .create(&PostParams::default(), &review)
                .await
                .map_err(|e| format!("SubjectAccessReview: {e}"))?;
            let status = answer.status.unwrap_or_default();
            if status.allowed && status.denied != Some(true) {
                Ok(Ok(()))
            } else {
                let reason = status
                    .reason
                    .filter(|r| !r.is_empty())
                    .or(status.evaluation_error)
                    .unwrap_or_default();
                Ok(Err(reason))
            }
        })
    }
}

/// Lets everyone do everything: for tests of the routes that are not about RBAC.
pub struct AllowAll;

impl Reviewer for AllowAll {
    fn authenticate<'a>(&'a self, token: &'a str) -> BoxFuture<'a, Result<Option<User>, String>> {
        Box::pin(async move {
            Ok(Some(User {
                username: token.to_string(),
                ..Default::default()
            }))
        })
    }

    fn authorize<'a>(
        &'a self,
        _user: &'a User,
        _permission: &'a Permission,
    ) -> BoxFuture<'a, Result<Result<(), String>, String>> {
        Box::pin(async { Ok(Ok(())) })
    }
}

/// RBAC's answer: allowed, or the reason it is not.
type Access = Result<(), String>;

struct Cached<T> {
    value: T,
    until: Instant,
}

/// How long a refusal is kept: short, so a grant just made soon counts.
const NEGATIVE_TTL: Duration = Duration::from_secs(2);
/// Entries kept before expired ones are swept.
const SWEEP_AT: usize = 10_000;

/// Authentication and authorization with their answers cached.
pub struct Auth {
    reviewer: Arc<dyn Reviewer>,
    ttl: Duration,
    tokens: Mutex<HashMap<TokenDigest, Cached<Option<Arc<User>>>>>,
    /// Per user, then per permission: a call that hits the cache finds its answer by
    /// reference, cloning neither the user nor the permission.
    access: Mutex<HashMap<Arc<User>, UserAccess>>,
}

/// A token's SHA-256: the cache keeps no token.
type TokenDigest = [u8; 32];

/// One user's cached answers.
type UserAccess = HashMap<Permission, Cached<Access>>;

/// What the cache did, for metrics.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    Cached,
    Reviewed,
}

impl Auth {
    pub fn new(reviewer: Arc<dyn Reviewer>, ttl: Duration) -> Self {
        Self {
            reviewer,
            ttl,
            tokens: Mutex::new(HashMap::new()),
            access: Mutex::new(HashMap::new()),
        }
    }

    /// Forgets every review kept (tests that count the reviews a route asks for).
    #[cfg(test)]
    pub fn forget(&self) {
        self.tokens.lock().expect("auth lock").clear();
        self.access.lock().expect("auth lock").clear();
    }

    /// The caller of a request, and whether RBAC lets it do `permission`.
    pub async fn check(
        &self,
        headers: &HeaderMap,
        permission: &Permission,
    ) -> HostResult<(Arc<User>, Lookup)> {
        let token = bearer(headers)?;
        let (user, looked) = self.user(token).await?;
        let (allowed, looked_access) = self.allowed(&user, permission).await?;
        if let Err(reason) = allowed {
            let why = if reason.is_empty() {
                String::new()
            } else {
                format!(" ({reason})")
            };
            return Err(HostError::new(
                Code::Forbidden,
                format!(
                    "{} may not {permission}; grant it with a {}{why}",
                    user.username,
                    if permission.namespace.is_empty() {
                        "ClusterRole and ClusterRoleBinding"
                    } else {
                        "Role"
                    }
                ),
            ));
        }
        let lookup = if looked == Lookup::Cached && looked_access == Lookup::Cached {
            Lookup::Cached
        } else {
            Lookup::Reviewed
        };
        Ok((user, lookup))
    }

    async fn user(&self, token: &str) -> HostResult<(Arc<User>, Lookup)> {
        let digest: TokenDigest = Sha256::digest(token.as_bytes()).into();
        let now = Instant::now();
        let cached = {
            let tokens = self.tokens.lock().expect("auth lock");
            tokens
                .get(&digest)
                .filter(|c| c.until > now)
                .map(|c| c.value.clone())
        };
        let (user, lookup) = match cached {
            Some(u) => (u, Lookup::Cached),
            None => {
                let user = self
                    .reviewer
                    .authenticate(token)
                    .await
                    .map_err(|e| {
                        HostError::new(
                            Code::Unavailable,
                            format!("could not review the token: {e}"),
                        )
                        .retry_after(1)
                    })?
                    .map(Arc::new);
                let ttl = if user.is_some() {
                    self.ttl
                } else {
                    NEGATIVE_TTL
                };
                let mut tokens = self.tokens.lock().expect("auth lock");
                if tokens.len() >= SWEEP_AT {
                    tokens.retain(|_, c| c.until > now);
                }
                tokens.insert(
                    digest,
                    Cached {
                        value: user.clone(),
                        until: now + ttl,
                    },
                );
                (user, Lookup::Reviewed)
            }
        };
        match user {
            Some(u) => Ok((u, lookup)),
            None => Err(HostError::new(
                Code::InvalidToken,
                "the bearer token is not one the cluster accepts (TokenReview)",
            )),
        }
    }

    async fn allowed(
        &self,
        user: &Arc<User>,
        permission: &Permission,
    ) -> HostResult<(Result<(), String>, Lookup)> {
        let now = Instant::now();
        if let Some(c) = self
            .access
            .lock()
            .expect("auth lock")
            .get(&**user)
            .and_then(|of_user| of_user.get(permission))
            .filter(|c| c.until > now)
        {
            return Ok((c.value.clone(), Lookup::Cached));
        }
        let answer = self
            .reviewer
            .authorize(user, permission)
            .await
            .map_err(|e| {
                HostError::new(
                    Code::Unavailable,
                    format!("could not review the access: {e}"),
                )
                .retry_after(1)
            })?;
        let ttl = if answer.is_ok() {
            self.ttl
        } else {
            NEGATIVE_TTL
        };
        let mut access = self.access.lock().expect("auth lock");
        if access.len() >= SWEEP_AT {
            access.retain(|_, of_user| {
                of_user.retain(|_, c| c.until > now);
                !of_user.is_empty()
            });
        }
        let of_user = access.entry(user.clone()).or_default();
        if of_user.len() >= SWEEP_AT {
            of_user.retain(|_, c| c.until > now);
        }
        of_user.insert(
            permission.clone(),
            Cached {
                value: answer.clone(),
                until: now + ttl,
            },
        );
        Ok((answer, Lookup::Reviewed))
    }
}

/// The token of `Authorization: Bearer <token>`.
pub fn bearer(headers: &HeaderMap) -> HostResult<&str> {
    let Some(value) = headers.get(header::AUTHORIZATION) else {
        return Err(HostError::new(
            Code::MissingToken,
            "no Authorization header: send Authorization: Bearer <Kubernetes token>",
        ));
    };
    let text = value.to_str().unwrap_or_default();
    let token = text
        .strip_prefix("Bearer ")
        .or_else(|| text.strip_prefix("bearer "))
        .map(str::trim)
        .unwrap_or_default();
    if token.is_empty() {
        return Err(HostError::new(
            Code::MissingToken,
            "the Authorization header is not Bearer <Kubernetes token>",
        ));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use axum::http::HeaderValue;

    use super::*;

    /// Accepts token `good` as user alice, who may only create actions.
    #[derive(Default)]
    struct Fake {
        reviews: AtomicUsize,
    }

    impl Reviewer for Fake {
        fn authenticate<'a>(
            &'a self,
            token: &'a str,
        ) -> BoxFuture<'a, Result<Option<User>, String>> {
            self.reviews.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                Ok((token == "good").then(|| User {
                    username: "alice".into(),
                    ..Default::default()
                }))
            })
        }

        fn authorize<'a>(
            &'a self,
            _user: &'a User,
            permission: &'a Permission,
        ) -> BoxFuture<'a, Result<Result<(), String>, String>> {
            self.reviews.fetch_add(1, Ordering::SeqCst);
            Box::pin(async move {
                Ok(if permission.subresource == "actions" {
                    Ok(())
                } else {
                    Err("no RBAC rule".into())
                })
            })
        }
    }

    fn headers(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
        h
    }

    #[tokio::test]
    async fn token_then_rbac_with_answers_reused() {
        let fake = Arc::new(Fake::default());
        let auth = Auth::new(fake.clone(), Duration::from_secs(30));
        let action = Permission::action("ns", "echo-general");
        let (user, lookup) = auth.check(&headers("Bearer good"), &action).await.unwrap();
        assert_eq!(
            (user.username.as_str(), lookup),
            ("alice", Lookup::Reviewed)
        );
        let (_, lookup) = auth.check(&headers("Bearer good"), &action).await.unwrap();
        assert_eq!(lookup, Lookup::Cached);
        assert_eq!(fake.reviews.load(Ordering::SeqCst), 2);

        let e = auth
            .check(
                &headers("Bearer good"),
                &Permission::tool("ns", "echo-general"),
            )
            .await
            .unwrap_err();
        assert_eq!(e.code, Code::Forbidden);
        assert!(e.message.contains("create plugininstances/tools"), "{e}");
        let e = auth
            .check(&headers("Bearer bad"), &action)
            .await
            .unwrap_err();
        assert_eq!(e.code, Code::InvalidToken);
        let e = auth.check(&HeaderMap::new(), &action).await.unwrap_err();
        assert_eq!(e.code, Code::MissingToken);
        let e = auth
            .check(&headers("Basic abc"), &action)
            .await
            .unwrap_err();
        assert_eq!(e.code, Code::MissingToken);
    }

    #[test]
    fn methods_map_to_rbac_verbs() {
        assert_eq!(verb_of(&Method::GET), "get");
        assert_eq!(verb_of(&Method::POST), "create");
        assert_eq!(verb_of(&Method::PUT), "update");
        assert_eq!(verb_of(&Method::PATCH), "patch");
        assert_eq!(verb_of(&Method::DELETE), "delete");
        let p = Permission::x(&Method::DELETE, "ns", "i");
        assert_eq!(
            (p.verb, p.resource, p.subresource),
            ("delete", "plugininstances", "x")
        );
        let p = Permission::events("ns", "general");
        assert_eq!(
            (p.resource, p.subresource, p.name.as_str()),
            ("channels", "events", "general")
        );
    }
}
