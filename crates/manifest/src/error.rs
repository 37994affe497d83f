//! What is wrong with a manifest: a syntax error at a line and column, or every problem found,
//! each at its JSON path.

use std::fmt;

/// One broken rule, at the JSON path of the value that breaks it (`tools[1].input_schema`,
/// `ui.composer_switches[0].label`; empty for the document itself).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Problem {
    pub path: String,
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.is_empty() {
            write!(f, "manifest: {}", self.message)
        } else {
            write!(f, "{}: {}", self.path, self.message)
        }
    }
}

/// Why a manifest was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The text is not JSON5; line and column count from 1.
    #[error("line {line}, column {column}: {message}")]
    Syntax {
        line: usize,
        column: usize,
        message: String,
    },
    /// The document breaks these rules (never empty).
    #[error("{}", join_problems(.0))]
    Invalid(Vec<Problem>),
}

impl ManifestError {
    /// The problems found, or none for a syntax error.
    pub fn problems(&self) -> &[Problem] {
        match self {
            ManifestError::Syntax { .. } => &[],
            ManifestError::Invalid(p) => p,
        }
    }
}

fn join_problems(problems: &[Problem]) -> String {
    problems
        .iter()
        .map(Problem::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// A JSON path being walked, printed as `tools[1].input_schema` or `settings["a.b"].default`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct JsonPath(String);

impl JsonPath {
    pub(crate) fn root() -> Self {
        Self(String::new())
    }

    /// The path of a member of the object at this path.
    pub(crate) fn key(&self, key: &str) -> Self {
        let plain = key
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && key
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        if plain && self.0.is_empty() {
            Self(key.to_string())
        } else if plain {
            Self(format!("{}.{key}", self.0))
        } else {
            let quoted = serde_json::to_string(key).unwrap_or_else(|_| format!("\"{key}\""));
            Self(format!("{}[{quoted}]", self.0))
        }
    }

    /// The path of an item of the array at this path.
    pub(crate) fn index(&self, i: usize) -> Self {
        Self(format!("{}[{i}]", self.0))
    }
}

impl fmt::Display for JsonPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The problems found so far.
#[derive(Debug, Default)]
pub(crate) struct Problems(Vec<Problem>);

impl Problems {
    pub(crate) fn add(&mut self, path: &JsonPath, message: impl Into<String>) {
        self.0.push(Problem {
            path: path.0.clone(),
            message: message.into(),
        });
    }

    pub(crate) fn len(&self) -> usize {
        self.0.len()
    }

    pub(crate) fn into_vec(self) -> Vec<Problem> {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_read_like_accessors() {
        let root = JsonPath::root();
        assert_eq!(
            root.key("tools").index(1).key("input_schema").to_string(),
            "tools[1].input_schema"
        );
        assert_eq!(
            root.key("settings").key("a.b").key("default").to_string(),
            "settings[\"a.b\"].default"
        );
        assert_eq!(root.key("9lives").to_string(), "[\"9lives\"]");
        assert_eq!(root.key("sync-all").to_string(), "sync-all");
    }

    #[test]
    fn errors_name_the_path() {
        let e = ManifestError::Invalid(vec![
            Problem {
                path: "id".into(),
                message: "is required".into(),
            },
            Problem {
                path: String::new(),
                message: "must be an object".into(),
            },
        ]);
        assert_eq!(
            e.to_string(),
            "id: is required; manifest: must be an object"
        );
        let s = ManifestError::Syntax {
            line: 3,
            column: 7,
            message: "expected comma".into(),
        };
        assert_eq!(s.to_string(), "line 3, column 7: expected comma");
    }
}
