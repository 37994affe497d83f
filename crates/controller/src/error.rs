//! The controller's errors: one variant per step, each with a stable category used as the
//! metric label and the Event reason.

use super::pod::PodError;
use index::compact::NotParsed;

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
    #[error("reading {kind} {name}: {source}")]
    Read {
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
    #[error(transparent)]
    Stored(#[from] NotParsed),
}

impl Error {
    /// What the reconcile returned, when the finalizer helper wrapped it.
    fn within_finalizer(&self) -> Option<&Error> {
        use kube::runtime::finalizer::Error as Finalizing;
        match self {
            Error::Finalizer(wrapped) => match wrapped.as_ref() {
                Finalizing::ApplyFailed(inner) | Finalizing::CleanupFailed(inner) => Some(inner),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether looking again without a change cannot help: the object itself is wrong. A
    /// deletion is never refused for what the object is, only by the cluster's policy
    /// (admission), which can be lifted without a change we watch: it is tried again.
    pub fn is_permanent(&self) -> bool {
        if let Some(inner) = self.within_finalizer() {
            return inner.is_permanent();
        }
        match self {
            Error::Pod(_) | Error::NoNamespace(_) | Error::Stored(_) => true,
            Error::Apply { source, .. }
            | Error::Create { source, .. }
            | Error::Status { source, .. } => is_invalid(source),
            Error::Delete { .. }
            | Error::Read { .. }
            | Error::Finalizer(_)
            | Error::Pending { .. } => false,
        }
    }

    /// A stable name for the kind of failure (what failed inside the finalizer helper, for
    /// a reconcile it wrapped).
    pub fn category(&self) -> &'static str {
        if let Some(inner) = self.within_finalizer() {
            return inner.category();
        }
        match self {
            Error::Apply { .. } => "apply",
            Error::Create { .. } => "create",
            Error::Delete { .. } => "delete",
            Error::Read { .. } => "read",
            Error::Status { .. } => "status",
            Error::Finalizer(_) => "finalizer",
            Error::Pod(_) => "pod",
            Error::NoNamespace(_) => "invalid",
            Error::Pending { .. } => "registry",
            Error::Stored(_) => "stored",
        }
    }
}

impl Error {
    /// One line for a status message: the API server's own message rather than its whole
    /// answer.
    pub fn summary(&self) -> String {
        let brief = |source: &kube::Error| match source {
            kube::Error::Api(s) => format!("{} ({})", s.message, s.code),
            other => other.to_string(),
        };
        match self {
            Error::Apply { kind, name, source } => {
                format!("applying {kind} {name}: {}", brief(source))
            }
            Error::Create { kind, name, source } => {
                format!("creating {kind} {name}: {}", brief(source))
            }
            Error::Delete { kind, name, source } => {
                format!("deleting {kind} {name}: {}", brief(source))
            }
            Error::Status { kind, name, source } => {
                format!("writing the status of {kind} {name}: {}", brief(source))
            }
            other => other.to_string(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The writes of one reconcile that failed, while the others went on: the status names them,
/// then the reconcile fails with the one that decides when to look again.
#[derive(Debug, Default)]
pub struct Failures(Vec<Error>);

impl Failures {
    /// The value of a write that worked; a failed one is kept.
    pub fn check<T>(&mut self, result: Result<T>) -> Option<T> {
        match result {
            Ok(value) => Some(value),
            Err(err) => {
                self.0.push(err);
                None
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Ok when every write worked. Otherwise the first failure that may pass by itself, so
    /// the reconcile backs off and tries again; only when every one is permanent, the first,
    /// so it waits for a change.
    pub fn into_result(self) -> Result<()> {
        let mut all = self.0.into_iter();
        let Some(first) = all.next() else {
            return Ok(());
        };
        if !first.is_permanent() {
            return Err(first);
        }
        match all.find(|e| !e.is_permanent()) {
            Some(transient) => Err(transient),
            None => Err(first),
        }
    }
}

impl std::fmt::Display for Failures {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, err) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            f.write_str(&err.summary())?;
        }
        Ok(())
    }
}

/// The API server refused the object itself (422 Invalid, 400 Bad Request): only a change of
/// what we build from can help.
fn is_invalid(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 422 || s.code == 400)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The API server's refusal with `code`.
    fn api_refusal(message: &str, code: u16) -> kube::Error {
        kube::Error::Api(
            kube::core::Status::failure(message, "Invalid")
                .with_code(code)
                .boxed(),
        )
    }

    fn refused(code: u16) -> Error {
        Error::Apply {
            kind: "CronJob",
            name: "echo-general-tick".into(),
            source: api_refusal("refused", code),
        }
    }

    #[test]
    fn a_failure_that_may_pass_decides_over_a_permanent_one() {
        let mut failures = Failures::default();
        assert_eq!(failures.check(Ok::<_, Error>(1)), Some(1));
        assert!(failures.is_empty() && Failures::default().into_result().is_ok());
        failures.check::<()>(Err(refused(422)));
        failures.check::<()>(Err(refused(409)));
        assert_eq!(
            failures.to_string(),
            "applying CronJob echo-general-tick: refused (422); \
             applying CronJob echo-general-tick: refused (409)"
        );
        let err = failures.into_result().unwrap_err();
        assert!(
            !err.is_permanent(),
            "the conflict comes back by itself: {err}"
        );

        let mut permanent = Failures::default();
        permanent.check::<()>(Err(refused(422)));
        assert!(permanent.into_result().unwrap_err().is_permanent());
    }

    // What refuses a deletion is the cluster's policy (an admission policy or webhook), not
    // the object: it can be lifted with no change to anything the controller watches, so the
    // deletion is tried again (seen: an instance whose chat no longer enables its plugin
    // stayed for good once a ValidatingAdmissionPolicy had refused its deletion once).
    #[test]
    fn a_refused_deletion_is_tried_again() {
        for code in [400, 403, 422] {
            let err = Error::Delete {
                kind: "PluginInstance",
                name: "echo-general".into(),
                source: api_refusal("refused by a policy", code),
            };
            assert!(!err.is_permanent(), "{code}");
        }
    }

    // Seen: every failure of the Plugin reconciler was counted as `finalizer` (the finalizer
    // helper wraps what the reconcile returns), so the registry admission waits on showed
    // in metrics and alerts as a finalizer problem.
    #[test]
    fn a_failure_inside_the_finalizer_is_named_for_itself() {
        use kube::runtime::finalizer::Error as Finalizing;
        let pending = || Error::Pending {
            name: "echo".into(),
            message: "the registry does not answer".into(),
        };
        let applying = Error::Finalizer(Box::new(Finalizing::ApplyFailed(pending())));
        assert_eq!(applying.category(), "registry");
        let cleaning = Error::Finalizer(Box::new(Finalizing::CleanupFailed(refused(422))));
        assert_eq!(cleaning.category(), "apply");
        assert!(cleaning.is_permanent(), "what is wrong inside stays wrong");
        let adding = Error::Finalizer(Box::new(Finalizing::AddFinalizer(api_refusal(
            "conflict", 409,
        ))));
        assert_eq!(adding.category(), "finalizer");
        assert!(!adding.is_permanent());
    }
}
