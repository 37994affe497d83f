//! The stage pipeline as a table: one row per way a plugin is admitted or stopped, each
//! naming the stage that stopped it, how, and the reason its condition carries.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::*;
use model::contract::RunAs;
use model::manifest::bundle::BundleEntry;
use model::resources::{HostPlugins, PluginManifestSpec, PluginSpec};
use oci::signing::keys::PublisherKey;
use oci::signing::payload::Payload;
use oci::signing::record::SignatureRecord;
use sha2::{Digest as _, Sha256};

const REPO: &str = "registry.test:5000/plugins/echo";

fn manifest_json() -> serde_json::Value {
    serde_json::json!({
        "id": "echo", "name": "Echo", "version": "0.1.0", "api": "1",
        "capabilities": ["agent.readonly", "ui.composer_switch"],
        "agents": [{ "id": "say", "read_only": true, "tools": ["echo"] }],
        "tools": [{ "name": "echo", "input_schema": { "type": "object" } }],
        "ui": { "composer_switches": [{ "id": "mode", "label": "Mode", "icon": "ui/mode.svg" }] },
        "gate": { "commands": [{ "commands": ["curl"], "decision": "deny" }] }
    })
}

fn plugin_json_bytes() -> Vec<u8> {
    serde_json::to_vec_pretty(&manifest_json()).unwrap()
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

fn image_digest() -> String {
    format!("sha256:{}", sha256_hex(b"the echo image"))
}

fn plugin() -> Plugin {
    let manifest: PluginManifestSpec = serde_json::from_value(manifest_json()).unwrap();
    let mut p = Plugin::new(
        "echo",
        PluginSpec {
            image: format!("{REPO}:1@{}", image_digest()),
            command: vec!["/echo-plugin".into()],
            manifest,
            approved_capabilities: vec!["agent.readonly".into()],
            signature: None,
            purge_on_delete: false,
        },
    );
    p.metadata.generation = Some(1);
    p
}

fn host() -> HostConfigSpec {
    HostConfigSpec {
        plugins: HostPlugins {
            enabled: true,
            ..Default::default()
        },
        ..Default::default()
    }
}

fn view() -> ImageView {
    let json = plugin_json_bytes();
    ImageView {
        digest: image_digest(),
        repository: REPO.into(),
        run_as: RunAs {
            uid: 1000,
            gid: Some(1000),
        },
        command: vec!["/echo-plugin".into()],
        plugin_json_sha256: sha256_hex(&json),
        plugin_json: Arc::new(json),
        bundle: Arc::new(BTreeMap::from([
            ("plugin.json".to_string(), BundleEntry::File { size: 10 }),
            ("ui".to_string(), BundleEntry::Dir),
            ("ui/mode.svg".to_string(), BundleEntry::File { size: 900 }),
        ])),
    }
}

fn key() -> &'static PublisherKey {
    static KEY: std::sync::OnceLock<PublisherKey> = std::sync::OnceLock::new();
    KEY.get_or_init(|| PublisherKey::generate().unwrap())
}

fn other_key() -> &'static PublisherKey {
    static KEY: std::sync::OnceLock<PublisherKey> = std::sync::OnceLock::new();
    KEY.get_or_init(|| PublisherKey::generate().unwrap())
}

/// A signature by `key` over what the payload says, with the fields `tweak` changes.
fn signed(key: &PublisherKey, tweak: impl FnOnce(&mut Payload)) -> SignatureRecord {
    let v = view();
    let mut payload = Payload::new(
        "echo",
        "0.1.0",
        &v.plugin_json_sha256,
        REPO,
        &Digest::parse(&v.digest).unwrap(),
    );
    tweak(&mut payload);
    SignatureRecord::sign(key, &payload)
}

/// One row's world.
struct Case {
    host: HostConfigSpec,
    plugin: Plugin,
    image: Option<ImageFinding>,
    signatures: SignatureFinding,
    earlier: Vec<Holder>,
}

impl Case {
    fn new() -> Case {
        Case {
            host: host(),
            plugin: plugin(),
            image: Some(ImageFinding::Read(Arc::new(view()))),
            signatures: SignatureFinding::NotRead,
            earlier: vec![],
        }
    }

    fn mode(mut self, mode: &str, trusted: &[&PublisherKey]) -> Case {
        self.host.plugins.signature_mode = SignatureMode::parse(mode);
        self.host.plugins.trusted_publisher_keys = trusted.iter().map(|k| k.public_hex()).collect();
        self
    }

    fn signed_by(mut self, record: SignatureRecord) -> Case {
        self.signatures = SignatureFinding::Records(vec![record]);
        self
    }

    fn with(mut self, f: impl FnOnce(&mut Case)) -> Case {
        f(&mut self);
        self
    }

    fn run(&self) -> Outcome {
        evaluate(&Facts {
            host: &self.host,
            plugin: &self.plugin,
            image: self.image.as_ref(),
            signatures: &self.signatures,
            earlier: &self.earlier,
        })
    }
}

/// What a row expects: admitted (with a warning or not), or stopped at a stage.
#[derive(Debug)]
enum Want {
    Admitted { warned: Option<&'static str> },
    Stopped(AdmissionStage, StageState, &'static str),
}

/// The plugin, and the image it ships, with one tool of this name.
fn with_tools(c: &mut Case, tool: &str) {
    c.plugin.spec.manifest.rest.insert(
        "tools".into(),
        serde_json::json!([{ "name": tool, "input_schema": { "type": "object" } }]),
    );
    c.plugin.spec.manifest.rest.insert(
        "agents".into(),
        serde_json::json!([{ "id": "say", "read_only": true, "tools": [tool] }]),
    );
    let json = serde_json::to_vec(&c.plugin.spec.manifest.to_json()).unwrap();
    let mut v = view();
    v.plugin_json_sha256 = sha256_hex(&json);
    v.plugin_json = Arc::new(json);
    c.image = Some(ImageFinding::Read(Arc::new(v)));
}

fn image_refused(reason: &str, message: &str) -> Option<ImageFinding> {
    Some(ImageFinding::Refused {
        reason: reason.into(),
        message: message.into(),
    })
}

#[test]
fn the_stage_pipeline() {
    use AdmissionStage as S;
    use StageState::{Pending, Refused};
    let rows: Vec<(&str, Case, Want)> = vec![
        (
            "a good plugin, signatures disabled",
            Case::new(),
            Want::Admitted { warned: None },
        ),
        (
            "the host switch is off",
            Case::new().with(|c| c.host.plugins.enabled = false),
            Want::Stopped(S::Host, Refused, "PluginsDisabled"),
        ),
        (
            "an invalid manifest",
            Case::new().with(|c| {
                c.plugin
                    .spec
                    .manifest
                    .rest
                    .insert("api".into(), "2".into());
            }),
            Want::Stopped(S::Manifest, Refused, "InvalidManifest"),
        ),
        (
            "a gate rule on an operation the gate does not know",
            Case::new().with(|c| {
                c.plugin.spec.manifest.rest.insert(
                    "gate".into(),
                    serde_json::json!({ "files": [{ "paths": ["/data/**"], "operations": ["remove"], "decision": "deny" }] }),
                );
            }),
            Want::Stopped(S::Manifest, Refused, "InvalidManifest"),
        ),
        (
            "a gate glob the gate cannot compile",
            Case::new().with(|c| {
                c.plugin.spec.manifest.rest.insert(
                    "gate".into(),
                    serde_json::json!({ "files": [{ "paths": ["/data/[x"], "decision": "deny" }] }),
                );
            }),
            Want::Stopped(S::Manifest, Refused, "InvalidGateRules"),
        ),
        (
            "the registry is unreachable",
            Case::new().with(|c| {
                c.image = Some(ImageFinding::Unavailable {
                    reason: "RegistryUnavailable".into(),
                    message: "connection refused".into(),
                })
            }),
            Want::Stopped(S::Image, Pending, "RegistryUnavailable"),
        ),
        (
            "the registry is unreachable but this digest was admitted before",
            Case::new().with(|c| {
                let v = view();
                c.image = Some(ImageFinding::Recorded {
                    facts: ImageStatus {
                        digest: v.digest,
                        run_as_user: 1000,
                        run_as_group: Some(1000),
                        command: v.command,
                        plugin_json_sha256: v.plugin_json_sha256,
                        manifest_hash: hash_json(&manifest_json()),
                        publisher_key: None,
                    },
                    why: "connection refused".into(),
                })
            }),
            Want::Admitted { warned: None },
        ),
        (
            "an image that runs as root",
            Case::new().with(|c| c.image = image_refused("ImageUserRoot", "image USER \"0\" is root")),
            Want::Stopped(S::Image, Refused, "ImageUserRoot"),
        ),
        (
            "spec.manifest differs from the image's plugin.json",
            Case::new().with(|c| {
                c.plugin
                    .spec
                    .manifest
                    .rest
                    .insert("name".into(), "Echo, edited".into());
            }),
            Want::Stopped(S::Image, Refused, "ManifestMismatch"),
        ),
        (
            "a recorded digest whose plugin.json is not spec.manifest",
            Case::new().with(|c| {
                let v = view();
                c.image = Some(ImageFinding::Recorded {
                    facts: ImageStatus {
                        digest: v.digest,
                        run_as_user: 1000,
                        run_as_group: None,
                        command: v.command,
                        plugin_json_sha256: v.plugin_json_sha256,
                        manifest_hash: "sha256:other".into(),
                        publisher_key: None,
                    },
                    why: "timeout".into(),
                })
            }),
            Want::Stopped(S::Image, Refused, "ManifestMismatch"),
        ),
        (
            "spec.command is not the image's",
            Case::new().with(|c| c.plugin.spec.command = vec!["/bin/sh".into()]),
            Want::Stopped(S::Image, Refused, "CommandMismatch"),
        ),
        (
            "a switch icon over 16 KB",
            Case::new().with(|c| {
                let mut v = view();
                let mut bundle = (*v.bundle).clone();
                // 16 KB, as the reference's sizes count (16,384 bytes), and a byte.
                let size = 16 * 1024 + 1;
                bundle.insert("ui/mode.svg".into(), BundleEntry::File { size });
                v.bundle = Arc::new(bundle);
                c.image = Some(ImageFinding::Read(Arc::new(v)));
            }),
            Want::Stopped(S::Image, Refused, "ImageBundleInvalid"),
        ),
        (
            "strict: unsigned",
            Case::new().mode("strict", &[key()]),
            Want::Stopped(S::Signature, Refused, "Unsigned"),
        ),
        (
            "strict: signed by a trusted key",
            Case::new()
                .mode("strict", &[key()])
                .signed_by(signed(key(), |_| {})),
            Want::Admitted { warned: None },
        ),
        (
            "strict: signed by a key not trusted",
            Case::new()
                .mode("strict", &[key()])
                .signed_by(signed(other_key(), |_| {})),
            Want::Stopped(S::Signature, Refused, "UntrustedKey"),
        ),
        (
            "strict: a tampered payload",
            Case::new().mode("strict", &[key()]).signed_by({
                let mut r = signed(key(), |_| {});
                r.payload = r.payload.replace("0.1.0", "0.1.1");
                r
            }),
            Want::Stopped(S::Signature, Refused, "InvalidSignature"),
        ),
        (
            "disabled: a signature for another digest is refused all the same",
            Case::new().signed_by(signed(key(), |p| {
                p.image.digest = format!("sha256:{}", sha256_hex(b"another image"));
            })),
            Want::Stopped(S::Signature, Refused, "SignatureDigestMismatch"),
        ),
        (
            "permissive: a signature for another plugin.json is refused",
            Case::new()
                .mode("permissive", &[key()])
                .signed_by(signed(key(), |p| p.plugin.plugin_json_sha256 = sha256_hex(b"x"))),
            Want::Stopped(S::Signature, Refused, "SignatureManifestMismatch"),
        ),
        (
            "permissive: unsigned is admitted with a warning",
            Case::new().mode("permissive", &[key()]),
            Want::Admitted {
                warned: Some("Unsigned"),
            },
        ),
        (
            "permissive: an untrusted key is admitted with a warning",
            Case::new()
                .mode("permissive", &[key()])
                .signed_by(signed(other_key(), |_| {})),
            Want::Admitted {
                warned: Some("UntrustedKey"),
            },
        ),
        (
            "a mode nobody knows acts as strict",
            Case::new().mode("stricct", &[key()]),
            Want::Stopped(S::Signature, Refused, "Unsigned"),
        ),
        (
            "the registry's signatures cannot be read",
            Case::new()
                .mode("strict", &[key()])
                .with(|c| c.signatures = SignatureFinding::Unavailable("503".into())),
            Want::Stopped(S::Signature, Pending, "RegistryUnavailable"),
        ),
        (
            "an approved capability the manifest does not declare",
            Case::new().with(|c| c.plugin.spec.approved_capabilities.push("files.read".into())),
            Want::Stopped(S::Capabilities, Refused, "CapabilityNotDeclared"),
        ),
        (
            "an unknown capability",
            Case::new().with(|c| c.plugin.spec.approved_capabilities.push("files.write".into())),
            Want::Stopped(S::Capabilities, Refused, "UnknownCapability"),
        ),
        (
            "a tool name another plugin registered first",
            Case::new().with(|c| {
                c.earlier = vec![Holder {
                    plugin: "other".into(),
                    tools: vec!["shout".into()],
                }];
                with_tools(c, "shout");
            }),
            Want::Stopped(S::Names, Refused, conflicts::TOOL_NAME_CONFLICT),
        ),
        (
            "a package name that is another plugin's tool",
            Case::new().with(|c| {
                c.earlier = vec![Holder {
                    plugin: "other".into(),
                    tools: vec!["echo".into(), "x".into()],
                }];
                // Its own tools are free, its name is not.
                with_tools(c, "y");
            }),
            Want::Stopped(S::Names, Refused, conflicts::PACKAGE_NAME_CONFLICT),
        ),
        (
            "a tool name with __",
            Case::new().with(|c| with_tools(c, "a__b")),
            Want::Stopped(S::Names, Refused, conflicts::TOOL_NAME_RESERVED),
        ),
    ];
    for (name, case, want) in rows {
        let outcome = case.run();
        assert_eq!(outcome.stages.len(), AdmissionStage::ALL.len(), "{name}");
        let order: Vec<AdmissionStage> = outcome.stages.iter().map(|s| s.stage).collect();
        assert_eq!(order, AdmissionStage::ALL, "{name}: stages in order");
        match want {
            Want::Admitted { warned } => {
                assert!(outcome.admitted(), "{name}: {:#?}", outcome.stopped_at());
                let warnings: Vec<&str> = outcome.warnings().map(|w| w.reason.as_str()).collect();
                assert_eq!(warnings, warned.into_iter().collect::<Vec<_>>(), "{name}");
                let image = outcome.image.as_ref().expect("image facts recorded");
                assert_eq!(image.run_as_user, 1000, "{name}");
                assert_eq!(outcome.tools.len(), 1, "{name}");
            }
            Want::Stopped(stage, state, reason) => {
                assert!(!outcome.admitted(), "{name}: admitted");
                let stopped = outcome.stopped_at().expect("a stage stopped it");
                assert_eq!(
                    (stopped.stage, stopped.state, stopped.reason.as_str()),
                    (stage, state, reason),
                    "{name}: {}",
                    stopped.message
                );
                assert!(!stopped.message.is_empty(), "{name}");
                // The first failure stops the rest.
                let after: Vec<StageState> = outcome
                    .stages
                    .iter()
                    .filter(|s| s.stage > stage)
                    .map(|s| s.state)
                    .collect();
                assert!(
                    after.iter().all(|s| *s == StageState::NotReached),
                    "{name}: {after:?}"
                );
                assert_eq!(outcome.pending(), state == Pending, "{name}");
            }
        }
    }
}

#[test]
fn messages_name_the_plugin_the_key_and_the_field() {
    let untrusted = Case::new()
        .mode("strict", &[key()])
        .signed_by(signed(other_key(), |_| {}))
        .run();
    let stopped = untrusted.stopped_at().unwrap();
    assert!(stopped.message.contains("\"echo\""), "{}", stopped.message);
    assert!(
        stopped.message.contains(&other_key().public_hex()),
        "{}",
        stopped.message
    );
    let unknown = Case::new().mode("stricct", &[key()]).run();
    assert!(
        unknown
            .stopped_at()
            .unwrap()
            .message
            .contains("\"stricct\""),
        "{}",
        unknown.stopped_at().unwrap().message
    );
    let mismatch = Case::new()
        .with(|c| {
            c.plugin
                .spec
                .manifest
                .rest
                .insert("name".into(), "Other".into());
        })
        .run();
    assert!(
        mismatch.stopped_at().unwrap().message.contains("at name"),
        "{}",
        mismatch.stopped_at().unwrap().message
    );
    let gate = Case::new()
        .with(|c| {
            c.plugin.spec.manifest.rest.insert(
                "gate".into(),
                serde_json::json!({ "files": [{ "paths": ["/data/**"], "operations": ["remove"], "decision": "deny" }] }),
            );
        })
        .run();
    assert!(
        gate.stopped_at()
            .unwrap()
            .message
            .contains("gate.files[0].operations[0]"),
        "{}",
        gate.stopped_at().unwrap().message
    );
}

#[test]
fn a_verified_signature_records_its_key() {
    let outcome = Case::new()
        .mode("strict", &[key()])
        .signed_by(signed(key(), |_| {}))
        .run();
    assert_eq!(
        outcome.image.unwrap().publisher_key,
        Some(key().public_hex())
    );
}

#[test]
fn admit_reads_the_status_admission_wrote() {
    use model::resources::{Condition, ConditionStatus, PluginStatus};
    let parsed = |p: &Plugin| manifest::from_value(&p.spec.manifest.to_json()).map(Arc::new);
    let admit = |h: &HostConfigSpec, p: &Plugin| admit(h, p, &parsed(p));
    let mut p = plugin();
    let h = host();
    assert!(admit(&h, &p).is_err(), "no status yet");
    let condition = |status, generation| Condition {
        r#type: model::resources::ADMITTED.into(),
        status,
        observed_generation: Some(generation),
        last_transition_time: "2026-01-01T00:00:00Z".into(),
        reason: "Admitted".into(),
        message: "ok".into(),
    };
    p.status = Some(PluginStatus {
        observed_generation: Some(1),
        digest: Some(image_digest()),
        stage: Some("Admitted".into()),
        conditions: vec![condition(ConditionStatus::True, 1)],
        ..Default::default()
    });
    assert_eq!(admit(&h, &p).unwrap().id, "echo");
    assert!(holder(&p).is_some());
    // A newer spec is not admitted until admission looked at it.
    p.metadata.generation = Some(2);
    assert!(admit(&h, &p).is_err());
    assert!(holder(&p).is_none());
    p.metadata.generation = Some(1);
    // Nor is another digest.
    p.spec.image = format!("{REPO}@sha256:{}", sha256_hex(b"other"));
    assert!(admit(&h, &p).is_err());
    p.spec.image = plugin().spec.image;
    let mut off = host();
    off.plugins.enabled = false;
    assert_eq!(
        admit(&off, &p).unwrap_err().stage,
        Some(AdmissionStage::Host)
    );
}

/// Whose names a plugin is judged against: the admitted plugins before it in package-name
/// order, whenever each was created, and not one being deleted.
#[test]
fn earlier_holders_are_the_admitted_plugins_before_it_by_name() {
    use model::resources::{Condition, ConditionStatus, PluginStatus, RegisteredTool};
    /// A Plugin `name`, created at `minute`, admitted holding `tools` (or not admitted).
    fn installed(name: &str, minute: u8, admitted: bool, tools: &[&str]) -> Plugin {
        let mut p = plugin();
        p.metadata.name = Some(name.into());
        let at = format!("2026-01-01T00:{minute:02}:00Z");
        p.metadata.creation_timestamp = serde_json::from_value(serde_json::json!(at)).unwrap();
        let status = if admitted {
            ConditionStatus::True
        } else {
            ConditionStatus::False
        };
        p.status = Some(PluginStatus {
            observed_generation: Some(1),
            digest: Some(image_digest()),
            stage: Some(if admitted { "Admitted" } else { "Names" }.into()),
            tools: tools
                .iter()
                .map(|t| RegisteredTool {
                    name: t.to_string(),
                    mcp_name: format!("plugin_{t}"),
                })
                .collect(),
            conditions: vec![Condition {
                r#type: model::resources::ADMITTED.into(),
                status,
                observed_generation: Some(1),
                last_transition_time: "2026-01-01T00:00:00Z".into(),
                reason: "Admitted".into(),
                message: "ok".into(),
            }],
            ..Default::default()
        });
        p
    }
    let mut going = installed("aa-going", 0, true, &["t"]);
    going.metadata.deletion_timestamp = going.metadata.creation_timestamp.clone();
    let world = [
        installed("mm", 0, true, &["t"]),
        // Created last, first by name: it comes first.
        installed("ab", 59, true, &["t", "u"]),
        installed("ac", 30, false, &["t"]),
        going,
        installed("zz", 1, true, &["t"]),
    ];
    let names = |me: &Plugin| -> Vec<String> {
        earlier_holders(me, &world)
            .into_iter()
            .map(|h| h.plugin)
            .collect()
    };
    let cases: [(&str, u8, &[&str]); 5] = [
        ("aa", 10, &[]),
        ("ab", 59, &[]),
        ("mm", 0, &["ab"]),
        ("nn", 0, &["ab", "mm"]),
        ("zz", 1, &["ab", "mm"]),
    ];
    for (name, minute, want) in cases {
        let me = installed(name, minute, false, &[]);
        assert_eq!(names(&me), want, "{name}");
    }
    // So the one later created holds the name: mm, created first, is refused naming ab.
    let mm = &world[0];
    let refusal =
        conflicts::register("mm", &["t".into()], &earlier_holders(mm, &world)).unwrap_err();
    assert_eq!(refusal.key, conflicts::TOOL_NAME_CONFLICT);
    assert!(
        refusal.message.contains("plugin \"ab\""),
        "{}",
        refusal.message
    );
}
