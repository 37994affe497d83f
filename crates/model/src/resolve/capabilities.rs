//! The capabilities that count for an installed plugin: those its owner approved at install
//! that its manifest declares. An approval of a capability the manifest does not ask for, or
//! of a name no capability has, grants nothing.

use std::collections::BTreeSet;

use crate::manifest::{Capability, Manifest};
use crate::resources::Plugin;

/// The plugin's approved capabilities, each declared by its manifest.
pub fn approved_capabilities(plugin: &Plugin, manifest: &Manifest) -> BTreeSet<Capability> {
    plugin
        .spec
        .approved_capabilities
        .iter()
        .filter_map(|name| Capability::parse(name))
        .filter(|c| manifest.declares_capability(*c))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::fixtures::manifest;
    use crate::resources::{PluginManifestSpec, PluginSpec};

    fn plugin(approved: &[&str]) -> Plugin {
        let manifest: PluginManifestSpec =
            serde_json::from_value(serde_json::json!({ "id": "cogtest" })).unwrap();
        Plugin::new(
            "cogtest",
            PluginSpec {
                image: format!("registry.local/cogtest@sha256:{}", "0".repeat(64)),
                command: vec![],
                manifest,
                approved_capabilities: approved.iter().map(|c| c.to_string()).collect(),
                signature: None,
                purge_on_delete: false,
            },
        )
    }

    #[test]
    fn only_approvals_the_manifest_asks_for_count() {
        // The fixture's manifest declares only "schedule".
        let m = manifest();
        let approved = |names: &[&str]| approved_capabilities(&plugin(names), &m);
        assert_eq!(
            approved(&["schedule"]),
            BTreeSet::from([Capability::Schedule])
        );
        assert!(approved(&[]).is_empty());
        assert!(approved(&["live.control", "no.such"]).is_empty());
    }
}
