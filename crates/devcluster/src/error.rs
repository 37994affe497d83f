//! The errors of the dev cluster: one variant a step, each with the context needed to act on it.

use std::path::PathBuf;
use std::time::Duration;

/// Why the dev cluster (or a part of it) could not do its job.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The folder of control-plane binaries could not be found or built.
    #[error("control-plane binaries: {0}")]
    Binaries(String),

    /// A file or folder the cluster needs could not be written or read.
    #[error("{what} ({path}): {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// Keys or certificates could not be generated.
    #[error("generating {what}: {source}")]
    Pki {
        what: &'static str,
        #[source]
        source: rcgen::Error,
    },

    /// A process could not be started.
    #[error("starting {binary} ({program}): {source}")]
    Spawn {
        binary: String,
        program: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A control-plane process ended while it was starting.
    #[error(
        "{binary} (port {port}) exited with {status} while starting; last lines of {log}:\n{tail}"
    )]
    Exited {
        binary: &'static str,
        port: u16,
        status: String,
        log: PathBuf,
        tail: String,
    },

    /// A control-plane process did not become ready in time.
    #[error(
        "{binary} (port {port}) not ready after {waited:?}: {last_error}; last lines of {log}:\n{tail}"
    )]
    NotReady {
        binary: &'static str,
        port: u16,
        waited: Duration,
        last_error: String,
        log: PathBuf,
        tail: String,
    },

    /// The kubeconfig could not be loaded into a client.
    #[error("loading kubeconfig {path}: {message}")]
    Kubeconfig { path: PathBuf, message: String },

    /// A call to the API server failed.
    #[error("{context}: {source}")]
    Kube {
        context: String,
        #[source]
        source: kube::Error,
    },

    /// A wait on the API server's state did not end in time.
    #[error("timed out after {waited:?} waiting for {what}")]
    Timeout { what: String, waited: Duration },

    /// kubectl failed.
    #[error("kubectl {args} exited with {status}:\n{stderr}")]
    Kubectl {
        args: String,
        status: String,
        stderr: String,
    },
}

/// The dev cluster's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(
        what: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> Self {
        let path = path.into();
        move |source| Self::Io { what, path, source }
    }

    pub(crate) fn kube(context: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let context = context.into();
        move |source| Self::Kube { context, source }
    }
}
