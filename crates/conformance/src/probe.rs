//! The calls themselves: one HTTP request per [`Step`], with the step's secret and the route's
//! time limit. Thin: what the answer means is `judge`'s.

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, CONTENT_TYPE};

use crate::error::SetupError;
use crate::judge::{Answer, NoAnswer};
use crate::plan::{Body, Method, SecretUse, Step};

/// The secret a wrong-secret call carries.
const WRONG_SECRET: &str = "conformance-wrong-secret";

/// Every HTTP client conformance makes (the probe's, the wait until a plugin answers, the UI
/// stand-in's), built after installing reqwest's TLS provider (ring's; reqwest is built
/// without one). A guard on the library's side, because this library cannot know its binary:
/// besides `loop-plugins conformance` (whose main installs it), plugin authors' own test
/// binaries run it in-process, as the examples' tests do.
pub fn client(builder: reqwest::ClientBuilder) -> reqwest::Result<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    builder.build()
}

pub struct Probe {
    client: reqwest::Client,
    base: reqwest::Url,
    secret: String,
}

impl Probe {
    /// A probe of the plugin at `base` (`http://127.0.0.1:8080`; a path is kept as a prefix).
    pub fn new(base: &str, secret: String) -> Result<Self, SetupError> {
        let mut base = reqwest::Url::parse(base).map_err(|e| SetupError::Url {
            url: base.into(),
            message: e.to_string(),
        })?;
        if base.cannot_be_a_base() {
            return Err(SetupError::Url {
                url: base.to_string(),
                message: "not http(s)".into(),
            });
        }
        if !base.path().ends_with('/') {
            let path = format!("{}/", base.path());
            base.set_path(&path);
        }
        let client = client(reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()))
            .map_err(SetupError::Client)?;
        Ok(Self {
            client,
            base,
            secret,
        })
    }

    /// Makes the step's call, waiting at most `limit`.
    pub async fn call(&self, step: &Step, limit: Duration) -> Result<Answer, NoAnswer> {
        let url = self
            .base
            .join(step.path.trim_start_matches('/'))
            .map_err(|e| NoAnswer::Failed(format!("{}: {e}", step.path)))?;
        let mut request = match step.method {
            Method::Get => self.client.get(url),
            Method::Post => self.client.post(url),
        };
        request = match step.secret {
            SecretUse::Right => request.header(AUTHORIZATION, format!("Bearer {}", self.secret)),
            SecretUse::Wrong => request.header(AUTHORIZATION, format!("Bearer {WRONG_SECRET}")),
            SecretUse::Missing => request,
        };
        request = match &step.body {
            Some(Body::Json(v)) => request.json(v),
            Some(Body::Garbled(text)) => {
                request.header(CONTENT_TYPE, "application/json").body(*text)
            }
            None => request,
        };
        let exchange = async {
            let response = request.send().await?;
            let status = response.status().as_u16();
            let body = response.bytes().await?.to_vec();
            Ok::<_, reqwest::Error>(Answer { status, body })
        };
        match tokio::time::timeout(limit, exchange).await {
            Err(_) => Err(NoAnswer::TimedOut(limit)),
            Ok(Err(e)) => Err(NoAnswer::Failed(error_chain(&e))),
            Ok(Ok(answer)) => Ok(answer),
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
