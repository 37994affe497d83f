//! Manifests and indexes as a registry returns them: which one a body is, the linux/amd64
//! child of an index, and the checks an image manifest passes before any blob is fetched
//! (a container image config, readable layer media types, descriptor sizes under the caps).
//! Pure: bytes in, typed values or typed errors out.

use oci_spec::image::{Arch, Descriptor, ImageIndex, ImageManifest, Os};

use crate::digest::{Digest, DigestError};
use crate::limits::Limits;
use crate::media;
use crate::quote::shown;

/// The platform plugin pods run on.
pub const PLATFORM_OS: &str = "linux";
pub const PLATFORM_ARCH: &str = "amd64";

/// A manifest body, as an image manifest or an index.
#[derive(Debug, Clone)]
pub enum Manifest {
    Image(Box<ImageManifest>),
    Index(Box<ImageIndex>),
}

/// A descriptor reduced to what we use, its digest checked to be sha256.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Blob {
    pub media_type: String,
    pub digest: Digest,
    pub size: u64,
}

/// Why a manifest cannot be used; each names what is wrong (quoting the manifest by the start
/// of what it said).
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    #[error("manifest is not JSON of an image manifest or index: {}", shown(&.0.to_string()))]
    Json(#[source] serde_json::Error),
    #[error("manifest media type {0:?} is neither an image manifest nor an index")]
    MediaType(String),
    #[error("manifest schemaVersion is {0}, not 2")]
    SchemaVersion(u32),
    #[error("index has no linux/amd64 image (it has: {available})")]
    NoPlatform { available: String },
    #[error(
        "index entry for linux/amd64 is itself an index ({0}); nested indexes are not followed"
    )]
    NestedIndex(Digest),
    #[error("{what} descriptor digest: {source}")]
    Digest { what: String, source: DigestError },
    #[error("not a container image: config media type is {0:?}")]
    ConfigMediaType(String),
    #[error("layer {index} has media type {media_type:?}, which is not a tar or tar+gzip layer")]
    LayerMediaType { index: usize, media_type: String },
    #[error("{what} is {size} bytes, over the {limit}-byte cap")]
    TooBig { what: String, size: u64, limit: u64 },
    #[error("image has {count} layers, over the cap of {limit}")]
    TooManyLayers { count: usize, limit: usize },
    #[error("image has no layers")]
    NoLayers,
}

/// Parses a manifest body; the body's own `mediaType` wins over the response's content type,
/// and with neither the shape decides (`manifests` → index).
pub fn parse(body: &[u8], content_type: Option<&str>) -> Result<Manifest, ManifestError> {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Probe {
        schema_version: Option<u32>,
        media_type: Option<String>,
        manifests: Option<serde_json::Value>,
    }
    let probe: Probe = serde_json::from_slice(body).map_err(ManifestError::Json)?;
    if let Some(v) = probe.schema_version.filter(|v| *v != 2) {
        return Err(ManifestError::SchemaVersion(v));
    }
    let content_type =
        content_type.map(|c| c.split(';').next().unwrap_or_default().trim().to_string());
    let media_type = probe
        .media_type
        .or(content_type.filter(|c| media::MANIFEST_ACCEPT.contains(&c.as_str())));
    let is_index = match media_type.as_deref() {
        Some(media::OCI_INDEX | media::DOCKER_MANIFEST_LIST) => true,
        Some(media::OCI_MANIFEST | media::DOCKER_MANIFEST) => false,
        Some(other) => return Err(ManifestError::MediaType(shown(other))),
        None => probe.manifests.is_some(),
    };
    if is_index {
        Ok(Manifest::Index(Box::new(
            serde_json::from_slice(body).map_err(ManifestError::Json)?,
        )))
    } else {
        Ok(Manifest::Image(Box::new(
            serde_json::from_slice(body).map_err(ManifestError::Json)?,
        )))
    }
}

/// The linux/amd64 image of an index (the first one listed, as a container runtime picks it).
pub fn select_platform(index: &ImageIndex, limits: &Limits) -> Result<Blob, ManifestError> {
    let chosen = index.manifests().iter().find(|d| {
        d.platform()
            .as_ref()
            .is_some_and(|p| *p.os() == Os::Linux && *p.architecture() == Arch::Amd64)
    });
    let Some(d) = chosen else {
        let available: Vec<String> = index
            .manifests()
            .iter()
            .map(|d| match d.platform() {
                Some(p) => shown(&format!("{}/{}", p.os(), p.architecture())),
                None => "no platform".to_string(),
            })
            .collect();
        let available = if available.is_empty() {
            "nothing".to_string()
        } else {
            shown(&available.join(", "))
        };
        return Err(ManifestError::NoPlatform { available });
    };
    let blob = blob(d, "linux/amd64 manifest")?;
    if blob.media_type == media::OCI_INDEX || blob.media_type == media::DOCKER_MANIFEST_LIST {
        return Err(ManifestError::NestedIndex(blob.digest));
    }
    check_size("linux/amd64 manifest", blob.size, limits.manifest_bytes)?;
    Ok(blob)
}

/// What an image manifest points at, checked before fetching: the config and the layers.
#[derive(Debug, Clone)]
pub struct ImageBlobs {
    pub config: Blob,
    pub layers: Vec<Blob>,
}

/// Checks an image manifest is a container image we can read within the caps.
pub fn image_blobs(manifest: &ImageManifest, limits: &Limits) -> Result<ImageBlobs, ManifestError> {
    if manifest.schema_version() != 2 {
        return Err(ManifestError::SchemaVersion(manifest.schema_version()));
    }
    let config = blob(manifest.config(), "config")?;
    if config.media_type != media::OCI_CONFIG && config.media_type != media::DOCKER_CONFIG {
        return Err(ManifestError::ConfigMediaType(shown(&config.media_type)));
    }
    check_size("config", config.size, limits.config_bytes)?;
    if manifest.layers().is_empty() {
        return Err(ManifestError::NoLayers);
    }
    if manifest.layers().len() > limits.layers {
        return Err(ManifestError::TooManyLayers {
            count: manifest.layers().len(),
            limit: limits.layers,
        });
    }
    let mut layers = Vec::with_capacity(manifest.layers().len());
    for (index, d) in manifest.layers().iter().enumerate() {
        let layer = blob(d, &format!("layer {index}"))?;
        if media::layer_compression(&layer.media_type).is_none() {
            return Err(ManifestError::LayerMediaType {
                index,
                media_type: shown(&layer.media_type),
            });
        }
        check_size(
            &format!("layer {index} ({})", layer.digest),
            layer.size,
            limits.layer_bytes,
        )?;
        layers.push(layer);
    }
    Ok(ImageBlobs { config, layers })
}

fn blob(d: &Descriptor, what: &str) -> Result<Blob, ManifestError> {
    let digest = Digest::parse(d.digest().as_ref()).map_err(|source| ManifestError::Digest {
        what: what.to_string(),
        source,
    })?;
    Ok(Blob {
        media_type: d.media_type().to_string(),
        digest,
        size: d.size(),
    })
}

fn check_size(what: &str, size: u64, limit: u64) -> Result<(), ManifestError> {
    if size > limit {
        return Err(ManifestError::TooBig {
            what: what.to_string(),
            size,
            limit,
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn d(media_type: &str, fill: char, size: u64) -> serde_json::Value {
        json!({"mediaType": media_type, "digest": format!("sha256:{}", fill.to_string().repeat(64)), "size": size})
    }

    fn image(layers: Vec<serde_json::Value>) -> Vec<u8> {
        json!({"schemaVersion": 2, "mediaType": media::OCI_MANIFEST, "config": d(media::OCI_CONFIG, 'c', 100), "layers": layers})
            .to_string()
            .into_bytes()
    }

    fn entry(os: &str, arch: &str, fill: char) -> serde_json::Value {
        let mut e = d(media::OCI_MANIFEST, fill, 500);
        e["platform"] = json!({"os": os, "architecture": arch});
        e
    }

    #[test]
    fn tells_index_from_image() {
        assert!(matches!(
            parse(&image(vec![d(media::OCI_LAYER_GZIP, 'a', 10)]), None),
            Ok(Manifest::Image(_))
        ));
        let index =
            json!({"schemaVersion": 2, "manifests": [entry("linux", "amd64", 'a')]}).to_string();
        assert!(matches!(
            parse(index.as_bytes(), None),
            Ok(Manifest::Index(_))
        ));
        assert!(matches!(
            parse(index.as_bytes(), Some(media::DOCKER_MANIFEST_LIST)),
            Ok(Manifest::Index(_))
        ));
        let odd = json!({"schemaVersion": 2, "mediaType": "application/vnd.foo"}).to_string();
        assert!(
            matches!(parse(odd.as_bytes(), None), Err(ManifestError::MediaType(m)) if m == "application/vnd.foo")
        );
        let v1 = json!({"schemaVersion": 1}).to_string();
        assert!(matches!(
            parse(v1.as_bytes(), None),
            Err(ManifestError::SchemaVersion(1))
        ));
    }

    #[test]
    fn picks_linux_amd64_and_says_what_there_is_otherwise() {
        let limits = Limits::default();
        let index = json!({"schemaVersion": 2, "mediaType": media::OCI_INDEX, "manifests": [
            entry("linux", "arm64", 'b'), entry("linux", "amd64", 'a'), entry("windows", "amd64", 'f')]});
        let index = match parse(index.to_string().as_bytes(), None) {
            Ok(Manifest::Index(i)) => i,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            select_platform(&index, &limits).unwrap().digest.hex(),
            "a".repeat(64)
        );

        let arm = json!({"schemaVersion": 2, "manifests": [entry("linux", "arm64", 'b')]});
        let arm = match parse(arm.to_string().as_bytes(), None) {
            Ok(Manifest::Index(arm)) => arm,
            other => panic!("{other:?}"),
        };
        let err = select_platform(&arm, &limits).unwrap_err().to_string();
        assert!(
            err.contains("linux/arm64") && err.contains("no linux/amd64"),
            "{err}"
        );

        let small = Limits {
            manifest_bytes: 100,
            ..Limits::default()
        };
        assert!(matches!(
            select_platform(&index, &small),
            Err(ManifestError::TooBig { .. })
        ));
    }

    #[test]
    fn image_checks_before_fetching() {
        let limits = Limits::default();
        let parse_image = |body: Vec<u8>| match parse(&body, None).unwrap() {
            Manifest::Image(m) => m,
            Manifest::Index(_) => panic!(),
        };
        let ok = parse_image(image(vec![
            d(media::OCI_LAYER_GZIP, 'a', 10),
            d(media::DOCKER_LAYER_GZIP, 'b', 10),
        ]));
        assert_eq!(image_blobs(&ok, &limits).unwrap().layers.len(), 2);

        let zstd = parse_image(image(vec![d(media::OCI_LAYER_ZSTD, 'a', 10)]));
        assert!(matches!(
            image_blobs(&zstd, &limits),
            Err(ManifestError::LayerMediaType { index: 0, .. })
        ));

        let big = parse_image(image(vec![d(media::OCI_LAYER_GZIP, 'a', 10)]));
        let tight = Limits {
            config_bytes: 10,
            ..Limits::default()
        };
        let err = image_blobs(&big, &tight).unwrap_err().to_string();
        assert!(err.contains("config is 100 bytes"), "{err}");

        let none = parse_image(image(vec![]));
        assert!(matches!(
            image_blobs(&none, &limits),
            Err(ManifestError::NoLayers)
        ));

        let mut helm = json!({"schemaVersion": 2, "config": d("application/vnd.cncf.helm.config.v1+json", 'c', 10),
            "layers": [d(media::OCI_LAYER_GZIP, 'a', 10)]});
        helm["mediaType"] = json!(media::OCI_MANIFEST);
        let helm = parse_image(helm.to_string().into_bytes());
        assert!(matches!(
            image_blobs(&helm, &limits),
            Err(ManifestError::ConfigMediaType(_))
        ));
    }

    #[test]
    fn refusals_quote_the_manifest_by_its_start() {
        let long = "x".repeat(100_000);
        let odd = json!({"schemaVersion": 2, "mediaType": long}).to_string();
        let err = parse(odd.as_bytes(), None).unwrap_err().to_string();
        assert!(err.len() < 400 && err.contains("(100000 bytes)"), "{err}");
        let not_json = json!({"schemaVersion": 2, "manifests": long}).to_string();
        let err = parse(not_json.as_bytes(), None).unwrap_err().to_string();
        assert!(
            err.len() < 400 && err.starts_with("manifest is not JSON"),
            "{err}"
        );
    }
}
