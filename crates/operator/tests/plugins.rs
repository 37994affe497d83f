//! The plugin verbs against a real registry (distribution's, on 127.0.0.1, through oci's
//! TestRegistry), with images written here: install by tag with the digest pinned, each
//! image check refusing a broken image and naming what is wrong, keygen and sign, and
//! admission's signature stage on what was pulled (strict, permissive, untrusted, tampered,
//! a signature for another digest). No cluster: install runs with --dry-run, and the stages
//! run with the HostConfig each test gives.

use std::collections::BTreeMap;
use std::time::Duration;

use admission::StageState;
use loop_plugins_operator::plugins::candidate::Approval;
use loop_plugins_operator::plugins::check;
use loop_plugins_operator::plugins::install::{self, Approvals};
use loop_plugins_operator::plugins::keys;
use loop_plugins_operator::plugins::registry::RegistryArgs;
use loop_plugins_operator::plugins::verify;
use model::resources::{AdmissionStage, HostConfigSpec, HostPlugins, SignatureMode};
use oci::build::{self, BuiltImage, ImageConfig, LayerBuilder, LayerCompression};
use oci::testing::{TestRegistry, TestRegistryOptions};
use oci::{Registry, RegistryOptions};

const UID: u32 = 1000;

fn plugin_json(id: &str, version: &str) -> String {
    format!(
        r#"{{
  // plugin.json is JSON5
  "id": "{id}", "name": "Echo", "version": "{version}", "api": "1",
  "capabilities": ["agent.readonly", "ui.composer_switch"],
  "agents": [{{ "id": "say", "read_only": true, "tools": ["echo"] }}],
  "tools": [{{ "name": "echo", "input_schema": {{ "type": "object" }} }}],
  "ui": {{ "composer_switches": [{{ "id": "mode", "label": "Mode", "icon": "ui/mode.svg" }}] }},
}}"#
    )
}

/// What an image is made of; each broken image changes one thing.
struct Spec {
    user: Option<String>,
    label: bool,
    plugin_json: Option<String>,
    data: bool,
    icon_bytes: usize,
    loop_plugin_padding: usize,
}

impl Spec {
    fn good() -> Spec {
        Spec {
            user: Some(format!("{UID}:{UID}")),
            label: true,
            plugin_json: Some(plugin_json("echo", "0.1.0")),
            data: true,
            icon_bytes: 900,
            loop_plugin_padding: 0,
        }
    }

    fn build(&self) -> BuiltImage {
        let mut labels = BTreeMap::new();
        if self.label {
            labels.insert("dev.loop.plugin".to_string(), "1".to_string());
        }
        let config = ImageConfig {
            entrypoint: vec!["/echo-plugin".into()],
            user: self.user.clone(),
            labels,
            ..ImageConfig::default()
        };
        let bin = LayerBuilder::new().file("echo-plugin", b"\x7fELF test", 0, 0, 0o755);
        let mut tree = LayerBuilder::new().dir("loop-plugin", 0, 0, 0o755);
        if let Some(json) = &self.plugin_json {
            tree = tree.file("loop-plugin/plugin.json", json.as_bytes(), 0, 0, 0o644);
        }
        tree = tree.file(
            "loop-plugin/ui/mode.svg",
            &vec![b' '; self.icon_bytes],
            0,
            0,
            0o644,
        );
        if self.loop_plugin_padding > 0 {
            tree = tree.file(
                "loop-plugin/ui/big.bin",
                &vec![0u8; self.loop_plugin_padding],
                0,
                0,
                0o644,
            );
        }
        if self.data {
            tree = tree.dir("data", UID, UID, 0o755);
        }
        build::build_image(
            &config,
            vec![
                bin.build(LayerCompression::Gzip).unwrap(),
                tree.build(LayerCompression::Gzip).unwrap(),
            ],
        )
    }
}

fn start() -> TestRegistry {
    TestRegistry::start(TestRegistryOptions::default()).expect("start the test registry")
}

fn client() -> Registry {
    Registry::new(RegistryOptions::default()).unwrap()
}

async fn push(registry: &TestRegistry, repo_tag: &str, spec: &Spec) -> (String, BuiltImage) {
    let image = spec.build();
    let r = registry.reference(repo_tag).unwrap();
    let digest = client().push_image(&r, &image).await.unwrap();
    assert_eq!(digest, image.manifest_digest);
    (r.to_string(), image)
}

fn args() -> RegistryArgs {
    RegistryArgs {
        config: None,
        insecure: vec![],
        namespace: "loop-plugins".into(),
    }
}

async fn dry_run(reference: &str, approval: Approval) -> Result<install::InstallReport, String> {
    install::install(
        None,
        &args(),
        reference,
        Approvals::Given(approval),
        true,
        Duration::ZERO,
    )
    .await
    .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_by_tag_pins_the_digest_and_takes_what_the_image_says() {
    let registry = start();
    let (reference, image) = push(&registry, "plugins/echo:0.1.0", &Spec::good()).await;
    let report = dry_run(&reference, Approval::Each(vec!["agent.readonly".into()]))
        .await
        .unwrap();
    let p = &report.plugin;
    assert_eq!(
        p.spec.image,
        format!("{reference}@{}", image.manifest_digest),
        "the tag is kept and the digest pinned"
    );
    assert_eq!(p.spec.command, ["/echo-plugin"]);
    assert_eq!(p.spec.manifest.id, "echo");
    assert_eq!(p.spec.approved_capabilities, ["agent.readonly"]);
    assert!(p.spec.signature.is_none(), "nothing was signed");
    assert!(!report.applied);
    // Each capability listed with what it allows, approved or not.
    let lines: Vec<(&str, bool)> = report
        .capabilities
        .iter()
        .map(|l| (l.capability.as_str(), l.approved))
        .collect();
    assert_eq!(
        lines,
        [("agent.readonly", true), ("ui.composer_switch", false)]
    );
    assert!(report.capabilities.iter().all(|l| !l.allows.is_empty()));
    // Admission's stages ran on it here.
    assert!(
        report.checked.admitted(),
        "{:?}",
        report.checked.stopped_at()
    );
    let image_stage = &report.checked.stages[2];
    assert_eq!(image_stage.stage, AdmissionStage::Image);
    assert!(
        image_stage.message.contains(&format!("USER {UID}:{UID}")),
        "{}",
        image_stage.message
    );

    let Err(err) = dry_run(&reference, Approval::Each(vec!["files.read".into()])).await else {
        panic!("approving what the manifest does not declare");
    };
    assert!(
        err.contains("files.read") && err.contains("does not declare"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_broken_image_is_refused_naming_what_is_wrong() {
    let registry = start();
    let cases: Vec<(&str, Spec, &[&str])> = vec![
        (
            "root",
            Spec {
                user: Some("0:0".into()),
                ..Spec::good()
            },
            &["USER", "root"],
        ),
        (
            "no-user",
            Spec {
                user: None,
                ..Spec::good()
            },
            &["no USER"],
        ),
        (
            "named-user",
            Spec {
                user: Some("app".into()),
                ..Spec::good()
            },
            &["numeric"],
        ),
        (
            "no-label",
            Spec {
                label: false,
                ..Spec::good()
            },
            &["dev.loop.plugin"],
        ),
        (
            "no-data",
            Spec {
                data: false,
                ..Spec::good()
            },
            &["/data"],
        ),
        (
            "no-plugin-json",
            Spec {
                plugin_json: None,
                ..Spec::good()
            },
            &["plugin.json"],
        ),
        (
            "invalid-plugin-json",
            Spec {
                plugin_json: Some(
                    plugin_json("echo", "0.1.0").replace("\"api\": \"1\"", "\"api\": \"2\""),
                ),
                ..Spec::good()
            },
            &["api"],
        ),
        (
            "broken-json5",
            Spec {
                plugin_json: Some("{ \"id\": ".into()),
                ..Spec::good()
            },
            &["line"],
        ),
        (
            // Issue 39's reproduction: 40 KB of `[`, which aborted `plugin install` with a
            // stack overflow.
            "nested-20000-deep",
            Spec {
                plugin_json: Some(format!(
                    r#"{{"id": "acc-deep", "version": "1.0.0", "name": "d", "api": "1", "x": {}{}}}"#,
                    "[".repeat(20_000),
                    "]".repeat(20_000)
                )),
                ..Spec::good()
            },
            &["line 1", "deeper than 64 levels"],
        ),
        (
            "big-icon",
            Spec {
                icon_bytes: 16 * 1024 + 1,
                ..Spec::good()
            },
            &["ui.composer_switches[0].icon", "16385 bytes"],
        ),
        (
            "big-bundle",
            Spec {
                loop_plugin_padding: 50 * 1024 * 1024 + 1,
                ..Spec::good()
            },
            &["/loop-plugin", "52428800"],
        ),
    ];
    for (name, spec, words) in cases {
        let (reference, _) = push(&registry, &format!("broken/{name}:1"), &spec).await;
        let err = match dry_run(&reference, Approval::All).await {
            Ok(_) => panic!("{name}: installed"),
            Err(e) => e,
        };
        for word in words {
            assert!(err.contains(word), "{name}: {err:?} should name {word:?}");
        }
    }
}

async fn plugin(reference: &str) -> model::resources::Plugin {
    match dry_run(reference, Approval::All).await {
        Ok(report) => report.plugin,
        Err(e) => panic!("{reference}: {e}"),
    }
}

fn host(mode: &str, trusted: &[&String]) -> HostConfigSpec {
    HostConfigSpec {
        plugins: HostPlugins {
            enabled: true,
            signature_mode: SignatureMode::parse(mode),
            trusted_publisher_keys: trusted.iter().map(|k| k.to_string()).collect(),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signatures_are_bound_to_the_image_and_judged_by_the_policy() {
    let registry = start();
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("publisher.pem");
    let public = keys::keygen(&key_file).unwrap();
    assert_eq!(public.len(), 64);
    assert!(
        keys::keygen(&key_file).is_err(),
        "keygen never overwrites a key"
    );
    let other_file = dir.path().join("other.pem");
    let other = keys::keygen(&other_file).unwrap();

    let (signed_ref, signed_image) = push(&registry, "plugins/echo:signed", &Spec::good()).await;
    let (unsigned_ref, _) = push(
        &registry,
        "plugins/echo:unsigned",
        &Spec {
            plugin_json: Some(plugin_json("echo", "0.1.1")),
            ..Spec::good()
        },
    )
    .await;
    let signed = keys::sign(&args(), &key_file, &signed_ref).await.unwrap();
    assert_eq!(
        signed.image,
        format!("{signed_ref}@{}", signed_image.manifest_digest)
    );
    assert!(signed.at.ends_with(".sig"), "{}", signed.at);
    assert_eq!(signed.record.public_key, public);

    let pulled = check::pull(&client(), &signed_ref).await.unwrap();
    assert_eq!(pulled.signatures.len(), 1, "published next to the image");
    let signed_plugin = plugin(&signed_ref).await;
    assert_eq!(
        signed_plugin.spec.signature.as_ref().unwrap().public_key,
        public,
        "install copies the signature into spec.signature"
    );
    let unsigned_pulled = check::pull(&client(), &unsigned_ref).await.unwrap();
    let unsigned_plugin = plugin(&unsigned_ref).await;

    let stage = |h: &HostConfigSpec, p: &model::resources::Plugin, pulled: &check::Pulled| {
        let outcome = check::evaluate(h, p, pulled, &[], true);
        let s = outcome
            .stages
            .iter()
            .find(|s| s.stage == AdmissionStage::Signature)
            .unwrap()
            .clone();
        (s.state, s.reason, s.message)
    };
    // strict, trusted key: admitted.
    let (state, reason, _) = stage(&host("strict", &[&public]), &signed_plugin, &pulled);
    assert_eq!(
        (state, reason.as_str()),
        (StageState::Passed, "SignatureVerified")
    );
    // strict, unsigned.
    let (state, reason, message) = stage(
        &host("strict", &[&public]),
        &unsigned_plugin,
        &unsigned_pulled,
    );
    assert_eq!((state, reason.as_str()), (StageState::Refused, "Unsigned"));
    assert!(message.contains("\"echo\""), "{message}");
    // strict, a key not trusted: named.
    let (state, reason, message) = stage(&host("strict", &[&other]), &signed_plugin, &pulled);
    assert_eq!(
        (state, reason.as_str()),
        (StageState::Refused, "UntrustedKey")
    );
    assert!(message.contains(&public), "{message}");
    // permissive: unsigned warns.
    let (state, reason, _) = stage(
        &host("permissive", &[&public]),
        &unsigned_plugin,
        &unsigned_pulled,
    );
    assert_eq!((state, reason.as_str()), (StageState::Warned, "Unsigned"));
    // A tampered payload.
    let mut tampered = signed_plugin.clone();
    let s = tampered.spec.signature.as_mut().unwrap();
    s.payload = s.payload.replace("0.1.0", "0.9.0");
    let (state, reason, _) = stage(&host("strict", &[&public]), &tampered, &pulled);
    assert_eq!(
        (state, reason.as_str()),
        (StageState::Refused, "InvalidSignature")
    );
    // A signature for another digest, in every mode.
    let mut moved = unsigned_plugin.clone();
    moved.spec.signature = signed_plugin.spec.signature.clone();
    for mode in ["disabled", "permissive", "strict"] {
        let (state, reason, message) = stage(&host(mode, &[&public]), &moved, &unsigned_pulled);
        assert_eq!(
            (state, reason.as_str()),
            (StageState::Refused, "SignatureDigestMismatch"),
            "{mode}: {message}"
        );
    }
    // An unknown mode acts as strict, and says so.
    let (state, _, message) = stage(&host("strictest", &[]), &unsigned_plugin, &unsigned_pulled);
    assert_eq!(state, StageState::Refused);
    assert!(message.contains("strictest"), "{message}");

    // verify REF runs the same stages (no cluster: HostConfig's defaults, disabled).
    let verified = verify::verify(None, &args(), &signed_ref).await.unwrap();
    assert!(!verified.installed && !verified.cluster_policy);
    assert!(
        verified.outcome.admitted(),
        "{:?}",
        verified.outcome.stopped_at()
    );
}
