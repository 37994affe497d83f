//! What can stop a check before it starts: the contract spec, the manifest, the secret, the
//! HTTP client, the image's pull, the container engine. Problems the plugin has are findings
//! (`report`), not errors: an image admission refuses too.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum ContractError {
    #[error("the contract spec does not parse: {0}")]
    Parse(String),
    #[error("the contract spec has no {0}")]
    Missing(String),
    #[error("the contract's schema {name} does not compile: {message}")]
    Schema { name: String, message: String },
}

#[derive(Debug, thiserror::Error)]
pub enum SetupError {
    #[error(transparent)]
    Contract(#[from] ContractError),
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Manifest {
        path: PathBuf,
        source: manifest::ManifestError,
    },
    #[error("writing {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} is empty: a plugin needs a secret")]
    EmptySecret(PathBuf),
    #[error("{url} is not a base URL: {message}")]
    Url { url: String, message: String },
    #[error("building the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("no plugin command given after --")]
    NoCommand,
    #[error("starting {program}: {source}")]
    Start {
        program: String,
        source: std::io::Error,
    },
    #[error("{program} exited ({status}) before it answered; its last lines:\n{log}")]
    Exited {
        program: String,
        status: String,
        log: String,
    },
    #[error("{program} did not answer on {url} within {limit:?}; its last lines:\n{log}")]
    NeverUp {
        program: String,
        url: String,
        limit: std::time::Duration,
        log: String,
    },
    #[error("starting the fake host: {0}")]
    FakeHost(#[source] std::io::Error),
    #[error("{0} is not a folder: --bundle names the plugin's UI bundle (/loop-plugin/ui)")]
    Bundle(PathBuf),
    #[error(
        "--chromium {0}: no such file (without --chromium, a machine with none skips the drawing)"
    )]
    NoChromium(PathBuf),
    #[error("drawing the panels and cards: {0}")]
    Browser(String),
    #[error(
        "admission could not decide on {reference} now, at its {stage} stage ({reason}): {message}"
    )]
    Undecided {
        reference: String,
        stage: String,
        reason: String,
        message: String,
    },
    #[error("pulling {reference}: {source}")]
    Pull {
        reference: String,
        source: Box<operator::plugins::PluginError>,
    },
    #[error(
        "no container engine answers ({tried}): IMAGE runs with docker or podman, or the one ${env} names"
    )]
    NoEngine {
        tried: String,
        /// The variable that names one.
        env: &'static str,
    },
    #[error("{engine} {step} {image} failed: {said}")]
    Engine {
        engine: String,
        step: &'static str,
        image: String,
        said: String,
    },
}
