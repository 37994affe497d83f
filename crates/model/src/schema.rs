//! Schema pieces that schemars cannot derive in the structural form Kubernetes requires.

use schemars::{Schema, SchemaGenerator, json_schema};

/// A map from names to arbitrary JSON values (settings values, schema documents).
pub fn any_json_map(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "additionalProperties": { "x-kubernetes-preserve-unknown-fields": true }
    })
}

/// Any JSON value.
pub fn any_json(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "x-kubernetes-preserve-unknown-fields": true })
}

/// A `metav1.Time` as an RFC 3339 string.
pub fn timestamp(_: &mut SchemaGenerator) -> Schema {
    json_schema!({ "type": "string", "format": "date-time" })
}
