//! A config version's name: `config_hash`, `sha256:<hex>` of its canonical JSON (object keys
//! sorted by their UTF-8 bytes, no whitespace, integral numbers written as integers so that
//! `1.0` and `1` hash alike after a trip through the API server).

use serde_json::{Number, Value};
use sha2::{Digest, Sha256};

use super::model::PluginsConfig;
/// `sha256:<hex>` of the canonical JSON of a project's `plugins`.
pub fn config_hash(plugins: &PluginsConfig) -> String {
    hash_json(&serde_json::to_value(plugins).unwrap_or(Value::Null))
}

/// `sha256:<hex>` of the canonical JSON of any value.
pub fn hash_json(value: &Value) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical_json(value).as_bytes()))
    )
}

/// The canonical JSON text of a value: sorted keys, no whitespace.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => out.push_str(&canonical_number(n)),
        Value::String(s) => out.push_str(&Value::String(s.clone()).to_string()),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(v, out);
            }
            out.push('}');
        }
    }
}

fn canonical_number(n: &Number) -> String {
    if n.is_i64() || n.is_u64() {
        return n.to_string();
    }
    match n.as_f64() {
        // Integral floats within the exact range of f64 are written as integers.
        Some(f) if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 => {
            format!("{}", f as i64)
        }
        _ => n.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn canonical_json_sorts_keys_without_whitespace() {
        let v = json!({ "b": [1, { "z": true, "a": null }], "a": "x\"y", "é": 1.5, "c": 2.0 });
        assert_eq!(
            canonical_json(&v),
            r#"{"a":"x\"y","b":[1,{"a":null,"z":true}],"c":2,"é":1.5}"#
        );
    }

    #[test]
    fn the_hash_ignores_key_order_and_spacing() {
        let a: PluginsConfig =
            serde_json::from_str(r#"{"p":{"enabled":true,"settings":{"b":1,"a":2}}}"#).unwrap();
        let b: PluginsConfig = serde_json::from_str(
            r#"{ "p" : { "settings" : { "a" : 2.0 , "b" : 1 } , "enabled" : true } }"#,
        )
        .unwrap();
        assert_eq!(config_hash(&a), config_hash(&b));
        assert!(config_hash(&a).starts_with("sha256:"));
        assert_eq!(config_hash(&a).len(), 7 + 64);
        let c: PluginsConfig =
            serde_json::from_value(json!({ "p": { "enabled": false } })).unwrap();
        assert_ne!(config_hash(&a), config_hash(&c));
    }
}
