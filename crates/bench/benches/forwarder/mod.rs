//! The floor of the host API's hop (issue 31): a bare forwarder between the same loader and
//! the same plugin. Every `POST /tools/{name}` goes to the plugin's container with its secret
//! added, and the answer comes back as it is: a keep-alive pool (reqwest over hyper, the
//! client the API server's `PluginClient` uses), and no checks at all: no caller token, no
//! stores, no breaker, no schema, no size cap, no metrics, no logs. What a proxy costs with
//! this stack; the host API's figures are read against it.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;

struct Upstream {
    http: reqwest::Client,
    /// `http://<pod address>:<port>`.
    base: String,
    bearer: String,
}

/// Serves the forwarder on a loopback port until the task is aborted; its base URL.
pub async fn start(
    plugin_base: &str,
    secret: &str,
) -> anyhow::Result<(String, tokio::task::JoinHandle<()>)> {
    let upstream = Arc::new(Upstream {
        http: reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(16)
            .build()?,
        base: plugin_base.trim_end_matches('/').to_string(),
        bearer: format!("Bearer {secret}"),
    });
    let app = Router::new()
        .route("/tools/{name}", post(forward))
        .with_state(upstream);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let base = format!("http://{}", listener.local_addr()?);
    let serving = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok((base, serving))
}

async fn forward(
    State(upstream): State<Arc<Upstream>>,
    Path(name): Path<String>,
    body: Bytes,
) -> Response {
    let sent = upstream
        .http
        .post(format!("{}/tools/{name}", upstream.base))
        .header(header::AUTHORIZATION, &upstream.bearer)
        .header(header::CONTENT_TYPE, "application/json")
        .body(body)
        .send()
        .await;
    let answer = match sent {
        Ok(answer) => answer,
        Err(e) => return (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = StatusCode::from_u16(answer.status().as_u16()).unwrap_or(StatusCode::BAD_GATEWAY);
    match answer.bytes().await {
        Ok(bytes) => (
            status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            bytes,
        )
            .into_response(),
        Err(e) => (StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    }
}
