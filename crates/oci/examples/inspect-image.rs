//! Pulls a plugin image, checks it and prints what install would record, and the signatures
//! published next to it:
//!
//!   cargo run -p loop-plugins-oci --example inspect-image -- 127.0.0.1:5000/plugins/echo:dev
//!
//! Exits non-zero with the refusal's reason and message when the image is refused.

use loop_plugins_oci::signing::publish;
use loop_plugins_oci::{ImageRef, Registry, RegistryOptions, inspect};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // reqwest's TLS provider (it is built without one): ring's, before any client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let reference = ImageRef::parse(&std::env::args().nth(1).ok_or("usage: inspect-image REF")?)?;
    let registry = Registry::new(RegistryOptions::default())?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let facts = match runtime.block_on(inspect(&registry, &reference)) {
        Ok(facts) => facts,
        Err(e) => {
            eprintln!("refused ({}): {e}", e.reason());
            std::process::exit(1);
        }
    };
    let signatures = runtime.block_on(publish::fetch_signatures(
        &registry,
        &reference,
        &facts.manifest_digest,
    ))?;
    let out = serde_json::json!({
        "image": facts.pinned.to_string(),
        "manifestDigest": facts.manifest_digest.to_string(),
        "indexDigest": facts.index_digest.as_ref().map(ToString::to_string),
        "command": facts.command(),
        "runAsUser": facts.config.run_as.uid,
        "runAsGroup": facts.config.run_as.gid,
        "labels": facts.config.labels,
        "pluginJsonSha256": facts.tree.plugin_json_sha256,
        "pluginJson": String::from_utf8_lossy(&facts.tree.plugin_json),
        "loopPluginBytes": facts.tree.loop_plugin_bytes,
        "loopPluginPaths": facts.tree.loop_plugin.keys().collect::<Vec<_>>(),
        "signatures": signatures,
    });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(())
}
