//! Plugin images for the suite and the benchmarks: a real registry, and an image per Plugin that ships exactly
//! the Plugin's `spec.manifest` as `/loop-plugin/plugin.json` (the pages and icons it names
//! beside it) with the echo plugin's binary as its entrypoint, so admission's Image stage
//! finds what runs is what was declared.
//!
//! The registry: `LOOP_PLUGINS_E2E_REGISTRY` (`host:port`, one the cluster reaches, such as
//! kind's `localhost:5001`), else a registry the run starts on 127.0.0.1 (oci's
//! `TestRegistry`, hack/registry/build.sh's binary), which the controller reaches when it
//! runs on this machine (the local control plane, `make e2e-existing`). Every echo image goes
//! to one repository, [`ECHO_REPOSITORY`], tagged by plugin id, so the binary's layer is
//! pushed once; the kubelet stand-in plays that repository with the echo plugin's binary.
//! `LOOP_PLUGINS_E2E_ECHO_BINARY` names the binary put in the images at /echo-plugin (a static
//! one, for real containers). Without it the images carry a small file there saying the
//! stand-in plays them: the stand-in never runs an image's content, and a debug echo-plugin
//! (95 MB) in every image would have the controller decompress gigabytes per run.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::Context;
use model::resources::Plugin;
use oci::build::{
    BuiltImage, BuiltLayer, ImageConfig, LayerBuilder, LayerCompression, build_image,
};
use oci::testing::{TestRegistry, TestRegistryOptions};
use oci::{ImageRef, Registry, RegistryOptions};
use tokio::sync::OnceCell;

/// The repository every echo image of the run goes to.
pub const ECHO_REPOSITORY: &str = "e2e/echo";
/// Our own image's repository in the run (CronJobs' `trigger`, the gate's init container).
pub const SELF_REPOSITORY: &str = "e2e/loop-plugins";
/// The entrypoint of the echo images.
pub const ECHO_ENTRYPOINT: &str = "/echo-plugin";
/// The uid:gid the echo images run as.
pub const ECHO_UID: u32 = 65532;
/// Names the registry the suite pushes to instead of starting one.
pub const REGISTRY_ENV: &str = "LOOP_PLUGINS_E2E_REGISTRY";
/// Names the echo binary put in the images.
pub const ECHO_BINARY_ENV: &str = "LOOP_PLUGINS_E2E_ECHO_BINARY";
/// Names the quiz binary put in the quiz images (kind-e2e builds it static).
pub const QUIZ_BINARY_ENV: &str = "LOOP_PLUGINS_E2E_QUIZ_BINARY";

/// A plugin program the suite's images carry: the repository its images go to (which the
/// kubelet stand-in plays with the program's binary), its entrypoint, and the example folder
/// its pages and icons come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Program {
    pub repository: &'static str,
    pub entrypoint: &'static str,
    pub example: &'static str,
    /// The variable naming a binary of it for real containers; unset, its images carry a
    /// note that only the stand-in plays.
    pub binary_env: &'static str,
}

/// The echo plugin: every test's plugin.
pub const ECHO: Program = Program {
    repository: ECHO_REPOSITORY,
    entrypoint: ECHO_ENTRYPOINT,
    example: "examples/echo-plugin",
    binary_env: ECHO_BINARY_ENV,
};

/// The quiz plugin (on the SDK): its images carry its binary where
/// `LOOP_PLUGINS_E2E_QUIZ_BINARY` names one (kind-e2e), else a note only the stand-in (the
/// local control plane) plays.
pub const QUIZ: Program = Program {
    repository: "e2e/quiz",
    entrypoint: "/quiz-plugin",
    example: "examples/quiz-plugin",
    binary_env: QUIZ_BINARY_ENV,
};

/// The run's registry and what was built once.
pub struct Images {
    host: String,
    client: Registry,
    _registry: Option<TestRegistry>,
    /// Each program's binary layer, built once.
    binary_layers: tokio::sync::Mutex<BTreeMap<&'static str, BuiltLayer>>,
    self_image: OnceCell<String>,
}

/// One image's content, for tests that write broken ones.
#[derive(Clone, Debug)]
pub struct ImageContent {
    /// plugin.json's text; None leaves it out.
    pub plugin_json: Option<String>,
    /// `USER`; None leaves it unset.
    pub user: Option<String>,
    /// The owner of /data (uid, gid): the USER's, for a good image.
    pub data_owner: (u32, u32),
    pub label: bool,
    pub data: bool,
    /// Extra files under /loop-plugin (path relative to it, bytes).
    pub files: BTreeMap<String, Vec<u8>>,
}

impl Images {
    /// The registry of `LOOP_PLUGINS_E2E_REGISTRY`, else one started for the run.
    pub fn start() -> anyhow::Result<Images> {
        let (host, registry) = match std::env::var(REGISTRY_ENV) {
            Ok(host) if !host.is_empty() => (host, None),
            _ => {
                let r = TestRegistry::start(TestRegistryOptions::default())
                    .context("starting the run's registry")?;
                (r.host(), Some(r))
            }
        };
        Ok(Images {
            host,
            client: Registry::new(RegistryOptions::default())?,
            _registry: registry,
            binary_layers: Default::default(),
            self_image: OnceCell::new(),
        })
    }

    /// `host:port` of the registry, as image references name it.
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The repository the stand-in plays with the echo binary.
    pub fn echo_repository(&self) -> String {
        self.repository(ECHO)
    }

    /// The repository the stand-in plays with `program`'s binary.
    pub fn repository(&self, program: Program) -> String {
        format!("{}/{}", self.host, program.repository)
    }

    /// The repository the stand-in plays with our own binary.
    pub fn self_repository(&self) -> String {
        format!("{}/{SELF_REPOSITORY}", self.host)
    }

    /// Our own image for the run, pinned by digest. The stand-in plays its repository with
    /// the loop-plugins binary built beside the tests, so the image holds a note saying so
    /// rather than half a gigabyte of debug binary; it is a real image with a real digest.
    pub async fn self_image(&self) -> anyhow::Result<String> {
        let image = self
            .self_image
            .get_or_try_init(|| async {
                let note = b"The e2e suite's kubelet stand-in plays this image with the loop-plugins binary built beside the tests.\n";
                let layer = LayerBuilder::new()
                    .file("STAND-IN", note, 0, 0, 0o644)
                    .build(LayerCompression::Gzip)?;
                let config = ImageConfig {
                    entrypoint: vec![model::contract::SELF_IMAGE_BINARY.into()],
                    user: Some(format!("{ECHO_UID}:{ECHO_UID}")),
                    ..ImageConfig::default()
                };
                let image = build_image(&config, vec![layer]);
                let r = ImageRef::parse(&format!("{}:run", self.self_repository()))?;
                let digest = self.client.push_image(&r, &image).await?;
                anyhow::Ok(r.pinned(digest).to_string())
            })
            .await?;
        Ok(image.clone())
    }

    /// The registry client the tests push with.
    pub fn client(&self) -> &Registry {
        &self.client
    }

    /// The echo binary the stand-in runs for the images.
    pub fn echo_binary() -> PathBuf {
        Self::binary(ECHO)
    }

    /// `program`'s binary, beside loop-plugins (`cargo build --workspace`).
    pub fn binary(program: Program) -> PathBuf {
        crate::binary()
            .parent()
            .expect("the binary has a folder")
            .join(program.entrypoint.trim_start_matches('/'))
    }

    async fn binary_layer(&self, program: Program) -> anyhow::Result<BuiltLayer> {
        let mut layers = self.binary_layers.lock().await;
        if let Some(layer) = layers.get(program.repository) {
            return Ok(layer.clone());
        }
        let binary = std::env::var_os(program.binary_env).map(PathBuf::from);
        let name = program.entrypoint.trim_start_matches('/');
        let layer = tokio::task::spawn_blocking(move || -> anyhow::Result<BuiltLayer> {
            let bytes = match &binary {
                Some(path) => std::fs::read(path)
                    .with_context(|| format!("reading the {name} binary {}", path.display()))?,
                None => format!(
                    "#!/bin/false\n# The e2e suite's kubelet stand-in plays this image with the {name} binary built beside the tests.\n"
                )
                .into_bytes(),
            };
            Ok(LayerBuilder::new()
                .file(name, &bytes, 0, 0, 0o755)
                .build(LayerCompression::Gzip)?)
        })
        .await??;
        layers.insert(program.repository, layer.clone());
        Ok(layer)
    }

    /// An image of `content` (its entrypoint the echo binary), built.
    pub async fn build(&self, content: &ImageContent) -> anyhow::Result<BuiltImage> {
        self.build_for(ECHO, content).await
    }

    /// An image of `content` with `program` as its entrypoint, built.
    pub async fn build_for(
        &self,
        program: Program,
        content: &ImageContent,
    ) -> anyhow::Result<BuiltImage> {
        let mut labels = BTreeMap::new();
        if content.label {
            labels.insert("dev.loop.plugin".to_string(), "1".to_string());
        }
        let config = ImageConfig {
            entrypoint: vec![program.entrypoint.into()],
            user: content.user.clone(),
            labels,
            ..ImageConfig::default()
        };
        let mut tree = LayerBuilder::new().dir("loop-plugin", 0, 0, 0o755);
        if let Some(json) = &content.plugin_json {
            tree = tree.file("loop-plugin/plugin.json", json.as_bytes(), 0, 0, 0o644);
        }
        for (path, bytes) in &content.files {
            tree = tree.file(&format!("loop-plugin/{path}"), bytes, 0, 0, 0o644);
        }
        if content.data {
            tree = tree.dir("data", content.data_owner.0, content.data_owner.1, 0o755);
        }
        tree = tree.dir("tmp", 0, 0, 0o1777);
        let layers = vec![
            self.binary_layer(program).await?,
            tree.build(LayerCompression::Gzip)?,
        ];
        Ok(build_image(&config, layers))
    }

    /// Pushes `content` as `<registry>/<ECHO_REPOSITORY>:<tag>`; returns it pinned by digest.
    pub async fn push(&self, tag: &str, content: &ImageContent) -> anyhow::Result<String> {
        self.push_for(ECHO, tag, content).await
    }

    /// Pushes `content` as `<registry>/<program's repository>:<tag>`; returns it pinned.
    pub async fn push_for(
        &self,
        program: Program,
        tag: &str,
        content: &ImageContent,
    ) -> anyhow::Result<String> {
        let image = self.build_for(program, content).await?;
        let r = ImageRef::parse(&format!("{}:{tag}", self.repository(program)))?;
        let digest = self.client.push_image(&r, &image).await?;
        Ok(r.pinned(digest).to_string())
    }

    /// Makes `plugin`'s image: one that ships its `spec.manifest` (and the pages and icons
    /// the manifest names), pushed under its name as tag; sets `spec.image` (pinned) and
    /// `spec.command` to what the image says.
    pub async fn publish(&self, plugin: &mut Plugin) -> anyhow::Result<()> {
        self.publish_as(ECHO, plugin).await
    }

    /// [`Images::publish`], with `program` as the image's entrypoint.
    pub async fn publish_as(&self, program: Program, plugin: &mut Plugin) -> anyhow::Result<()> {
        let content = ImageContent::for_program(program, plugin);
        let name = plugin
            .metadata
            .name
            .clone()
            .context("the Plugin has a name")?;
        plugin.spec.image = self.push_for(program, &name, &content).await?;
        plugin.spec.command = vec![program.entrypoint.into()];
        Ok(())
    }
}

impl ImageContent {
    /// The image runs as `uid:gid` (and /data is theirs).
    pub fn run_as(mut self, uid: u32, gid: u32) -> ImageContent {
        self.user = Some(format!("{uid}:{gid}"));
        self.data_owner = (uid, gid);
        self
    }

    /// A good image shipping `plugin`'s manifest.
    pub fn for_plugin(plugin: &Plugin) -> ImageContent {
        Self::for_program(ECHO, plugin)
    }

    /// A good image shipping `plugin`'s manifest, its pages and icons from `program`'s
    /// example folder.
    pub fn for_program(program: Program, plugin: &Plugin) -> ImageContent {
        let manifest = plugin.spec.manifest.to_json();
        let mut files = BTreeMap::new();
        // The pages and icons the manifest names: the example's own where it has them.
        let ui = &manifest["ui"];
        let list = |key: &str, field: &str| -> Vec<String> {
            ui[key]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|i| i[field].as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default()
        };
        let named = list("panels", "entry")
            .into_iter()
            .chain(list("cards", "entry"))
            .chain(list("composer_switches", "icon"));
        let example = crate::repo_root().join(program.example);
        // A page's directory ships whole, as the example's image does: its scripts and
        // styles beside its entry.
        for entry in list("panels", "entry")
            .into_iter()
            .chain(list("cards", "entry"))
        {
            let Some((dir, _)) = entry.rsplit_once('/') else {
                continue;
            };
            for (path, bytes) in files_below(&example, dir) {
                files.insert(path, bytes);
            }
        }
        for path in named {
            if files.contains_key(&path) {
                continue;
            }
            let own = example.join(&path);
            let bytes = std::fs::read(own).unwrap_or_else(|_| {
                if path.ends_with(".svg") {
                    br#"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><circle cx="8" cy="8" r="6"/></svg>"#.to_vec()
                } else {
                    b"<!doctype html><title>e2e</title><script src=\"app.js\"></script>".to_vec()
                }
            });
            files.insert(path, bytes);
        }
        ImageContent {
            plugin_json: Some(
                serde_json::to_string_pretty(&manifest).expect("a manifest serializes"),
            ),
            user: Some(format!("{ECHO_UID}:{ECHO_UID}")),
            data_owner: (ECHO_UID, ECHO_UID),
            label: true,
            data: true,
            files,
        }
    }
}

/// The files under `base/dir`, by their path relative to `base` (none when it is missing).
fn files_below(base: &std::path::Path, dir: &str) -> Vec<(String, Vec<u8>)> {
    let mut found = Vec::new();
    let mut todo = vec![dir.to_string()];
    while let Some(dir) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(base.join(&dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = format!("{dir}/{}", entry.file_name().to_string_lossy());
            match entry.file_type() {
                Ok(t) if t.is_dir() => todo.push(path),
                Ok(t) if t.is_file() => {
                    if let Ok(bytes) = std::fs::read(entry.path()) {
                        found.push((path, bytes));
                    }
                }
                _ => {}
            }
        }
    }
    found
}
