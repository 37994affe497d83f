//! What every request shares.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::core::v1::ConfigMap;
use tokio::sync::OwnedMutexGuard;

use super::files::MAX_FILE_BYTES;
use super::metrics::Metrics;
use super::quota::Ledger;
use super::secrets::SecretSettings;
use super::writes::Writer;
use crate::calls::Calls;
use crate::clock::Clock;
use crate::index::Index;
use crate::live::LiveSessions;
use crate::own_writes::OwnWrites;
use crate::quality::Quality;
use crate::status::StatusWriter;
use model::resources::{AgentRun, PluginInstance};

/// How the API server is set up.
#[derive(Clone, Debug)]
pub struct ApiConfig {
    /// `DIR` of `DIR/<namespace>/<claimName>/<subPath>`; without it `files.read` finds no tree.
    pub worktree_root: Option<PathBuf>,
    /// The largest file `GET /files/{path}` returns.
    pub max_file_bytes: u64,
    /// The largest request body.
    pub max_body_bytes: usize,
    /// How long one request may take.
    pub request_timeout: Duration,
    /// Where the replicas keep their shared records (each plugin's runs, see
    /// [`super::shared_runs`]); None: this server counts alone.
    pub replicas_namespace: Option<String>,
}

impl Default for ApiConfig {
    fn default() -> Self {
        Self {
            worktree_root: None,
            max_file_bytes: MAX_FILE_BYTES,
            max_body_bytes: MAX_BODY_BYTES,
            request_timeout: REQUEST_TIMEOUT,
            replicas_namespace: None,
        }
    }
}

/// The largest request body (1 MiB) and how long one request may take (30 s).
pub use sdk::api::limits::{MAX_BODY_BYTES, REQUEST_TIMEOUT};

/// The shared state of the Plugin API.
pub struct PluginApiState {
    pub config: ApiConfig,
    /// The process's one index of the cluster.
    pub index: Arc<Index>,
    /// Who each token speaks for, while nothing that decides it changes.
    pub callers: super::callers::Callers,
    /// Calls to plugins, and the activity that keeps their containers up.
    pub calls: Calls,
    pub writer: Arc<dyn Writer>,
    /// Where secret settings' values are read from, live.
    pub secrets: SecretSettings,
    /// The instances' status fields the Plugin API changes (switches, live hold).
    pub status: Arc<dyn StatusWriter>,
    pub clock: Arc<dyn Clock>,
    pub live: Arc<dyn LiveSessions>,
    /// Chats' UI commands (None: a server without a cluster carries none).
    pub ui_commands: Option<Arc<crate::ui_commands::UiCommands>>,
    pub metrics: Arc<Metrics>,
    /// What this process wrote, until the stores show it.
    pub fresh_instances: OwnWrites<PluginInstance>,
    pub fresh_runs: OwnWrites<AgentRun>,
    pub fresh_maps: OwnWrites<ConfigMap>,
    pub ledger: Ledger,
    /// The runs record shared with the other replicas, when there is a namespace for it.
    pub shared_runs: Option<super::shared_runs::SharedRuns>,
    pub locks: KeyedLocks,
    /// Chats' quality scans (the hotspots): the host API's, so this process reads what it
    /// stored before its watch shows it (in memory until `serve` shares the cluster's).
    pub quality: Arc<Quality>,
}

impl PluginApiState {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: ApiConfig,
        calls: Calls,
        writer: Arc<dyn Writer>,
        secrets: SecretSettings,
        status: Arc<dyn StatusWriter>,
        clock: Arc<dyn Clock>,
        live: Arc<dyn LiveSessions>,
        metrics: Arc<Metrics>,
    ) -> Self {
        Self {
            config,
            quality: Arc::new(Quality::in_memory(calls.index().clone())),
            index: calls.index().clone(),
            callers: Default::default(),
            calls,
            writer,
            secrets,
            status,
            clock,
            live,
            ui_commands: None,
            metrics,
            fresh_instances: OwnWrites::default(),
            fresh_runs: OwnWrites::default(),
            fresh_maps: OwnWrites::default(),
            ledger: Ledger::default(),
            shared_runs: None,
            locks: KeyedLocks::default(),
        }
    }
}

/// One async lock per key (an instance, a ConfigMap, a plugin's quota), made on first use and
/// dropped once nobody holds or waits for it.
#[derive(Default)]
pub struct KeyedLocks {
    locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl KeyedLocks {
    pub async fn lock(&self, key: &str) -> OwnedMutexGuard<()> {
        let lock = {
            let mut locks = self.locks.lock().expect("locks lock");
            locks.retain(|_, l| Arc::strong_count(l) > 1);
            locks.entry(key.to_string()).or_default().clone()
        };
        lock.lock_owned().await
    }
}
