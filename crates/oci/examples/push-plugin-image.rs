//! Pushes a plugin image built from host files, without Docker: the binary at /<name>, a
//! plugin directory (plugin.json, ui/) at /loop-plugin, /data owned by the USER, label
//! dev.loop.plugin=1. Prints the pushed reference pinned by digest as its last line.
//!
//!   cargo run -p loop-plugins-oci --example push-plugin-image -- \
//!     --binary target/release/echo-plugin --plugin-dir examples/echo-plugin \
//!     --ref 127.0.0.1:5000/plugins/echo:dev [--user 65532:65532] [--insecure HOST:PORT]
//!
//! Only plugin.json and ui/ of --plugin-dir go into the image. Credentials, if the registry
//! wants some, come from $DOCKER_CONFIG/config.json or ~/.docker/config.json.

use std::collections::BTreeMap;
use std::path::PathBuf;

use loop_plugins_oci::build::PluginImageSpec;
use loop_plugins_oci::{DockerConfig, ImageRef, Registry, RegistryOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // reqwest's TLS provider (it is built without one): ring's, before any client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut args = std::env::args().skip(1);
    let (mut binary, mut plugin_dir, mut reference, mut user, mut insecure) =
        (None, None, None, "65532:65532".to_string(), Vec::new());
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--binary" => binary = Some(PathBuf::from(value()?)),
            "--plugin-dir" => plugin_dir = Some(PathBuf::from(value()?)),
            "--ref" => reference = Some(value()?),
            "--user" => user = value()?,
            "--insecure" => insecure.push(value()?),
            other => return Err(format!("unknown flag {other}").into()),
        }
    }
    let binary = binary.ok_or("--binary is required")?;
    let plugin_dir = plugin_dir.ok_or("--plugin-dir is required")?;
    let reference = ImageRef::parse(&reference.ok_or("--ref is required")?)?;
    let (uid, gid) = user.split_once(':').ok_or("--user is uid:gid")?;

    // Stage plugin.json and ui/ only: a plugin's source folder holds more than its image should.
    let staged = std::env::temp_dir().join(format!("loop-plugin-image-{}", std::process::id()));
    std::fs::create_dir_all(&staged)?;
    std::fs::copy(plugin_dir.join("plugin.json"), staged.join("plugin.json"))?;
    if plugin_dir.join("ui").is_dir() {
        copy_dir(&plugin_dir.join("ui"), &staged.join("ui"))?;
    }
    let name = binary
        .file_name()
        .ok_or("--binary has no file name")?
        .to_string_lossy()
        .into_owned();
    let spec = PluginImageSpec {
        binary,
        binary_name: name,
        plugin_dir: staged.clone(),
        uid: uid.parse()?,
        gid: gid.parse()?,
        labels: BTreeMap::new(),
        env: Vec::new(),
    };
    let image = spec.build();
    std::fs::remove_dir_all(&staged)?;
    let image = image?;

    let config_path = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))
        .map(|d| d.join("config.json"));
    let credentials = match config_path.filter(|p| p.is_file()) {
        Some(path) => DockerConfig::parse(&std::fs::read(path)?)?,
        None => DockerConfig::default(),
    };
    let registry = Registry::new(RegistryOptions {
        credentials,
        insecure,
        ..RegistryOptions::default()
    })?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let digest = runtime.block_on(registry.push_image(&reference, &image))?;
    println!("{}", reference.pinned(digest));
    Ok(())
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) -> std::io::Result<()> {
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
