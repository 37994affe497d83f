//! How deep and how long the JSON that plugin authors, images and project editors write may
//! be, and the reader that holds a parse to it.
//!
//! **Length**: JSON5 text is read only up to [`MAX_TEXT_BYTES`] (1 MiB). A manifest lives in
//! its Plugin resource, which Kubernetes stores whole (etcd takes at most 1.5 MiB an object),
//! so a longer plugin.json could never be installed; reading one would cost the controller
//! hundreds of MB first (a parsed value is several times its text). The reference caps only
//! the whole /loop-plugin tree (50 MB); this cap is this host's, and stricter.
//!
//! **Depth**:
//! Every serde reader recurses once per level of nesting, and so does everything that walks
//! the value afterwards (the manifest's rules, schema compilation and validation, dropping the
//! value). A document nested 20,000 deep is 40 KB of `[` and overflows a thread's stack: that
//! is not a panic but an abort of the whole process, which no `catch_unwind` stops. So every
//! parse of untrusted JSON5 goes through [`json5_value`](crate::parse::json5_value)'s reader ([`Bounded`]), which refuses
//! a document at the first value deeper than [`MAX_DEPTH`], naming the limit and where it was
//! passed, before anything recursed past it; a value already in memory (a Plugin's
//! `spec.manifest`, read from the API server) is measured without recursion by [`depth_of`].
//!
//! The limit is this host's, stricter than the reference (which sets none); 64 levels hold any
//! manifest or project config a person writes (a tool's `input_schema` several objects deep
//! is a dozen), and it keeps a manifest well inside the 128 levels at which serde_json, and so
//! every Kubernetes client, stops reading the Plugin that carries it (`spec.manifest` sits two
//! levels down).

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};

use crate::error::JsonPath;

/// The deepest a document may nest: the document itself is level 1, a value inside it level 2.
pub const MAX_DEPTH: usize = 64;

/// The longest JSON5 text read: 1 MiB.
pub const MAX_TEXT_BYTES: usize = 1 << 20;

/// A JSON value read with its nesting held to [`MAX_DEPTH`]. Deserialize it from any serde
/// reader (`json5::from_str::<Bounded>`); the refusal names the limit, and json5 adds where:
/// the value at the limit whose content goes deeper.
#[derive(Debug, Clone, PartialEq)]
pub struct Bounded(pub Value);

impl<'de> serde::Deserialize<'de> for Bounded {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Level(1).deserialize(deserializer).map(Bounded)
    }
}

/// The message of the refusal, shared by the reader and [`depth_of`]'s callers.
pub fn too_deep() -> String {
    format!("nests deeper than {MAX_DEPTH} levels, this host's limit for plugin JSON")
}

/// Reads one value at nesting level `.0` (the document is level 1).
struct Level(usize);

impl<'de> DeserializeSeed<'de> for Level {
    type Value = Value;

    /// A value below the limit is refused before the reader reads into it.
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        if self.0 > MAX_DEPTH {
            return Err(de::Error::custom(too_deep()));
        }
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Level {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
        match i64::try_from(v) {
            Ok(i) => Ok(Value::from(i)),
            Err(_) => u64::try_from(v)
                .map(Value::from)
                .or_else(|_| Ok(Value::from(v as f64))),
        }
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
        Ok(u64::try_from(v).map_or_else(|_| Value::from(v as f64), Value::from))
    }

    /// As serde_json reads one: a number that is not finite (JSON5's `Infinity`, `NaN`) is null.
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(Value::from(v))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(64));
        while let Some(item) = seq.next_element_seed(Level(self.0 + 1))? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    /// A key given twice keeps its last value, as serde_json's own reader does.
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut members = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let value = map.next_value_seed(Level(self.0 + 1))?;
            members.insert(key, value);
        }
        Ok(Value::Object(members))
    }
}

/// How deep `value` nests (a scalar or an empty container is 1, `[[]]` is 2), measured
/// without recursion.
pub fn depth_of(value: &Value) -> usize {
    let mut stack = vec![(value, 1)];
    let mut deepest = 0;
    while let Some((v, level)) = stack.pop() {
        deepest = deepest.max(level);
        match v {
            Value::Array(items) => stack.extend(items.iter().map(|i| (i, level + 1))),
            Value::Object(members) => stack.extend(members.values().map(|m| (m, level + 1))),
            _ => {}
        }
    }
    deepest
}

/// Whether `value` nests deeper than [`MAX_DEPTH`]; when it does, the JSON path of the first
/// value past the limit (`tools[0].input_schema.properties.a`), in document order. Stops at
/// the limit, so a value nested far deeper costs no more to check than one at the limit.
pub fn first_past_limit(value: &Value) -> Option<String> {
    let mut stack: Vec<(&Value, usize, JsonPath)> = vec![(value, 1, JsonPath::root())];
    while let Some((v, level, path)) = stack.pop() {
        let children: Vec<(&Value, JsonPath)> = match v {
            Value::Array(items) => items
                .iter()
                .enumerate()
                .map(|(i, item)| (item, path.index(i)))
                .collect(),
            Value::Object(members) => members.iter().map(|(k, m)| (m, path.key(k))).collect(),
            _ => continue,
        };
        if level >= MAX_DEPTH {
            if let Some((_, first)) = children.into_iter().next() {
                return Some(first.to_string());
            }
            continue;
        }
        stack.extend(children.into_iter().rev().map(|(c, p)| (c, level + 1, p)));
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn nested_arrays(depth: usize) -> String {
        format!("{}{}", "[".repeat(depth), "]".repeat(depth))
    }

    #[test]
    fn the_limit_itself_reads_and_one_more_is_refused_where_it_is_passed() {
        let at_limit = json5::from_str::<Bounded>(&nested_arrays(MAX_DEPTH)).unwrap();
        assert_eq!(depth_of(&at_limit.0), MAX_DEPTH);
        assert_eq!(first_past_limit(&at_limit.0), None);
        let err = json5::from_str::<Bounded>(&nested_arrays(MAX_DEPTH + 1)).unwrap_err();
        assert!(err.to_string().contains("deeper than 64"), "{err}");
        // Where: the value at the limit whose content goes deeper (the 64th `[`).
        let at = err.position().expect("the reader says where");
        assert_eq!((at.line, at.column), (0, MAX_DEPTH - 1));
    }

    #[test]
    fn a_document_far_past_the_limit_is_refused_without_recursing_into_it() {
        // 20,000 levels overflow any thread's stack when read recursively; run on a small one.
        let text = format!(r#"{{"id": "acc-deep", "x": {}}}"#, nested_arrays(20_000));
        let err = std::thread::Builder::new()
            .stack_size(256 * 1024)
            .spawn(move || json5::from_str::<Bounded>(&text).unwrap_err().to_string())
            .unwrap()
            .join()
            .unwrap();
        assert!(err.contains("deeper than 64"), "{err}");
    }

    #[test]
    fn values_read_as_serde_json_reads_them() {
        let text = r#"{ a: [1, -2, 3.5, 18446744073709551615, "s", 'q', null, true, {}], a2: Infinity, b: {c: NaN}, a: 2 }"#;
        let ours = json5::from_str::<Bounded>(text).unwrap().0;
        let theirs: Value = json5::from_str(text).unwrap();
        assert_eq!(ours, theirs);
    }

    #[test]
    fn depth_is_measured_without_recursion_and_names_the_first_value_past_the_limit() {
        assert_eq!(depth_of(&json!(1)), 1);
        assert_eq!(depth_of(&json!({"a": [1, {"b": []}]})), 4);
        assert_eq!(first_past_limit(&json!({"a": [1, {"b": []}]})), None);
        let mut deep = json!({"leaf": 1});
        for _ in 0..100_000 {
            deep = Value::Array(vec![deep]);
        }
        let at = first_past_limit(&deep).expect("past the limit");
        assert_eq!(at, "[0]".repeat(MAX_DEPTH));
        assert!(depth_of(&deep) > 100_000);
        // Dropping a value this deep recurses too; take it apart by hand.
        let mut v = deep;
        while let Value::Array(mut items) = v {
            v = items.pop().unwrap_or(Value::Null);
        }
    }
}
