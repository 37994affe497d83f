//! The checks run before a plugin is installed or upgraded (by the CLI, and by the host API
//! for a person in the console), and when asked to verify: the admission pipeline the
//! controller runs (crates/admission), over the image as pulled and the cluster's HostConfig
//! and admitted plugins. The same stages decide in both places,
//! so what `plugin verify` says is what the controller will say (zeroclaw: the check the host
//! applies when you list plugins is the check the runtime applies).

use std::sync::Arc;

use admission::conflicts::Holder;
use admission::{Facts, ImageFinding, ImageView, Outcome, SignatureFinding};
use model::resources::{HostConfigSpec, Plugin};
use oci::signing::record::SignatureRecord;
use oci::{ImageFacts, Registry};

use crate::candidate::PulledImage;

/// Why an image could not be pulled for the checks.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    #[error(transparent)]
    Reference(#[from] oci::ReferenceError),
    #[error(transparent)]
    Image(#[from] oci::InspectError),
    #[error(transparent)]
    Signatures(#[from] oci::signing::publish::SignatureStoreError),
}

/// The image pulled and checked, and the signatures published for it.
pub struct Pulled {
    pub facts: ImageFacts,
    pub signatures: Vec<SignatureRecord>,
}

impl Pulled {
    /// What admission reads of the image's `/loop-plugin` tree.
    pub fn view(&self) -> ImageView {
        admission::view_of(&self.facts)
    }

    /// What the image says, as a candidate Plugin is made of it (`view` from [`Pulled::view`]);
    /// `signature`: the one to copy into `spec.signature`, if any.
    pub fn says<'a>(
        &'a self,
        view: &'a ImageView,
        signature: Option<&'a SignatureRecord>,
    ) -> PulledImage<'a> {
        PulledImage {
            pinned: self.facts.pinned.to_string(),
            command: self.facts.command(),
            plugin_json: &self.facts.tree.plugin_json,
            bundle: &view.bundle,
            signature,
        }
    }
}

/// Pulls `reference`, checks it as a plugin image and fetches its signatures.
pub async fn pull(registry: &Registry, reference: &str) -> Result<Pulled, PullError> {
    let r = oci::ImageRef::parse(reference)?;
    let facts = oci::inspect(registry, &r).await?;
    let signatures =
        oci::signing::publish::fetch_signatures(registry, &facts.reference, &facts.manifest_digest)
            .await?;
    Ok(Pulled { facts, signatures })
}

/// The signature among `signatures` admission would judge under `host`'s trusted keys.
pub fn chosen_signature<'a>(
    host: &HostConfigSpec,
    signatures: &'a [SignatureRecord],
) -> Option<&'a SignatureRecord> {
    oci::signing::policy::pick(signatures, &host.plugins.trusted_publisher_keys)
}

/// The plugins admitted before `plugin` (all of them, for one not created yet).
pub fn earlier(plugin: &Plugin, installed: &[Plugin]) -> Vec<Holder> {
    admission::earlier_holders(plugin, installed)
}

/// Runs admission's stages on `plugin` as the controller would, with the image as pulled.
/// `host_switch` false judges the plugin as if plugins.enabled were on (install is allowed
/// while plugins are off; they run once it is on).
pub fn evaluate(
    host: &HostConfigSpec,
    plugin: &Plugin,
    pulled: &Pulled,
    installed: &[Plugin],
    host_switch: bool,
) -> Outcome {
    let mut host = host.clone();
    if !host_switch {
        host.plugins.enabled = true;
    }
    let image = ImageFinding::Read(Arc::new(admission::view_of(&pulled.facts)));
    let signatures = match &plugin.spec.signature {
        Some(s) => SignatureFinding::Records(vec![SignatureRecord {
            payload: s.payload.clone(),
            signature: s.signature.clone(),
            public_key: s.public_key.clone(),
        }]),
        None => SignatureFinding::Records(pulled.signatures.clone()),
    };
    let earlier = earlier(plugin, installed);
    admission::evaluate(&Facts {
        host: &host,
        plugin,
        image: Some(&image),
        signatures: &signatures,
        earlier: &earlier,
    })
}
