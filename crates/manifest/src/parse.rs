//! From text (JSON with comments and trailing commas) or a JSON value to a checked `Manifest`.

use serde_json::Value;

use super::error::{ManifestError, Problem};
use super::limits::{self, Bounded};
use super::model::Manifest;
use super::rules;

/// Parses and checks `plugin.json`. A syntax error gives its line and column; otherwise every
/// problem is reported at once.
pub fn parse_str(text: &str) -> Result<Manifest, ManifestError> {
    from_value(&json5_value(text)?)
}

/// Reads JSON5 text that someone else wrote (`plugin.json`, a project's `.loop/config.json`)
/// as a JSON value: text longer than [`limits::MAX_TEXT_BYTES`] is refused unread, a leading
/// byte-order mark is skipped, nesting is held to [`limits::MAX_DEPTH`], and a syntax error, or
/// the level past the limit, is reported at its line and column. The one JSON5 reader: nothing
/// reads such text with `json5` directly.
pub fn json5_value(text: &str) -> Result<Value, ManifestError> {
    if text.len() > limits::MAX_TEXT_BYTES {
        return Err(ManifestError::Invalid(vec![Problem {
            path: String::new(),
            message: format!(
                "is {} bytes, more than the {} bytes this host reads: a manifest must fit in its Plugin resource",
                text.len(),
                limits::MAX_TEXT_BYTES
            ),
        }]));
    }
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    json5::from_str::<Bounded>(text)
        .map(|b| b.0)
        .map_err(|e| syntax_error(text, e))
}

/// Checks a manifest already read as JSON (a Plugin's stored manifest, for one). A value
/// nested deeper than [`limits::MAX_DEPTH`] is refused before any rule walks it.
pub fn from_value(value: &Value) -> Result<Manifest, ManifestError> {
    if let Some(path) = limits::first_past_limit(value) {
        return Err(ManifestError::Invalid(vec![Problem {
            path,
            message: limits::too_deep(),
        }]));
    }
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

/// The error and its line and column, counted from 1, as an editor shows them (see
/// [`EditorPosition`]). json5 gives an error at the end of the text no position of its own: it
/// reports the start of the value it was reading (1:1 for the document), or none. Such an
/// error is placed where the text ends (see [`end_of`]); every other keeps the parser's
/// position.
fn syntax_error(text: &str, e: json5::Error) -> ManifestError {
    let offset = if e.code().is_some_and(ended_early) {
        Some(end_of(text))
    } else {
        e.position().map(|p| offset_of(p, text))
    };
    let at = offset
        .map(|o| EditorPosition::of(o, text))
        .unwrap_or(EditorPosition { line: 1, column: 1 });
    let mut message = e.to_string();
    // json5 appends " at line L column C"; the position is reported on its own.
    if let Some(i) = message.rfind(" at line ") {
        message.truncate(i);
    }
    ManifestError::Syntax {
        line: at.line,
        column: at.column,
        message,
    }
}

/// A place in the text as an editor names it, counted from 1: lines end at LF (CRLF counts
/// once), as `str::lines` splits them; columns count characters. JSON5 also ends a line at a
/// lone CR, U+2028 and U+2029 (json5's own positions do), which most editors show inside a
/// line, so an error after them would name a line the person cannot find.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
struct EditorPosition {
    line: usize,
    column: usize,
}

impl EditorPosition {
    fn of(offset: usize, text: &str) -> EditorPosition {
        let before = &text[..offset];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let mut line_text = &before[line_start..];
        // At the LF of a CRLF: the CR is part of the break, not a character of the line.
        if text[offset..].starts_with('\n') {
            line_text = line_text.strip_suffix('\r').unwrap_or(line_text);
        }
        let columns = line_text.chars().count();
        EditorPosition {
            line: before.matches('\n').count() + 1,
            column: columns + 1,
        }
    }
}

/// The byte offset json5's position (lines at every JSON5 line terminator, columns in
/// characters) names; a position past the text is its end.
fn offset_of(position: json5::Position, text: &str) -> usize {
    let mut line = 0;
    let mut column = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        if line == position.line && column == position.column {
            return i;
        }
        if json5::char::is_json5_line_terminator(c) {
            if c == '\r' && chars.peek().is_some_and(|&(_, n)| n == '\n') {
                chars.next();
            }
            line += 1;
            column = 0;
        } else {
            column += 1;
        }
    }
    text.len()
}

/// Whether the parser ran out of text (`EOF parsing ...`).
fn ended_early(code: json5::ErrorCode) -> bool {
    use json5::ErrorCode::*;
    matches!(
        code,
        EofParsingArray
            | EofParsingBool
            | EofParsingComment
            | EofParsingEscapeSequence
            | EofParsingIdentifier
            | EofParsingNull
            | EofParsingNumber
            | EofParsingObject
            | EofParsingString
            | EofParsingValue
    )
}

/// Where the text ends: after the last character of its last line. Line breaks (of any kind
/// JSON5 knows) that end the text open no line of their own, as an editor shows a file ending
/// with one.
fn end_of(text: &str) -> usize {
    text.trim_end_matches(json5::char::is_json5_line_terminator)
        .len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_and_trailing_commas_are_fine() {
        let m = parse_str(
            "\u{feff}{\n  // the id\n  \"id\": \"echo\", name: 'Echo',\n  /* block */ \"version\": \"0.1.0\", \"api\": \"1\",\n  capabilities: ['files.read'],\n}\n",
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

    fn position(text: &str) -> (usize, usize, String) {
        match parse_str(text) {
            Err(ManifestError::Syntax {
                line,
                column,
                message,
            }) => (line, column, message),
            other => panic!("{text:?}: {other:?}"),
        }
    }

    fn at(text: &str) -> (usize, usize) {
        let (line, column, _) = position(text);
        (line, column)
    }

    #[test]
    fn a_file_cut_short_is_reported_where_it_ends() {
        // Cut mid-value: the end is after the last character, on the one line.
        let (line, column, message) = position("{ \"id\": \"x\", \"version\": ");
        assert_eq!((line, column), (1, 25), "{message}");
        assert_eq!(message, "EOF parsing value");
        // Cut after a few good lines: the last line, after its last character; the line
        // break that ends it opens no line of its own.
        let good = "{\n  \"id\": \"echo\",\n  \"name\": \"Echo\",\n";
        assert_eq!(at(good), (3, 18));
        assert_eq!(at(&good.replace('\n', "\r\n")), (3, 18));
        assert_eq!(at(&format!("{good}\n\n")), (3, 18));
        // Inside a string, a comment or a nested value, the same.
        assert_eq!(at("{\n  \"id\": \"ec"), (2, 12));
        assert_eq!(at("{ /* note"), (1, 10));
        assert_eq!(at("{ \"a\": [1, {\"b\": "), (1, 18));
        // A byte-order mark takes no column.
        assert_eq!(at("\u{feff}{ \"id\": "), (1, 9));
        // An empty file ends where it starts.
        assert_eq!(at(""), (1, 1));
        // Other errors keep their own position.
        assert_eq!(at("{\n  \"id\": \"x\" \"v\": 1\n}"), (2, 13));
    }

    /// JSON5 ends a line at U+2028, U+2029 and a lone CR too; an editor, and `str::lines`, at
    /// LF (CRLF counted once). A position names the line as the editor shows it: seen in CI,
    /// an error past a run of U+2028 inside a key was reported at line 114 of a two-line file.
    #[test]
    fn positions_count_lines_as_an_editor_does() {
        // A key holding 113 U+2028 on line 1, then an error on line 2.
        let key = "\u{2028}".repeat(113);
        let text = format!("{{'{key}': 1,\n  x y}}");
        assert_eq!(at(&text), (2, 5));
        // After them on the same line, columns count characters as shown.
        assert_eq!(at("{'\u{2029}\u{2028}': 1 2}"), (1, 10));
        // A lone CR is no line break to an editor either.
        assert_eq!(at("{'a': 1,\r x y}"), (1, 13));
        // Cut short after them: the end of the last editor line.
        assert_eq!(at("{'\u{2028}\u{2028}': "), (1, 8));
    }

    #[test]
    fn a_manifest_nested_past_the_limit_is_refused_where_it_passes_it() {
        // The reproduction of issue 39: 40 KB of `[`, which aborted every reader of it.
        let deep = format!(
            "{{\"id\": \"acc-deep\", \"version\": \"1.0.0\", \"name\": \"d\", \"api\": \"1\",\n \"x\": {}{}}}",
            "[".repeat(20_000),
            "]".repeat(20_000)
        );
        let err = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || parse_str(&deep).unwrap_err())
            .unwrap()
            .join()
            .expect("no stack overflow");
        match err {
            ManifestError::Syntax {
                line,
                column,
                message,
            } => {
                assert_eq!(line, 2);
                // `"x": ` then 63 arrays under the document: the last of them, at the limit,
                // holds one more.
                assert_eq!(column, 7 + 62, "{message}");
                assert!(message.contains("deeper than 64 levels"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        // The same document already in memory (a Plugin's spec.manifest) is refused at its path.
        let mut x = serde_json::json!([]);
        for _ in 0..200 {
            x = serde_json::Value::Array(vec![x]);
        }
        let value =
            serde_json::json!({"id": "acc-deep", "tools": [{"name": "t", "input_schema": x}]});
        let err = from_value(&value).unwrap_err();
        let problems = err.problems();
        assert_eq!(problems.len(), 1, "{err}");
        assert_eq!(
            problems[0].path,
            format!("tools[0].input_schema{}", "[0]".repeat(61))
        );
        assert!(problems[0].message.contains("deeper than 64"), "{err}");
    }

    #[test]
    fn text_longer_than_the_limit_is_refused_unread() {
        let long = format!("{{\"id\": \"{}\"}}", "x".repeat(limits::MAX_TEXT_BYTES));
        let err = parse_str(&long).unwrap_err();
        assert!(
            err.to_string().contains("more than the 1048576 bytes"),
            "{err}"
        );
        // At the limit it is read (and refused for what it says).
        let at = format!("{{\"x\": \"{}\"}}", "y".repeat(limits::MAX_TEXT_BYTES - 9));
        assert_eq!(at.len(), limits::MAX_TEXT_BYTES);
        assert!(json5_value(&at).is_ok());
    }

    #[test]
    fn every_problem_is_reported_at_once() {
        let err = parse_str(r#"{ "id": "Echo", "api": 2, "capabilities": ["nope"] }"#).unwrap_err();
        let paths: Vec<&str> = err.problems().iter().map(|p| p.path.as_str()).collect();
        assert_eq!(paths, ["id", "name", "version", "api", "capabilities[0]"]);
    }
}
