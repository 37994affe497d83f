//! Moving signature artifacts: publishing a signature next to its image (replacing an earlier
//! one by the same key, keeping the others) and fetching them back. Thin I/O over
//! `artifact` and [`Registry`].

use super::artifact::{self, ArtifactError};
use super::keys::normalize_hex;
use super::payload::{MAX_PAYLOAD_BYTES, Payload};
use super::record::SignatureRecord;
use crate::digest::Digest;
use crate::inspect::ImageFacts;
use crate::media;
use crate::reference::ImageRef;
use crate::registry::{Registry, RegistryError};
use crate::signing::keys::PublisherKey;

/// Why a signature artifact could not be published or read.
#[derive(Debug, thiserror::Error)]
pub enum SignatureStoreError {
    #[error("signature artifact {reference}: {source}")]
    Registry {
        reference: String,
        source: RegistryError,
    },
    #[error("signature artifact {reference}: {source}")]
    Artifact {
        reference: String,
        source: ArtifactError,
    },
    #[error("signature artifact {reference}: payload {digest} is not UTF-8")]
    Utf8 { reference: String, digest: Digest },
}

impl SignatureStoreError {
    pub fn is_transient(&self) -> bool {
        matches!(self, SignatureStoreError::Registry { source, .. } if source.is_transient())
    }
}

/// Where the signatures of `manifest_digest` live: `<registry>/<repository>:sha256-<hex>.sig`.
pub fn signature_ref(image: &ImageRef, manifest_digest: &Digest) -> ImageRef {
    image
        .with_tag(&artifact::signature_tag(manifest_digest))
        .expect("sha256-<hex>.sig is a valid tag")
}

/// The signatures published for an image manifest; none when there is no `.sig` tag.
pub async fn fetch_signatures(
    registry: &Registry,
    image: &ImageRef,
    manifest_digest: &Digest,
) -> Result<Vec<SignatureRecord>, SignatureStoreError> {
    let sig_ref = signature_ref(image, manifest_digest);
    let reference = sig_ref.to_string();
    let fetched = match registry.fetch_manifest(&sig_ref, None).await {
        Ok(f) => f,
        Err(RegistryError::NotFound { .. }) => return Ok(Vec::new()),
        Err(source) => return Err(SignatureStoreError::Registry { reference, source }),
    };
    let layers =
        artifact::parse(&fetched.bytes).map_err(|source| SignatureStoreError::Artifact {
            reference: reference.clone(),
            source,
        })?;
    let by_digest = sig_ref.by_digest(fetched.digest);
    let mut records = Vec::with_capacity(layers.len());
    for layer in layers {
        let bytes = registry
            .fetch_blob(&by_digest, &layer.payload, MAX_PAYLOAD_BYTES as u64)
            .await
            .map_err(|source| SignatureStoreError::Registry {
                reference: reference.clone(),
                source,
            })?;
        let payload = String::from_utf8(bytes).map_err(|_| SignatureStoreError::Utf8 {
            reference: reference.clone(),
            digest: layer.payload.digest.clone(),
        })?;
        records.push(SignatureRecord {
            payload,
            signature: layer.signature,
            public_key: layer.public_key,
        });
    }
    Ok(records)
}

/// Publishes `record` for `manifest_digest`, keeping other keys' signatures already there
/// and replacing this key's. Returns the artifact's reference.
pub async fn publish_signature(
    registry: &Registry,
    image: &ImageRef,
    manifest_digest: &Digest,
    record: &SignatureRecord,
) -> Result<ImageRef, SignatureStoreError> {
    let sig_ref = signature_ref(image, manifest_digest);
    let reference = sig_ref.to_string();
    let reg = |source| SignatureStoreError::Registry {
        reference: reference.clone(),
        source,
    };
    let mut records: Vec<SignatureRecord> = fetch_signatures(registry, image, manifest_digest)
        .await?
        .into_iter()
        .filter(|r| normalize_hex(&r.public_key) != normalize_hex(&record.public_key))
        .collect();
    records.push(record.clone());
    let built = artifact::build(&records);
    for (blob, bytes) in built.blobs {
        registry
            .push_blob(&sig_ref, &blob, bytes)
            .await
            .map_err(reg)?;
    }
    registry
        .push_manifest(&sig_ref, built.manifest, media::OCI_MANIFEST)
        .await
        .map_err(reg)?;
    Ok(sig_ref)
}

/// `plugin sign`: signs what `facts` say the image is, as plugin `name` at `version` (the
/// manifest's id and version, which the caller parsed from `facts.tree.plugin_json`), and
/// publishes the signature next to the image.
pub async fn sign_image(
    registry: &Registry,
    key: &PublisherKey,
    facts: &ImageFacts,
    name: &str,
    version: &str,
) -> Result<SignatureRecord, SignatureStoreError> {
    let payload = Payload::new(
        name,
        version,
        &facts.tree.plugin_json_sha256,
        &facts.repository(),
        &facts.manifest_digest,
    );
    let record = SignatureRecord::sign(key, &payload);
    publish_signature(registry, &facts.reference, &facts.manifest_digest, &record).await?;
    Ok(record)
}
