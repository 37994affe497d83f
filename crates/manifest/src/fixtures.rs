//! Small manifest builders for the tests.

use serde_json::{Value, json};

use super::error::Problem;
use super::rules;

/// A manifest under construction, starting from the smallest valid one.
#[derive(Clone, Debug)]
pub(crate) struct M(pub Value);

impl M {
    pub(crate) fn new() -> Self {
        // One capability: a manifest declares at least one, and files.read asks nothing of
        // the rest of it.
        Self(json!({
            "id": "echo", "name": "Echo", "version": "0.1.0", "api": "1",
            "capabilities": ["files.read"],
        }))
    }

    /// Sets a top-level member.
    pub(crate) fn set(mut self, key: &str, value: Value) -> Self {
        self.0[key] = value;
        self
    }

    /// Removes a top-level member.
    pub(crate) fn remove(mut self, key: &str) -> Self {
        self.0.as_object_mut().unwrap().remove(key);
        self
    }

    /// Sets `capabilities`.
    pub(crate) fn caps(self, caps: &[&str]) -> Self {
        self.set("capabilities", json!(caps))
    }

    pub(crate) fn problems(&self) -> Vec<Problem> {
        rules::check(&self.0)
    }

    #[track_caller]
    pub(crate) fn assert_valid(&self) {
        let p = self.problems();
        assert!(p.is_empty(), "expected no problems, got {p:#?}");
    }

    /// Asserts a problem at exactly `path` whose message contains `needle`.
    #[track_caller]
    pub(crate) fn assert_problem(&self, path: &str, needle: &str) {
        let p = self.problems();
        assert!(
            p.iter()
                .any(|p| p.path == path && p.message.contains(needle)),
            "expected a problem at {path} containing {needle:?}, got {p:#?}"
        );
    }

    /// Asserts no problem at `path` or under it.
    #[track_caller]
    pub(crate) fn assert_no_problem_at(&self, path: &str) {
        let p = self.problems();
        assert!(
            !p.iter().any(|p| p.path.starts_with(path)),
            "expected no problem at {path}, got {p:#?}"
        );
    }
}
