//! Test plugins' manifests, as the suite and the benches edit them.

use model::resources::Plugin;

/// Renames each of the manifest's tools, and the agents' references to them.
pub fn rename_tools(plugin: &mut Plugin, rename: impl Fn(&str) -> String) {
    let rest = &mut plugin.spec.manifest.rest;
    if let Some(tools) = rest.get_mut("tools").and_then(|t| t.as_array_mut()) {
        for t in tools {
            if let Some(name) = t["name"].as_str() {
                t["name"] = rename(name).into();
            }
        }
    }
    if let Some(agents) = rest.get_mut("agents").and_then(|a| a.as_array_mut()) {
        for a in agents {
            if let Some(tools) = a["tools"].as_array_mut() {
                for t in tools {
                    if let Some(name) = t.as_str() {
                        *t = rename(name).into();
                    }
                }
            }
        }
    }
}
