//! Starting a plugin on a loopback port for a test, and talking to it.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use loop_plugin_sdk::api::Client as ApiClient;
use reqwest::{Client, Method, RequestBuilder};
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub const SECRET: &str = "test-secret";

/// The built-in manifest.
pub fn manifest() -> loop_plugin_sdk::manifest::Manifest {
    loop_plugin_sdk::manifest::parse_str(echo_plugin::BUILTIN).unwrap()
}

/// A directory removed when dropped.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(name: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("echo-plugin-{name}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// An HTTP client (after installing the crypto provider reqwest needs here).
pub fn client() -> Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::new()
}

/// A plugin serving on 127.0.0.1.
pub struct Running {
    pub url: String,
    pub client: Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<std::io::Result<()>>>,
}

pub async fn start(data: &Path) -> Running {
    start_with(data, None).await
}

pub async fn start_with(data: &Path, api: Option<ApiClient>) -> Running {
    let plugin = echo_plugin::plugin(manifest(), api, data)
        .unwrap()
        .build(SECRET)
        .unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr: SocketAddr = listener.local_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(plugin.serve(listener, async move {
        let _ = stopped.await;
    }));
    Running {
        url: format!("http://{addr}"),
        client: client(),
        stop: Some(stop),
        task: Some(task),
    }
}

impl Running {
    /// A request carrying the secret.
    pub fn req(&self, method: Method, path: &str) -> RequestBuilder {
        self.client
            .request(method, format!("{}{path}", self.url))
            .bearer_auth(SECRET)
    }

    pub async fn post(&self, path: &str, body: Value) -> reqwest::Response {
        self.req(Method::POST, path)
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    /// The journal's request entries for `route`.
    pub async fn journal(&self, route: &str) -> Vec<Value> {
        let res = self.req(Method::GET, "/x/journal").send().await.unwrap();
        assert_eq!(res.status(), 200);
        let body: Value = res.json().await.unwrap();
        body["entries"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["route"] == route)
            .cloned()
            .collect()
    }

    /// Shuts the plugin down and waits for it.
    pub async fn stop(mut self) {
        let _ = self.stop.take().unwrap().send(());
        self.task.take().unwrap().await.unwrap().unwrap();
    }
}
