//! `plugin keygen` and `plugin sign --key FILE REF`: an Ed25519 publisher key (PKCS#8 PEM,
//! 0600, never overwritten), and a signature over the canonical payload that binds the
//! plugin's name and version and plugin.json's sha256 to the image's repository and manifest
//! digest, published next to the image as `sha256-<hex>.sig`.

use std::path::Path;

use oci::signing::keys::PublisherKey;
use oci::signing::publish;
use oci::signing::record::SignatureRecord;

use super::error::PluginError;
use super::registry::{RegistryArgs, registry};
use install::candidate;
use install::check;

/// Writes a new key to `path`; returns its public key (hex), for trustedPublisherKeys.
pub fn keygen(path: &Path) -> Result<String, PluginError> {
    let key = PublisherKey::generate()?;
    key.save(path)?;
    Ok(key.public_hex())
}

/// What `plugin sign` published.
pub struct Signed {
    pub record: SignatureRecord,
    /// `REF@sha256:...` signed.
    pub image: String,
    /// Where the signature is: `<repository>:sha256-<hex>.sig`.
    pub at: String,
}

/// Signs the image `reference` (pulled and checked first: only a valid plugin image is
/// signed) with the key at `key_path`, and publishes the signature next to it.
pub async fn sign(
    args: &RegistryArgs,
    key_path: &Path,
    reference: &str,
) -> Result<Signed, PluginError> {
    let key = PublisherKey::load(key_path)?;
    let registry = registry(args, None, None).await?;
    let pulled = check::pull(&registry, reference).await?;
    let view = pulled.view();
    let says = pulled.says(&view, None);
    let (manifest, _) = candidate::manifest_of(&says)?;
    let record = publish::sign_image(
        &registry,
        &key,
        &pulled.facts,
        &manifest.id,
        &manifest.version,
    )
    .await?;
    let at = publish::signature_ref(&pulled.facts.reference, &pulled.facts.manifest_digest);
    Ok(Signed {
        record,
        image: pulled.facts.pinned.to_string(),
        at: at.to_string(),
    })
}
