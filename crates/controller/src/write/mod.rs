//! The one door for the controller's writes ([`Writes`], the context's `writes`), with one
//! field manager. Every reconciler writes through it; nothing else calls the API server to
//! change an object, and every write holds one of a bounded number of turns while in flight.
//!
//! - objects by server-side apply ([`Writes::apply`]), skipped when every field we would apply
//!   already has its value in the live object (`drift`), so a steady state makes no write and a
//!   hand edit of a field we set is undone; an absent object by a create ([`Writes::create`]);
//! - deletions ([`Writes::delete`]), of what we made, by uid;
//! - statuses by a merge patch of what changed in the part we own (`merge_patch`),
//!   [`Writes::status`]: at the version read where another writer's newer version must win,
//!   kept where the reconciler reads back what it wrote ([`Writes::kept_status`]): see
//!   [`StatusWrite`];
//! - `recent_writes`: the one memory of writes the cache does not show yet. A write is skipped
//!   when the same write went over the version the cache still shows, a create when the object
//!   was made and no watch has shown it yet, and the echo of a status write wakes nobody
//!   ([`Writes::is_status_echo`]).

mod apply;
mod drift;

pub use apply::StatusWrite;
pub mod merge_patch;
mod recent_writes;

use std::sync::Arc;

use kube::Client;
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::metrics::Metrics;
use index::Awaited;
use recent_writes::RecentWrites;

/// A write that failed: the sync and status steps' error (see `error`).
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("applying {kind} {name}: {source}")]
    Apply {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("creating {kind} {name}: {source}")]
    Create {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("deleting {kind} {name}: {source}")]
    Delete {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("writing the status of {kind} {name}: {source}")]
    Status {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    /// A built object without a namespace: a builder's mistake.
    #[error("{kind} {name} has no namespace")]
    NoNamespace { kind: &'static str, name: String },
}

impl WriteError {
    /// Whether writing again without a change cannot help: the API server refused the object
    /// itself (422 Invalid, 400 Bad Request). A deletion is never refused for what the object
    /// is, only by the cluster's policy (admission), which can be lifted without a change we
    /// watch: it is tried again.
    pub fn is_permanent(&self) -> bool {
        match self {
            WriteError::Apply { source, .. }
            | WriteError::Create { source, .. }
            | WriteError::Status { source, .. } => is_invalid(source),
            WriteError::Delete { .. } => false,
            WriteError::NoNamespace { .. } => true,
        }
    }

    pub fn category(&self) -> &'static str {
        match self {
            WriteError::Apply { .. } => "apply",
            WriteError::Create { .. } => "create",
            WriteError::Delete { .. } => "delete",
            WriteError::Status { .. } => "status",
            WriteError::NoNamespace { .. } => "invalid",
        }
    }

    /// One line for a status message: the API server's own message rather than its whole
    /// answer.
    pub fn summary(&self) -> String {
        let brief = |source: &kube::Error| match source {
            kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
            other => other.to_string(),
        };
        match self {
            WriteError::Apply { kind, name, source } => {
                format!("applying {kind} {name}: {}", brief(source))
            }
            WriteError::Create { kind, name, source } => {
                format!("creating {kind} {name}: {}", brief(source))
            }
            WriteError::Delete { kind, name, source } => {
                format!("deleting {kind} {name}: {}", brief(source))
            }
            WriteError::Status { kind, name, source } => {
                format!("writing the status of {kind} {name}: {}", brief(source))
            }
            other => other.to_string(),
        }
    }
}

/// The API server refused the object itself (422 Invalid, 400 Bad Request): only a change of
/// what we build from can help.
fn is_invalid(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 422 || s.code == 400)
}

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
