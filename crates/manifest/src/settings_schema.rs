//! A setting's schema: only the keywords the reference lists, each default satisfying its own
//! schema; and at its top, `"secret": true` (issue 30): a string whose value comes from a
//! Kubernetes Secret the config references, never inline, so it has no default.

use serde_json::{Map, Value};

use super::error::{JsonPath, Problems};
use super::json_schema;

/// The types a setting may have.
pub const SETTING_TYPES: [&str; 6] = ["string", "integer", "number", "boolean", "array", "object"];

/// The keywords a setting's schema may use, at any depth.
pub const SETTING_KEYWORDS: [&str; 11] = [
    "type",
    "title",
    "description",
    "default",
    "enum",
    "minimum",
    "maximum",
    "pattern",
    "items",
    "properties",
    "additionalProperties",
];

/// The keyword that marks a setting secret, at the top of its schema only: its value comes
/// from a Secret reference (`secretSettings`), never inline, and the plugin reads it with
/// `GET /settings/secrets/{name}`.
pub const SECRET_KEYWORD: &str = "secret";

/// Whether the schema marks its setting secret (`"secret": true`).
pub fn is_secret(schema: &Value) -> bool {
    schema.get(SECRET_KEYWORD).and_then(Value::as_bool) == Some(true)
}

/// Checks one setting's schema at `path` (`settings.count`): its keywords, that it compiles, and
/// that its default satisfies it; a secret setting is a string without a default.
pub(crate) fn check_setting(schema: &Value, path: &JsonPath, problems: &mut Problems) {
    let before = problems.len();
    check_keywords(schema, path, true, problems);
    if problems.len() > before {
        return;
    }
    if is_secret(schema) {
        check_secret(schema, path, problems);
        if problems.len() > before {
            return;
        }
    }
    let validator = match json_schema::compile(schema) {
        Ok(v) => v,
        Err(e) => {
            problems.add(path, format!("is not a valid schema: {e}"));
            return;
        }
    };
    if let Some(default) = schema.get("default")
        && let Err(e) = json_schema::check(&validator, default)
    {
        problems.add(
            &path.key("default"),
            format!("the default {default} does not satisfy the setting's schema: {e}"),
        );
    }
}

/// A secret setting is a string (a Secret's value is text) and has no default: a value in the
/// manifest would be one every reader of the Plugin sees. The default is not echoed.
fn check_secret(schema: &Value, path: &JsonPath, problems: &mut Problems) {
    if setting_type(schema) != Some("string") {
        problems.add(
            &path.key("type"),
            "a secret setting must be of type string: its value is the text of a Secret's key",
        );
    }
    if schema.get("default").is_some() {
        problems.add(
            &path.key("default"),
            "a secret setting has no default: its value comes only from a Secret reference \
             (secretSettings in the global or project config)",
        );
    }
}

/// The setting's `type`, when it has one.
pub fn setting_type(schema: &Value) -> Option<&str> {
    schema.get("type").and_then(Value::as_str)
}

fn check_keywords(schema: &Value, path: &JsonPath, top: bool, problems: &mut Problems) {
    let Some(obj) = schema.as_object() else {
        problems.add(
            path,
            "must be a schema: an object such as {\"type\": \"string\"}",
        );
        return;
    };
    if top && !obj.contains_key("type") {
        problems.add(
            path,
            format!("needs a type, one of {}", SETTING_TYPES.join(", ")),
        );
    }
    for (key, value) in obj {
        let at = path.key(key);
        match key.as_str() {
            "type" => match value.as_str() {
                Some(t) if SETTING_TYPES.contains(&t) => {}
                _ => problems.add(&at, format!("must be one of {}", SETTING_TYPES.join(", "))),
            },
            "title" | "description" | "pattern" => {
                if !value.is_string() {
                    problems.add(&at, "must be a string");
                }
            }
            "default" => {}
            SECRET_KEYWORD if top => {
                if !value.is_boolean() {
                    problems.add(&at, "must be true or false");
                }
            }
            "enum" => match value.as_array() {
                Some(a) if !a.is_empty() => {}
                _ => problems.add(&at, "must be a non-empty array of the allowed values"),
            },
            "minimum" | "maximum" => {
                if !value.is_number() {
                    problems.add(&at, "must be a number");
                }
            }
            "items" => check_keywords(value, &at, false, problems),
            "properties" => match value.as_object() {
                Some(props) => {
                    for (name, sub) in props {
                        check_keywords(sub, &at.key(name), false, problems);
                    }
                }
                None => problems.add(&at, "must be an object of schemas, by property name"),
            },
            "additionalProperties" => {
                if !value.is_boolean() {
                    check_keywords(value, &at, false, problems);
                }
            }
            _ => problems.add(
                &at,
                format!(
                    "\"{key}\" is not a keyword a setting may use; a setting's schema uses only {} \
                     (and \"{SECRET_KEYWORD}\" at its top)",
                    SETTING_KEYWORDS.join(", ")
                ),
            ),
        }
    }
    check_bounds(obj, path, problems);
}

fn check_bounds(obj: &Map<String, Value>, path: &JsonPath, problems: &mut Problems) {
    if let (Some(min), Some(max)) = (
        obj.get("minimum").and_then(Value::as_f64),
        obj.get("maximum").and_then(Value::as_f64),
    ) && min > max
    {
        problems.add(
            &path.key("minimum"),
            format!("the minimum {min} is more than the maximum {max}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn problems(schema: Value) -> Vec<String> {
        let mut p = Problems::default();
        check_setting(&schema, &JsonPath::root().key("settings").key("s"), &mut p);
        p.into_vec().into_iter().map(|p| p.to_string()).collect()
    }

    #[test]
    fn accepts_every_listed_keyword() {
        let schema = json!({
            "type": "object",
            "title": "Limits",
            "description": "Per-kind limits",
            "properties": {
                "name": { "type": "string", "pattern": "^[a-z]+$", "enum": ["a", "b"] },
                "n": { "type": "integer", "minimum": 1, "maximum": 10 },
                "tags": { "type": "array", "items": { "type": "string" } }
            },
            "additionalProperties": { "type": "number" },
            "default": { "name": "a", "n": 3, "tags": ["x"], "ratio": 0.5 }
        });
        assert_eq!(problems(schema), Vec::<String>::new());
        assert!(problems(json!({"type": "object", "additionalProperties": false})).is_empty());
    }

    #[test]
    fn refuses_other_keywords_at_any_depth() {
        let p = problems(json!({"type": "string", "maxLength": 3}));
        assert_eq!(p.len(), 1);
        assert!(
            p[0].starts_with("settings.s.maxLength: \"maxLength\" is not a keyword"),
            "{p:?}"
        );
        let p = problems(json!({"type": "array", "items": {"type": "string", "format": "email"}}));
        assert!(p[0].starts_with("settings.s.items.format:"), "{p:?}");
        let p = problems(json!({"type": "object", "properties": {"a": {"oneOf": []}}}));
        assert!(p[0].starts_with("settings.s.properties.a.oneOf:"), "{p:?}");
    }

    #[test]
    fn needs_a_known_type() {
        assert!(problems(json!({"title": "x"}))[0].contains("needs a type"));
        assert!(
            problems(json!({"type": "date"}))[0].starts_with("settings.s.type: must be one of")
        );
        assert!(problems(json!("string"))[0].contains("must be a schema"));
    }

    #[test]
    fn checks_keyword_values() {
        assert!(
            problems(json!({"type": "integer", "minimum": "1"}))[0].contains("must be a number")
        );
        assert!(
            problems(json!({"type": "integer", "minimum": 5, "maximum": 1}))[0]
                .contains("more than the maximum")
        );
        assert!(problems(json!({"type": "string", "enum": []}))[0].contains("non-empty array"));
        assert!(
            problems(json!({"type": "string", "pattern": "("}))[0].contains("not a valid schema")
        );
    }

    #[test]
    fn a_secret_setting_is_a_string_without_a_default() {
        assert!(problems(json!({"type": "string", "title": "Token", "secret": true})).is_empty());
        assert!(problems(json!({"type": "string", "secret": false, "default": "x"})).is_empty());
        assert!(is_secret(&json!({"type": "string", "secret": true})));
        assert!(!is_secret(&json!({"type": "string", "secret": false})));
        assert!(!is_secret(&json!({"type": "string"})));

        let p = problems(json!({"type": "integer", "secret": true}));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("settings.s.type: a secret setting must be of type string"),
            "{p:?}"
        );
        // The default is refused without being echoed: it may be a real credential.
        let p = problems(json!({"type": "string", "secret": true, "default": "hunter2"}));
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].starts_with("settings.s.default: a secret setting has no default"),
            "{p:?}"
        );
        assert!(!p[0].contains("hunter2"), "{p:?}");

        let p = problems(json!({"type": "string", "secret": "yes"}));
        assert!(
            p[0].starts_with("settings.s.secret: must be true or false"),
            "{p:?}"
        );
        // Only at the top: a part of a setting is not secret on its own.
        let p = problems(
            json!({"type": "object", "properties": {"k": {"type": "string", "secret": true}}}),
        );
        assert!(
            p[0].starts_with("settings.s.properties.k.secret: \"secret\" is not a keyword"),
            "{p:?}"
        );
    }

    #[test]
    fn default_satisfies_its_schema() {
        assert!(
            problems(json!({"type": "integer", "minimum": 1, "maximum": 10, "default": 3}))
                .is_empty()
        );
        let p = problems(json!({"type": "integer", "minimum": 1, "maximum": 10, "default": 11}));
        assert_eq!(p.len(), 1);
        assert!(
            p[0].starts_with("settings.s.default: the default 11 does not satisfy"),
            "{p:?}"
        );
        let p = problems(json!({"type": "string", "enum": ["a"], "default": "b"}));
        assert!(p[0].starts_with("settings.s.default:"), "{p:?}");
        let p = problems(json!({"type": "boolean", "default": "yes"}));
        assert!(p[0].starts_with("settings.s.default:"), "{p:?}");
    }
}
