//! The work that must happen once across the API replicas, done by the one that holds the
//! fan-out Lease (every replica serves both APIs; see `crate::serve`):
//!
//! - [`settings_changed`]: after a config write, `settings.changed` to the containers already
//!   running in the chats it touches (the reference: "It goes only to containers already
//!   running, without a thread id");
//! - [`runs_done`]: `POST /runs/{run_id}/done` once a run ended, through the one way to call a
//!   plugin, with bounded, backed-off retries;
//! - [`sweep`]: switch and live-hold state left over after the plugin stopped declaring the
//!   switch or lost the capability is dropped;
//! - [`plugins_changed`]: `plugins.changed` to running containers when a plugin is installed,
//!   upgraded or removed, or a container stops.
//!
//! A replica that does not lead reads the same events; the settings and plugins events it
//! keeps for as long as a handover can take and sends them if it takes over ([`backlog`]), and
//! it also sends what the holders' mark of what they sent does not show ([`sent_mark`]), so that an
//! event the last holder never sent is not lost, even one this replica did not see.

pub mod backlog;
pub mod plugins_changed;
pub mod runs_done;
pub mod sent_mark;
pub mod settings_changed;
pub mod sweep;

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::host_api::HostState;
use crate::index::ConfigWrite;

/// Runs the fan-out until `stop` turns true; only while `leading` says so does it send. With
/// a `mark` (there is one with a Lease), the holder records what it sent there.
pub async fn run(
    host: HostState,
    config_writes: mpsc::UnboundedReceiver<ConfigWrite>,
    done: Arc<dyn runs_done::DoneRecorder>,
    leading: watch::Receiver<bool>,
    mark: Option<sent_mark::SentRecord>,
    mut stop: watch::Receiver<bool>,
) {
    let mark = mark.map(Arc::new);
    let tasks = async {
        tokio::join!(
            settings_changed::run(host.clone(), config_writes, leading.clone(), mark.clone()),
            runs_done::run(host.clone(), done, leading.clone()),
            sweep::run(host.clone(), leading.clone()),
            plugins_changed::run(host.clone(), leading.clone(), mark.clone()),
        )
    };
    tokio::select! {
        _ = tasks => {}
        _ = stop.wait_for(|s| *s) => {}
    }
}

/// Waits until this replica leads.
async fn until_leading(leading: &mut watch::Receiver<bool>) {
    let _ = leading.wait_for(|l| *l).await;
}
