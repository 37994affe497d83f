//! Reading a desktop config: the file's text, parsed as JSON with comments and trailing
//! commas (json5, as manifests are), and its `plugins` object.

use std::path::{Path, PathBuf};

use model::manifest::ManifestError;
use serde_json::{Map, Value};

/// Why a config could not be imported.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}:{line}:{column}: {message}")]
    Syntax {
        path: PathBuf,
        line: usize,
        column: usize,
        message: String,
    },
    #[error("{path}: {what} is not a JSON object")]
    NotAnObject { path: PathBuf, what: &'static str },
    #[error(
        "the project's name cannot come from {path} (the folder holding .loop is not a valid \
         Kubernetes name); give one with --name"
    )]
    NoName { path: PathBuf },
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error(transparent)]
    Trust(#[from] crate::OperatorError),
}

/// The `plugins` object of the config at `path` (empty when the file has none).
pub fn read_plugins(path: &Path) -> Result<Map<String, Value>, ImportError> {
    let text = std::fs::read_to_string(path).map_err(|source| ImportError::Read {
        path: path.into(),
        source,
    })?;
    plugins_of(path, &text)
}

/// The `plugins` object of a config's text.
pub fn plugins_of(path: &Path, text: &str) -> Result<Map<String, Value>, ImportError> {
    let value = model::manifest::json5_value(text).map_err(|e| match e {
        ManifestError::Syntax {
            line,
            column,
            message,
        } => ImportError::Syntax {
            path: path.into(),
            line,
            column,
            message,
        },
        // The reader only reports syntax; the rules are not run on a config.
        ManifestError::Invalid(problems) => ImportError::Syntax {
            path: path.into(),
            line: 1,
            column: 1,
            message: ManifestError::Invalid(problems).to_string(),
        },
    })?;
    let Value::Object(mut top) = value else {
        return Err(ImportError::NotAnObject {
            path: path.into(),
            what: "the config",
        });
    };
    match top.remove("plugins") {
        None | Some(Value::Null) => Ok(Map::new()),
        Some(Value::Object(plugins)) => Ok(plugins),
        Some(_) => Err(ImportError::NotAnObject {
            path: path.into(),
            what: "plugins",
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_trailing_commas_are_read_as_the_desktop_writes_them() {
        let text = "// <project>/.loop/config.json\n{\n  \"model\": \"x\",\n  \"plugins\": {\n    /* on */\n    \"echo\": { \"enabled\": true, },\n  },\n}\n";
        let plugins = plugins_of(Path::new("c.json"), text).unwrap();
        assert_eq!(plugins["echo"], serde_json::json!({ "enabled": true }));
    }

    #[test]
    fn a_config_without_plugins_imports_nothing() {
        assert!(plugins_of(Path::new("c.json"), "{}").unwrap().is_empty());
    }

    #[test]
    fn a_syntax_error_names_the_file_line_and_column() {
        let err = plugins_of(Path::new("c.json"), "{\n  \"plugins\": {,\n}").unwrap_err();
        let ImportError::Syntax { line, .. } = &err else {
            panic!("{err}");
        };
        assert_eq!(*line, 2, "{err}");
        assert!(err.to_string().starts_with("c.json:2:"), "{err}");
    }

    #[test]
    fn plugins_must_be_an_object() {
        let err = plugins_of(Path::new("c.json"), "{ plugins: [] }").unwrap_err();
        assert!(matches!(
            err,
            ImportError::NotAnObject {
                what: "plugins",
                ..
            }
        ));
    }
}
