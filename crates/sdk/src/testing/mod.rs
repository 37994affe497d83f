//! For a plugin's own tests: [`FakeHost`] serves the Plugin API from memory on a loopback
//! port, held to the plugin's manifest as the host holds it: the capabilities the owner
//! approved (403 `capability_not_approved` for any other route), the agents, cards, composer
//! switches, live control subtypes and secret settings it declares, and the limits of
//! [`crate::api::limits`]. It records what the plugin did (runs, switch states, cards,
//! notifications, memory, files read, live control requests and holds, secret settings read,
//! UI commands (each answered that every step ran, as the reference's fake host does),
//! hotspots read, and every refusal), and answers from the [`Config`] a test gives it: the chat,
//! the working tree's files, the chat's quality scan (which [`FakeHost::set_scan`] replaces, as
//! the app's next scan does), each live control subtype's response, each secret setting's value
//! (which [`FakeHost::rotate_secret`] changes, as rotating its Secret does).
//!
//! ```no_run
//! # async fn t() {
//! use loop_plugin_sdk::testing::{Config, FakeHost};
//! let manifest = loop_plugin_sdk::manifest::parse_str(include_str!("../../../../examples/echo-plugin/plugin.json")).unwrap();
//! let host = FakeHost::start(Config::new(manifest)).await.unwrap();
//! let client = host.client();
//! client.notify(&loop_plugin_sdk::api::wire::NotificationRequest {
//!     title: "Done".into(), body: None, level: None,
//! }).await.unwrap();
//! assert_eq!(host.recorded().notifications.len(), 1);
//! # }
//! ```
//!
//! A plugin process started by hand points `LOOP_API_URL` at [`FakeHost::url`] and
//! `LOOP_PLUGIN_TOKEN_FILE` at a file holding [`FakeHost::token`].

mod routes;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use manifest::{Capability, Manifest};
use serde_json::{Map, Value};
use tokio::sync::oneshot;

use crate::api::Client;
use crate::api::limits::HotspotsQuery;
use crate::api::ui_command::UiCommandRequest;
use crate::api::wire::{
    App, Channel, ChatKind, ErrorCode, Hotspot, InboxEntry, LiveControlRequest, Run, RunState,
    ScanTotals, SecretSetting, Switch,
};

pub use routes::{Needs, ROUTES};

/// What the fake host answers with.
#[derive(Clone, Debug)]
pub struct Config {
    pub manifest: Manifest,
    /// The capabilities the owner approved; `None` approves every one the manifest declares.
    /// A capability counts only when it is both approved and declared, as in a cluster.
    pub approved: Option<Vec<Capability>>,
    /// `false` answers every authenticated route 409 `plugin_not_enabled`.
    pub enabled: bool,
    /// `GET /channel`'s answer.
    pub channel: Channel,
    /// The chat's working tree, by path; `None` is a chat without one (404 `no_working_tree`).
    pub files: Option<BTreeMap<String, Vec<u8>>>,
    /// The live session's response to each control subtype; a subtype without one answers
    /// 409 `not_live`, as a chat without a live session does.
    pub live_responses: BTreeMap<String, Value>,
    /// Each secret setting's value, by name, as its Secret holds it (revision `"1"`); a secret
    /// setting without one answers 404 `secret_not_set`, as one without a Secret reference
    /// does.
    pub secret_settings: BTreeMap<String, String>,
    /// The chat's latest quality scan (`GET /hotspots`, `GET /hotspots/page`); `None` answers
    /// 404 `scan_not_found`, as a chat the app has not scanned yet does.
    pub scan: Option<Scan>,
}

/// A quality scan, as the app posts it through the host API: what `GET /hotspots` and `GET
/// /hotspots/page` answer from.
#[derive(Clone, Debug, PartialEq)]
pub struct Scan {
    /// The commit it measured.
    pub commit: Option<String>,
    pub totals: ScanTotals,
    /// In any order: the host keeps them worst first ([`Hotspot::worst_first`]).
    pub functions: Vec<Hotspot>,
}

impl Config {
    /// Everything the manifest declares approved, a desktop channel `chat` of project
    /// `project` with the manifest's setting defaults, no working tree, no live session.
    pub fn new(manifest: Manifest) -> Self {
        let settings: Map<String, Value> = manifest
            .settings
            .iter()
            .filter_map(|(name, schema)| Some((name.clone(), schema.get("default")?.clone())))
            .collect();
        Config {
            manifest,
            approved: None,
            enabled: true,
            channel: Channel {
                id: "chat".into(),
                kind: ChatKind::Channel,
                parent: None,
                project: "project".into(),
                app: App::Desktop,
                settings,
            },
            files: None,
            live_responses: BTreeMap::new(),
            secret_settings: BTreeMap::new(),
            scan: None,
        }
    }

    /// Whether a route needing `capability` may run: approved and declared.
    pub fn allows(&self, capability: Capability) -> bool {
        self.manifest.capabilities.contains(&capability)
            && self
                .approved
                .as_ref()
                .is_none_or(|approved| approved.contains(&capability))
    }
}

/// A run the plugin started, with its prompt.
#[derive(Clone, Debug, PartialEq)]
pub struct StartedRun {
    pub run: Run,
    pub prompt: String,
}

/// A call the fake host refused, as the plugin saw it.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    /// `METHOD /path`.
    pub route: String,
    pub code: ErrorCode,
    pub message: String,
}

/// What the plugin did to the fake host, in order within each kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Recorded {
    pub runs: Vec<StartedRun>,
    /// Each switch's state as the plugin last set it (a reset one is absent).
    pub switches: BTreeMap<String, Switch>,
    /// Every `PUT` and `DELETE` of a switch, in order, as the pill then showed.
    pub switch_changes: Vec<Switch>,
    pub cards: Vec<InboxEntry>,
    pub notifications: Vec<InboxEntry>,
    pub memory: BTreeMap<String, Value>,
    pub files_read: Vec<String>,
    pub live_controls: Vec<LiveControlRequest>,
    pub holds: Vec<bool>,
    /// The names of the secret settings read, in order.
    pub secrets_read: Vec<String>,
    /// The UI commands the plugin ran (each answered that every step ran).
    pub ui_commands: Vec<UiCommandRequest>,
    /// The queries of `GET /hotspots` and `GET /hotspots/page` answered, in order.
    pub hotspots_read: Vec<HotspotsQuery>,
    pub refusals: Vec<Refusal>,
}

#[derive(Debug)]
struct Shared {
    config: Config,
    token: String,
    recorded: Mutex<Recorded>,
    /// Each secret setting's Secret as it is now: its value and revision.
    secrets: Mutex<BTreeMap<String, SecretSetting>>,
    /// The chat's quality scan as the host keeps it now.
    scan: Mutex<Option<StoredScan>>,
}

/// A scan as the fake host keeps it: its functions worst first, and when it was stored.
#[derive(Clone, Debug)]
struct StoredScan {
    scan: Scan,
    scanned_at: String,
}

impl StoredScan {
    fn of(mut scan: Scan) -> Self {
        scan.functions.sort_by(Hotspot::worst_first);
        StoredScan {
            scan,
            scanned_at: jiff::Timestamp::now().to_string(),
        }
    }
}

impl Shared {
    fn recorded(&self) -> MutexGuard<'_, Recorded> {
        self.recorded.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn secrets(&self) -> MutexGuard<'_, BTreeMap<String, SecretSetting>> {
        self.secrets.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn scan(&self) -> MutexGuard<'_, Option<StoredScan>> {
        self.scan.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// The Plugin API from memory on `127.0.0.1`, until dropped.
pub struct FakeHost {
    url: String,
    shared: Arc<Shared>,
    stop: Option<oneshot::Sender<()>>,
}

/// The token [`FakeHost`] takes.
pub const TOKEN: &str = "fake-host-token";

impl FakeHost {
    /// Serves `config` on a free loopback port.
    pub async fn start(config: Config) -> std::io::Result<FakeHost> {
        let secrets = config
            .secret_settings
            .iter()
            .map(|(name, value)| {
                let secret = SecretSetting {
                    name: name.clone(),
                    value: value.clone(),
                    revision: "1".into(),
                };
                (name.clone(), secret)
            })
            .collect();
        let scan = config.scan.clone().map(StoredScan::of);
        let shared = Arc::new(Shared {
            config,
            token: TOKEN.into(),
            recorded: Mutex::default(),
            secrets: Mutex::new(secrets),
            scan: Mutex::new(scan),
        });
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let url = format!("http://{}", listener.local_addr()?);
        let (stop, stopped) = oneshot::channel::<()>();
        let app = routes::router(shared.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stopped.await;
                })
                .await;
        });
        Ok(FakeHost {
            url,
            shared,
            stop: Some(stop),
        })
    }

    /// `LOOP_API_URL` for the plugin.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The token the plugin sends (what `LOOP_PLUGIN_TOKEN_FILE` holds).
    pub fn token(&self) -> &str {
        &self.shared.token
    }

    /// A client with the fake host's token.
    pub fn client(&self) -> Client {
        Client::with_token(&self.url, self.token()).expect("a plain-HTTP client builds")
    }

    /// What the plugin did so far.
    pub fn recorded(&self) -> Recorded {
        self.shared.recorded().clone()
    }

    /// Ends a run the plugin started, as the host does when its agent finishes: the run's
    /// status becomes `succeeded` or `failed` with `result`. Sending the plugin
    /// `POST /runs/{run_id}/done` is the caller's part (the conformance check does it).
    /// `None` when the plugin started no run `run_id`.
    pub fn end_run(&self, run_id: &str, succeeded: bool, result: &str) -> Option<Run> {
        let mut recorded = self.shared.recorded();
        let started = recorded.runs.iter_mut().find(|r| r.run.id == run_id)?;
        started.run.status = if succeeded {
            RunState::Succeeded
        } else {
            RunState::Failed
        };
        started.run.result = Some(result.into());
        Some(started.run.clone())
    }

    /// Rotates secret setting `name`'s Secret: the next read answers `value` at the next
    /// revision (`"1"` for one that had none).
    pub fn rotate_secret(&self, name: &str, value: &str) -> SecretSetting {
        let mut secrets = self.shared.secrets();
        let revision = secrets
            .get(name)
            .and_then(|s| s.revision.parse::<u64>().ok())
            .map_or(1, |r| r + 1);
        let secret = SecretSetting {
            name: name.into(),
            value: value.into(),
            revision: revision.to_string(),
        };
        secrets.insert(name.into(), secret.clone());
        secret
    }

    /// Replaces the chat's quality scan, as the app's next scan does (`None`: the chat has none,
    /// 404 `scan_not_found`). Sending the plugin `quality.scanned` is the caller's part.
    pub fn set_scan(&self, scan: Option<Scan>) {
        *self.shared.scan() = scan.map(StoredScan::of);
    }

    /// Records that `POST /runs/{run_id}/done` reached the plugin.
    pub fn mark_done_delivered(&self, run_id: &str) {
        let mut recorded = self.shared.recorded();
        if let Some(started) = recorded.runs.iter_mut().find(|r| r.run.id == run_id) {
            started.run.done_delivered = true;
        }
    }
}

impl Drop for FakeHost {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}
