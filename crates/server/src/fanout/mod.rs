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
//!   upgraded or removed, or a container stops;
//! - [`overdue_approvals`]: an approval still pending past its deadline, its waiting call gone
//!   with its replica, expired (denied);
//! - [`failed_runs`]: the host's notification in a chat's drawer that an agent run there failed.
//!
//! A replica that does not lead reads the same events; the settings and plugins events it
//! keeps for as long as a handover can take and sends them if it takes over ([`backlog`]), and
//! it also sends what the holders' mark of what they sent does not show ([`sent_mark`]), so that an
//! event the last holder never sent is not lost, even one this replica did not see.

pub mod backlog;
pub mod failed_runs;
pub mod overdue_approvals;
pub mod plugins_changed;
pub mod runs_done;
pub mod sent_mark;
pub mod settings_changed;
pub mod sweep;

use std::sync::Arc;

use tokio::sync::{mpsc, watch};

use crate::calls::Calls;
use crate::cards::marks::MarkWriter;
use crate::index::ConfigWrite;
use crate::status::StatusWriter;
use crate::tool_calls::approval::ApprovalDesk;

/// What the leader works with: the one way to call plugins, the writers of what it decides.
pub struct Duties {
    pub calls: Calls,
    /// Writes instances' status (what [`sweep`] drops).
    pub status: Arc<dyn StatusWriter>,
    /// Records that a run's `/done` went out ([`runs_done`]).
    pub done: Arc<dyn runs_done::DoneRecorder>,
    /// Expires approvals nobody waits on ([`overdue_approvals`]).
    pub desk: ApprovalDesk,
    /// Writes the host's notifications in the chats' drawers ([`failed_runs`]).
    pub drawer: Arc<dyn MarkWriter>,
}

/// Runs the fan-out until `stop` turns true; only while `leading` says so does it send. With
/// a `mark` (there is one with a Lease), the holder records what it sent there.
pub async fn run(
    duties: Duties,
    config_writes: mpsc::UnboundedReceiver<ConfigWrite>,
    leading: watch::Receiver<bool>,
    mark: Option<sent_mark::SentRecord>,
    mut stop: watch::Receiver<bool>,
) {
    let Duties {
        calls,
        status,
        done,
        desk,
        drawer,
    } = duties;
    let mark = mark.map(Arc::new);
    let tasks = async {
        tokio::join!(
            settings_changed::run(calls.clone(), config_writes, leading.clone(), mark.clone()),
            runs_done::run(calls.clone(), done, leading.clone()),
            sweep::run(calls.clone(), status, leading.clone()),
            plugins_changed::run(calls.clone(), leading.clone(), mark.clone()),
            overdue_approvals::run(desk, leading.clone()),
            failed_runs::run(calls.clone(), drawer, leading.clone()),
        )
    };
    tokio::select! {
        _ = tasks => {}
        _ = stop.wait_for(|s| *s) => {}
    }
}

/// Waits until this replica leads; never, when the lead can no longer come.
///
/// A flag whose sender is gone keeps its last value for good: a server without a Lease leads
/// from the start (`runtime::leader::leading` drops the sender at once), and one that stopped
/// leading as it shut down never leads again. `wait_for` answers a closed flag at once, so a
/// loop that waited on it directly went round without pause.
async fn until_leading(leading: &mut watch::Receiver<bool>) {
    if leading.wait_for(|l| *l).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Waits until this replica no longer leads; never, when nothing can take the lead away
/// (see [`until_leading`]).
async fn until_not_leading(leading: &mut watch::Receiver<bool>) {
    if leading.wait_for(|l| !*l).await.is_err() {
        std::future::pending::<()>().await;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[tokio::test]
    async fn a_lead_that_nothing_can_change_is_waited_for_forever() {
        let mut for_good = watch::channel(true).1;
        until_leading(&mut for_good).await;
        let lost =
            tokio::time::timeout(Duration::from_millis(100), until_not_leading(&mut for_good));
        assert!(lost.await.is_err(), "a lead nothing can take away was lost");

        let mut never = watch::channel(false).1;
        until_not_leading(&mut never).await;
        let gained = tokio::time::timeout(Duration::from_millis(100), until_leading(&mut never));
        assert!(gained.await.is_err(), "a lead that cannot come came");

        let (flag, mut leading) = watch::channel(false);
        flag.send_replace(true);
        until_leading(&mut leading).await;
        flag.send_replace(false);
        until_not_leading(&mut leading).await;
    }
}
