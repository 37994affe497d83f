//! The images `make dev` pushes to its registry, built without Docker by crates/oci: each
//! example plugin's (the reference's image layout from examples/<plugin>'s plugin.json and ui/
//! and its binary built here: echo, and quiz on the SDK), and ours. The kubelet stand-in plays each pushed
//! repository with the local program, so what runs carries the image's real digest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use oci::build::{ImageConfig, LayerBuilder, LayerCompression, PluginImageSpec, build_image};
use oci::{ImageRef, Registry, RegistryOptions};

use super::{Error, Result};

/// An example plugin `make dev` installs: its folder under examples/, its binary (built beside
/// ours), its repository in the dev registry, and where the binary is in its image.
#[derive(Clone, Copy, Debug)]
pub struct Example {
    pub name: &'static str,
    pub folder: &'static str,
    pub binary: &'static str,
    pub repository: &'static str,
    pub entrypoint: &'static str,
}

/// The echo plugin: every route of the contract.
pub const ECHO: Example = Example {
    name: "echo",
    folder: "examples/echo-plugin",
    binary: "echo-plugin",
    repository: ECHO_REPOSITORY,
    entrypoint: ECHO_ENTRYPOINT,
};

/// The quiz plugin, written on the SDK.
pub const QUIZ: Example = Example {
    name: "quiz",
    folder: "examples/quiz-plugin",
    binary: "quiz-plugin",
    repository: "plugins/quiz",
    entrypoint: "/quiz-plugin",
};

/// Every example `make dev` installs.
pub const EXAMPLES: [Example; 2] = [ECHO, QUIZ];

/// The echo plugin's repository and the examples' tag in the dev registry.
pub const ECHO_REPOSITORY: &str = "plugins/echo";
pub const ECHO_TAG: &str = "dev";
/// Our own image's repository in the dev registry.
pub const SELF_REPOSITORY: &str = "loop-plugins";
/// The uid:gid the echo image runs as.
pub const ECHO_UID: u32 = 65532;
/// The echo image's entrypoint (PluginImageSpec puts the binary at /<name>).
pub const ECHO_ENTRYPOINT: &str = "/echo-plugin";

fn oci_error(what: &str) -> impl FnOnce(String) -> Error + '_ {
    move |e| Error::Binaries(format!("{what}: {e}"))
}

/// Pushes an example plugin's image (`<registry>/plugins/<name>:dev`); returns the reference
/// by tag and pinned.
pub async fn push_example(
    registry_host: &str,
    example: Example,
    binary: &Path,
    plugin_dir: &Path,
    staging: &Path,
) -> Result<(String, String)> {
    // Only plugin.json and ui/ go into the image: the folder holds the plugin's source too.
    let _ = std::fs::remove_dir_all(staging);
    std::fs::create_dir_all(staging).map_err(Error::io("staging the image", staging))?;
    std::fs::copy(plugin_dir.join("plugin.json"), staging.join("plugin.json"))
        .map_err(Error::io("staging plugin.json", staging))?;
    copy_dir(&plugin_dir.join("ui"), &staging.join("ui"))
        .map_err(Error::io("staging ui/", staging))?;
    let spec = PluginImageSpec {
        binary: binary.to_path_buf(),
        binary_name: example.entrypoint.trim_start_matches('/').into(),
        plugin_dir: staging.to_path_buf(),
        uid: ECHO_UID,
        gid: ECHO_UID,
        labels: BTreeMap::new(),
        env: Vec::new(),
    };
    let image = tokio::task::spawn_blocking(move || spec.build())
        .await
        .map_err(|e| Error::Binaries(format!("building the {} image: {e}", example.name)))?
        .map_err(|e| Error::Binaries(format!("building the {} image: {e}", example.name)))?;
    let reference = format!("{registry_host}/{}:{ECHO_TAG}", example.repository);
    let pinned = push(&reference, &image).await?;
    Ok((reference, pinned))
}

/// Pushes our own image (`<registry>/loop-plugins:dev`): a note that the stand-in plays it
/// with the loop-plugins binary built beside it (a debug binary is half a gigabyte); returns
/// it pinned. CronJobs' `trigger` and the gate's init container name it.
pub async fn push_self(registry_host: &str) -> Result<String> {
    let note = b"make dev's kubelet stand-in plays this image with the loop-plugins binary built beside it.\n";
    let layer = LayerBuilder::new()
        .file("STAND-IN", note, 0, 0, 0o644)
        .build(LayerCompression::Gzip)
        .map_err(|e| Error::Binaries(format!("building our image: {e}")))?;
    let config = ImageConfig {
        entrypoint: vec![model::contract::SELF_IMAGE_BINARY.into()],
        user: Some(format!("{ECHO_UID}:{ECHO_UID}")),
        ..ImageConfig::default()
    };
    let image = build_image(&config, vec![layer]);
    push(&format!("{registry_host}/{SELF_REPOSITORY}:dev"), &image).await
}

async fn push(reference: &str, image: &oci::build::BuiltImage) -> Result<String> {
    let r =
        ImageRef::parse(reference).map_err(|e| oci_error("an image reference")(e.to_string()))?;
    let registry = Registry::new(RegistryOptions::default())
        .map_err(|e| oci_error("the registry client")(e.to_string()))?;
    let digest = registry
        .push_image(&r, image)
        .await
        .map_err(|e| oci_error(reference)(e.to_string()))?;
    Ok(r.pinned(digest).to_string())
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// `program` where a Pod's process can run it whatever its uid: a hard link (or a copy)
/// in the run's folder, since the build's folder may sit under a home only root can enter.
pub fn reachable_copy(program: &Path, dir: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(Error::io("making the run's bin folder", dir))?;
    let name = program.file_name().unwrap_or_default();
    let target = dir.join(name);
    let _ = std::fs::remove_file(&target);
    if std::fs::hard_link(program, &target).is_err() {
        std::fs::copy(program, &target).map_err(Error::io("copying a program", &target))?;
    }
    Ok(target)
}
