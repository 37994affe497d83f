//! The plugin put together: its state, its router and serving until shutdown.

use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::auth::Secret;
use crate::config::{Config, read_secret};
use crate::hang::Hang;
use crate::journal::Journal;
use crate::loop_api::LoopApi;
use crate::manifest::Manifest;
use crate::settings::Settings;
use crate::state::AppState;
use crate::switches::Switches;

/// How long shutdown waits for background work (actions) to finish.
pub const BACKGROUND_GRACE: Duration = Duration::from_secs(5);

/// What a plugin is made from; [`Plugin::from_config`] fills it from the environment.
pub struct PluginOptions {
    pub manifest: Manifest,
    pub secret: String,
    pub data_dir: PathBuf,
    pub loop_api: Option<LoopApi>,
}

pub struct Plugin {
    state: AppState,
    secret: Secret,
}

impl Plugin {
    pub fn new(opts: PluginOptions) -> anyhow::Result<Self> {
        let journal = Journal::open(&opts.data_dir)
            .with_context(|| format!("opening the journal in {}", opts.data_dir.display()))?;
        let state = AppState {
            settings: Arc::new(Settings::from_manifest(&opts.manifest)),
            switches: Arc::new(Switches::open(&opts.data_dir)),
            manifest: Arc::new(opts.manifest),
            journal: Arc::new(journal),
            hang: Arc::new(Hang::default()),
            loop_api: opts.loop_api.map(Arc::new),
            shutdown: CancellationToken::new(),
            background: TaskTracker::new(),
        };
        Ok(Self {
            state,
            secret: Secret::new(&opts.secret),
        })
    }

    /// Reads the manifest and the secret the configuration names.
    pub fn from_config(cfg: &Config) -> anyhow::Result<Self> {
        let manifest = Manifest::load(&cfg.manifest)?;
        let secret = read_secret(&cfg.secret_file).context("LOOP_PLUGIN_SECRET_FILE")?;
        let loop_api = match (&cfg.api_url, &cfg.token_file) {
            (Some(url), Some(token)) => Some(LoopApi::new(url.clone(), token.clone())?),
            _ => None,
        };
        Self::new(PluginOptions {
            manifest,
            secret,
            data_dir: cfg.data_dir.clone(),
            loop_api,
        })
    }

    pub fn state(&self) -> &AppState {
        &self.state
    }

    pub fn router(&self) -> Router {
        crate::routes::router(self.state.clone(), self.secret.clone())
    }

    /// Serves on `listener` until `shutdown` completes, then stops taking connections, cuts
    /// hangs short, waits for requests in flight and (up to [`BACKGROUND_GRACE`]) background
    /// work.
    pub async fn serve(
        self,
        listener: TcpListener,
        shutdown: impl Future<Output = ()> + Send + 'static,
    ) -> std::io::Result<()> {
        let token = self.state.shutdown.clone();
        axum::serve(listener, self.router())
            .with_graceful_shutdown(async move {
                shutdown.await;
                token.cancel();
            })
            .await?;
        self.state.background.close();
        if tokio::time::timeout(BACKGROUND_GRACE, self.state.background.wait())
            .await
            .is_err()
        {
            tracing::warn!("background work still running at exit");
        }
        Ok(())
    }
}
