//! Generated hostile input for what this crate reads from plugin authors and project editors
//! (crates/hostile: never a panic or an abort, bounded time and memory): `plugin.json` as text
//! and as the JSON a Plugin carries, the JSON schemas a manifest declares (compiled, then given
//! values to check), and a project config's JSON5.

use hostile::inputs::{self, json_mutated, json5_text, mutated, render_json5};
use hostile::proptest::prelude::*;
use hostile::{Bounds, Target};
use loop_plugins_manifest::{ManifestError, from_value, json_schema, json5_value, parse_str};
use serde_json::{Value, json};

#[global_allocator]
static ALLOC: hostile::Counting = hostile::Counting;

const SEEDS: &[&str] = &[
    include_str!("../../../examples/manifests/echo.json"),
    include_str!("../../../examples/manifests/full.json"),
    include_str!("../../../examples/echo-plugin/plugin.json"),
    include_str!("../../../examples/quiz-plugin/plugin.json"),
];

fn seed_values() -> Vec<Value> {
    SEEDS
        .iter()
        .map(|s| json5_value(s).expect("seeds parse"))
        .collect()
}

/// A refusal is a value, never a panic; a syntax error points into the text.
fn refusal_is_well_formed(text: &str, e: &ManifestError) -> Result<(), String> {
    match e {
        ManifestError::Syntax { line, column, .. } => {
            // Lines as an editor shows them (LF, CRLF once); the column at most one past the
            // line's last character.
            let text = text.strip_prefix('\u{feff}').unwrap_or(text);
            let lines: Vec<&str> = text.lines().collect();
            let width = match lines.get(line.wrapping_sub(1)) {
                Some(l) => l.chars().count(),
                None if *line == lines.len() + 1 || *line == 1 => 0,
                None => usize::MAX,
            };
            if *line == 0 || *column == 0 || width == usize::MAX || *column > width + 1 {
                return Err(format!(
                    "syntax error at {line}:{column} in {} lines (that line {width} characters)",
                    lines.len()
                ));
            }
        }
        ManifestError::Invalid(problems) if problems.is_empty() => {
            return Err("refused with no problem named".into());
        }
        ManifestError::Invalid(_) => {}
    }
    Ok(())
}

/// The seeds' text mutated byte by byte, their values mutated and rendered with every JSON5
/// form, and JSON5 of every shape and depth.
fn manifest_texts() -> BoxedStrategy<Vec<u8>> {
    let seeds: Vec<Vec<u8>> = SEEDS.iter().map(|s| s.as_bytes().to_vec()).collect();
    // Values deeper than a thousand are made as text (json5_text): a value that deep would
    // overflow the generator's own stack when it is dropped.
    let structural = (json_mutated(seed_values(), 1_000), any::<u64>())
        .prop_map(|(v, seed)| render_json5(&v, seed).into_bytes());
    prop_oneof![
        2 => json5_text(),
        3 => mutated(seeds),
        3 => structural,
    ]
    .boxed()
}

#[test]
fn manifest_text() {
    Target::new("manifest_text", env!("CARGO_MANIFEST_DIR")).run(manifest_texts, |bytes| {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Ok(());
        };
        match parse_str(text) {
            Ok(m) => {
                // What was admitted can be used: its schemas compile again and take a value.
                for tool in &m.tools {
                    if let Ok(v) = json_schema::compile(&tool.input_schema) {
                        let _ = json_schema::check(&v, &json!({"a": [1, "x", null]}));
                    }
                }
                for (name, _) in m.setting_schemas() {
                    if let Some(Ok(v)) = m.setting_validator(name) {
                        let _ = json_schema::check(v, &json!("x"));
                    }
                }
                Ok(())
            }
            Err(e) => refusal_is_well_formed(text, &e),
        }
    });
}

/// A Plugin's `spec.manifest` as a Kubernetes client reads it: serde_json (recursion limit 128)
/// then the rules. Values up to 200 deep, past both limits.
#[test]
fn manifest_json() {
    let plugins = || {
        json_mutated(seed_values(), 200).prop_map(|v| {
            serde_json::to_vec(&json!({"spec": {"manifest": v}})).expect("serializes")
        })
    };
    Target::new("manifest_json", env!("CARGO_MANIFEST_DIR")).run(plugins, |bytes| {
        let Ok(object) = serde_json::from_slice::<Value>(bytes) else {
            return Ok(());
        };
        match from_value(&object["spec"]["manifest"]) {
            Ok(_) => Ok(()),
            Err(ManifestError::Syntax { .. }) => Err("a value has no syntax to refuse".into()),
            Err(e) => refusal_is_well_formed("", &e),
        }
    });
}

/// JSON Schema keywords, for generated schemas that reach the validator's combinators and
/// references, cycles included.
fn schema(depth: u32) -> BoxedStrategy<Value> {
    let leaf = prop_oneof![
        Just(json!(true)),
        Just(json!(false)),
        Just(json!({})),
        Just(json!({"type": "object"})),
        Just(json!({"type": ["string", "null"], "minLength": 2})),
        Just(json!({"$ref": "#"})),
        Just(json!({"$ref": "#/$defs/a"})),
        Just(json!({"$ref": "#/$defs/b"})),
        Just(json!({"$ref": "#/properties/a"})),
        Just(json!({"$ref": "http://example.com/remote.json"})),
        Just(json!({"$dynamicRef": "#x"})),
        Just(json!({"pattern": "^(a+)+$"})),
        Just(json!({"pattern": "(a|aa)*b"})),
        Just(json!({"pattern": "(?=a)*"})),
        Just(json!({"format": "regex"})),
        Just(json!({"format": "idn-hostname"})),
        Just(json!({"format": "date-time"})),
        Just(json!({"multipleOf": 1e-300})),
        Just(json!({"maximum": 1e308, "minimum": -1e308})),
        Just(json!({"uniqueItems": true})),
        Just(json!({"enum": [[[[1]]], {"a": {"b": 1}}]})),
        Just(json!({"contentMediaType": "application/json", "contentEncoding": "base64"})),
    ];
    leaf.prop_recursive(depth, 96, 4, |inner| {
        let list = prop::collection::vec(inner.clone(), 1..4);
        prop_oneof![
            list.clone().prop_map(|l| json!({"anyOf": l})),
            list.clone().prop_map(|l| json!({"oneOf": l})),
            list.clone().prop_map(|l| json!({"allOf": l})),
            inner.clone().prop_map(|s| json!({"not": s})),
            (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(i, t, e)| json!({"if": i, "then": t, "else": e})),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| json!({
                "type": "object", "properties": {"a": a}, "additionalProperties": b,
                "patternProperties": {"^(x+x+)+y$": {}}, "unevaluatedProperties": false
            })),
            (inner.clone(), inner.clone())
                .prop_map(|(a, b)| json!({"items": a, "prefixItems": [b], "contains": a})),
            (inner.clone(), inner.clone()).prop_map(|(a, b)| json!({
                "$defs": {"a": a, "b": {"anyOf": [{"$ref": "#/$defs/a"}, b]}},
                "$ref": "#/$defs/b"
            })),
            inner.prop_map(|s| json!({"dependentSchemas": {"a": s}, "propertyNames": s})),
        ]
    })
    .boxed()
}

/// A schema from a manifest, compiled as admission and the API server compile them, then
/// checking values as a tool call's input and output are checked.
fn schemas_and_values() -> BoxedStrategy<Vec<u8>> {
    let instance = prop_oneof![
        inputs::json_value(8),
        (1usize..120).prop_map(inputs::nested_value),
        Just(json!({"a": "x".repeat(5_000) + "y"})),
        Just(json!({"a": "a".repeat(64) + "!"})),
        Just(json!([1, 1.0, 1, {"a": 1}, {"a": 1.0}])),
    ];
    (schema(6), prop::collection::vec(instance, 1..4))
        .prop_map(|(s, values)| {
            serde_json::to_vec(&json!({"schema": s, "values": values})).expect("serializes")
        })
        .boxed()
}

#[test]
fn schemas() {
    Target::new("schemas", env!("CARGO_MANIFEST_DIR"))
        .bounds(Bounds::default())
        .run(schemas_and_values, |bytes| {
            let Ok(doc) = serde_json::from_slice::<Value>(bytes) else {
                return Ok(());
            };
            if let Ok(validator) = json_schema::compile(&doc["schema"]) {
                for value in doc["values"].as_array().into_iter().flatten() {
                    let _ = json_schema::check(&validator, value);
                }
            }
            Ok(())
        });
}

/// A project's `.loop/config.json` (and anything else read as JSON5 text someone else wrote).
#[test]
fn json5_documents() {
    Target::new("json5_documents", env!("CARGO_MANIFEST_DIR")).run(json5_text, |bytes| {
        let Ok(text) = std::str::from_utf8(bytes) else {
            return Ok(());
        };
        match json5_value(text) {
            Ok(v) if loop_plugins_manifest::limits::depth_of(&v) > 64 => {
                Err("a value deeper than the limit was read".into())
            }
            Ok(_) => Ok(()),
            Err(e) => refusal_is_well_formed(text, &e),
        }
    });
}

/// A manifest's UI paths checked against the `/loop-plugin` tree an image ships
/// (`bundle::check`): the manifest as admission reads it, the tree as hostile as an image
/// makes it: symlinks out of it, to each other in cycles, through symlinked directories, long
/// chains and long targets.
#[test]
fn bundle_tree() {
    use loop_plugins_manifest::bundle::{self, BundleEntry};
    use std::collections::BTreeMap;

    const PARTS: &[&str] = &[
        "ui",
        "ui",
        "main",
        "index.html",
        "mode.svg",
        "link",
        "dist",
        "a",
        "..",
        ".",
        "",
        "x",
    ];
    fn path() -> impl Strategy<Value = String> {
        prop_oneof![
            4 => prop::collection::vec(prop::sample::select(PARTS), 1..6).prop_map(|p| p.join("/")),
            1 => (1usize..2000).prop_map(|n| format!("ui/{}", "a/".repeat(n))),
            1 => (0..NASTY.len()).prop_map(|i| NASTY[i].to_string()),
        ]
    }
    const NASTY: &[&str] = &[
        "../../etc/passwd",
        "/loop-plugin/ui/mode.svg",
        "/loop-plugin/",
        "/etc",
        "/",
        "link",
        "ui/link",
        "a/../../..",
        "./././.",
        "ui/link/link/link",
    ];
    fn entry() -> impl Strategy<Value = Value> {
        prop_oneof![
            (path(), any::<u64>()).prop_map(|(p, size)| json!([p, "file", size])),
            (path(), 0u64..20_000).prop_map(|(p, size)| json!([p, "file", size])),
            path().prop_map(|p| json!([p, "dir"])),
            path().prop_map(|p| json!([p, "other"])),
            (path(), path()).prop_map(|(p, t)| json!([p, "symlink", t])),
        ]
    }
    fn ui_path() -> impl Strategy<Value = String> {
        prop_oneof![
            prop::collection::vec(
                prop::sample::select(&["main", "index.html", "link", "dist", "a", "x"][..]),
                1..5
            )
            .prop_map(|p| format!("ui/{}", p.join("/"))),
            (1usize..500).prop_map(|n| format!("ui/{}mode.svg", "link/".repeat(n))),
        ]
    }
    let inputs = || {
        (
            prop::collection::vec(ui_path(), 1..4),
            prop::collection::vec(entry(), 0..40),
        )
            .prop_map(|(pages, tree)| {
                let panels: Vec<Value> = pages
                    .iter()
                    .enumerate()
                    .map(|(i, p)| json!({"id": format!("p{i}"), "label": "P", "entry": p}))
                    .collect();
                let cards: Vec<Value> = pages
                    .iter()
                    .enumerate()
                    .map(|(i, p)| json!({"id": format!("c{i}"), "entry": p}))
                    .collect();
                let switches: Vec<Value> = pages
                    .iter()
                    .enumerate()
                    .map(|(i, p)| json!({"id": format!("s{i}"), "label": "S", "icon": format!("{p}.svg")}))
                    .collect();
                let manifest = json!({
                    "id": "echo", "name": "Echo", "version": "1", "api": "1",
                    "capabilities": ["ui.panel", "ui.notification.card", "ui.composer_switch"],
                    "ui": {"panels": panels, "cards": cards, "composer_switches": switches},
                });
                serde_json::to_vec(&json!({"manifest": manifest, "tree": tree})).expect("serializes")
            })
            .boxed()
    };
    Target::new("bundle_tree", env!("CARGO_MANIFEST_DIR")).run(inputs, |bytes| {
        let Ok(doc) = serde_json::from_slice::<Value>(bytes) else {
            return Ok(());
        };
        let Ok(manifest) = from_value(&doc["manifest"]) else {
            return Ok(());
        };
        let mut tree = BTreeMap::new();
        for e in doc["tree"].as_array().into_iter().flatten() {
            let path = e[0].as_str().unwrap_or_default().to_string();
            let entry = match e[1].as_str() {
                Some("file") => BundleEntry::File {
                    size: e[2].as_u64().unwrap_or(0),
                },
                Some("dir") => BundleEntry::Dir,
                Some("symlink") => BundleEntry::Symlink {
                    target: e[2].as_str().unwrap_or_default().to_string(),
                },
                _ => BundleEntry::Other,
            };
            tree.insert(path, entry);
        }
        let named = manifest.ui.panels.len()
            + manifest.ui.cards.len()
            + manifest.ui.composer_switches.len();
        let problems = bundle::check(&manifest, &tree);
        if problems.len() > named {
            return Err(format!("{} problems for {named} paths", problems.len()));
        }
        for p in &problems {
            if !p.path.starts_with("ui.") || p.message.is_empty() {
                return Err(format!("a problem that names nothing: {p:?}"));
            }
        }
        Ok(())
    });
}
