//! What a plugin's Pod takes from its admitted Plugin and from HostConfig, beyond the chat:
//! the image's command and USER as admission read them, the registry credentials it is
//! pulled with (a copy of HostConfig's Secret beside the Pod, owned by the instance), and the
//! gate's policy when the gate is on. Pure builders (the instance's `desired` builds the pull
//! Secret with them).

use std::collections::BTreeMap;

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;

use admission::gate_policy;
use oci::DOCKER_CONFIG_SECRET_KEY;

use super::pod::GateInputs;
use model::contract::RunAs;
use model::manifest::Manifest;
use model::names;
use model::resources::{HostConfigSpec, Plugin};

/// The parts of a plugin's Pod that come from its Plugin and HostConfig.
#[derive(Clone, Debug, PartialEq)]
pub struct PluginParts {
    pub command: Vec<String>,
    pub run_as: RunAs,
    /// The gate's image and policy, while the gate is on.
    pub gate: Option<GateParts>,
}

/// The gate's part of a Pod.
#[derive(Clone, Debug, PartialEq)]
pub struct GateParts {
    pub image: String,
    pub policy_json: String,
    pub chat: String,
    pub audit: String,
}

impl GateParts {
    pub fn inputs(&self) -> GateInputs<'_> {
        GateInputs {
            image: &self.image,
            policy_json: self.policy_json.clone(),
            chat: self.chat.clone(),
            audit: self.audit.clone(),
        }
    }
}

/// The parts for `plugin` (admitted, with `manifest`) in chat `namespace/channel`; an error
/// says why no Pod can be built.
pub fn parts(
    host: &HostConfigSpec,
    self_image: &str,
    plugin: &Plugin,
    manifest: &Manifest,
    namespace: &str,
    channel: &str,
) -> std::result::Result<PluginParts, String> {
    let image = plugin
        .status
        .as_ref()
        .and_then(|s| s.image.as_ref())
        .filter(|i| Some(i.digest.as_str()) == plugin.pinned_digest())
        .ok_or_else(|| {
            format!(
                "Plugin {} has no image facts for {} yet",
                plugin.name_any(),
                plugin.spec.image
            )
        })?;
    let gate = if host.gates.agentgate.enabled {
        let chat = format!("{namespace}/{channel}");
        let policy = gate_policy::policy(
            manifest.gate.as_ref(),
            &host.gates.audit,
            &manifest.id,
            &chat,
        )
        .map_err(|e| format!("the gate's policy for {}: {e}", manifest.id))?;
        Some(GateParts {
            image: host
                .gates
                .agentgate
                .image
                .clone()
                .unwrap_or_else(|| self_image.to_string()),
            policy_json: serde_json::to_string(&policy).expect("a policy serializes"),
            chat,
            audit: if host.gates.audit.to_stdout() {
                "-".into()
            } else {
                host.gates.audit.destination.clone()
            },
        })
    } else {
        None
    };
    Ok(PluginParts {
        command: image.command.clone(),
        run_as: image.run_as(),
        gate,
    })
}

/// The Secret a plugin Pod is pulled with: HostConfig's credentials, copied beside the Pod
/// (an imagePullSecret must be in the Pod's namespace), owned by the instance.
pub fn build_pull_secret(
    instance: &str,
    namespace: &str,
    labels: BTreeMap<String, String>,
    owner: OwnerReference,
    dockerconfigjson: &[u8],
) -> Secret {
    Secret {
        metadata: ObjectMeta {
            name: Some(names::pull_secret_name(instance)),
            namespace: Some(namespace.into()),
            labels: Some(labels),
            owner_references: Some(vec![owner]),
            ..Default::default()
        },
        type_: Some("kubernetes.io/dockerconfigjson".into()),
        data: Some(BTreeMap::from([(
            DOCKER_CONFIG_SECRET_KEY.into(),
            ByteString(dockerconfigjson.to_vec()),
        )])),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resources::{HostPlugins, ImageStatus, PluginSpec, PluginStatus};

    fn plugin() -> (Plugin, Manifest) {
        let json = serde_json::json!({
            "id": "echo", "name": "Echo", "version": "1", "api": "1",
            "capabilities": ["files.read"],
            "gate": { "commands": [{ "commands": ["curl"], "decision": "deny" }] }
        });
        let manifest = model::manifest::from_value(&json).unwrap();
        let digest = format!("sha256:{}", "b".repeat(64));
        let mut p = Plugin::new(
            "echo",
            PluginSpec {
                image: format!("r.test/echo@{digest}"),
                command: vec![],
                manifest: serde_json::from_value(json).unwrap(),
                approved_capabilities: vec![],
                signature: None,
                purge_on_delete: false,
            },
        );
        p.status = Some(PluginStatus {
            image: Some(ImageStatus {
                digest,
                run_as_user: 1000,
                run_as_group: None,
                command: vec!["/echo-plugin".into()],
                plugin_json_sha256: "x".into(),
                manifest_hash: "y".into(),
                publisher_key: None,
            }),
            ..Default::default()
        });
        (p, manifest)
    }

    fn host(gate: bool) -> HostConfigSpec {
        let mut h = HostConfigSpec {
            plugins: HostPlugins {
                enabled: true,
                ..Default::default()
            },
            ..Default::default()
        };
        h.gates.agentgate.enabled = gate;
        h
    }

    #[test]
    fn the_pod_runs_what_admission_read() {
        let (p, m) = plugin();
        let parts = parts(&host(false), "self@sha256:1", &p, &m, "team", "general").unwrap();
        assert_eq!(parts.command, ["/echo-plugin"]);
        assert_eq!(
            parts.run_as,
            RunAs {
                uid: 1000,
                gid: None
            }
        );
        assert!(parts.gate.is_none(), "the gate is off");
    }

    #[test]
    fn the_gate_gets_the_policy_compiled_from_the_manifest() {
        let (p, m) = plugin();
        let parts = parts(&host(true), "self@sha256:1", &p, &m, "team", "general").unwrap();
        let gate = parts.gate.unwrap();
        assert_eq!(gate.image, "self@sha256:1");
        assert_eq!(gate.chat, "team/general");
        let policy = ::gate::Policy::from_json(&gate.policy_json, "policy.json").unwrap();
        assert_eq!(policy.gate.commands[0].commands, ["curl"]);
        assert_eq!(policy.plugin.as_deref(), Some("echo"));
        assert_eq!(gate.audit, "/data/.loop-audit");
        let mut stdout = host(true);
        stdout.gates.audit.destination = "stdout".into();
        let gate = parts_gate(&stdout, &p, &m);
        assert_eq!(gate.audit, "-");
    }

    fn parts_gate(h: &HostConfigSpec, p: &Plugin, m: &Manifest) -> GateParts {
        parts(h, "s", p, m, "n", "c").unwrap().gate.unwrap()
    }

    #[test]
    fn no_facts_for_this_digest_no_pod() {
        let (mut p, m) = plugin();
        p.spec.image = format!("r.test/echo@sha256:{}", "c".repeat(64));
        let err = parts(&host(false), "s", &p, &m, "n", "c").unwrap_err();
        assert!(err.contains("no image facts"), "{err}");
    }

    #[test]
    fn the_pull_secret_is_a_dockerconfigjson_owned_by_the_instance() {
        let owner = OwnerReference {
            api_version: "plugins.loop.dev/v1alpha1".into(),
            kind: "PluginInstance".into(),
            name: "echo-general".into(),
            uid: "u".into(),
            controller: Some(true),
            block_owner_deletion: Some(true),
        };
        let s = build_pull_secret("echo-general", "team", BTreeMap::new(), owner, b"{}");
        assert_eq!(s.type_.as_deref(), Some("kubernetes.io/dockerconfigjson"));
        assert_eq!(s.metadata.name.as_deref(), Some("echo-general-pull"));
        assert!(s.data.unwrap().contains_key(".dockerconfigjson"));
    }
}
