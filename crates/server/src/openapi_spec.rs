//! Reading our OpenAPI specs in tests: parse, follow a local `$ref`, and validate a body
//! against a schema that may point into the spec's components.

use serde_json::{Value, json};

/// The HTTP methods the specs use, as their path items spell them.
pub const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

/// Parses a spec's YAML.
pub fn parse(yaml: &str) -> Value {
    serde_saphyr::from_str(yaml).expect("the spec parses")
}

/// Follows a local `$ref`.
pub fn resolve<'a>(spec: &'a Value, v: &'a Value) -> &'a Value {
    match v.get("$ref").and_then(Value::as_str) {
        Some(r) => spec
            .pointer(r.trim_start_matches('#'))
            .unwrap_or_else(|| panic!("dangling {r}")),
        None => v,
    }
}

/// A validator for `schema`, which may point into the spec's components.
pub fn validator(spec: &Value, schema: &Value) -> jsonschema::Validator {
    let mut root = schema.clone();
    if let Value::Object(m) = &mut root {
        m.insert(
            "$schema".into(),
            json!("https://json-schema.org/draft/2020-12/schema"),
        );
        m.insert("components".into(), spec["components"].clone());
    }
    jsonschema::validator_for(&root).unwrap_or_else(|e| panic!("schema {schema}: {e}"))
}
