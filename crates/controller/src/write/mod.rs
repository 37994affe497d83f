//! The one door for the controller's writes ([`Writes`], the context's `writes`), with one
//! field manager. Every reconciler writes through it; nothing else calls the API server to
//! change an object, and every write holds one of a bounded number of turns while in flight.
//!
//! - objects by server-side apply ([`Writes::apply`]), skipped when every field we would apply
//!   already has its value in the live object (`drift`), so a steady state makes no write and a
//!   hand edit of a field we set is undone; an absent object by a create ([`Writes::create`]);
//! - deletions ([`Writes::delete`]), of what we made, by uid;
//! - statuses by a merge patch of what changed in the part we own (`merge_patch`):
//!   [`Writes::status`], [`Writes::status_at_version`] where another writer's newer version
//!   must win, [`Writes::status_kept`] where the reconciler reads back what it wrote
//!   ([`Writes::kept_status`]);
//! - `recent_writes`: the one memory of writes the cache does not show yet. A write is skipped
//!   when the same write went over the version the cache still shows, a create when the object
//!   was made and no watch has shown it yet, and the echo of a status write wakes nobody
//!   ([`Writes::is_status_echo`]).

mod apply;
mod drift;
pub mod merge_patch;
mod recent_writes;

use std::sync::Arc;

use kube::Client;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::metrics::Metrics;
use index::Awaited;
use recent_writes::RecentWrites;

/// The write door: the client it writes with, the count of writes by kind and verb, the turns
/// of writes in flight, and the memory of recent writes.
pub struct Writes {
    client: Client,
    metrics: Metrics,
    /// Bounds the writes in flight.
    turns: Semaphore,
    recent: RecentWrites,
}

impl Writes {
    /// A door writing with `client`, at most `in_flight` writes at once; the objects it makes
    /// are remembered in `made` (the index's, which its watches clear).
    pub fn new(client: Client, metrics: Metrics, in_flight: u16, made: Arc<Awaited>) -> Self {
        Self {
            client,
            metrics,
            turns: Semaphore::new(usize::from(in_flight.max(1))),
            recent: RecentWrites::over(made),
        }
    }

    /// Waits for a turn to write: every write to the API server (an Event too) holds one while
    /// in flight.
    pub async fn permit(&self) -> SemaphorePermit<'_> {
        self.turns
            .acquire()
            .await
            .expect("the write semaphore is never closed")
    }
}
