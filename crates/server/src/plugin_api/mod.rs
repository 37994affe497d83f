//! The Plugin API server (`loop-plugins api`): what plugin pods call at `$LOOP_API_URL`, under
//! `/api/plugin/v1`, with the bearer token of their instance's Secret. The contract is
//! `openapi/plugin-api-v1.yaml`; its tests check every route against it.
//!
//! | method | route | capability |
//! |---|---|---|
//! | GET | `/channel` | none |
//! | POST | `/runs` | `agent.readonly` (read-only agent) or `agent.write` |
//! | GET | `/runs/{run_id}` | `agent.readonly` or `agent.write` |
//! | PUT, DELETE | `/composer/switches/{id}` | `ui.composer_switch` |
//! | POST | `/cards`, GET `/cards/{id}` | `ui.notification.card` |
//! | POST | `/notifications` | `notifications.send` |
//! | POST | `/channel/live/control`, PUT `/channel/live/hold` | `live.control` |
//! | GET | `/files/{path}` | `files.read` |
//! | GET, PUT | `/memory/{key}` | `memory.read`, `memory.write` |
//!
//! The parts, each with one job:
//! - [`tokens`]: the bearer header and the index of token digests, fed by the Secret watch;
//! - [`auth`]: who calls (401), whether the project enables the plugin (409), capabilities (403);
//! - [`view`]: the reflector stores and the overlay of this process's own writes;
//! - [`instance_state`], [`quota`], [`files`], [`inbox`], [`memory`]: the pure rules;
//! - [`writes`]: every write, behind a trait; [`apply`]: the thin parts that call it;
//! - `routes`: the handlers; [`metrics`]: Prometheus; this module: the server and its layers.

pub mod apply;
pub mod auth;
pub mod cli;
pub mod clock;
pub mod error;
pub mod files;
pub mod inbox;
pub mod instance_state;
pub mod live;
pub mod memory;
pub mod metrics;
pub mod quota;
mod routes;
pub mod shared_runs;
pub mod state;
pub mod tokens;
pub mod view;
pub mod writes;

#[cfg(test)]
pub(crate) mod tests;

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource};
use prometheus_client::registry::Registry;
use serde::de::DeserializeOwned;
use tower_http::limit::RequestBodyLimitLayer;
use tower_http::timeout::TimeoutLayer;
use tower_http::trace::TraceLayer;

pub use cli::{ApiArgs, serve};
pub use error::{ApiError, Code};
pub use routes::{PREFIX, ROUTES};
pub use state::{ApiConfig, AppState};

use model::names::MANAGED_SELECTOR;
use model::resources::{AgentRun, Channel, HostConfig, Plugin, PluginInstance, Project};

/// The Plugin API, with its layers: metrics, one error shape, tracing, a time limit and a body
/// limit. `/healthz` answers outside them.
pub fn router(state: Arc<AppState>) -> Router {
    let metrics = state.metrics.clone();
    let config = state.config.clone();
    Router::new()
        .nest(PREFIX, routes::routes())
        .fallback(|| async { ApiError::new(Code::NotFound, "no such route") })
        .with_state(state)
        .layer(RequestBodyLimitLayer::new(config.max_body_bytes))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::GATEWAY_TIMEOUT,
            config.request_timeout,
        ))
        .layer(TraceLayer::new_for_http())
        .layer(middleware::from_fn(error_shape))
        .layer(middleware::from_fn_with_state(metrics, metrics::track))
        .route("/healthz", get(|| async { "ok" }))
}

/// Gives every error answer the one JSON shape, whoever made it (the router's 405, a body or
/// time limit, an extractor's rejection).
async fn error_shape(request: Request, next: Next) -> Response {
    let response = next.run(request).await;
    let status = response.status();
    let is_json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes().starts_with(b"application/json"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let text = axum::body::to_bytes(body, 4096).await.unwrap_or_default();
    let text = String::from_utf8_lossy(&text);
    let message = match text.trim() {
        "" => status.canonical_reason().unwrap_or("error").to_string(),
        t => t.to_string(),
    };
    let shaped = ApiError::new(Code::for_status(status), message).into_response();
    parts.headers.remove(header::CONTENT_LENGTH);
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    let (_, body): (_, Body) = shaped.into_parts();
    Response::from_parts(parts, body)
}

/// Fills a reflector store from a watch, in the background.
fn reflect<K>(api: Api<K>, config: watcher::Config) -> Store<K>
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let stream = watcher(api, config).default_backoff().reflect(writer);
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        while let Some(event) = stream.next().await {
            if let Err(err) = event {
                tracing::warn!(%err, kind = %K::kind(&()), "watch failed; retrying");
            }
        }
    });
    store
}

/// Feeds the token index from the instances' Secrets; resolves once the first list is in.
fn index_tokens(api: Api<Secret>, tokens: Arc<tokens::TokenIndex>) -> impl Future<Output = ()> {
    let (ready_tx, ready_rx) = tokio::sync::oneshot::channel::<()>();
    let selector = format!("{MANAGED_SELECTOR},app.kubernetes.io/component=token");
    let stream = watcher(api, watcher::Config::default().labels(&selector)).default_backoff();
    tokio::spawn(async move {
        futures::pin_mut!(stream);
        let mut ready = Some(ready_tx);
        while let Some(event) = stream.next().await {
            match event {
                Ok(event) => {
                    tokens.apply_watcher_event(&event);
                    if matches!(event, watcher::Event::InitDone)
                        && let Some(tx) = ready.take()
                    {
                        let _ = tx.send(());
                    }
                }
                Err(err) => tracing::warn!(%err, "watch of token Secrets failed; retrying"),
            }
        }
    });
    async move {
        let _ = ready_rx.await;
    }
}

/// Runs the Plugin API on `listen` and its metrics on `metrics_addr` until SIGTERM or Ctrl-C,
/// finishing the requests in flight.
pub async fn run(
    client: Client,
    config: ApiConfig,
    listen: SocketAddr,
    metrics_addr: SocketAddr,
) -> anyhow::Result<()> {
    let managed = || watcher::Config::default().labels(MANAGED_SELECTOR);
    let stores = view::Stores {
        host: reflect(
            Api::<HostConfig>::all(client.clone()),
            watcher::Config::default(),
        ),
        plugins: reflect(
            Api::<Plugin>::all(client.clone()),
            watcher::Config::default(),
        ),
        projects: reflect(
            Api::<Project>::all(client.clone()),
            watcher::Config::default(),
        ),
        channels: reflect(
            Api::<Channel>::all(client.clone()),
            watcher::Config::default(),
        ),
        instances: reflect(Api::<PluginInstance>::all(client.clone()), managed()),
        runs: reflect(Api::<AgentRun>::all(client.clone()), managed()),
        config_maps: reflect(
            Api::<ConfigMap>::all(client.clone()),
            watcher::Config::default().labels(&format!(
                "{MANAGED_SELECTOR},app.kubernetes.io/component in (inbox,memory)"
            )),
        ),
    };
    let tokens = Arc::new(tokens::TokenIndex::new());
    let tokens_ready = index_tokens(Api::<Secret>::all(client.clone()), tokens.clone());
    tracing::info!("waiting for the caches to fill");
    futures::try_join!(
        stores.host.wait_until_ready(),
        stores.plugins.wait_until_ready(),
        stores.projects.wait_until_ready(),
        stores.channels.wait_until_ready(),
        stores.instances.wait_until_ready(),
        stores.runs.wait_until_ready(),
        stores.config_maps.wait_until_ready(),
    )?;
    tokens_ready.await;

    let mut registry = Registry::default();
    let metrics = Arc::new(metrics::Metrics::new(&mut registry));
    // The host API (callers → plugins) shares the server and the metrics registry.
    let host_settings = crate::host_api::HostSettings {
        replicas_namespace: config.replicas_namespace.clone(),
        ..Default::default()
    };
    let host =
        crate::host_api::HostState::new(client.clone(), host_settings, &mut registry).await?;
    let replicas_namespace = config.replicas_namespace.clone();
    let mut state = AppState::new(
        config,
        stores,
        tokens,
        Arc::new(writes::KubeWriter::new(client.clone())),
        Arc::new(clock::SystemClock),
        Arc::new(live::NoLiveSessions),
        metrics,
    );
    match replicas_namespace {
        Some(namespace) => {
            tracing::info!(
                %namespace,
                "replicas count plugins.daily_runs and send settings.changed together"
            );
            state.shared_runs = Some(shared_runs::SharedRuns::new(client, &namespace));
        }
        None => tracing::warn!(
            "no --replicas-namespace (POD_NAMESPACE): this server counts plugins.daily_runs \
             and sends settings.changed alone, exact only while it is the one replica"
        ),
    }
    let state = Arc::new(state);
    let registry = Arc::new(registry);
    let metrics_app = runtime::metrics::router(registry);

    let api_listener = tokio::net::TcpListener::bind(listen).await?;
    let metrics_listener = tokio::net::TcpListener::bind(metrics_addr).await?;
    tracing::info!(%listen, %metrics_addr, "Plugin API serving");
    let api = axum::serve(
        api_listener,
        router(state).merge(crate::host_api::router(host)),
    )
    .with_graceful_shutdown(runtime::shutdown::signal());
    let metrics_server = axum::serve(metrics_listener, metrics_app)
        .with_graceful_shutdown(runtime::shutdown::signal());
    let (a, m) = tokio::join!(api, metrics_server);
    a?;
    m?;
    tracing::info!("Plugin API stopped");
    Ok(())
}
