//! `Plugin`: an installed plugin, pinned by digest, with its manifest and the capabilities the
//! owner approved.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::Condition;

/// An installed plugin. Its name is its manifest id.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "plugins.loop.dev",
    version = "v1alpha1",
    kind = "Plugin",
    status = "PluginStatus",
    shortname = "plg",
    category = "loop-plugins",
    doc = "An installed Loop plugin: an OCI image pinned by digest, its manifest and the approved capabilities",
    validation = Rule::new("self.metadata.name == self.spec.manifest.id").message("a Plugin's name must equal its manifest id"),
    printcolumn(name = "Version", type_ = "string", json_path = ".spec.manifest.version"),
    printcolumn(name = "Digest", type_ = "string", json_path = ".status.digest"),
    printcolumn(name = "Admitted", type_ = "string", json_path = ".status.conditions[?(@.type==\"Admitted\")].status"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Admitted\")].reason"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct PluginSpec {
    /// The plugin's image, pinned by digest: `name@sha256:<64 hex>`.
    #[x_kube(validation = Rule::new("self.matches('^[^@\\\\s]+@sha256:[0-9a-f]{64}$')").message("the image must be pinned by digest (name@sha256:<64 hex>)"))]
    #[schemars(length(max = 512))]
    pub image: String,
    /// The image's entrypoint and command, which the gate wraps when it is on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// The image's `/loop-plugin/plugin.json`.
    pub manifest: PluginManifestSpec,
    /// Capabilities the owner approved at install; only those the manifest declares count.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub approved_capabilities: Vec<String>,
    /// The publisher's signature over the plugin's name, version, manifest digest and image digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<PluginSignature>,
    /// Delete each chat's /data volume when the Plugin is deleted (`--purge`); kept otherwise.
    #[serde(default)]
    pub purge_on_delete: bool,
}

/// The manifest as stored on the Plugin. The schema checks the fields the API server needs for
/// its own rules; the controller checks every rule of the manifest at admission.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PluginManifestSpec {
    pub id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Every other field of plugin.json, as written.
    #[serde(flatten)]
    pub rest: BTreeMap<String, serde_json::Value>,
}

impl PluginManifestSpec {
    /// The manifest as one JSON document, for the manifest checks.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or(serde_json::Value::Null)
    }
}

impl JsonSchema for PluginManifestSpec {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PluginManifestSpec".into()
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        json_schema!({
            "type": "object",
            "description": "The plugin's plugin.json.",
            "required": ["id"],
            "properties": {
                "id": { "type": "string", "pattern": "^[a-z][a-z0-9-]{1,31}$" },
                "version": { "type": "string" }
            },
            "x-kubernetes-preserve-unknown-fields": true
        })
    }
}

/// A detached Ed25519 signature and the key that made it.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PluginSignature {
    /// Hex-encoded Ed25519 public key.
    #[x_kube(validation = Rule::new("self.matches('^[0-9a-f]{64}$')").message("64 lowercase hex digits"))]
    pub publisher_key: String,
    /// Hex-encoded signature.
    #[x_kube(validation = Rule::new("self.matches('^[0-9a-f]{128}$')").message("128 lowercase hex digits"))]
    pub signature: String,
}

/// What admission found.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PluginStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The image digest admitted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The tools registered, as agents see them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<RegisteredTool>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A tool registered for agents.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct RegisteredTool {
    /// The manifest's tool name.
    pub name: String,
    /// The name agents call it by: plugin_<name>.
    pub mcp_name: String,
}

/// Why a Plugin could not be made from a manifest file.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    #[error("{0}")]
    Manifest(#[from] crate::manifest::ManifestError),
    #[error("the manifest has no usable id: {0}")]
    Shape(#[from] serde_json::Error),
}

impl Plugin {
    /// The Plugin resource for a manifest (plugin.json text) and an image pinned by digest,
    /// with every capability the manifest declares approved when `approve_all`.
    pub fn from_manifest(
        manifest_text: &str,
        image: &str,
        command: Vec<String>,
        approve_all: bool,
    ) -> Result<Plugin, RenderError> {
        let parsed = crate::manifest::parse_str(manifest_text)?;
        let value: serde_json::Value = json5::from_str(manifest_text)
            .map_err(|e| serde_json::Error::io(std::io::Error::other(e.to_string())))?;
        let manifest: PluginManifestSpec = serde_json::from_value(value)?;
        let approved = if approve_all {
            parsed.capabilities.iter().map(|c| c.to_string()).collect()
        } else {
            vec![]
        };
        Ok(Plugin::new(
            &manifest.id.clone(),
            PluginSpec {
                image: image.into(),
                command,
                manifest,
                approved_capabilities: approved,
                signature: None,
                purge_on_delete: false,
            },
        ))
    }
}

/// A Plugin as YAML to apply, without the fields the server fills.
pub fn plugin_yaml(plugin: &Plugin) -> String {
    serde_saphyr::to_string(plugin).expect("a Plugin serializes to YAML")
}
