//! The controller's errors: one variant per step, each with a stable category used as the
//! metric label and the Event reason.

use super::pod::PodError;

#[derive(Debug, thiserror::Error)]
pub enum Error {
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
    #[error("finalizing Plugin: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
    #[error("building the Pod: {0}")]
    Pod(#[from] PodError),
    #[error("{0} has no namespace")]
    NoNamespace(String),
    #[error("admitting Plugin {name}: {message} (looking again soon)")]
    Pending { name: String, message: String },
}

impl Error {
    /// Whether looking again without a change cannot help: the object itself is wrong.
    pub fn is_permanent(&self) -> bool {
        match self {
            Error::Pod(_) | Error::NoNamespace(_) => true,
            Error::Apply { source, .. }
            | Error::Create { source, .. }
            | Error::Delete { source, .. }
            | Error::Status { source, .. } => is_invalid(source),
            Error::Finalizer(_) | Error::Pending { .. } => false,
        }
    }

    /// A stable name for the kind of failure.
    pub fn category(&self) -> &'static str {
        match self {
            Error::Apply { .. } => "apply",
            Error::Create { .. } => "create",
            Error::Delete { .. } => "delete",
            Error::Status { .. } => "status",
            Error::Finalizer(_) => "finalizer",
            Error::Pod(_) => "pod",
            Error::NoNamespace(_) => "invalid",
            Error::Pending { .. } => "registry",
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The API server refused the object itself (422 Invalid, 400 Bad Request): only a change of
/// what we build from can help.
fn is_invalid(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 422 || s.code == 400)
}
