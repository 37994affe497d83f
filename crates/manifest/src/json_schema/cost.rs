//! How many subschemas a schema can apply to one place of a value, bounded before the schema
//! is used.
//!
//! Checking a value applies subschemas to each place in it: `allOf`, `anyOf`, `oneOf`, `not`,
//! `if`/`then`/`else`, `dependentSchemas` and references apply theirs to the same place,
//! `properties`, `items` and the rest to the places inside it. Without references a schema is
//! a tree, and the work is at most its size times the value's. With them, a schema of a few
//! hundred bytes can apply 2^30 subschemas to one place (a chain of `anyOf`s that each refer
//! twice to the next), or apply itself to the same place forever. The validator has no budget
//! of its own, so such a schema in a tool's `input_schema` would hold an API server thread for
//! hours on every call. A schema is therefore refused when it:
//!
//! - refers to itself at the same place (a cycle of references and in-place applicators
//!   that reads nothing deeper), or
//! - can apply more than [`MAX_APPLIED`] subschemas to one place of a value nested up to
//!   [`MAX_VALUE_DEPTH`] levels (serde_json's limit, which every body this host reads has).
//!
//! The count is an upper bound, computed without a value: `B(s, k)`, the most applications
//! that schema `s` makes at one place `k` levels below its own, is 1 for itself when `k` is 0,
//! plus `B` of each same-place child at `k`, plus, for the child place that gets the most (one
//! member name, or one item index, with the applicators that take any member or item), the sum
//! of its children's `B` at `k - 1`. A schema with shared definitions used in many properties counts
//! each once per place; only multiplication through references grows it. References are
//! resolved as jsonschema resolves them (the `referencing` crate), `$id`s and anchors included.

use std::collections::{BTreeMap, HashMap};

use referencing::{Draft, Registry, Resolver, ResourceRef};
use serde_json::Value;

/// The most subschemas a schema may apply to one place of a value.
pub const MAX_APPLIED: u64 = 1_000;
/// How deep the values a schema checks may nest: serde_json's recursion limit.
pub const MAX_VALUE_DEPTH: usize = 128;

/// Which places inside a value an applicator reaches.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Inside {
    /// The member of this name (`properties`).
    Member(String),
    /// Any member (`patternProperties`, `additionalProperties`, `unevaluatedProperties`).
    AnyMember,
    /// The item at this index (`prefixItems`, draft 4-7's array `items`).
    Item(usize),
    /// Any item (`items`, `additionalItems`, `unevaluatedItems`, `contains`).
    AnyItem,
    /// Each member's name (`propertyNames`).
    Name,
    /// A string's decoded content (`contentSchema`).
    Content,
}

impl Inside {
    /// The family of places: an applicator to any of a family reaches every place of it.
    fn family(&self) -> u8 {
        match self {
            Inside::Member(_) | Inside::AnyMember => 0,
            Inside::Item(_) | Inside::AnyItem => 1,
            Inside::Name => 2,
            Inside::Content => 3,
        }
    }

    fn is_any(&self) -> bool {
        matches!(
            self,
            Inside::AnyMember | Inside::AnyItem | Inside::Name | Inside::Content
        )
    }
}

/// A subschema and where its applicators lead.
struct Node {
    /// Its JSON pointer from the root, for the refusal.
    at: String,
    same_place: Vec<usize>,
    inside: Vec<(Inside, usize)>,
}

/// Keywords whose schemas apply to the same place.
const SAME_PLACE_LISTS: &[&str] = &["allOf", "anyOf", "oneOf"];
const SAME_PLACE_ONE: &[&str] = &["not", "if", "then", "else"];
const SAME_PLACE_MAPS: &[&str] = &["dependentSchemas", "dependencies"];
const REFERENCES: &[&str] = &["$ref", "$dynamicRef", "$recursiveRef"];

/// Refuses a schema that could make its validator loop or multiply its work; the error says
/// where. Call it on a schema jsonschema compiled (its references resolve).
pub fn check(schema: &Value) -> Result<(), String> {
    let nodes = graph(schema)?;
    let order = same_place_order(&nodes)?;
    let n = nodes.len();
    let cap = MAX_APPLIED + 1;
    let add = |a: u64, b: u64| a.saturating_add(b).min(cap);
    // below[i]: B(i, k - 1); here[i]: B(i, k).
    let mut below = vec![0u64; n];
    for k in 0..=MAX_VALUE_DEPTH {
        let mut here = vec![0u64; n];
        // Same-place children come before their parents in `order`.
        for &i in &order {
            let node = &nodes[i];
            // A subschema counts at its own place only.
            let mut b = u64::from(k == 0);
            for &c in &node.same_place {
                b = add(b, here[c]);
            }
            if k > 0 {
                b = add(b, deepest_child(node, &below, cap));
            }
            here[i] = b;
        }
        if here[0] > MAX_APPLIED {
            return Err(format!(
                "can apply more than {MAX_APPLIED} subschemas to one place of a value ({}, through references at {}): this host's limit, so that checking a value stays cheap",
                match k {
                    0 => "at its top".to_string(),
                    1 => "one level down".to_string(),
                    k => format!("{k} levels down"),
                },
                busiest(&nodes, &here)
            ));
        }
        if here == below {
            // Nothing changes deeper down: the bound holds at every depth.
            break;
        }
        below = here;
    }
    Ok(())
}

/// The applications inside a node's place, at the child place that gets the most.
fn deepest_child(node: &Node, below: &[u64], cap: u64) -> u64 {
    let add = |a: u64, b: u64| a.saturating_add(b).min(cap);
    // Per family: what every place of it gets, and what each named place adds.
    let mut any = [0u64; 4];
    let mut named: BTreeMap<&Inside, u64> = BTreeMap::new();
    for (inside, c) in &node.inside {
        if inside.is_any() {
            let f = inside.family() as usize;
            any[f] = add(any[f], below[*c]);
        } else {
            let e = named.entry(inside).or_insert(0);
            *e = add(*e, below[*c]);
        }
    }
    let mut most = any.iter().copied().max().unwrap_or(0);
    for (inside, b) in named {
        most = most.max(add(b, any[inside.family() as usize]));
    }
    most
}

/// The pointer of the subschema with the most applications, for the refusal.
fn busiest(nodes: &[Node], counts: &[u64]) -> String {
    nodes
        .iter()
        .zip(counts)
        .filter(|(n, _)| !n.at.is_empty())
        .max_by_key(|(_, c)| **c)
        .map_or_else(|| "#".to_string(), |(n, _)| format!("#{}", n.at))
}

/// The order in which same-place children come before their parents, or the cycle's place.
fn same_place_order(nodes: &[Node]) -> Result<Vec<usize>, String> {
    // Iterative depth-first search: 0 unseen, 1 on the path, 2 done.
    let mut state = vec![0u8; nodes.len()];
    let mut order = Vec::with_capacity(nodes.len());
    for start in 0..nodes.len() {
        if state[start] != 0 {
            continue;
        }
        let mut stack: Vec<(usize, usize)> = vec![(start, 0)];
        state[start] = 1;
        while let Some((i, next)) = stack.pop() {
            if let Some(&c) = nodes[i].same_place.get(next) {
                stack.push((i, next + 1));
                match state[c] {
                    0 => {
                        state[c] = 1;
                        stack.push((c, 0));
                    }
                    1 => {
                        return Err(format!(
                            "applies itself to the same place of a value without end (a cycle of references through #{}): a validator would never finish",
                            nodes[c].at
                        ));
                    }
                    _ => {}
                }
            } else {
                state[i] = 2;
                order.push(i);
            }
        }
    }
    Ok(order)
}

/// Every subschema reachable from the root, through applicators and resolved references.
fn graph(schema: &Value) -> Result<Vec<Node>, String> {
    const BASE: &str = "urn:loop-plugins:schema";
    let draft = Draft::default().detect(schema);
    let registry = Registry::new()
        .draft(draft)
        .retrieve_known_draft_meta_schemas(false)
        .add(BASE, ResourceRef::new(schema, draft))
        .and_then(|b| b.prepare())
        .map_err(|e| format!("its references cannot be resolved: {e}"))?;
    let root_uri = referencing::uri::from_str(BASE).map_err(|e| e.to_string())?;
    let resolver = registry.resolver(root_uri);

    let mut b = Builder {
        nodes: Vec::new(),
        index: HashMap::new(),
        todo: Vec::new(),
    };
    b.node_of(schema, String::new(), &resolver);
    // Dynamic and recursive references may land on any subschema that declares the anchor.
    let dynamic = dynamic_anchors(schema);
    let mut next = 0;
    while next < b.todo.len() {
        let (value, at, resolver) = b.todo[next].clone();
        let me = b.index[&(value as *const Value)];
        next += 1;
        let Value::Object(obj) = value else {
            continue;
        };
        let resolver = resolver
            .in_subresource(ResourceRef::new(value, draft))
            .map_err(|e| format!("at #{at}: {e}"))?;
        let mut same = Vec::new();
        let mut inside = Vec::new();
        for key in SAME_PLACE_LISTS {
            if let Some(Value::Array(items)) = obj.get(*key) {
                for (i, s) in items.iter().enumerate() {
                    same.push((s, format!("{at}/{key}/{i}")));
                }
            }
        }
        for key in SAME_PLACE_ONE {
            if let Some(s) = obj.get(*key) {
                same.push((s, format!("{at}/{key}")));
            }
        }
        for key in SAME_PLACE_MAPS {
            if let Some(Value::Object(m)) = obj.get(*key) {
                for (name, s) in m {
                    if s.is_object() || s.is_boolean() {
                        same.push((s, format!("{at}/{key}/{}", escape(name))));
                    }
                }
            }
        }
        if let Some(Value::Object(m)) = obj.get("properties") {
            for (name, s) in m {
                inside.push((
                    Inside::Member(name.clone()),
                    (s, format!("{at}/properties/{}", escape(name))),
                ));
            }
        }
        if let Some(Value::Object(m)) = obj.get("patternProperties") {
            for (pattern, s) in m {
                inside.push((
                    Inside::AnyMember,
                    (s, format!("{at}/patternProperties/{}", escape(pattern))),
                ));
            }
        }
        for (key, place) in [
            ("additionalProperties", Inside::AnyMember),
            ("unevaluatedProperties", Inside::AnyMember),
            ("additionalItems", Inside::AnyItem),
            ("unevaluatedItems", Inside::AnyItem),
            ("contains", Inside::AnyItem),
            ("propertyNames", Inside::Name),
            ("contentSchema", Inside::Content),
        ] {
            if let Some(s) = obj.get(key) {
                inside.push((place, (s, format!("{at}/{key}"))));
            }
        }
        match obj.get("items") {
            Some(Value::Array(items)) => {
                for (i, s) in items.iter().enumerate() {
                    inside.push((Inside::Item(i), (s, format!("{at}/items/{i}"))));
                }
            }
            Some(s) => inside.push((Inside::AnyItem, (s, format!("{at}/items")))),
            None => {}
        }
        if let Some(Value::Array(items)) = obj.get("prefixItems") {
            for (i, s) in items.iter().enumerate() {
                inside.push((Inside::Item(i), (s, format!("{at}/prefixItems/{i}"))));
            }
        }
        let mut edges_same = Vec::new();
        for (v, path) in same {
            edges_same.push(b.node_of(v, path, &resolver));
        }
        let mut edges_inside = Vec::new();
        for (place, (v, path)) in inside {
            edges_inside.push((place, b.node_of(v, path, &resolver)));
        }
        for key in REFERENCES {
            let Some(reference) = obj.get(*key) else {
                continue;
            };
            let target = match (key, reference) {
                (&"$recursiveRef", _) => resolver.lookup_recursive_ref(),
                (_, Value::String(r)) => resolver.lookup(r),
                _ => continue,
            };
            let resolved = target.map_err(|e| format!("at #{at}/{key}: {e}"))?;
            let path =
                pointer_of(schema, resolved.contents()).unwrap_or_else(|| format!("{at}/{key}"));
            let found = b.node_of(resolved.contents(), path, resolved.resolver());
            edges_same.push(found);
            if *key != "$ref" {
                let name = match (key, reference) {
                    (&"$dynamicRef", Value::String(r)) => r.rsplit('#').next().unwrap_or(""),
                    _ => "",
                };
                for (anchor, v, path) in &dynamic {
                    let matches = if *key == "$recursiveRef" {
                        anchor.is_empty()
                    } else {
                        anchor == name
                    };
                    if matches {
                        edges_same.push(b.node_of(v, path.clone(), &resolver));
                    }
                }
            }
        }
        b.nodes[me].same_place = edges_same;
        b.nodes[me].inside = edges_inside;
    }
    Ok(b.nodes)
}

/// The graph being built: each subschema once, by identity, with the resolver its
/// references resolve with, and the subschemas still to visit.
struct Builder<'a> {
    nodes: Vec<Node>,
    index: HashMap<*const Value, usize>,
    todo: Vec<(&'a Value, String, Resolver<'a>)>,
}

impl<'a> Builder<'a> {
    /// The node of a subschema, made (and queued) the first time it is seen.
    fn node_of(&mut self, value: &'a Value, at: String, resolver: &Resolver<'a>) -> usize {
        if let Some(&i) = self.index.get(&(value as *const Value)) {
            return i;
        }
        self.nodes.push(Node {
            at: at.clone(),
            same_place: vec![],
            inside: vec![],
        });
        let i = self.nodes.len() - 1;
        self.index.insert(value as *const Value, i);
        self.todo.push((value, at, resolver.clone()));
        i
    }
}

/// Every subschema declaring a `$dynamicAnchor` (by name) or `$recursiveAnchor: true` (by
/// the empty name), with its pointer.
fn dynamic_anchors(schema: &Value) -> Vec<(String, &Value, String)> {
    let mut found = Vec::new();
    let mut stack = vec![(schema, String::new())];
    while let Some((v, at)) = stack.pop() {
        match v {
            Value::Object(m) => {
                if let Some(Value::String(name)) = m.get("$dynamicAnchor") {
                    found.push((name.clone(), v, at.clone()));
                }
                if m.get("$recursiveAnchor") == Some(&Value::Bool(true)) {
                    found.push((String::new(), v, at.clone()));
                }
                for (k, c) in m {
                    stack.push((c, format!("{at}/{}", escape(k))));
                }
            }
            Value::Array(items) => {
                for (i, c) in items.iter().enumerate() {
                    stack.push((c, format!("{at}/{i}")));
                }
            }
            _ => {}
        }
    }
    found
}

/// The JSON pointer of `target` inside `root`, found by identity.
fn pointer_of(root: &Value, target: &Value) -> Option<String> {
    let mut stack = vec![(root, String::new())];
    while let Some((v, at)) = stack.pop() {
        if std::ptr::eq(v, target) {
            return Some(at);
        }
        match v {
            Value::Object(m) => {
                stack.extend(m.iter().map(|(k, c)| (c, format!("{at}/{}", escape(k)))));
            }
            Value::Array(items) => {
                stack.extend(
                    items
                        .iter()
                        .enumerate()
                        .map(|(i, c)| (c, format!("{at}/{i}"))),
                );
            }
            _ => {}
        }
    }
    None
}

/// A JSON pointer segment.
fn escape(segment: &str) -> String {
    segment.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn anyof_chain(levels: usize) -> Value {
        let mut defs = serde_json::Map::new();
        for i in 0..levels {
            defs.insert(
                format!("a{i}"),
                json!({"anyOf": [{"$ref": format!("#/$defs/a{}", i + 1)}, {"$ref": format!("#/$defs/a{}", i + 1), "type": "object"}]}),
            );
        }
        defs.insert(format!("a{levels}"), json!({"type": "string"}));
        json!({"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/a0"}}})
    }

    #[test]
    fn plain_and_shared_schemas_pass() {
        for schema in [
            json!({"type": "object"}),
            json!(true),
            json!({"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}, "required": ["a"]}),
            // A tree: each node refers to the root for its children.
            json!({"type": "object", "properties": {"children": {"type": "array", "items": {"$ref": "#"}}}}),
            // A definition shared by a thousand properties counts once per place.
            json!({
                "type": "object",
                "$defs": {"item": {"type": "array", "items": {"$ref": "#/$defs/leaf"}}, "leaf": {"anyOf": [{"type": "string"}, {"type": "integer"}]}},
                "properties": (0..1000).map(|i| (format!("p{i}"), json!({"$ref": "#/$defs/item"}))).collect::<serde_json::Map<_, _>>(),
            }),
            // Referenced through an $id and an anchor.
            json!({"$id": "https://example.com/s", "$defs": {"n": {"$anchor": "num", "type": "number"}}, "properties": {"a": {"$ref": "#num"}, "b": {"$ref": "https://example.com/s#/$defs/n"}}}),
            // Six doublings: 253 applications at the place of `x`.
            anyof_chain(6),
        ] {
            check(&schema).unwrap_or_else(|e| panic!("{schema}: {e}"));
        }
    }

    #[test]
    fn a_chain_that_doubles_at_each_reference_is_refused() {
        let err = check(&anyof_chain(30)).unwrap_err();
        assert!(err.contains("more than 1000 subschemas"), "{err}");
        assert!(err.contains("#/$defs/a"), "{err}");
    }

    #[test]
    fn a_schema_that_doubles_at_each_level_of_the_value_is_refused() {
        let err = check(&json!({"anyOf": [{"items": {"$ref": "#"}}, {"items": {"$ref": "#"}}]}))
            .unwrap_err();
        assert!(err.contains("levels down"), "{err}");
    }

    #[test]
    fn a_reference_to_itself_at_the_same_place_is_refused() {
        for schema in [
            json!({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}),
            json!({"anyOf": [{"$ref": "#"}]}),
            json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"allOf": [{"$ref": "#/$defs/a"}]}}, "$ref": "#/$defs/a"}),
        ] {
            let err = check(&schema).unwrap_err();
            assert!(err.contains("without end"), "{schema}: {err}");
        }
    }

    #[test]
    fn items_and_members_are_counted_per_place() {
        // Two properties each with 600 applications: one place gets at most 600.
        let heavy =
            json!({"allOf": (0..599).map(|_| json!({"type": "string"})).collect::<Vec<_>>()});
        let ok = json!({"$defs": {"h": heavy}, "properties": {"a": {"$ref": "#/$defs/h"}, "b": {"$ref": "#/$defs/h"}}});
        check(&ok).unwrap();
        // The same two on one member (a pattern that matches it too) add up.
        let both = json!({"$defs": {"h": heavy}, "properties": {"a": {"$ref": "#/$defs/h"}}, "patternProperties": {"^a": {"$ref": "#/$defs/h"}}});
        assert!(check(&both).is_err());
    }
}
