//! The signature artifact, published next to the image the way cosign does it: an OCI image
//! manifest in the image's own repository under the tag `sha256-<image manifest hex>.sig`,
//! which any registry holds (no referrers API needed).
//!
//! - manifest `mediaType` `application/vnd.oci.image.manifest.v1+json`, `artifactType`
//!   `application/vnd.dev.loop.plugin.signature.v1`;
//! - `config`: the OCI empty descriptor (`application/vnd.oci.empty.v1+json`, content `{}`);
//! - one layer per signature: media type `application/vnd.dev.loop.plugin.signature.payload.v1+json`,
//!   the blob is the canonical payload, and the layer's annotations carry
//!   `dev.loop.plugin.signature` (the Ed25519 signature, base64) and
//!   `dev.loop.plugin.publisher-key` (the public key, hex).
//!
//! Pure: building and reading the manifest; `publish` moves it.

use std::collections::HashMap;

use serde_json::json;

use super::payload::MAX_PAYLOAD_BYTES;
use super::record::SignatureRecord;
use crate::build::descriptor_json;
use crate::digest::{Digest, DigestError};
use crate::manifest::Blob;
use crate::media;
use crate::quote::shown;

pub const SIGNATURE_ANNOTATION: &str = "dev.loop.plugin.signature";
pub const KEY_ANNOTATION: &str = "dev.loop.plugin.publisher-key";
/// The OCI empty config's content.
pub const EMPTY_CONFIG: &[u8] = b"{}";

/// The tag the signatures of an image manifest live under.
pub fn signature_tag(manifest_digest: &Digest) -> String {
    format!("{}.sig", manifest_digest.tag_form())
}

/// A signature artifact ready to push: its manifest and the blobs it points at.
#[derive(Debug, Clone)]
pub struct Artifact {
    pub manifest: Vec<u8>,
    pub blobs: Vec<(Blob, Vec<u8>)>,
}

/// One signature layer as the manifest lists it; the payload is its blob.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignatureLayer {
    pub payload: Blob,
    pub signature: String,
    pub public_key: String,
}

/// Why a manifest under a `.sig` tag is not a signature artifact.
#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    #[error("signature artifact is not JSON of an OCI image manifest: {}", shown(&.0.to_string()))]
    Json(#[source] serde_json::Error),
    #[error(
        "signature artifact has artifactType {0:?}, not application/vnd.dev.loop.plugin.signature.v1"
    )]
    ArtifactType(String),
    #[error("signature artifact layer {index}: digest: {source}")]
    Digest { index: usize, source: DigestError },
    #[error("signature artifact layer {index} has no {annotation} annotation")]
    Annotation {
        index: usize,
        annotation: &'static str,
    },
    #[error(
        "signature artifact layer {index} is {size} bytes, over the {MAX_PAYLOAD_BYTES}-byte payload cap"
    )]
    TooBig { index: usize, size: u64 },
}

/// Builds the artifact holding `records` (in order).
pub fn build(records: &[SignatureRecord]) -> Artifact {
    let config = Blob {
        media_type: media::OCI_EMPTY.to_string(),
        digest: Digest::of(EMPTY_CONFIG),
        size: EMPTY_CONFIG.len() as u64,
    };
    let mut blobs = vec![(config.clone(), EMPTY_CONFIG.to_vec())];
    let mut layers = Vec::new();
    for record in records {
        let bytes = record.payload.as_bytes().to_vec();
        let blob = Blob {
            media_type: media::SIGNATURE_PAYLOAD.to_string(),
            digest: Digest::of(&bytes),
            size: bytes.len() as u64,
        };
        let mut layer = descriptor_json(&blob);
        layer["annotations"] =
            json!({SIGNATURE_ANNOTATION: record.signature, KEY_ANNOTATION: record.public_key});
        layers.push(layer);
        blobs.push((blob, bytes));
    }
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": media::OCI_MANIFEST,
        "artifactType": media::SIGNATURE_ARTIFACT,
        "config": descriptor_json(&config),
        "layers": layers,
    });
    Artifact {
        manifest: serde_json::to_vec(&manifest).expect("JSON of strings serializes"),
        blobs,
    }
}

/// Reads the signature layers of an artifact manifest (layers of other media types are
/// skipped, as cosign skips what it does not know).
pub fn parse(manifest: &[u8]) -> Result<Vec<SignatureLayer>, ArtifactError> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Manifest {
        artifact_type: Option<String>,
        #[serde(default)]
        layers: Vec<Layer>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Layer {
        media_type: String,
        digest: String,
        size: u64,
        #[serde(default)]
        annotations: HashMap<String, String>,
    }
    let m: Manifest = serde_json::from_slice(manifest).map_err(ArtifactError::Json)?;
    let artifact_type = m.artifact_type.unwrap_or_default();
    if artifact_type != media::SIGNATURE_ARTIFACT {
        return Err(ArtifactError::ArtifactType(shown(&artifact_type)));
    }
    let mut out = Vec::new();
    for (index, layer) in m.layers.into_iter().enumerate() {
        if layer.media_type != media::SIGNATURE_PAYLOAD {
            continue;
        }
        let digest = Digest::parse(&layer.digest)
            .map_err(|source| ArtifactError::Digest { index, source })?;
        if layer.size > MAX_PAYLOAD_BYTES as u64 {
            return Err(ArtifactError::TooBig {
                index,
                size: layer.size,
            });
        }
        let annotation = |name: &'static str| {
            layer
                .annotations
                .get(name)
                .cloned()
                .ok_or(ArtifactError::Annotation {
                    index,
                    annotation: name,
                })
        };
        out.push(SignatureLayer {
            signature: annotation(SIGNATURE_ANNOTATION)?,
            public_key: annotation(KEY_ANNOTATION)?,
            payload: Blob {
                media_type: layer.media_type,
                digest,
                size: layer.size,
            },
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signing::keys::PublisherKey;
    use crate::signing::payload::Payload;

    #[test]
    fn build_then_parse() {
        let key = PublisherKey::generate().unwrap();
        let payload = Payload::new(
            "echo",
            "0.1.0",
            Digest::of(b"{}").hex(),
            "localhost/echo",
            &Digest::of(b"m"),
        );
        let record = SignatureRecord::sign(&key, &payload);
        let artifact = build(std::slice::from_ref(&record));
        assert_eq!(artifact.blobs.len(), 2);
        let layers = parse(&artifact.manifest).unwrap();
        assert_eq!(layers.len(), 1);
        assert_eq!(layers[0].signature, record.signature);
        assert_eq!(layers[0].public_key, key.public_hex());
        assert_eq!(
            layers[0].payload.digest,
            Digest::of(record.payload.as_bytes())
        );
        assert_eq!(
            signature_tag(&Digest::of(b"m")),
            format!("sha256-{}.sig", Digest::of(b"m").hex())
        );
    }

    #[test]
    fn refuses_what_is_not_ours() {
        let image = json!({"schemaVersion": 2, "mediaType": media::OCI_MANIFEST, "layers": []});
        assert!(
            matches!(parse(image.to_string().as_bytes()), Err(ArtifactError::ArtifactType(t)) if t.is_empty())
        );
        let missing = json!({"artifactType": media::SIGNATURE_ARTIFACT, "layers": [
            {"mediaType": media::SIGNATURE_PAYLOAD, "digest": Digest::of(b"").to_string(), "size": 0, "annotations": {KEY_ANNOTATION: "k"}}]});
        assert!(matches!(
            parse(missing.to_string().as_bytes()),
            Err(ArtifactError::Annotation {
                index: 0,
                annotation: SIGNATURE_ANNOTATION
            })
        ));
    }
}
