//! From text (JSON with comments and trailing commas) or a JSON value to a checked `Manifest`.

use serde_json::Value;

use super::error::{ManifestError, Problem};
use super::model::Manifest;
use super::rules;

/// Parses and checks `plugin.json`. A syntax error gives its line and column; otherwise every
/// problem is reported at once.
pub fn parse_str(text: &str) -> Result<Manifest, ManifestError> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let value: Value = json5::from_str(text).map_err(syntax_error)?;
    from_value(&value)
}

/// Checks a manifest already read as JSON (a Plugin's stored manifest, for one).
pub fn from_value(value: &Value) -> Result<Manifest, ManifestError> {
    let problems = rules::check(value);
    if !problems.is_empty() {
        return Err(ManifestError::Invalid(problems));
    }
    // The rules check every field the typed model reads, so this only fails if they drift.
    serde_json::from_value(value.clone()).map_err(|e| {
        ManifestError::Invalid(vec![Problem {
            path: String::new(),
            message: e.to_string(),
        }])
    })
}

fn syntax_error(e: json5::Error) -> ManifestError {
    let (line, column) = e
        .position()
        .map(|p| (p.line + 1, p.column + 1))
        .unwrap_or((1, 1));
    let mut message = e.to_string();
    // json5 appends " at line L column C"; the position is reported on its own.
    if let Some(i) = message.rfind(" at line ") {
        message.truncate(i);
    }
    ManifestError::Syntax {
        line,
        column,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_trailing_commas_are_fine() {
        let m = parse_str(
            "\u{feff}{\n  // the id\n  \"id\": \"echo\", name: 'Echo',\n  /* block */ \"version\": \"0.1.0\", \"api\": \"1\",\n}\n",
        )
        .unwrap();
        assert_eq!(m.id, "echo");
        assert_eq!(m.name, "Echo");
    }

    #[test]
    fn syntax_errors_give_line_and_column() {
        let err = parse_str("{\n  \"id\": \"echo\"\n  \"name\": \"Echo\"\n}").unwrap_err();
        match err {
            ManifestError::Syntax {
                line,
                column,
                message,
            } => {
                assert_eq!((line, column), (3, 3), "{message}");
                assert!(!message.contains(" at line"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_str("{\"id\": \"echo\",,}"),
            Err(ManifestError::Syntax { line: 1, .. })
        ));
        assert!(matches!(parse_str(""), Err(ManifestError::Syntax { .. })));
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let err = parse_str(r#"{ "id": "Echo", "api": 2, "capabilities": ["nope"] }"#).unwrap_err();
        let paths: Vec<&str> = err.problems().iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["id", "name", "version", "api", "capabilities[0]"]);
    }
}
