//! Media types: the OCI and Docker ones we read and write, and the ones of our signature
//! artifact. One place, so a name is spelled once.

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const OCI_LAYER_TAR: &str = "application/vnd.oci.image.layer.v1.tar";
pub const OCI_LAYER_GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
pub const OCI_LAYER_ZSTD: &str = "application/vnd.oci.image.layer.v1.tar+zstd";
/// Deprecated in the image spec but still read: the bytes are the same tar (+gzip).
pub const OCI_LAYER_NONDIST_TAR: &str = "application/vnd.oci.image.layer.nondistributable.v1.tar";
pub const OCI_LAYER_NONDIST_GZIP: &str =
    "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip";
/// The empty descriptor's media type (content `{}`), for artifacts without a config.
pub const OCI_EMPTY: &str = "application/vnd.oci.empty.v1+json";

pub const DOCKER_MANIFEST: &str = "application/vnd.docker.distribution.manifest.v2+json";
pub const DOCKER_MANIFEST_LIST: &str = "application/vnd.docker.distribution.manifest.list.v2+json";
pub const DOCKER_CONFIG: &str = "application/vnd.docker.container.image.v1+json";
pub const DOCKER_LAYER_GZIP: &str = "application/vnd.docker.image.rootfs.diff.tar.gzip";
pub const DOCKER_FOREIGN_LAYER_GZIP: &str =
    "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip";

/// Our signature artifact (see `signing::artifact`): its `artifactType`, and its one layer's
/// media type, the canonical payload.
pub const SIGNATURE_ARTIFACT: &str = "application/vnd.dev.loop.plugin.signature.v1";
pub const SIGNATURE_PAYLOAD: &str = "application/vnd.dev.loop.plugin.signature.payload.v1+json";

/// What a manifest GET accepts: image manifests and indexes, OCI and Docker.
pub const MANIFEST_ACCEPT: &[&str] = &[
    OCI_MANIFEST,
    OCI_INDEX,
    DOCKER_MANIFEST,
    DOCKER_MANIFEST_LIST,
];

/// How a layer's bytes are compressed, from its media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
}

/// The compression of a layer media type we can read, or `None` for one we cannot (zstd,
/// or anything that is not a layer).
pub fn layer_compression(media_type: &str) -> Option<Compression> {
    match media_type {
        OCI_LAYER_TAR | OCI_LAYER_NONDIST_TAR => Some(Compression::None),
        OCI_LAYER_GZIP | OCI_LAYER_NONDIST_GZIP | DOCKER_LAYER_GZIP | DOCKER_FOREIGN_LAYER_GZIP => {
            Some(Compression::Gzip)
        }
        _ => None,
    }
}
