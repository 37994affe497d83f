//! What every role serves beside its work: `/healthz` and the Prometheus `/metrics` of its
//! registry, in the OpenMetrics text format.

use std::sync::Arc;

use axum::Router;
use axum::http::header;
use axum::routing::get;
use prometheus_client::registry::Registry;

/// The content type of [`encode`]'s output.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The registry's text exposition.
pub fn encode(registry: &Registry) -> String {
    let mut body = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut body, registry);
    body
}

/// `/healthz` and `/metrics` for `registry`.
pub fn router(registry: Arc<Registry>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/metrics",
            get(move || {
                let registry = registry.clone();
                async move { ([(header::CONTENT_TYPE, CONTENT_TYPE)], encode(&registry)) }
            }),
        )
}

/// Serves [`router`] on `addr` until `stop` resolves.
pub async fn serve(
    addr: std::net::SocketAddr,
    registry: Arc<Registry>,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    axum::serve(listener, router(registry))
        .with_graceful_shutdown(stop)
        .await
}
