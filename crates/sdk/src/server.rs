//! [`Plugin`]: the handlers an author writes, checked against the manifest, served with the
//! contract's routes.
//!
//! | route | what the server does | then calls |
//! |---|---|---|
//! | every route | 401 `{"error"}` without `Authorization: Bearer <secret>` (constant-time compare) | |
//! | `GET /healthz` | 200 `{"status": "ok", "id", "version"}` from the manifest | |
//! | `POST /actions/{id}` | 400 for a body that breaks the contract, 404 for an undeclared id, else 202 at once | the action's handler, in the background, with a token cancelled at shutdown |
//! | `POST /tools/{name}` | 400 / 404 likewise | the tool's handler; its `Err` becomes an `is_error` result |
//! | `POST /runs/{id}/done` | 204 | the run-end handler, if any |
//! | `POST /events` | 422 for an event the manifest does not subscribe to, else 204 | the event handler, if any |
//! | `POST /switches/{id}` | 404 for an undeclared switch | the switch's handler; its answer is the pill's state |
//! | `/x/...` | the author's router, nested under `/x` (404 without one), bodies up to the contract's 8 MB | |
//!
//! The author's [`Plugin::middleware`] runs around every route once the secret is checked
//! (logging, metrics, a record of what the host sent).
//!
//! [`Plugin::build`] refuses a handler for something the manifest does not declare and a
//! declared action, tool or switch without a handler, so a plugin cannot pass its own start
//! and then answer 404 to the host. Shutdown ([`Server::serve`]) stops taking connections,
//! finishes requests in flight, cancels background actions and the plugin's own background
//! work ([`Background::go`]) and waits up to [`BACKGROUND_GRACE`] for them.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{Next, from_fn, from_fn_with_state};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use manifest::Manifest;
use serde::de::DeserializeOwned;
use subtle::ConstantTimeEq;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::wire::{
    ActionRequest, ErrorBody, Event, Health, RunDone, SwitchRequest, SwitchState, ToolRequest,
    ToolResult,
};

/// How long shutdown waits for background actions after cancelling them.
pub const BACKGROUND_GRACE: Duration = Duration::from_secs(5);
/// The biggest body an `/x` route takes (the contract's `x-loop-max-body-bytes`: the
/// reference's 8 MB, in `manifest::sizes`' binary units); a bigger one is answered 413.
pub const MAX_X_BODY: usize = manifest::sizes::X_BODY_MAX_BYTES as usize;

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;
type ActionFn = Arc<dyn Fn(ActionRequest, ActionContext) -> BoxFuture<()> + Send + Sync>;
type ToolFn = Arc<dyn Fn(ToolRequest) -> BoxFuture<Result<ToolResult, ToolError>> + Send + Sync>;
type SwitchFn = Arc<dyn Fn(SwitchRequest) -> BoxFuture<SwitchState> + Send + Sync>;
type EventFn = Arc<dyn Fn(Event) -> BoxFuture<()> + Send + Sync>;
type RunDoneFn = Arc<dyn Fn(String, RunDone) -> BoxFuture<()> + Send + Sync>;
type MiddlewareFn = Arc<dyn Fn(Request, Next) -> BoxFuture<Response> + Send + Sync>;

/// What a background action gets besides its request.
#[derive(Clone, Debug)]
pub struct ActionContext {
    /// The action's id.
    pub action: String,
    /// Cancelled when the plugin shuts down: stop soon after.
    pub cancelled: CancellationToken,
}

/// The plugin's own background work (what an event or run-end handler hands off, since the
/// host waits for those; a poller): each task is tracked, its token is cancelled when the
/// plugin shuts down, and shutdown waits for it as for background actions. Get it from
/// [`Plugin::background`] before [`Plugin::build`]; clones share one set of tasks.
#[derive(Clone, Debug)]
pub struct Background {
    shutdown: CancellationToken,
    tracker: TaskTracker,
}

impl Background {
    /// Runs `work` in the background with a token cancelled at shutdown: stop soon after.
    pub fn go<F, Fut>(&self, work: F)
    where
        F: FnOnce(CancellationToken) -> Fut,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.tracker.spawn(work(self.shutdown.child_token()));
    }

    /// Whether shutdown has begun.
    pub fn is_shutting_down(&self) -> bool {
        self.shutdown.is_cancelled()
    }

    /// Completes when shutdown begins: for waits that are not tasks, such as a request that
    /// holds on (a long poll, a delay), which shutdown otherwise waits out.
    pub fn shutting_down(&self) -> impl Future<Output = ()> + Send + use<> {
        self.shutdown.clone().cancelled_owned()
    }
}

/// A tool's failure: the agent reads it as an `is_error` result.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl ToolError {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// Handlers that do not fit the manifest.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("the handlers do not fit the manifest: {}", .0.join("; "))]
pub struct BuildError(pub Vec<String>);

/// A plugin's handlers, before [`Plugin::build`] checks them against the manifest.
pub struct Plugin {
    manifest: Manifest,
    actions: BTreeMap<String, ActionFn>,
    tools: BTreeMap<String, ToolFn>,
    switches: BTreeMap<String, SwitchFn>,
    event: Option<EventFn>,
    run_done: Option<RunDoneFn>,
    x: Option<Router>,
    middleware: Vec<MiddlewareFn>,
    background: Background,
}

impl Plugin {
    pub fn new(manifest: Manifest) -> Self {
        Self {
            manifest,
            actions: BTreeMap::new(),
            tools: BTreeMap::new(),
            switches: BTreeMap::new(),
            event: None,
            run_done: None,
            x: None,
            middleware: Vec::new(),
            background: Background {
                shutdown: CancellationToken::new(),
                tracker: TaskTracker::new(),
            },
        }
    }

    /// The handle for the plugin's own background work, to give handlers before building.
    pub fn background(&self) -> Background {
        self.background.clone()
    }

    /// The action `id`'s work, run in the background after the 202.
    pub fn action<F, Fut>(mut self, id: &str, f: F) -> Self
    where
        F: Fn(ActionRequest, ActionContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.actions
            .insert(id.into(), Arc::new(move |req, cx| Box::pin(f(req, cx))));
        self
    }

    /// The tool `name`.
    pub fn tool<F, Fut>(mut self, name: &str, f: F) -> Self
    where
        F: Fn(ToolRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolResult, ToolError>> + Send + 'static,
    {
        self.tools
            .insert(name.into(), Arc::new(move |req| Box::pin(f(req))));
        self
    }

    /// The composer switch `id`.
    pub fn switch<F, Fut>(mut self, id: &str, f: F) -> Self
    where
        F: Fn(SwitchRequest) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = SwitchState> + Send + 'static,
    {
        self.switches
            .insert(id.into(), Arc::new(move |req| Box::pin(f(req))));
        self
    }

    /// Every event the manifest subscribes to (the host waits: hand long work to a task).
    pub fn on_event<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(Event) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.event = Some(Arc::new(move |e| Box::pin(f(e))));
        self
    }

    /// The end of an agent run the plugin started (any run id: it may predate a restart).
    pub fn on_run_done<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(String, RunDone) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        self.run_done = Some(Arc::new(move |id, done| Box::pin(f(id, done))));
        self
    }

    /// The plugin's own API, served under `/x` (a route `/journal` answers `/x/journal`).
    pub fn x(mut self, router: Router) -> Self {
        self.x = Some(router);
        self
    }

    /// Code run around every route, the contract's and `/x`'s (unknown routes too), once the
    /// secret is checked: a request without it never reaches it. It goes on with
    /// `next.run(req).await` or answers itself. Several run in the order added, the first
    /// outermost.
    pub fn middleware<F, Fut>(mut self, f: F) -> Self
    where
        F: Fn(Request, Next) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Response> + Send + 'static,
    {
        self.middleware
            .push(Arc::new(move |req, next| Box::pin(f(req, next))));
        self
    }

    /// Checks the handlers against the manifest and makes the server.
    pub fn build(self, secret: &str) -> Result<Server, BuildError> {
        let mut problems = Vec::new();
        let declared = |kind: &str, handled: Vec<&String>, declared: Vec<&String>| {
            let mut p = Vec::new();
            for name in &handled {
                if !declared.contains(name) {
                    p.push(format!(
                        "a handler for {kind} {name}, which the manifest does not declare"
                    ));
                }
            }
            for name in &declared {
                if !handled.contains(name) {
                    p.push(format!(
                        "the manifest declares {kind} {name}, which has no handler"
                    ));
                }
            }
            p
        };
        let m = &self.manifest;
        problems.extend(declared(
            "action",
            self.actions.keys().collect(),
            m.actions.iter().map(|a| &a.id).collect(),
        ));
        problems.extend(declared(
            "tool",
            self.tools.keys().collect(),
            m.tools.iter().map(|t| &t.name).collect(),
        ));
        problems.extend(declared(
            "switch",
            self.switches.keys().collect(),
            m.ui.composer_switches.iter().map(|s| &s.id).collect(),
        ));
        if secret.is_empty() {
            problems.push("an empty secret".into());
        }
        if !problems.is_empty() {
            return Err(BuildError(problems));
        }
        Ok(Server {
            state: Arc::new(Inner {
                manifest: self.manifest,
                actions: self.actions,
                tools: self.tools,
                switches: self.switches,
                event: self.event,
                run_done: self.run_done,
                shutdown: self.background.shutdown,
                background: self.background.tracker,
            }),
            secret: Arc::from(secret.as_bytes()),
            x: self.x.unwrap_or_default(),
            middleware: self.middleware,
        })
    }
}

struct Inner {
    manifest: Manifest,
    actions: BTreeMap<String, ActionFn>,
    tools: BTreeMap<String, ToolFn>,
    switches: BTreeMap<String, SwitchFn>,
    event: Option<EventFn>,
    run_done: Option<RunDoneFn>,
    shutdown: CancellationToken,
    background: TaskTracker,
}

type Shared = Arc<Inner>;

/// A plugin ready to serve.
pub struct Server {
    state: Shared,
    secret: Arc<[u8]>,
    x: Router,
    middleware: Vec<MiddlewareFn>,
}

impl Server {
    /// The router: every route behind the secret, then the author's middleware.
    pub fn router(&self) -> Router {
        let mut router = Router::new()
            .route("/healthz", get(health))
            .route("/actions/{action}", post(run_action))
            .route("/tools/{tool}", post(call_tool))
            .route("/runs/{run_id}/done", post(run_done))
            .route("/events", post(take_event))
            .route("/switches/{switch}", post(set_switch))
            .with_state(self.state.clone())
            .nest(
                "/x",
                self.x.clone().layer(DefaultBodyLimit::max(MAX_X_BODY)),
            )
            .fallback(|| async { error(StatusCode::NOT_FOUND, "no such route") });
        for f in self.middleware.iter().rev().cloned() {
            router = router.layer(from_fn(move |req: Request, next: Next| f(req, next)));
        }
        router.layer(from_fn_with_state(self.secret.clone(), require_secret))
    }

    /// Serves on `listener` until `shutdown` completes; then finishes requests in flight,
    /// cancels background actions and waits up to [`BACKGROUND_GRACE`] for them.
    pub async fn serve(
        self,
        listener: tokio::net::TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let token = self.state.shutdown.clone();
        axum::serve(listener, self.router())
            .with_graceful_shutdown(async move {
                shutdown.await;
                token.cancel();
            })
            .await?;
        self.state.shutdown.cancel();
        self.state.background.close();
        if tokio::time::timeout(BACKGROUND_GRACE, self.state.background.wait())
            .await
            .is_err()
        {
            tracing::warn!("background actions still running at exit");
        }
        Ok(())
    }
}

/// SIGTERM (what Kubernetes sends) or Ctrl-C: pass it to [`Server::serve`].
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if tokio::signal::ctrl_c().await.is_err() {
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {}
        () = term => {}
    }
}

fn error(status: StatusCode, message: impl Into<String>) -> Response {
    let body = ErrorBody {
        error: message.into(),
    };
    (status, axum::Json(body)).into_response()
}

async fn require_secret(State(secret): State<Arc<[u8]>>, req: Request, next: Next) -> Response {
    if bearer(req.headers()).is_some_and(|presented| bool::from(secret.as_ref().ct_eq(presented))) {
        return next.run(req).await;
    }
    let mut res = error(StatusCode::UNAUTHORIZED, "missing or wrong bearer secret");
    res.headers_mut()
        .insert(header::WWW_AUTHENTICATE, "Bearer".parse().expect("static"));
    res
}

/// The credentials of `Authorization: Bearer <credentials>` (the scheme in any case).
fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    let (scheme, rest) = value.split_at_checked(7)?;
    scheme
        .eq_ignore_ascii_case(b"bearer ")
        .then(|| rest.trim_ascii())
}

/// A JSON body, or why it does not parse (the contract answers that with 400).
fn parse<T: DeserializeOwned>(body: &Bytes) -> Result<T, String> {
    serde_json::from_slice(body).map_err(|e| format!("the body: {e}"))
}

async fn health(State(s): State<Shared>) -> Response {
    axum::Json(Health {
        status: "ok".into(),
        id: s.manifest.id.clone(),
        version: s.manifest.version.clone(),
    })
    .into_response()
}

async fn run_action(State(s): State<Shared>, Path(action): Path<String>, body: Bytes) -> Response {
    let Some(handler) = s.actions.get(&action).cloned() else {
        return error(StatusCode::NOT_FOUND, format!("no such action: {action}"));
    };
    let req: ActionRequest = match parse(&body) {
        Ok(r) => r,
        Err(why) => return error(StatusCode::BAD_REQUEST, why),
    };
    if let Err(why) = req.check() {
        return error(StatusCode::BAD_REQUEST, why);
    }
    let cx = ActionContext {
        action,
        cancelled: s.shutdown.child_token(),
    };
    s.background.spawn(handler(req, cx));
    (
        StatusCode::ACCEPTED,
        axum::Json(serde_json::json!({"accepted": true})),
    )
        .into_response()
}

async fn call_tool(State(s): State<Shared>, Path(tool): Path<String>, body: Bytes) -> Response {
    let Some(handler) = s.tools.get(&tool).cloned() else {
        return error(StatusCode::NOT_FOUND, format!("no such tool: {tool}"));
    };
    let req: ToolRequest = match parse(&body) {
        Ok(r) => r,
        Err(why) => return error(StatusCode::BAD_REQUEST, why),
    };
    let result = handler(req)
        .await
        .unwrap_or_else(|e| ToolResult::error(e.to_string()));
    axum::Json(result).into_response()
}

async fn run_done(State(s): State<Shared>, Path(run_id): Path<String>, body: Bytes) -> Response {
    let done: RunDone = match parse(&body) {
        Ok(d) => d,
        Err(why) => return error(StatusCode::BAD_REQUEST, why),
    };
    if let Some(handler) = s.run_done.clone() {
        handler(run_id, done).await;
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn take_event(State(s): State<Shared>, body: Bytes) -> Response {
    let event: Event = match parse(&body) {
        Ok(e) => e,
        Err(why) => return error(StatusCode::BAD_REQUEST, why),
    };
    if !s.manifest.events.contains(&event.kind) {
        return error(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("not subscribed to {}", event.kind),
        );
    }
    if let Some(handler) = s.event.clone() {
        handler(event).await;
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn set_switch(State(s): State<Shared>, Path(switch): Path<String>, body: Bytes) -> Response {
    let Some(handler) = s.switches.get(&switch).cloned() else {
        return error(StatusCode::NOT_FOUND, format!("no such switch: {switch}"));
    };
    let req: SwitchRequest = match parse(&body) {
        Ok(r) => r,
        Err(why) => return error(StatusCode::BAD_REQUEST, why),
    };
    axum::Json(handler(req).await).into_response()
}
