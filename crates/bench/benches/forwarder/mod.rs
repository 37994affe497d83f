//! The floor of the host API's hop (issue 31): a bare forwarder between the same loader and
//! the same plugin. Every `POST /tools/{name}` goes to the plugin's container with its secret
//! added, and the answer comes back as it is: a keep-alive pool (reqwest over hyper, the
//! client the API server's `PluginClient` uses), and no checks at all: no caller token, no
//! stores, no breaker, no schema, no size cap, no metrics, no logs. What a proxy costs with
//! this stack; the host API's figures are read against it.
//!
//! It runs as a process of its own, as the API server does, so each can be pinned to a CPU and
//! its CPU time read from /proc: [`Forwarder::spawn`] starts this bench's own executable again
//! with `BENCH_FORWARD_TO` set, and the bench's `main` hands over to [`serve_if_asked`], which
//! serves on the default multi-threaded Tokio runtime (as `loop-plugins api` does) and prints
//! its address on standard output.

use std::io::Write;
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::Arc;

use anyhow::Context;
use tokio::io::AsyncBufReadExt;

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

const UPSTREAM: &str = "BENCH_FORWARD_TO";
const SECRET: &str = "BENCH_FORWARD_SECRET";

/// The forwarder's process, killed when dropped.
pub struct Forwarder {
    child: tokio::process::Child,
    pub addr: SocketAddr,
}

impl Forwarder {
    /// Starts the forwarder to `plugin_base` (`http://<pod address>:<port>`), calls carrying
    /// `secret`; resolves once it listens.
    pub async fn spawn(plugin_base: &str, secret: &str) -> anyhow::Result<Self> {
        let mut child = tokio::process::Command::new(std::env::current_exe()?)
            .env(UPSTREAM, plugin_base)
            .env(SECRET, secret)
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()?;
        let stdout = child.stdout.take().context("the forwarder's stdout")?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        let line = tokio::time::timeout(std::time::Duration::from_secs(30), lines.next_line())
            .await
            .context("the forwarder did not say where it listens within 30 s")??
            .context("the forwarder exited before it listened")?;
        let addr = line
            .strip_prefix("listening on ")
            .context("the forwarder's first line")?
            .parse()?;
        Ok(Self { child, addr })
    }

    pub fn pid(&self) -> u32 {
        self.child.id().unwrap_or_default()
    }
}

/// In the forwarder's process (started by [`Forwarder::spawn`]): serves until killed.
/// Elsewhere: None.
pub fn serve_if_asked() -> Option<anyhow::Result<()>> {
    let upstream = std::env::var(UPSTREAM).ok()?;
    let secret = std::env::var(SECRET).unwrap_or_default();
    let serve = async move {
        let app = router(&upstream, &secret)?;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let mut stdout = std::io::stdout();
        writeln!(stdout, "listening on {}", listener.local_addr()?)?;
        stdout.flush()?;
        axum::serve(listener, app).await?;
        anyhow::Ok(())
    };
    Some(
        tokio::runtime::Runtime::new()
            .map_err(Into::into)
            .and_then(|rt| rt.block_on(serve)),
    )
}

fn router(plugin_base: &str, secret: &str) -> anyhow::Result<Router> {
    let upstream = Arc::new(Upstream {
        http: reqwest::Client::builder()
            .no_proxy()
            .pool_max_idle_per_host(16)
            .build()?,
        base: plugin_base.trim_end_matches('/').to_string(),
        bearer: format!("Bearer {secret}"),
    });
    Ok(Router::new()
        .route("/tools/{name}", post(forward))
        .with_state(upstream))
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
