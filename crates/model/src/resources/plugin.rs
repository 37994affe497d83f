//! `Plugin`: an installed plugin, pinned by digest, with its manifest and the capabilities the
//! owner approved.

use std::collections::BTreeMap;

use kube::{CustomResource, KubeSchema};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::Condition;
use crate::contract::RunAs;

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
    printcolumn(name = "Admitted", type_ = "string", json_path = ".status.conditions[?(@.type==\"Admitted\")].status"),
    printcolumn(name = "Stage", type_ = "string", json_path = ".status.stage", description = "the admission stage that refused the plugin, or Admitted"),
    printcolumn(name = "Reason", type_ = "string", json_path = ".status.conditions[?(@.type==\"Admitted\")].reason"),
    printcolumn(name = "Digest", type_ = "string", json_path = ".status.digest", priority = 1),
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

/// A detached Ed25519 signature and the key that made it, as `loop-plugins plugin sign`
/// publishes it next to the image (tag `sha256-<hex>.sig`) and `plugin install` copies it here.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct PluginSignature {
    /// The signed payload, canonical JSON on one line: the plugin's name and version, the
    /// sha256 of plugin.json as shipped, the image's repository and manifest digest.
    #[schemars(length(min = 1, max = 4096))]
    pub payload: String,
    /// The Ed25519 signature over the payload's bytes, standard base64.
    #[x_kube(validation = Rule::new("self.matches('^[A-Za-z0-9+/]{86}==$')").message("base64 of 64 bytes"))]
    pub signature: String,
    /// The publisher's Ed25519 public key, 64 lowercase hex digits.
    #[x_kube(validation = Rule::new("self.matches('^[0-9a-f]{64}$')").message("64 lowercase hex digits"))]
    pub public_key: String,
}

/// What admission found.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PluginStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The image manifest digest admission looked at (`sha256:<hex>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The admission stage that refused the plugin (`Manifest`, `Image`, `Signature`, ...), or
    /// `Admitted` when every stage passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<String>,
    /// What the image is, as the controller read it by digest: who the plugin runs as, its
    /// command, plugin.json's sha256.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageStatus>,
    /// The tools registered, as agents see them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<RegisteredTool>,
    /// `Admitted`, and one condition per admission stage (see [`AdmissionStage`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// The facts of a plugin image that the Pod and the signature stage need, read from the
/// image by digest (they never change for a digest).
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ImageStatus {
    /// The image manifest digest.
    pub digest: String,
    /// The image's numeric USER: the Pod's runAsUser.
    pub run_as_user: i64,
    /// The USER's group when it names one; the Pod runs as the uid's group otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_as_group: Option<i64>,
    /// The image's entrypoint followed by its cmd.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub command: Vec<String>,
    /// sha256 of /loop-plugin/plugin.json as shipped, hex.
    pub plugin_json_sha256: String,
    /// `sha256:<hex>` of plugin.json's canonical JSON: what `spec.manifest` must hash to.
    pub manifest_hash: String,
    /// The publisher key whose signature admission judged, when there was one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub publisher_key: Option<String>,
}

impl ImageStatus {
    /// Who the Pod runs as: the image's USER as admission recorded it.
    pub fn run_as(&self) -> RunAs {
        RunAs {
            uid: self.run_as_user,
            gid: self.run_as_group,
        }
    }
}

/// The condition that sums admission up: True when every stage passed.
pub const ADMITTED: &str = "Admitted";

/// The stages of admission, in order; each has a condition of its own on the Plugin, and
/// the first that refuses stops the rest (zeroclaw's lifecycle, bound to the image).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AdmissionStage {
    /// HostConfig `plugins.enabled`.
    Host,
    /// Every rule of plugin.json, including the gate rules the gate can enforce.
    Manifest,
    /// The image pulled by digest and checked; its plugin.json is `spec.manifest`.
    Image,
    /// The signature policy over the payload bound to the image digest.
    Signature,
    /// The approved capabilities are ones the manifest declares.
    Capabilities,
    /// The plugin's name and tool names are its own among admitted plugins.
    Names,
}

impl AdmissionStage {
    pub const ALL: [AdmissionStage; 6] = [
        AdmissionStage::Host,
        AdmissionStage::Manifest,
        AdmissionStage::Image,
        AdmissionStage::Signature,
        AdmissionStage::Capabilities,
        AdmissionStage::Names,
    ];

    /// The stage's name, as `status.stage` and `plugin info` show it.
    pub fn name(self) -> &'static str {
        match self {
            AdmissionStage::Host => "Host",
            AdmissionStage::Manifest => "Manifest",
            AdmissionStage::Image => "Image",
            AdmissionStage::Signature => "Signature",
            AdmissionStage::Capabilities => "Capabilities",
            AdmissionStage::Names => "Names",
        }
    }

    /// The type of the stage's condition.
    pub fn condition_type(self) -> &'static str {
        match self {
            AdmissionStage::Host => "HostEnabled",
            AdmissionStage::Manifest => "ManifestValid",
            AdmissionStage::Image => "ImageVerified",
            AdmissionStage::Signature => "SignatureAccepted",
            AdmissionStage::Capabilities => "CapabilitiesApproved",
            AdmissionStage::Names => "NamesRegistered",
        }
    }
}

impl std::fmt::Display for AdmissionStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl Plugin {
    /// The image manifest digest `spec.image` is pinned to (`sha256:<hex>`).
    pub fn pinned_digest(&self) -> Option<&str> {
        self.spec.image.rsplit_once('@').map(|(_, d)| d)
    }

    /// Whether the controller's admission stands for this spec of this image: the `Admitted`
    /// condition is True for the generation it last looked at, the digest it looked at is the
    /// one the spec pins, and that generation is the current one, or an earlier one whose
    /// image and manifest are the ones the spec names now (an edit such as approving a
    /// capability: until admission looks at it, a moment later, what runs keeps running
    /// instead of being taken down with its tokens; the capabilities that count are read
    /// from the current spec either way). Whoever runs or calls the plugin asks this.
    pub fn is_admitted(&self) -> bool {
        let Some(status) = &self.status else {
            return false;
        };
        let generation = self.metadata.generation;
        let judged = status.observed_generation;
        let same_bundle = || {
            status.image.as_ref().is_some_and(|image| {
                image.manifest_hash == crate::config::hash_json(&self.spec.manifest.to_json())
            })
        };
        let current =
            judged == generation || (judged.is_some() && judged < generation && same_bundle());
        current
            && status.digest.as_deref() == self.pinned_digest()
            && status.conditions.iter().any(|c| {
                c.r#type == ADMITTED
                    && c.status == super::ConditionStatus::True
                    && c.observed_generation == judged
            })
    }

    /// Whether admission has given no verdict on this spec yet: a Plugin just installed, or
    /// edited to a new image or manifest, in the moment before admission looks at it. What
    /// runs the plugin waits for the verdict rather than acting on "not admitted" (making
    /// nothing for a plugin about to be admitted, or taking down what an upgrade keeps).
    pub fn awaits_admission(&self) -> bool {
        !self.is_admitted()
            && self
                .status
                .as_ref()
                .is_none_or(|s| s.observed_generation != self.metadata.generation)
    }

    /// The condition of one admission stage, if written.
    pub fn stage_condition(&self, stage: AdmissionStage) -> Option<&Condition> {
        self.status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.r#type == stage.condition_type())
    }
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
        let value = crate::manifest::json5_value(manifest_text)?;
        let parsed = crate::manifest::from_value(&value)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::{Condition, ConditionStatus};

    /// A Plugin whose generation 1 admission admitted.
    fn admitted() -> Plugin {
        let text = r#"{"id": "echo", "name": "Echo", "version": "1.0.0", "api": "1",
            "capabilities": ["agent.readonly", "ui.notification.card"]}"#;
        let digest = format!("sha256:{}", "a".repeat(64));
        let mut plugin =
            Plugin::from_manifest(text, &format!("r.test/echo@{digest}"), vec![], false).unwrap();
        plugin.metadata.generation = Some(1);
        plugin.status = Some(PluginStatus {
            observed_generation: Some(1),
            digest: Some(digest.clone()),
            image: Some(ImageStatus {
                digest,
                run_as_user: 1000,
                run_as_group: None,
                command: vec![],
                plugin_json_sha256: "0".repeat(64),
                manifest_hash: crate::config::hash_json(&plugin.spec.manifest.to_json()),
                publisher_key: None,
            }),
            conditions: vec![Condition {
                r#type: ADMITTED.into(),
                status: ConditionStatus::True,
                observed_generation: Some(1),
                last_transition_time: "2026-01-01T00:00:00Z".into(),
                reason: "Admitted".into(),
                message: String::new(),
            }],
            ..Default::default()
        });
        plugin
    }

    #[test]
    fn an_approval_admission_has_not_seen_yet_keeps_the_plugin_admitted() {
        let mut plugin = admitted();
        assert!(plugin.is_admitted());
        // The owner approves a capability: generation 2, same image, same manifest.
        plugin.spec.approved_capabilities = vec!["ui.notification.card".into()];
        plugin.metadata.generation = Some(2);
        assert!(plugin.is_admitted());
    }

    #[test]
    fn a_new_image_or_manifest_waits_for_admission() {
        let mut other_image = admitted();
        other_image.spec.image = format!("r.test/echo@sha256:{}", "b".repeat(64));
        other_image.metadata.generation = Some(2);
        assert!(!other_image.is_admitted());

        let mut other_manifest = admitted();
        other_manifest.spec.manifest.version = Some("1.0.1".into());
        other_manifest.metadata.generation = Some(2);
        assert!(!other_manifest.is_admitted());

        // Refused for the generation it last looked at: not admitted, whatever comes next.
        let mut refused = admitted();
        refused.status.as_mut().unwrap().conditions[0].status = ConditionStatus::False;
        assert!(!refused.is_admitted());
    }

    #[test]
    fn only_a_spec_admission_has_not_judged_awaits_it() {
        let mut fresh = admitted();
        fresh.status = None;
        assert!(fresh.awaits_admission());

        let mut upgraded = admitted();
        upgraded.spec.image = format!("r.test/echo@sha256:{}", "b".repeat(64));
        upgraded.metadata.generation = Some(2);
        assert!(upgraded.awaits_admission());

        // Judged: admitted or refused, it waits for nothing.
        assert!(!admitted().awaits_admission());
        let mut refused = admitted();
        refused.status.as_mut().unwrap().conditions[0].status = ConditionStatus::False;
        assert!(!refused.awaits_admission());
        // An approval keeps it admitted meanwhile.
        let mut approved = admitted();
        approved.spec.approved_capabilities = vec!["ui.notification.card".into()];
        approved.metadata.generation = Some(2);
        assert!(!approved.awaits_admission());
    }
}
