//! Each Plugin's manifest parsed, and its tools' schemas compiled, once per change of the
//! Plugin: the one manifest and validator cache of the process (the settings' schemas are
//! compiled inside the manifest itself).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use jsonschema::Validator;
use model::manifest::{Manifest, json_schema};
use model::resources::Plugin;

/// A plugin's manifest with its tools' schemas compiled.
pub struct Compiled {
    pub manifest: Arc<Manifest>,
    pub inputs: HashMap<String, Result<Validator, String>>,
    pub outputs: HashMap<String, Result<Validator, String>>,
}

impl Compiled {
    pub fn new(manifest: Manifest) -> Self {
        let inputs = manifest
            .tools
            .iter()
            .map(|t| (t.name.clone(), json_schema::compile(&t.input_schema)))
            .collect();
        let outputs = manifest
            .tools
            .iter()
            .filter_map(|t| {
                let schema = t.output_schema.as_ref()?;
                Some((t.name.clone(), json_schema::compile(schema)))
            })
            .collect();
        Self {
            manifest: Arc::new(manifest),
            inputs,
            outputs,
        }
    }
}

/// Each Plugin's compiled manifest, made again when its spec changes.
#[derive(Default)]
pub struct ManifestCache {
    map: Mutex<HashMap<String, (String, Arc<Compiled>)>>,
}

impl ManifestCache {
    /// The plugin's compiled manifest, or why its manifest does not parse.
    pub fn get(&self, plugin: &Plugin) -> Result<Arc<Compiled>, String> {
        let name = plugin.metadata.name.clone().unwrap_or_default();
        let version = format!(
            "{}/{}",
            plugin.metadata.uid.as_deref().unwrap_or_default(),
            plugin.metadata.generation.unwrap_or_default()
        );
        if let Some((v, compiled)) = self.map.lock().expect("manifest cache lock").get(&name)
            && *v == version
            && plugin.metadata.generation.is_some()
        {
            return Ok(compiled.clone());
        }
        let manifest = model::manifest::from_value(&plugin.spec.manifest.to_json())
            .map_err(|e| e.to_string())?;
        let compiled = Arc::new(Compiled::new(manifest));
        self.map
            .lock()
            .expect("manifest cache lock")
            .insert(name, (version, compiled.clone()));
        Ok(compiled)
    }
}
