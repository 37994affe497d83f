//! What gathering found, as admission judges it: the image (pulled by digest and checked by
//! the oci crate, or the facts a status recorded) and the signatures published next to it.
//! The reads themselves are the caller's (the controller's `images` for reconciles, the
//! operator's `plugin install|verify` for a person): this file only names their results, and
//! [`view_of`] turns what the oci crate read into the facts the Image stage compares.

use std::collections::BTreeMap;
use std::sync::Arc;

use model::contract::RunAs;
use model::manifest::bundle::BundleEntry;
use model::resources::ImageStatus;
use oci::checks::PluginEntry;
use oci::signing::record::SignatureRecord;

/// What the image is, once pulled and checked: the facts admission judges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageView {
    /// The image manifest digest.
    pub digest: String,
    /// `registry/repository`, as signature payloads name it.
    pub repository: String,
    /// The image's USER.
    pub run_as: RunAs,
    /// Entrypoint followed by cmd.
    pub command: Vec<String>,
    /// /loop-plugin/plugin.json as shipped.
    pub plugin_json: Arc<Vec<u8>>,
    pub plugin_json_sha256: String,
    /// Every path under /loop-plugin.
    pub bundle: Arc<BTreeMap<String, BundleEntry>>,
}

/// What reading the image gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImageFinding {
    /// Pulled (or found in the cache) and checked.
    Read(Arc<ImageView>),
    /// The registry is unreachable, and admission passed this digest before: the facts it
    /// recorded then (an image never changes for its digest).
    Recorded { facts: ImageStatus, why: String },
    /// The registry is unreachable or failing: try again later.
    Unavailable { reason: String, message: String },
    /// The image is not a plugin image (or not there).
    Refused { reason: String, message: String },
}

/// The signatures to judge.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum SignatureFinding {
    /// Not looked for (the mode is disabled and the spec carries none).
    #[default]
    NotRead,
    /// `spec.signature`, or those published next to the image.
    Records(Vec<SignatureRecord>),
    /// The registry could not be asked: try again later.
    Unavailable(String),
}

/// The facts admission judges, from what the oci crate read.
pub fn view_of(facts: &oci::ImageFacts) -> ImageView {
    let bundle = facts
        .tree
        .loop_plugin
        .iter()
        .map(|(path, entry)| {
            let entry = match entry {
                PluginEntry::File { bytes, .. } => BundleEntry::File {
                    size: bytes.len() as u64,
                },
                PluginEntry::Dir => BundleEntry::Dir,
                PluginEntry::Symlink { target } => BundleEntry::Symlink {
                    target: target.clone(),
                },
                PluginEntry::Other => BundleEntry::Other,
            };
            (path.clone(), entry)
        })
        .collect();
    ImageView {
        digest: facts.manifest_digest.to_string(),
        repository: facts.repository(),
        run_as: facts.config.run_as,
        command: facts.command(),
        plugin_json: facts.tree.plugin_json.clone(),
        plugin_json_sha256: facts.tree.plugin_json_sha256.clone(),
        bundle: Arc::new(bundle),
    }
}
