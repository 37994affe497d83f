//! The controller's errors: one enum per step of a reconcile, each variant with a stable
//! category, which is the metric label of a failed reconcile
//! (`loop_plugins_controller_reconcile_failures_total{controller, category}`) and the reason of
//! the Warning Event on the object that failed (see `controllers`).
//!
//! | step | enum | categories |
//! |---|---|---|
//! | gather: reading what a reconcile decides from (the index, a live read) | [`GatherError`] | `invalid`, `stored`, `read` |
//! | admit: admission's verdict on a Plugin | [`AdmitError`] | `registry` |
//! | sync and status: every write, through the door (`write`) | [`WriteError`] | `apply`, `create`, `delete`, `status`, `invalid` |
//! | the finalizer helper around a Plugin's reconcile | [`Error::Finalizer`] | what failed inside it, else `finalizer` |
//!
//! [`Error`] is what a reconcile returns: the error of the step that failed. Deciding and
//! building are pure and cannot fail: what they refuse (a Pod that would run as root, a
//! schedule no cron can mean) is shown in status, not returned.

use index::compact::NotParsed;

pub use super::write::WriteError;

/// Reading what a reconcile decides from.
#[derive(Debug, thiserror::Error)]
pub enum GatherError {
    #[error("{0} has no namespace")]
    NoNamespace(String),
    #[error(transparent)]
    Stored(#[from] NotParsed),
    #[error("reading {kind} {name}: {source}")]
    Read {
        kind: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
}

impl GatherError {
    /// The object itself is wrong (no namespace, a stored copy that does not parse): only a
    /// change of it can help. A live read that failed is tried again.
    pub fn is_permanent(&self) -> bool {
        match self {
            GatherError::NoNamespace(_) | GatherError::Stored(_) => true,
            GatherError::Read { .. } => false,
        }
    }

    pub fn category(&self) -> &'static str {
        match self {
            GatherError::NoNamespace(_) => "invalid",
            GatherError::Stored(_) => "stored",
            GatherError::Read { .. } => "read",
        }
    }
}

/// Admission's verdict on a Plugin, when it waits on something that may pass by itself.
#[derive(Debug, thiserror::Error)]
pub enum AdmitError {
    #[error("admitting Plugin {name}: {message} (looking again soon)")]
    Pending { name: String, message: String },
}

impl AdmitError {
    pub fn category(&self) -> &'static str {
        match self {
            AdmitError::Pending { .. } => "registry",
        }
    }
}

/// What a reconcile returns: the error of the step that failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Gather(#[from] GatherError),
    #[error(transparent)]
    Admit(#[from] AdmitError),
    #[error(transparent)]
    Write(#[from] WriteError),
    #[error("finalizing Plugin: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<Error>>),
}

impl From<NotParsed> for Error {
    fn from(err: NotParsed) -> Self {
        Error::Gather(err.into())
    }
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

    /// Whether looking again without a change cannot help: the object itself is wrong.
    pub fn is_permanent(&self) -> bool {
        if let Some(inner) = self.within_finalizer() {
            return inner.is_permanent();
        }
        match self {
            Error::Gather(err) => err.is_permanent(),
            Error::Write(err) => err.is_permanent(),
            Error::Admit(_) | Error::Finalizer(_) => false,
        }
    }

    /// A stable name for the kind of failure (what failed inside the finalizer helper, for
    /// a reconcile it wrapped).
    pub fn category(&self) -> &'static str {
        if let Some(inner) = self.within_finalizer() {
            return inner.category();
        }
        match self {
            Error::Gather(err) => err.category(),
            Error::Admit(err) => err.category(),
            Error::Write(err) => err.category(),
            Error::Finalizer(_) => "finalizer",
        }
    }

    /// One line for a status message or an Event: the API server's own message rather than
    /// its whole answer.
    pub fn summary(&self) -> String {
        if let Some(inner) = self.within_finalizer() {
            return inner.summary();
        }
        match self {
            Error::Write(err) => err.summary(),
            other => other.to_string(),
        }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The writes of one reconcile that failed, while the others went on: the status names them,
/// then the reconcile fails with the one that decides when to look again.
#[derive(Debug, Default)]
pub struct Failures(Vec<WriteError>);

impl Failures {
    /// The value of a write that worked; a failed one is kept.
    pub fn check<T>(&mut self, result: Result<T, WriteError>) -> Option<T> {
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
    pub fn into_result(self) -> Result<(), WriteError> {
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

    fn refused(code: u16) -> WriteError {
        WriteError::Apply {
            kind: "CronJob",
            name: "echo-general-tick".into(),
            source: api_refusal("refused", code),
        }
    }

    #[test]
    fn a_failure_that_may_pass_decides_over_a_permanent_one() {
        let mut failures = Failures::default();
        assert_eq!(failures.check(Ok::<_, WriteError>(1)), Some(1));
        assert!(failures.is_empty() && Failures::default().into_result().is_ok());
        let wrapped = Error::from(refused(409));
        assert_eq!(
            (wrapped.category(), wrapped.is_permanent()),
            ("apply", false)
        );
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
            let err = WriteError::Delete {
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
        let pending = || {
            Error::from(AdmitError::Pending {
                name: "echo".into(),
                message: "the registry does not answer".into(),
            })
        };
        let applying = Error::Finalizer(Box::new(Finalizing::ApplyFailed(pending())));
        assert_eq!(applying.category(), "registry");
        let cleaning = Error::Finalizer(Box::new(Finalizing::CleanupFailed(refused(422).into())));
        assert_eq!(cleaning.category(), "apply");
        assert!(cleaning.is_permanent(), "what is wrong inside stays wrong");
        let adding = Error::Finalizer(Box::new(Finalizing::AddFinalizer(api_refusal(
            "conflict", 409,
        ))));
        assert_eq!(adding.category(), "finalizer");
        assert!(!adding.is_permanent());
    }

    // The table in the module doc, held against the code: each step's failures by the
    // category the metric and the Event name, and whether they wait for a change.
    #[test]
    fn each_step_names_its_failures() {
        let read = GatherError::Read {
            kind: "Job",
            name: "run-1".into(),
            source: api_refusal("unavailable", 503),
        };
        let no_namespace = GatherError::NoNamespace("general".into());
        let deleting = WriteError::Delete {
            kind: "Pod",
            name: "p".into(),
            source: api_refusal("refused", 422),
        };
        let rows: [(Error, &str, bool); 5] = [
            (no_namespace.into(), "invalid", true),
            (read.into(), "read", false),
            (refused(422).into(), "apply", true),
            (deleting.into(), "delete", false),
            (
                AdmitError::Pending {
                    name: "echo".into(),
                    message: "the registry does not answer".into(),
                }
                .into(),
                "registry",
                false,
            ),
        ];
        for (err, category, permanent) in rows {
            assert_eq!(
                (err.category(), err.is_permanent()),
                (category, permanent),
                "{err}"
            );
        }
        assert_eq!(
            Error::from(refused(409)).summary(),
            "applying CronJob echo-general-tick: refused (409)",
            "the API server's message, not its whole answer"
        );
    }
}
