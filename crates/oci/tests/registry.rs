//! Against a real registry (distribution's, from hack/registry/build.sh) on 127.0.0.1: images
//! written here, pushed, pulled and checked; signatures published and fetched; basic auth
//! through a dockerconfigjson.

use std::collections::BTreeMap;

use loop_plugins_oci::build::{
    self, BuiltImage, ImageConfig, LayerBuilder, LayerCompression, PluginImageSpec,
};
use loop_plugins_oci::registry::Endpoint;
use loop_plugins_oci::signing::keys::PublisherKey;
use loop_plugins_oci::signing::policy::{self, Finding, SignatureMode, Subject, Verdict};
use loop_plugins_oci::signing::publish;
use loop_plugins_oci::testing::{TestAuth, TestRegistry, TestRegistryOptions};
use loop_plugins_oci::{
    Digest, DockerConfig, ImageFacts, ImageRef, InspectError, Limits, Registry, RegistryOptions,
    inspect,
};

const UID: u32 = 1000;
const PLUGIN_JSON: &[u8] =
    br#"{ "id": "echo", "name": "Echo", "version": "0.1.0", "api": "1", "capabilities": ["files.read"], }"#;

fn start() -> TestRegistry {
    TestRegistry::start(TestRegistryOptions::default()).expect("start the test registry")
}

fn client() -> Registry {
    Registry::new(RegistryOptions::default()).unwrap()
}

fn good_config() -> ImageConfig {
    ImageConfig {
        entrypoint: vec!["/echo-plugin".into()],
        cmd: vec!["--port-env".into(), "LOOP_PLUGIN_PORT".into()],
        user: Some(format!("{UID}:{UID}")),
        labels: BTreeMap::from([("dev.loop.plugin".to_string(), "1".to_string())]),
        ..ImageConfig::default()
    }
}

fn base_layer() -> LayerBuilder {
    LayerBuilder::new().file("echo-plugin", b"\x7fELF not really", 0, 0, 0o755)
}

fn plugin_layer() -> LayerBuilder {
    LayerBuilder::new()
        .dir("loop-plugin", 0, 0, 0o755)
        .file("loop-plugin/plugin.json", PLUGIN_JSON, 0, 0, 0o644)
        .file(
            "loop-plugin/ui/main/index.html",
            b"<p>echo</p>",
            0,
            0,
            0o644,
        )
        .dir("data", UID, UID, 0o755)
}

fn image(config: &ImageConfig, layers: &[LayerBuilder]) -> BuiltImage {
    let built = layers
        .iter()
        .map(|l| l.build(LayerCompression::Gzip).unwrap())
        .collect();
    build::build_image(config, built)
}

async fn push(registry: &TestRegistry, tag: &str, image: &BuiltImage) -> ImageRef {
    let r = registry.reference(&format!("plugins/echo:{tag}")).unwrap();
    let digest = client().push_image(&r, image).await.unwrap();
    assert_eq!(digest, image.manifest_digest);
    r
}

async fn facts(r: &ImageRef) -> Result<ImageFacts, InspectError> {
    inspect(&client(), r).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_facts_by_tag_with_the_digest_pinned() {
    let registry = start();
    let img = image(&good_config(), &[base_layer(), plugin_layer()]);
    let r = push(&registry, "v1", &img).await;
    let f = facts(&r).await.unwrap();
    assert_eq!(f.manifest_digest, img.manifest_digest);
    assert_eq!(f.index_digest, None);
    assert_eq!(
        f.pinned.to_string(),
        format!(
            "{}/plugins/echo:v1@{}",
            registry.host(),
            img.manifest_digest
        )
    );
    assert_eq!(
        f.command(),
        ["/echo-plugin", "--port-env", "LOOP_PLUGIN_PORT"]
    );
    assert_eq!(f.config.run_as.to_string(), format!("{UID}:{UID}"));
    assert_eq!(
        f.config.labels.get("dev.loop.plugin").map(String::as_str),
        Some("1")
    );
    assert_eq!(f.tree.plugin_json.as_slice(), PLUGIN_JSON);
    assert_eq!(f.tree.plugin_json_sha256, Digest::of(PLUGIN_JSON).hex());
    assert!(f.tree.loop_plugin.contains_key("ui/main/index.html"));
    assert_eq!(f.tree.data.uid, UID);
    assert_eq!(f.repository(), format!("{}/plugins/echo", registry.host()));

    // By digest, the same image.
    let again = facts(&f.pinned).await.unwrap();
    assert_eq!(again.manifest_digest, f.manifest_digest);
    // A moved tag does not move a pinned reference.
    let other = image(
        &good_config(),
        &[
            base_layer(),
            plugin_layer().file("loop-plugin/extra", b"x", 0, 0, 0o644),
        ],
    );
    push(&registry, "v1", &other).await;
    assert_eq!(
        facts(&r).await.unwrap().manifest_digest,
        other.manifest_digest
    );
    assert_eq!(
        facts(&f.pinned).await.unwrap().manifest_digest,
        img.manifest_digest
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_index_resolves_to_its_linux_amd64_child() {
    let registry = start();
    let amd64 = image(&good_config(), &[base_layer(), plugin_layer()]);
    let arm64 = image(
        &ImageConfig {
            architecture: "arm64".into(),
            ..good_config()
        },
        &[base_layer().file("arm", b"", 0, 0, 0o644), plugin_layer()],
    );
    let r = registry.reference("plugins/echo:multi").unwrap();
    let index_digest = client()
        .push_index(
            &r,
            &[(&arm64, "linux", "arm64"), (&amd64, "linux", "amd64")],
        )
        .await
        .unwrap();
    let f = facts(&r).await.unwrap();
    assert_eq!(f.manifest_digest, amd64.manifest_digest);
    assert_eq!(f.index_digest, Some(index_digest));
    assert_eq!(f.pinned.digest(), Some(&amd64.manifest_digest));

    let only_arm = registry.reference("plugins/echo:arm").unwrap();
    client()
        .push_index(&only_arm, &[(&arm64, "linux", "arm64")])
        .await
        .unwrap();
    let err = facts(&only_arm).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("no linux/amd64 image (it has: linux/arm64)"),
        "{err}"
    );
}

/// A broken image, what its refusal's reason is, and what its message must say.
struct Broken {
    tag: &'static str,
    config: ImageConfig,
    layers: Vec<LayerBuilder>,
    reason: &'static str,
    says: &'static str,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_check_refuses_a_broken_image_naming_what_is_wrong() {
    let registry = start();
    let good = || vec![base_layer(), plugin_layer()];
    let no_label = ImageConfig {
        labels: BTreeMap::new(),
        ..good_config()
    };
    let cases = vec![
        Broken {
            tag: "root",
            config: ImageConfig {
                user: Some("0".into()),
                ..good_config()
            },
            layers: good(),
            reason: "ImageUserRoot",
            says: "USER \"0\" is root",
        },
        Broken {
            tag: "nouser",
            config: ImageConfig {
                user: None,
                ..good_config()
            },
            layers: good(),
            reason: "ImageUserRoot",
            says: "no USER",
        },
        Broken {
            tag: "named",
            config: ImageConfig {
                user: Some("app".into()),
                ..good_config()
            },
            layers: good(),
            reason: "ImageUserNotNumeric",
            says: "USER \"app\" is a name",
        },
        Broken {
            tag: "nolabel",
            config: no_label,
            layers: good(),
            reason: "ImageLabelMissing",
            says: "no label dev.loop.plugin",
        },
        Broken {
            tag: "big",
            config: good_config(),
            layers: vec![
                base_layer(),
                plugin_layer().file(
                    "loop-plugin/ui/blob.bin",
                    &vec![0; 50 * 1024 * 1024 + 1],
                    0,
                    0,
                    0o644,
                ),
            ],
            reason: "ImageLoopPluginTooBig",
            says: "over the 52428800-byte cap",
        },
        Broken {
            tag: "nodata",
            config: good_config(),
            layers: vec![
                base_layer(),
                LayerBuilder::new().file("loop-plugin/plugin.json", PLUGIN_JSON, 0, 0, 0o644),
            ],
            reason: "ImageDataMissing",
            says: "no /data",
        },
        Broken {
            tag: "dataowner",
            config: good_config(),
            layers: vec![base_layer(), plugin_layer().dir("data", 1001, 1001, 0o755)],
            reason: "ImageDataOwner",
            says: "/data is owned by 1001:1001, not by the image's USER 1000:1000",
        },
        Broken {
            tag: "nopluginjson",
            config: good_config(),
            layers: vec![
                base_layer(),
                LayerBuilder::new()
                    .dir("loop-plugin/ui", 0, 0, 0o755)
                    .dir("data", UID, UID, 0o755),
            ],
            reason: "ImagePluginJsonMissing",
            says: "no /loop-plugin/plugin.json",
        },
        Broken {
            tag: "whiteout",
            config: good_config(),
            layers: vec![
                base_layer(),
                plugin_layer(),
                LayerBuilder::new().whiteout("loop-plugin/plugin.json"),
            ],
            reason: "ImagePluginJsonMissing",
            says: "no /loop-plugin/plugin.json",
        },
        Broken {
            tag: "dotdot",
            config: good_config(),
            layers: vec![
                base_layer(),
                plugin_layer().raw_file("loop-plugin/../../etc/cron.d/x", b"* * * * * root sh"),
            ],
            reason: "ImageLayerInvalid",
            says: "entry \"loop-plugin/../../etc/cron.d/x\" has a '..' component",
        },
        Broken {
            tag: "absolute",
            config: good_config(),
            layers: vec![base_layer(), plugin_layer().raw_file("/etc/passwd", b"x")],
            reason: "ImageLayerInvalid",
            says: "entry \"/etc/passwd\" has an absolute path",
        },
        Broken {
            tag: "escape",
            config: good_config(),
            layers: vec![
                base_layer(),
                plugin_layer().symlink("loop-plugin/ui/up", "../../../../etc"),
            ],
            reason: "ImageLayerInvalid",
            says: "points outside the image",
        },
    ];
    for case in cases {
        let img = image(&case.config, &case.layers);
        let r = push(&registry, case.tag, &img).await;
        let err = facts(&r).await.expect_err(case.tag);
        assert_eq!(err.reason(), case.reason, "{}: {err}", case.tag);
        assert!(
            err.to_string().contains(case.says),
            "{}: {err:?} should say {:?}",
            case.tag,
            case.says
        );
        assert!(
            err.to_string().contains(&r.to_string()),
            "{}: names the reference: {err}",
            case.tag
        );
        assert!(!err.is_transient(), "{}", case.tag);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn whiteouts_and_opaque_dirs_are_applied() {
    let registry = start();
    let lower = plugin_layer()
        .file("loop-plugin/ui/old.html", b"old", 0, 0, 0o644)
        .file("loop-plugin/notes.txt", b"n", 0, 0, 0o644);
    let upper = LayerBuilder::new()
        .opaque("loop-plugin/ui")
        .file("loop-plugin/ui/main/index.html", b"<p>new</p>", 0, 0, 0o644)
        .whiteout("loop-plugin/notes.txt");
    let img = image(&good_config(), &[base_layer(), lower, upper]);
    let f = facts(&push(&registry, "layered", &img).await)
        .await
        .unwrap();
    let paths: Vec<&str> = f.tree.loop_plugin.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        ["plugin.json", "ui", "ui/main", "ui/main/index.html"]
    );
    match &f.tree.loop_plugin["ui/main/index.html"] {
        loop_plugins_oci::PluginEntry::File { bytes, .. } => {
            assert_eq!(bytes.as_slice(), b"<p>new</p>")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blob_whose_bytes_do_not_match_its_digest_is_refused() {
    let registry = start();
    let img = image(&good_config(), &[base_layer(), plugin_layer()]);
    let r = push(&registry, "v1", &img).await;
    let layer = &img.layers[1].blob;
    let path = registry.blob_path(&layer.digest);
    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff; // same length, other content
    std::fs::write(&path, bytes).unwrap();
    let err = facts(&r).await.unwrap_err();
    assert_eq!(err.reason(), "ImageDigestMismatch", "{err}");
    assert!(err.to_string().contains(&layer.digest.to_string()), "{err}");

    // The config blob too.
    let r2 = push(
        &registry,
        "v2",
        &image(
            &ImageConfig {
                cmd: vec!["x".into()],
                ..good_config()
            },
            &[base_layer(), plugin_layer()],
        ),
    )
    .await;
    let resolved = client().resolve(&r2).await.unwrap();
    let config_digest = Digest::parse(resolved.manifest.config().digest().as_ref()).unwrap();
    let path = registry.blob_path(&config_digest);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[0] = b' ';
    std::fs::write(&path, bytes).unwrap();
    let err = facts(&r2).await.unwrap_err();
    assert_eq!(err.reason(), "ImageDigestMismatch", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_on_manifests_and_configs() {
    let registry = start();
    let r = push(
        &registry,
        "v1",
        &image(&good_config(), &[base_layer(), plugin_layer()]),
    )
    .await;
    let tight = |limits: Limits| {
        Registry::new(RegistryOptions {
            limits,
            ..RegistryOptions::default()
        })
        .unwrap()
    };
    let err = inspect(
        &tight(Limits {
            manifest_bytes: 100,
            ..Limits::default()
        }),
        &r,
    )
    .await
    .unwrap_err();
    assert_eq!(err.reason(), "ImageTooBig", "{err}");
    assert!(err.to_string().contains("over the 100-byte cap"), "{err}");
    let err = inspect(
        &tight(Limits {
            config_bytes: 50,
            ..Limits::default()
        }),
        &r,
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("config is"), "{err}");
    let err = inspect(
        &tight(Limits {
            decompressed_bytes: 4096,
            ..Limits::default()
        }),
        &r,
    )
    .await
    .unwrap_err();
    assert_eq!(err.reason(), "ImageTooBig", "{err}");
    let missing = registry.reference("plugins/echo:nope").unwrap();
    let err = facts(&missing).await.unwrap_err();
    assert_eq!(err.reason(), "ImageNotFound", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_registry_is_transient() {
    let gone = {
        let registry = start();
        registry.reference("plugins/echo:v1").unwrap()
    };
    let err = facts(&gone).await.unwrap_err();
    assert!(err.is_transient(), "{err}");
    assert_eq!(err.reason(), "RegistryUnavailable");
}

fn subject(f: &ImageFacts) -> Subject {
    Subject {
        plugin: "echo".into(),
        version: "0.1.0".into(),
        repository: f.repository(),
        manifest_digest: f.manifest_digest.clone(),
        plugin_json_sha256: f.tree.plugin_json_sha256.clone(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signatures_are_published_next_to_the_image_and_bound_to_it() {
    let registry = start();
    let c = client();
    let img = image(&good_config(), &[base_layer(), plugin_layer()]);
    let r = push(&registry, "v1", &img).await;
    let f = facts(&r).await.unwrap();
    assert!(
        publish::fetch_signatures(&c, &r, &f.manifest_digest)
            .await
            .unwrap()
            .is_empty(),
        "unsigned at first"
    );

    let alice = PublisherKey::generate().unwrap();
    let bob = PublisherKey::generate().unwrap();
    let signed = publish::sign_image(&c, &alice, &f, "echo", "0.1.0")
        .await
        .unwrap();
    publish::sign_image(&c, &bob, &f, "echo", "0.1.0")
        .await
        .unwrap();
    // Signing again with the same key replaces its signature, not adds one.
    publish::sign_image(&c, &alice, &f, "echo", "0.1.0")
        .await
        .unwrap();
    let found = publish::fetch_signatures(&c, &r, &f.manifest_digest)
        .await
        .unwrap();
    assert_eq!(found.len(), 2);
    assert!(
        found.contains(&signed),
        "Ed25519 is deterministic: the same payload gives the same record"
    );
    let sig_ref = publish::signature_ref(&r, &f.manifest_digest);
    assert_eq!(
        sig_ref.tag(),
        Some(format!("sha256-{}.sig", f.manifest_digest.hex()).as_str())
    );

    let trusted = vec![alice.public_hex()];
    let pick = policy::pick(&found, &trusted);
    let strict = policy::decide(&SignatureMode::Strict, &trusted, pick, &subject(&f));
    assert_eq!(
        (strict.verdict, strict.finding),
        (Verdict::Admit, Finding::Verified),
        "{}",
        strict.message
    );
    let untrusted = policy::decide(
        &SignatureMode::Strict,
        &[bob.public_hex()],
        Some(&signed),
        &subject(&f),
    );
    assert_eq!(untrusted.finding, Finding::UntrustedKey);

    // A new image under the same tag: alice's signature is for the old digest.
    let v2 = image(
        &good_config(),
        &[
            base_layer(),
            plugin_layer().file("loop-plugin/ui/more.html", b"m", 0, 0, 0o644),
        ],
    );
    push(&registry, "v1", &v2).await;
    let f2 = facts(&r).await.unwrap();
    assert!(
        publish::fetch_signatures(&c, &r, &f2.manifest_digest)
            .await
            .unwrap()
            .is_empty()
    );
    for mode in ["disabled", "permissive", "strict"] {
        let d = policy::decide(
            &SignatureMode::parse(mode),
            &trusted,
            Some(&signed),
            &subject(&f2),
        );
        assert_eq!(
            (d.verdict, d.finding),
            (Verdict::Refuse, Finding::DigestMismatch),
            "{mode}: {}",
            d.message
        );
        assert!(
            d.message.contains(&f2.manifest_digest.to_string())
                && d.message.contains(&alice.public_hex()),
            "{}",
            d.message
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn basic_auth_through_a_dockerconfigjson() {
    let auth = TestAuth::Basic {
        username: "alice".into(),
        password: "s3cret".into(),
    };
    let registry = TestRegistry::start(TestRegistryOptions {
        auth,
        ..Default::default()
    })
    .unwrap();
    let r = registry.reference("plugins/echo:v1").unwrap();
    let img = image(&good_config(), &[base_layer(), plugin_layer()]);

    let anonymous = client();
    let err = anonymous.push_image(&r, &img).await.unwrap_err();
    assert_eq!(err.reason(), "RegistryUnauthorized", "{err}");

    let credentials = DockerConfig::parse(&registry.docker_config_json()).unwrap();
    let authed = Registry::new(RegistryOptions {
        credentials,
        ..RegistryOptions::default()
    })
    .unwrap();
    authed.push_image(&r, &img).await.unwrap();
    let f = inspect(&authed, &r).await.unwrap();
    assert_eq!(f.manifest_digest, img.manifest_digest);
    let key = PublisherKey::generate().unwrap();
    publish::sign_image(&authed, &key, &f, "echo", "0.1.0")
        .await
        .unwrap();
    assert_eq!(
        publish::fetch_signatures(&authed, &r, &f.manifest_digest)
            .await
            .unwrap()
            .len(),
        1
    );

    let err = inspect(&anonymous, &r).await.unwrap_err();
    assert_eq!(err.reason(), "RegistryUnauthorized", "{err}");
    let wrong =
        serde_json::json!({"auths": {registry.host(): {"username": "alice", "password": "wrong"}}})
            .to_string();
    let wrong = Registry::new(RegistryOptions {
        credentials: DockerConfig::parse(wrong.as_bytes()).unwrap(),
        ..RegistryOptions::default()
    })
    .unwrap();
    let err = inspect(&wrong, &r).await.unwrap_err();
    assert_eq!(err.reason(), "RegistryUnauthorized", "{err}");
    assert!(!err.is_transient());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_image_from_host_files_passes_the_checks() {
    let registry = start();
    let plugin_dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/echo-plugin");
    // The layout is the echo plugin's (its plugin.json and ui/); a small executable stands in
    // for its binary here (/bin/true: gzip in a debug build is slow on a big one).
    let staged = tempfile::tempdir().unwrap();
    std::fs::copy(
        plugin_dir.join("plugin.json"),
        staged.path().join("plugin.json"),
    )
    .unwrap();
    copy_tree(&plugin_dir.join("ui"), &staged.path().join("ui"));
    let spec = PluginImageSpec {
        binary: "/bin/true".into(),
        binary_name: "echo-plugin".into(),
        plugin_dir: staged.path().to_path_buf(),
        uid: 65532,
        gid: 65532,
        labels: BTreeMap::from([(
            "org.opencontainers.image.title".to_string(),
            "echo-plugin".to_string(),
        )]),
        env: vec![],
    };
    let img = spec.build().unwrap();
    assert_eq!(
        spec.build().unwrap().manifest_digest,
        img.manifest_digest,
        "deterministic"
    );
    let r = registry.reference("plugins/echo:dev").unwrap();
    client().push_image(&r, &img).await.unwrap();
    let f = facts(&r).await.unwrap();
    assert_eq!(f.manifest_digest, img.manifest_digest);
    assert_eq!(f.command(), ["/echo-plugin"]);
    assert_eq!(f.config.run_as.uid, 65532);
    assert_eq!(
        f.tree.plugin_json.as_slice(),
        std::fs::read(plugin_dir.join("plugin.json")).unwrap()
    );
    assert!(f.tree.loop_plugin.contains_key("ui/mode.svg"));
    assert!(
        f.tree.loop_plugin.contains_key("ui/main/index.html"),
        "a panel's page, a folder below ui/"
    );
}

/// Copies the folder `from` to `to`, its subfolders too (a panel's page is a folder of `ui/`).
fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_auth_through_a_dockerconfigjson() {
    let auth = TestAuth::Token {
        username: "alice".into(),
        password: "s3cret".into(),
    };
    let registry = TestRegistry::start(TestRegistryOptions {
        auth,
        ..Default::default()
    })
    .unwrap();
    let r = registry.reference("plugins/echo:v1").unwrap();
    let img = image(&good_config(), &[base_layer(), plugin_layer()]);

    // Basic credentials from the dockerconfigjson are traded for a bearer token (push, then pull).
    let credentials = DockerConfig::parse(&registry.docker_config_json()).unwrap();
    let authed = Registry::new(RegistryOptions {
        credentials,
        ..RegistryOptions::default()
    })
    .unwrap();
    authed.push_image(&r, &img).await.unwrap();
    assert_eq!(
        inspect(&authed, &r).await.unwrap().manifest_digest,
        img.manifest_digest
    );

    let err = inspect(&client(), &r).await.unwrap_err();
    assert_eq!(err.reason(), "RegistryUnauthorized", "{err}");
    let wrong =
        serde_json::json!({"auths": {registry.host(): {"username": "alice", "password": "wrong"}}})
            .to_string();
    let wrong = Registry::new(RegistryOptions {
        credentials: DockerConfig::parse(wrong.as_bytes()).unwrap(),
        ..RegistryOptions::default()
    })
    .unwrap();
    let err = inspect(&wrong, &r).await.unwrap_err();
    assert_eq!(err.reason(), "RegistryUnauthorized", "{err}");

    // A dockerconfigjson `registrytoken` is used as the bearer token as is: pull works, push does not.
    let token = registry
        .mint_token(&["repository:plugins/echo:pull"])
        .unwrap();
    let bearer =
        serde_json::json!({"auths": {registry.host(): {"registrytoken": token}}}).to_string();
    let bearer = Registry::new(RegistryOptions {
        credentials: DockerConfig::parse(bearer.as_bytes()).unwrap(),
        ..RegistryOptions::default()
    })
    .unwrap();
    assert_eq!(
        inspect(&bearer, &r).await.unwrap().manifest_digest,
        img.manifest_digest
    );
    let other = registry.reference("plugins/other:v1").unwrap();
    let err = bearer.push_image(&other, &img).await.unwrap_err();
    assert_eq!(err.reason(), "RegistryUnauthorized", "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_a_private_ca_and_an_endpoint_under_another_name() {
    let registry = TestRegistry::start(TestRegistryOptions {
        tls: true,
        ..Default::default()
    })
    .unwrap();
    // As in kind: references name the registry one way, this process reaches it another.
    let r = ImageRef::parse("registry.test:5000/plugins/echo:v1").unwrap();
    let endpoint = Endpoint {
        host: registry.host(),
        plain_http: false,
    };
    let endpoints = BTreeMap::from([("registry.test:5000".to_string(), endpoint)]);
    let trusted = Registry::new(RegistryOptions {
        endpoints: endpoints.clone(),
        ca_certificates: vec![registry.ca_pem().unwrap().to_vec()],
        ..RegistryOptions::default()
    })
    .unwrap();
    let img = image(&good_config(), &[base_layer(), plugin_layer()]);
    trusted.push_image(&r, &img).await.unwrap();
    let f = inspect(&trusted, &r).await.unwrap();
    assert_eq!(
        f.pinned.to_string(),
        format!("registry.test:5000/plugins/echo:v1@{}", img.manifest_digest)
    );
    assert_eq!(f.repository(), "registry.test:5000/plugins/echo");
    let key = PublisherKey::generate().unwrap();
    publish::sign_image(&trusted, &key, &f, "echo", "0.1.0")
        .await
        .unwrap();
    assert_eq!(
        publish::fetch_signatures(&trusted, &r, &f.manifest_digest)
            .await
            .unwrap()
            .len(),
        1
    );

    let untrusted = Registry::new(RegistryOptions {
        endpoints,
        ..RegistryOptions::default()
    })
    .unwrap();
    let err = inspect(&untrusted, &r).await.unwrap_err();
    assert!(
        err.to_string().to_lowercase().contains("certificate"),
        "{err}"
    );
    let err = Registry::new(RegistryOptions {
        ca_certificates: vec![b"not pem".to_vec()],
        ..RegistryOptions::default()
    })
    .err()
    .unwrap();
    assert_eq!(err.reason(), "RegistryConfigInvalid", "{err}");
}
