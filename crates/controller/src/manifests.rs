//! Each Plugin's manifest, parsed once per version of the Plugin rather than once per
//! reconcile. Parsing checks every rule of the manifest and compiles its settings' JSON
//! Schemas: in `make bench-scale`'s convergence, where every chat and every instance
//! reconcile read the manifests of the plugins they run, it was a fifth of the controller's CPU.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use model::manifest::{Manifest, ManifestError};
use model::resources::Plugin;

/// A Plugin's manifest as parsed, or why it does not parse.
pub type Parsed = Result<Arc<Manifest>, ManifestError>;

/// The parsed manifests by Plugin uid, each with the resourceVersion it was parsed at.
#[derive(Debug, Default)]
pub struct Manifests {
    parsed: Mutex<HashMap<String, (String, Parsed)>>,
}

impl Manifests {
    /// `plugin`'s manifest: the one parsed from this version of it, else parsed now. A Plugin
    /// without a uid or a version (one built, not read) is parsed every time.
    pub fn of(&self, plugin: &Plugin) -> Parsed {
        let meta = &plugin.metadata;
        let (Some(uid), Some(version)) = (meta.uid.as_deref(), meta.resource_version.as_deref())
        else {
            return parse(plugin);
        };
        if let Some((at, parsed)) = self.lock().get(uid)
            && at == version
        {
            return parsed.clone();
        }
        let parsed = parse(plugin);
        self.lock()
            .insert(uid.to_string(), (version.to_string(), parsed.clone()));
        parsed
    }

    /// Drops the manifest kept for the Plugin with `uid` (it is being removed).
    pub fn forget(&self, uid: &str) {
        self.lock().remove(uid);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (String, Parsed)>> {
        // A panic while holding the lock leaves a map that is still whole.
        self.parsed.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn parse(plugin: &Plugin) -> Parsed {
    model::manifest::from_value(&plugin.spec.manifest.to_json()).map(Arc::new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn plugin(uid: &str, version: &str, name: &str) -> Plugin {
        let manifest = json!({ "id": "echo", "name": name, "version": "0.1.0", "api": "1" });
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
        plugin.metadata.resource_version = Some(version.into());
        plugin
    }

    #[test]
    fn a_version_is_parsed_once_and_a_new_version_again() {
        let manifests = Manifests::default();
        let first = manifests.of(&plugin("u1", "1", "one")).expect("parses");
        let again = manifests.of(&plugin("u1", "1", "one")).expect("parses");
        assert!(
            Arc::ptr_eq(&first, &again),
            "the same version is not parsed again"
        );
        let changed = manifests.of(&plugin("u1", "2", "two")).expect("parses");
        assert_eq!(changed.name, "two");
        assert!(!Arc::ptr_eq(&first, &changed));
    }

    #[test]
    fn a_manifest_that_does_not_parse_says_why_each_time() {
        let manifests = Manifests::default();
        let mut broken = plugin("u2", "1", "x");
        broken.spec.manifest = serde_json::from_value(json!({ "id": "echo" })).expect("a value");
        assert!(manifests.of(&broken).is_err());
        assert!(manifests.of(&broken).is_err());
    }

    #[test]
    fn a_forgotten_plugin_is_parsed_anew() {
        let manifests = Manifests::default();
        let first = manifests.of(&plugin("u3", "1", "one")).expect("parses");
        manifests.forget("u3");
        let after = manifests.of(&plugin("u3", "1", "one")).expect("parses");
        assert!(!Arc::ptr_eq(&first, &after));
    }
}
