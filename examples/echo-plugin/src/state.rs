//! What every handler shares: the plugin's parts, in one cheap-to-clone state.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::hang::Hang;
use crate::journal::Journal;
use crate::loop_api::LoopApi;
use crate::manifest::Manifest;
use crate::settings::Settings;
use crate::switches::Switches;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub manifest: Arc<Manifest>,
    pub journal: Arc<Journal>,
    pub hang: Arc<Hang>,
    pub switches: Arc<Switches>,
    pub settings: Arc<Settings>,
    pub loop_api: Option<Arc<LoopApi>>,
    /// Cancelled when the plugin shuts down.
    pub shutdown: CancellationToken,
    /// Background work (actions run after their 202).
    pub background: TaskTracker,
}
