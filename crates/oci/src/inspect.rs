//! Pulling a plugin image and checking it: resolve the reference to its image manifest
//! digest, check the manifest and config before fetching any layer, stream each layer through
//! the layer rules on a blocking thread, then check the merged tree. The result is every fact
//! install and admission need; a failure says which step and what is wrong.

use tokio_util::io::{StreamReader, SyncIoBridge};

use crate::checks::{self, CheckError, ConfigFacts, TreeFacts};
use crate::digest::Digest;
use crate::layers::{self, Budget, LayerError};
use crate::manifest::{self, ManifestError};
use crate::reference::ImageRef;
use crate::registry::{self, Registry, RegistryError};
use crate::rootfs::{PathError, RootFs};

/// What a plugin image is, once pulled and checked.
#[derive(Debug, Clone)]
pub struct ImageFacts {
    /// The reference as asked.
    pub reference: ImageRef,
    /// The reference pinned to the image manifest digest (tag kept): the Plugin's `image`.
    pub pinned: ImageRef,
    /// The image manifest's digest (an index's linux/amd64 child when the reference named an
    /// index): what signatures bind to.
    pub manifest_digest: Digest,
    pub index_digest: Option<Digest>,
    pub config_digest: Digest,
    /// USER, ENTRYPOINT, CMD, labels, env from the image config.
    pub config: ConfigFacts,
    /// plugin.json's bytes and sha256, the /loop-plugin tree, /data's owner.
    pub tree: TreeFacts,
}

impl ImageFacts {
    /// `registry/repository`, what a signature payload names.
    pub fn repository(&self) -> String {
        self.reference.name()
    }

    /// The Plugin's command: the image's entrypoint followed by its cmd.
    pub fn command(&self) -> Vec<String> {
        self.config
            .entrypoint
            .iter()
            .chain(&self.config.cmd)
            .cloned()
            .collect()
    }
}

/// Why an image was not accepted, with the reference it was about.
#[derive(Debug, thiserror::Error)]
pub enum InspectError {
    #[error("{reference}: {source}")]
    Registry {
        reference: String,
        source: RegistryError,
    },
    #[error("{reference}: {source}")]
    Manifest {
        reference: String,
        source: ManifestError,
    },
    #[error("{reference}: {source}")]
    Check {
        reference: String,
        source: CheckError,
    },
    /// Boxed: a layer's error names its entry at length, and this error travels far.
    #[error("{reference}: layer {index} ({digest}): {source}")]
    Layer {
        reference: String,
        index: usize,
        digest: Digest,
        source: Box<LayerError>,
    },
    #[error("{reference}: the layer reader stopped: {message}")]
    Task { reference: String, message: String },
}

impl InspectError {
    /// A failure that may pass on its own: requeue rather than refuse.
    pub fn is_transient(&self) -> bool {
        match self {
            InspectError::Registry { source, .. } => source.is_transient(),
            InspectError::Task { .. } => true,
            _ => false,
        }
    }

    /// A stable name for conditions and Events.
    pub fn reason(&self) -> &'static str {
        match self {
            InspectError::Registry { source, .. } => source.reason(),
            InspectError::Manifest { .. } => "ImageManifestInvalid",
            InspectError::Check { source, .. } => source.reason(),
            InspectError::Layer { source, .. } => match source.as_ref() {
                LayerError::Path(PathError::LoopPluginTooBig { .. }) => "ImageLoopPluginTooBig",
                LayerError::DigestMismatch { .. }
                | LayerError::SizeMismatch { .. }
                | LayerError::DiffIdMismatch { .. } => "ImageDigestMismatch",
                LayerError::DecompressedTooBig { .. } | LayerError::TooManyEntries { .. } => {
                    "ImageTooBig"
                }
                LayerError::Source(_) => "RegistryUnavailable",
                _ => "ImageLayerInvalid",
            },
            InspectError::Task { .. } => "Internal",
        }
    }
}

/// Pulls `reference` and checks it as a plugin image.
#[tracing::instrument(skip(registry), fields(reference = %reference))]
pub async fn inspect(
    registry: &Registry,
    reference: &ImageRef,
) -> Result<ImageFacts, InspectError> {
    let name = reference.to_string();
    let reg = |source| InspectError::Registry {
        reference: name.clone(),
        source,
    };
    let limits = registry.limits().clone();

    let resolved = registry.resolve(reference).await.map_err(reg)?;
    let blobs = manifest::image_blobs(&resolved.manifest, &limits).map_err(|source| {
        InspectError::Manifest {
            reference: name.clone(),
            source,
        }
    })?;
    tracing::debug!(digest = %resolved.manifest_digest, layers = blobs.layers.len(), "resolved");
    let by_digest = reference.by_digest(resolved.manifest_digest.clone());
    let config_bytes = registry
        .fetch_blob(&by_digest, &blobs.config, limits.config_bytes)
        .await
        .map_err(reg)?;
    let config = checks::check_config(&config_bytes, blobs.layers.len()).map_err(|source| {
        InspectError::Check {
            reference: name.clone(),
            source,
        }
    })?;

    let mut fs = RootFs::for_limits(&limits);
    let mut budget = Budget::new(limits.decompressed_bytes, limits.entries);
    for (index, blob) in blobs.layers.iter().enumerate() {
        let stream = registry.blob_stream(&by_digest, blob).await.map_err(reg)?;
        let reader = SyncIoBridge::new(StreamReader::new(stream));
        let diff_id = config.diff_ids.get(index).cloned();
        let layer = blob.clone();
        let (back, left, result) = tokio::task::spawn_blocking(move || {
            let result = layers::apply_layer(
                &mut fs,
                index,
                &layer,
                diff_id.as_ref(),
                reader,
                &mut budget,
            );
            (fs, budget, result)
        })
        .await
        .map_err(|e| InspectError::Task {
            reference: name.clone(),
            message: e.to_string(),
        })?;
        (fs, budget) = (back, left);
        match result {
            Ok(()) => {}
            // The stream's own failure (a transfer error, oci-client's digest check) is the registry's.
            Err(LayerError::Source(e)) => {
                let what = format!("blob {} of {}", blob.digest, reference.name());
                return Err(reg(registry::io_error(&what, e)));
            }
            Err(source) => {
                return Err(InspectError::Layer {
                    reference: name,
                    index,
                    digest: blob.digest.clone(),
                    source: Box::new(source),
                });
            }
        }
    }
    tracing::debug!(loop_plugin_bytes = fs.loop_plugin_bytes(), "layers applied");
    let tree =
        checks::check_tree(&fs, config.run_as, limits.loop_plugin_bytes).map_err(|source| {
            InspectError::Check {
                reference: name.clone(),
                source,
            }
        })?;
    Ok(ImageFacts {
        reference: reference.clone(),
        pinned: reference.pinned(resolved.manifest_digest.clone()),
        manifest_digest: resolved.manifest_digest,
        index_digest: resolved.index_digest,
        config_digest: blobs.config.digest,
        config,
        tree,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::RegistryOptions;
    use crate::signing::publish;

    /// The controller runs these on tokio tasks: their futures must be Send.
    #[test]
    fn futures_are_send() {
        fn send<T: Send>(_: &T) {}
        let _ = rustls::crypto::ring::default_provider().install_default();
        let registry = Registry::new(RegistryOptions::default()).unwrap();
        let r = ImageRef::parse("localhost:5000/x:v1").unwrap();
        send(&inspect(&registry, &r));
        let d = Digest::of(b"");
        send(&publish::fetch_signatures(&registry, &r, &d));
        send(&registry.push_image(&r, &crate::build::build_image(&Default::default(), vec![])));
    }
}
