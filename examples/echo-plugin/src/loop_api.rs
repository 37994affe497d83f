//! The Plugin API client: `$LOOP_API_URL/api/plugin/v1/...` with the channel token from
//! `LOOP_PLUGIN_TOKEN_FILE`, read afresh on every call so a rotated token is picked up.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde_json::Value;

use crate::config::read_secret;

/// How long a Plugin API call may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

pub struct LoopApi {
    base: String,
    token_file: PathBuf,
    http: reqwest::Client,
}

/// An answer: its status and its body (JSON when it parses, else a string).
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    pub body: Value,
}

/// reqwest is built here without a crypto provider of its own (`rustls-no-provider`, to
/// avoid building aws-lc); this installs ring's as the process default. Call it before
/// making any `reqwest::Client`; calling it again does nothing.
pub fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

impl LoopApi {
    /// `base` is `LOOP_API_URL` without a trailing slash.
    pub fn new(base: String, token_file: PathBuf) -> anyhow::Result<Self> {
        install_crypto_provider();
        let mut builder = reqwest::Client::builder().timeout(TIMEOUT);
        // The API in a cluster is a plain-HTTP Service, which needs no root certificates; an
        // image FROM scratch has none, and the platform verifier refuses to start without.
        if base.starts_with("http://") {
            builder = builder.tls_certs_only([]);
        }
        let http = builder.build().context("building the Plugin API client")?;
        Ok(Self {
            base,
            token_file,
            http,
        })
    }

    /// The URL of a Plugin API route (`path` starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("{}/api/plugin/v1{path}", self.base)
    }

    /// `GET /channel`: the channel and the plugin's settings in its project.
    pub async fn channel(&self) -> anyhow::Result<Answer> {
        self.get("/channel").await
    }

    async fn get(&self, path: &str) -> anyhow::Result<Answer> {
        let token = read_secret(&self.token_file).context("LOOP_PLUGIN_TOKEN_FILE")?;
        let res = self
            .http
            .get(self.url(path))
            .bearer_auth(token)
            .send()
            .await?;
        let status = res.status().as_u16();
        let bytes = res.bytes().await?;
        let body = serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
        Ok(Answer { status, body })
    }
}
