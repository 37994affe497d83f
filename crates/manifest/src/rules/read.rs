//! Reading a manifest's JSON while recording what is the wrong shape.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use crate::error::{JsonPath, Problems};

pub(super) type Object = Map<String, Value>;

/// A member that is present and not null.
pub(super) fn field<'a>(obj: &'a Object, name: &str) -> Option<&'a Value> {
    obj.get(name).filter(|v| !v.is_null())
}

/// A JSON type's name with its article, for messages.
pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A required, non-empty string member of the object at `path`.
pub(super) fn required_str<'a>(
    obj: &'a Object,
    name: &str,
    path: &JsonPath,
    p: &mut Problems,
) -> Option<&'a str> {
    let at = path.key(name);
    match obj.get(name) {
        None | Some(Value::Null) => {
            p.add(&at, "is required");
            None
        }
        Some(Value::String(s)) if s.trim().is_empty() => {
            p.add(&at, "must not be empty");
            None
        }
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            p.add(&at, format!("must be a string, not {}", kind(other)));
            None
        }
    }
}

/// An optional string member.
pub(super) fn optional_str<'a>(
    obj: &'a Object,
    name: &str,
    path: &JsonPath,
    p: &mut Problems,
) -> Option<&'a str> {
    match field(obj, name)? {
        Value::String(s) => Some(s),
        other => {
            p.add(
                &path.key(name),
                format!("must be a string, not {}", kind(other)),
            );
            None
        }
    }
}

/// An optional boolean member.
pub(super) fn optional_bool(obj: &Object, name: &str, path: &JsonPath, p: &mut Problems) -> bool {
    match field(obj, name) {
        None => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            p.add(
                &path.key(name),
                format!("must be true or false, not {}", kind(other)),
            );
            false
        }
    }
}

/// The value at `path` as an object.
pub(super) fn as_object<'a>(v: &'a Value, path: &JsonPath, p: &mut Problems) -> Option<&'a Object> {
    match v {
        Value::Object(o) => Some(o),
        other => {
            p.add(path, format!("must be an object, not {}", kind(other)));
            None
        }
    }
}

/// An optional object member, with its path.
pub(super) fn optional_object<'a>(
    obj: &'a Object,
    name: &str,
    path: &JsonPath,
    p: &mut Problems,
) -> Option<(JsonPath, &'a Object)> {
    let at = path.key(name);
    let o = as_object(field(obj, name)?, &at, p)?;
    Some((at, o))
}

/// An optional array member's items, with their paths.
pub(super) fn optional_array<'a>(
    obj: &'a Object,
    name: &str,
    path: &JsonPath,
    p: &mut Problems,
) -> Vec<(JsonPath, &'a Value)> {
    let at = path.key(name);
    match field(obj, name) {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (at.index(i), v))
            .collect(),
        Some(other) => {
            p.add(&at, format!("must be an array, not {}", kind(other)));
            Vec::new()
        }
    }
}

/// An optional array member whose items are objects.
pub(super) fn optional_objects<'a>(
    obj: &'a Object,
    name: &str,
    path: &JsonPath,
    p: &mut Problems,
) -> Vec<(JsonPath, &'a Object)> {
    optional_array(obj, name, path, p)
        .into_iter()
        .filter_map(|(at, v)| as_object(v, &at, p).map(|o| (at, o)))
        .collect()
}

/// An optional array member whose items are non-empty strings.
pub(super) fn string_list<'a>(
    obj: &'a Object,
    name: &str,
    path: &JsonPath,
    p: &mut Problems,
) -> Vec<(JsonPath, &'a str)> {
    optional_array(obj, name, path, p)
        .into_iter()
        .filter_map(|(at, v)| match v {
            Value::String(s) if !s.trim().is_empty() => Some((at, s.as_str())),
            Value::String(_) => {
                p.add(&at, "must not be empty");
                None
            }
            other => {
                p.add(&at, format!("must be a string, not {}", kind(other)));
                None
            }
        })
        .collect()
}

/// The string member `key` of each object of the array member `list` (no problems recorded:
/// for cross-references between sections).
pub(super) fn ids_of<'a>(obj: &'a Object, list: &str, key: &str) -> Vec<&'a str> {
    obj.get(list)
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|item| item.get(key).and_then(Value::as_str))
        .collect()
}

/// Records the ids of a list's items seen so far, to refuse one given twice.
pub(super) struct Unique<'a> {
    seen: BTreeMap<&'a str, JsonPath>,
    field: &'static str,
}

impl<'a> Unique<'a> {
    /// `field` is the member holding the id: "id", "name".
    pub(super) fn new(field: &'static str) -> Self {
        Self {
            seen: BTreeMap::new(),
            field,
        }
    }

    /// Refuses the item at `item` (at its id member) when an earlier item had `id`.
    pub(super) fn check(&mut self, id: &'a str, item: &JsonPath, p: &mut Problems) {
        if let Some(first) = self.seen.get(id) {
            p.add(
                &item.key(self.field),
                format!("\"{id}\" is already the {} of {first}", self.field),
            );
        } else {
            self.seen.insert(id, item.clone());
        }
    }
}
