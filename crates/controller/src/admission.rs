//! Plugin admission: an ordered pipeline of stages, in the order of the trust model. A plugin
//! that fails a stage never reaches the next, and its status names the stage and why.
//!
//! Stages to come (signature policy, digest binding, tool-name conflicts) join `STAGES`.

use model::manifest::{self, Manifest};
use model::resources::{HostConfigSpec, Plugin};

/// A stage of admission.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// The host's plugins.enabled: nothing is admitted while it is off.
    HostGate,
    /// The manifest's shape: every rule of plugin.json.
    Manifest,
}

impl Stage {
    /// The condition reason when this stage refuses.
    pub fn reason(self) -> &'static str {
        match self {
            Stage::HostGate => "PluginsDisabled",
            Stage::Manifest => "InvalidManifest",
        }
    }
}

/// Why a plugin was not admitted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    pub stage: Stage,
    pub message: String,
}

/// The outcome of admission.
pub type Admission = Result<Manifest, Refusal>;

/// Runs every stage in order.
pub fn admit(host: &HostConfigSpec, plugin: &Plugin) -> Admission {
    if !host.plugins.enabled {
        return Err(Refusal {
            stage: Stage::HostGate,
            message: "plugins.enabled is off in HostConfig default".into(),
        });
    }
    manifest::from_value(&plugin.spec.manifest.to_json()).map_err(|err| Refusal {
        stage: Stage::Manifest,
        message: err.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resources::{HostPlugins, PluginManifestSpec, PluginSpec};

    fn plugin(manifest: serde_json::Value) -> Plugin {
        let manifest: PluginManifestSpec = serde_json::from_value(manifest).unwrap();
        Plugin::new(
            "echo",
            PluginSpec {
                image: format!("registry.local/echo@sha256:{}", "0".repeat(64)),
                command: vec![],
                manifest,
                approved_capabilities: vec![],
                signature: None,
                purge_on_delete: false,
            },
        )
    }

    fn host(enabled: bool) -> HostConfigSpec {
        HostConfigSpec {
            plugins: HostPlugins {
                enabled,
                ..Default::default()
            },
            ..Default::default()
        }
    }

    fn valid() -> serde_json::Value {
        serde_json::json!({ "id": "echo", "name": "Echo", "version": "0.1.0", "api": "1" })
    }

    #[test]
    fn the_host_gate_comes_first() {
        let refusal = admit(&host(false), &plugin(serde_json::json!({"id": "echo"}))).unwrap_err();
        assert_eq!(refusal.stage, Stage::HostGate);
    }

    #[test]
    fn an_invalid_manifest_is_refused_naming_the_field() {
        let mut bad = valid();
        bad["api"] = "2".into();
        let refusal = admit(&host(true), &plugin(bad)).unwrap_err();
        assert_eq!(refusal.stage, Stage::Manifest);
        assert!(refusal.message.contains("api"), "{}", refusal.message);
    }

    #[test]
    fn a_valid_plugin_is_admitted() {
        assert!(admit(&host(true), &plugin(valid())).is_ok());
    }
}
