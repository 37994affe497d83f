//! An input a tool will take: a value built from the tool's `input_schema`, so the check can
//! call every tool without the author writing examples. It follows the common keywords
//! (`examples`, `default`, `const`, `enum`, `type`, `properties` and `required`, `items`,
//! `minItems`, `minLength`, `minimum`); the caller validates the result against the schema
//! and reports a tool it could not build an input for instead of calling it with a wrong one.

use serde_json::{Map, Value, json};

/// How deep nested objects and arrays go before the builder gives up.
const MAX_DEPTH: usize = 8;

/// A value meant to satisfy `schema`; `None` when the schema says nothing it can follow.
pub fn sample(schema: &Value) -> Option<Value> {
    build(schema, 0)
}

fn build(schema: &Value, depth: usize) -> Option<Value> {
    if depth > MAX_DEPTH {
        return None;
    }
    let schema = match schema {
        Value::Bool(true) => return Some(json!({})),
        Value::Object(o) => o,
        _ => return None,
    };
    if let Some(first) = schema.get("examples").and_then(|e| e.as_array()?.first()) {
        return Some(first.clone());
    }
    if let Some(v) = schema.get("default").or_else(|| schema.get("const")) {
        return Some(v.clone());
    }
    if let Some(first) = schema.get("enum").and_then(|e| e.as_array()?.first()) {
        return Some(first.clone());
    }
    if let Some(first) = ["anyOf", "oneOf"]
        .iter()
        .find_map(|k| schema.get(*k).and_then(|e| e.as_array()?.first()))
    {
        return build(first, depth + 1);
    }
    let kind = match schema.get("type") {
        Some(Value::String(t)) => t.as_str(),
        Some(Value::Array(ts)) => ts.iter().find_map(Value::as_str).unwrap_or("object"),
        _ if schema.contains_key("properties") => "object",
        _ => return None,
    };
    Some(match kind {
        "object" => {
            let properties = schema.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = schema
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let mut out = Map::new();
            for name in required {
                let property = properties
                    .and_then(|p| p.get(name))
                    .unwrap_or(&Value::Bool(true));
                out.insert(name.to_string(), build(property, depth + 1)?);
            }
            Value::Object(out)
        }
        "array" => {
            let min = schema.get("minItems").and_then(Value::as_u64).unwrap_or(0);
            let item = schema.get("items").unwrap_or(&Value::Bool(true));
            let items: Option<Vec<Value>> = (0..min).map(|_| build(item, depth + 1)).collect();
            Value::Array(items?)
        }
        "string" => {
            let min = schema.get("minLength").and_then(Value::as_u64).unwrap_or(0) as usize;
            let text = "conformance";
            Value::String(if text.len() >= min {
                text.to_string()
            } else {
                "x".repeat(min)
            })
        }
        "integer" => json!(schema.get("minimum").and_then(Value::as_i64).unwrap_or(1)),
        "number" => json!(schema.get("minimum").and_then(Value::as_f64).unwrap_or(1.0)),
        "boolean" => json!(true),
        "null" => Value::Null,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn valid(schema: Value) {
        let value = sample(&schema).unwrap_or_else(|| panic!("no sample for {schema}"));
        let validator = jsonschema::validator_for(&schema).unwrap();
        assert!(validator.is_valid(&value), "{value} breaks {schema}");
    }

    #[test]
    fn builds_values_the_schema_takes() {
        valid(
            json!({"type": "object", "properties": {"text": {"type": "string"}},
            "required": ["text"], "additionalProperties": false}),
        );
        valid(json!({"type": "object", "properties": {
            "n": {"type": "integer", "minimum": 3},
            "tags": {"type": "array", "items": {"type": "string", "minLength": 20}, "minItems": 2},
            "mode": {"enum": ["fast", "slow"]},
            "nested": {"type": "object", "properties": {"on": {"type": "boolean"}}, "required": ["on"]},
        }, "required": ["n", "tags", "mode", "nested"]}));
        valid(json!({"type": "object", "properties": {"x": {"type": "number"}}}));
    }

    #[test]
    fn prefers_what_the_author_wrote() {
        let schema = json!({"type": "object", "examples": [{"q": "weather"}]});
        assert_eq!(sample(&schema), Some(json!({"q": "weather"})));
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer", "default": 7}},
            "required": ["n"]});
        assert_eq!(sample(&schema), Some(json!({"n": 7})));
    }

    #[test]
    fn says_so_when_it_cannot() {
        assert_eq!(sample(&json!({"not": {}})), None);
        assert_eq!(
            sample(
                &json!({"type": "object", "properties": {"f": {"format": "x"}}, "required": ["f"]})
            ),
            None
        );
    }
}
