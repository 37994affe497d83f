//! Each Plugin's manifest, parsed and its tools' schemas compiled once per version of the
//! Plugin (its generation: a status write keeps it) rather than once per reconcile or call:
//! the one manifest cache of a process, whichever roles it runs.
//!
//! Parsing checks every rule of the manifest and compiles its settings' JSON Schemas: in `make
//! bench-scale`'s convergence, where every chat and every instance reconcile read the manifests
//! of the plugins they run, it was a fifth of the controller's CPU. The API server validates
//! each tool call's input and output against the tools' compiled schemas. A manifest that does
//! not parse is kept too, with why, until its Plugin changes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use jsonschema::Validator;
use kube::runtime::watcher;

use model::manifest::{Manifest, ManifestError, json_schema};
use model::resources::Plugin;

/// A Plugin's manifest as parsed, or why it does not parse.
pub type Parsed = Result<Arc<Manifest>, ManifestError>;

/// A plugin's manifest with its tools' schemas compiled, or why a schema does not compile.
pub struct Compiled {
    pub manifest: Arc<Manifest>,
    /// Each tool's `input_schema`, by tool name.
    pub inputs: HashMap<String, Result<Validator, String>>,
    /// Each tool's `output_schema`, by tool name, for the tools that have one.
    pub outputs: HashMap<String, Result<Validator, String>>,
}

impl Compiled {
    pub fn new(manifest: Manifest) -> Self {
        let inputs = manifest
            .tools
            .iter()
            .map(|t| {
                let compiled = json_schema::compile(&t.input_schema).map_err(|e| e.to_string());
                (t.name.clone(), compiled)
            })
            .collect();
        let outputs = manifest
            .tools
            .iter()
            .filter_map(|t| {
                let schema = t.output_schema.as_ref()?;
                Some((
                    t.name.clone(),
                    json_schema::compile(schema).map_err(|e| e.to_string()),
                ))
            })
            .collect();
        Self {
            manifest: Arc::new(manifest),
            inputs,
            outputs,
        }
    }
}

/// A Plugin's manifest compiled, or why it does not parse.
type Kept = Result<Arc<Compiled>, ManifestError>;

/// The compiled manifests by Plugin uid, each with the generation it was compiled at.
#[derive(Default)]
pub struct Manifests {
    compiled: Mutex<HashMap<String, (i64, Kept)>>,
}

impl Manifests {
    /// `plugin`'s manifest compiled: the one compiled from this version of it, else compiled
    /// now. A Plugin without a uid or a generation (one built, not read) is compiled every
    /// time.
    pub fn get(&self, plugin: &Plugin) -> Kept {
        let meta = &plugin.metadata;
        let (Some(uid), Some(generation)) = (meta.uid.as_deref(), meta.generation) else {
            return compile(plugin);
        };
        if let Some((at, kept)) = self.lock().get(uid)
            && *at == generation
        {
            return kept.clone();
        }
        let kept = compile(plugin);
        self.lock()
            .insert(uid.to_string(), (generation, kept.clone()));
        kept
    }

    /// `plugin`'s manifest as parsed (see [`Manifests::get`]).
    pub fn of(&self, plugin: &Plugin) -> Parsed {
        self.get(plugin).map(|compiled| compiled.manifest.clone())
    }

    /// Drops the manifest kept for the Plugin with `uid` (it is being removed).
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    /// Takes one event of the Plugin watch: a Plugin deleted is forgotten.
    pub fn apply_watcher_event(&self, event: &watcher::Event<Plugin>) {
        if let watcher::Event::Delete(plugin) = event
            && let Some(uid) = plugin.metadata.uid.as_deref()
        {
            self.forget(uid);
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, (i64, Kept)>> {
        // A panic while holding the lock leaves a map that is still whole.
        self.compiled.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn compile(plugin: &Plugin) -> Kept {
    model::manifest::from_value(&plugin.spec.manifest.to_json()).map(|m| Arc::new(Compiled::new(m)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plugin(uid: &str, generation: i64, name: &str) -> Plugin {
        let manifest = json!({
            "id": "echo", "name": name, "version": "0.1.0", "api": "1",
            "capabilities": ["files.read"],
            "tools": [
                {"name": "say", "input_schema": {"type": "object"},
                 "output_schema": {"type": "object"}},
                {"name": "shout", "input_schema": {"type": "object"}}
            ]
        });
        let mut plugin = Plugin::new(
            "echo",
            model::resources::PluginSpec {
                image: format!("r.test/echo@sha256:{}", "a".repeat(64)),
                command: vec![],
                manifest: serde_json::from_value(manifest).expect("a manifest value"),
                approved_capabilities: vec![],
                signature: None,
                purge_on_delete: false,
            },
        );
        plugin.metadata.uid = Some(uid.into());
        plugin.metadata.generation = Some(generation);
        plugin.metadata.resource_version = Some(format!("{generation}"));
        plugin
    }

    #[test]
    fn a_version_is_compiled_once_and_a_new_version_again() {
        let manifests = Manifests::default();
        let first = manifests.get(&plugin("u1", 1, "one")).expect("parses");
        let again = manifests.get(&plugin("u1", 1, "one")).expect("parses");
        assert!(
            Arc::ptr_eq(&first, &again),
            "the same version is not compiled again"
        );
        let changed = manifests.get(&plugin("u1", 2, "two")).expect("parses");
        assert_eq!(changed.manifest.name, "two");
        assert!(!Arc::ptr_eq(&first, &changed));
    }

    #[test]
    fn a_status_write_keeps_the_compiled_manifest() {
        let manifests = Manifests::default();
        let first = manifests.of(&plugin("u1", 1, "one")).expect("parses");
        let mut written = plugin("u1", 1, "one");
        written.metadata.resource_version = Some("7".into());
        let after = manifests.of(&written).expect("parses");
        assert!(Arc::ptr_eq(&first, &after));
    }

    #[test]
    fn each_tool_has_its_input_schema_compiled_and_its_output_schema_when_it_has_one() {
        let compiled = Manifests::default()
            .get(&plugin("u1", 1, "one"))
            .expect("parses");
        let mut inputs: Vec<_> = compiled.inputs.keys().cloned().collect();
        inputs.sort();
        assert_eq!(inputs, ["say", "shout"]);
        assert!(compiled.inputs.values().all(Result::is_ok));
        assert_eq!(compiled.outputs.keys().collect::<Vec<_>>(), ["say"]);
    }

    #[test]
    fn a_manifest_that_does_not_parse_says_why_each_time() {
        let manifests = Manifests::default();
        let mut broken = plugin("u2", 1, "x");
        broken.spec.manifest = serde_json::from_value(json!({ "id": "echo" })).expect("a value");
        assert!(manifests.of(&broken).is_err());
        assert!(manifests.get(&broken).is_err());
    }

    #[test]
    fn a_forgotten_or_deleted_plugin_is_compiled_anew() {
        let manifests = Manifests::default();
        let first = manifests.get(&plugin("u3", 1, "one")).expect("parses");
        manifests.forget("u3");
        let after = manifests.get(&plugin("u3", 1, "one")).expect("parses");
        assert!(!Arc::ptr_eq(&first, &after));
        manifests.apply_watcher_event(&watcher::Event::Delete(plugin("u3", 1, "one")));
        let again = manifests.get(&plugin("u3", 1, "one")).expect("parses");
        assert!(!Arc::ptr_eq(&after, &again));
    }
}
