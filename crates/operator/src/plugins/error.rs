//! Why a plugin verb failed: one variant per step, each naming what it was about.

use install::candidate::CandidateError;

#[derive(Debug, thiserror::Error)]
pub enum PluginError {
    #[error(transparent)]
    Reference(#[from] oci::ReferenceError),
    #[error(transparent)]
    Image(#[from] oci::InspectError),
    #[error(transparent)]
    Candidate(#[from] CandidateError),
    #[error("registry: {0}")]
    Registry(#[from] oci::RegistryError),
    #[error("registry credentials {what}: {message}")]
    Credentials { what: String, message: String },
    #[error(transparent)]
    Signatures(#[from] oci::signing::publish::SignatureStoreError),
    #[error(transparent)]
    Key(#[from] oci::signing::keys::KeyError),
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("Plugin {0} is already installed: `loop-plugins plugin upgrade {0} [REF]` replaces it")]
    Exists(String),
    #[error("Plugin {0} is not installed")]
    NotInstalled(String),
    #[error("{0}")]
    Refused(String),
    #[error("reading {path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

/// A pull's failure is the verb's, as it was before the pull moved to crates/install: an
/// image refusal stays `Image` (conformance reports it as a finding, not as a failed pull).
impl From<install::PullError> for PluginError {
    fn from(e: install::PullError) -> Self {
        match e {
            install::PullError::Reference(e) => PluginError::Reference(e),
            install::PullError::Image(e) => PluginError::Image(e),
            install::PullError::Signatures(e) => PluginError::Signatures(e),
        }
    }
}

impl PluginError {
    pub fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> PluginError {
        let what = what.into();
        move |source| PluginError::Kube { what, source }
    }
}
