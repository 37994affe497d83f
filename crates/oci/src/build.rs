//! Building OCI images in memory, deterministically: layers as tar (+gzip) with fixed mtimes
//! and the entry order given (sorted when read from a directory), a config, a manifest and an
//! index, so the same inputs always give the same digests. Used to push the echo plugin's
//! image without Docker and by the tests to write good and broken images. Pure, except
//! [`LayerBuilder::from_dir`], which reads a host directory.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use serde_json::json;

use crate::digest::Digest;
use crate::manifest::Blob;
use crate::media;

/// How a built layer is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerCompression {
    Gzip,
    None,
}

#[derive(Debug, Clone)]
enum Kind {
    File(Vec<u8>),
    Dir,
    Symlink(String),
    Hardlink(String),
    /// A regular file whose name is written as is, unchecked (for refusal tests).
    Raw(Vec<u8>),
}

#[derive(Debug, Clone)]
struct Entry {
    path: String,
    kind: Kind,
    uid: u32,
    gid: u32,
    mode: u32,
}

/// The entries of one layer, in the order they are written.
#[derive(Debug, Clone, Default)]
pub struct LayerBuilder {
    entries: Vec<Entry>,
}

/// A built layer: its bytes, its descriptor and its uncompressed digest (the config's diff_id).
#[derive(Debug, Clone)]
pub struct BuiltLayer {
    pub bytes: Vec<u8>,
    pub blob: Blob,
    pub diff_id: Digest,
}

/// Why an image could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    #[error("layer entry {path:?}: {source}")]
    Entry { path: String, source: io::Error },
    #[error("reading {path}: {source}")]
    Read { path: PathBuf, source: io::Error },
    #[error("{path}: {what} is not supported in an image built from a directory")]
    Unsupported { path: PathBuf, what: &'static str },
    #[error("writing the layer: {0}")]
    Write(#[source] io::Error),
}

impl LayerBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    fn push(mut self, path: &str, kind: Kind, uid: u32, gid: u32, mode: u32) -> Self {
        self.entries.push(Entry {
            path: path.to_string(),
            kind,
            uid,
            gid,
            mode,
        });
        self
    }

    /// A regular file.
    pub fn file(self, path: &str, bytes: &[u8], uid: u32, gid: u32, mode: u32) -> Self {
        self.push(path, Kind::File(bytes.to_vec()), uid, gid, mode)
    }

    /// A directory.
    pub fn dir(self, path: &str, uid: u32, gid: u32, mode: u32) -> Self {
        self.push(path, Kind::Dir, uid, gid, mode)
    }

    /// A symbolic link, owned by root.
    pub fn symlink(self, path: &str, target: &str) -> Self {
        self.push(path, Kind::Symlink(target.to_string()), 0, 0, 0o777)
    }

    /// A hard link to an earlier entry's path.
    pub fn hardlink(self, path: &str, target: &str) -> Self {
        self.push(path, Kind::Hardlink(target.to_string()), 0, 0, 0o644)
    }

    /// A whiteout hiding `path` of lower layers (`<dir>/.wh.<name>`).
    pub fn whiteout(self, path: &str) -> Self {
        let path = path.trim_end_matches('/');
        let marker = match path.rsplit_once('/') {
            Some((dir, name)) => format!("{dir}/.wh.{name}"),
            None => format!(".wh.{path}"),
        };
        self.push(&marker, Kind::File(Vec::new()), 0, 0, 0o644)
    }

    /// An opaque marker hiding what lower layers put under `dir` (`<dir>/.wh..wh..opq`).
    pub fn opaque(self, dir: &str) -> Self {
        let marker = format!("{}/.wh..wh..opq", dir.trim_end_matches('/'));
        self.push(&marker, Kind::File(Vec::new()), 0, 0, 0o644)
    }

    /// A regular file whose name goes into the tar header unchecked, `..` and leading `/`
    /// included: what a hostile image would carry. At most 100 bytes.
    pub fn raw_file(self, name: &str, bytes: &[u8]) -> Self {
        self.push(name, Kind::Raw(bytes.to_vec()), 0, 0, 0o644)
    }

    /// A host directory's tree under `dest` in the image (`""` for the root), entries sorted
    /// by path, owned by `uid:gid`, modes 0755 for directories and executables, else 0644.
    /// Regular files, directories and symlinks only.
    pub fn from_dir(
        mut self,
        host: &Path,
        dest: &str,
        uid: u32,
        gid: u32,
    ) -> Result<Self, BuildError> {
        let dest = dest.trim_matches('/');
        let mut paths = Vec::new();
        collect(host, host, &mut paths)?;
        paths.sort();
        for rel in paths {
            let src = host.join(&rel);
            let read = |source| BuildError::Read {
                path: src.clone(),
                source,
            };
            let meta = std::fs::symlink_metadata(&src).map_err(read)?;
            let rel = rel.to_string_lossy().replace('\\', "/");
            let path = if dest.is_empty() {
                rel
            } else {
                format!("{dest}/{rel}")
            };
            let ft = meta.file_type();
            self = if ft.is_dir() {
                self.dir(&path, uid, gid, 0o755)
            } else if ft.is_symlink() {
                let target = std::fs::read_link(&src).map_err(read)?;
                self.push(
                    &path,
                    Kind::Symlink(target.to_string_lossy().into_owned()),
                    uid,
                    gid,
                    0o777,
                )
            } else if ft.is_file() {
                use std::os::unix::fs::PermissionsExt;
                let mode = if meta.permissions().mode() & 0o111 != 0 {
                    0o755
                } else {
                    0o644
                };
                let bytes = std::fs::read(&src).map_err(read)?;
                self.file(&path, &bytes, uid, gid, mode)
            } else {
                return Err(BuildError::Unsupported {
                    path: src,
                    what: "a device, socket or FIFO",
                });
            };
        }
        Ok(self)
    }

    /// Writes the layer.
    pub fn build(&self, compression: LayerCompression) -> Result<BuiltLayer, BuildError> {
        let tar_bytes = self.tar()?;
        let diff_id = Digest::of(&tar_bytes);
        let (bytes, media_type) = match compression {
            LayerCompression::None => (tar_bytes, media::OCI_LAYER_TAR),
            LayerCompression::Gzip => {
                // GzEncoder writes mtime 0 and no file name: the same tar gives the same bytes.
                let mut gz =
                    flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                gz.write_all(&tar_bytes).map_err(BuildError::Write)?;
                (
                    gz.finish().map_err(BuildError::Write)?,
                    media::OCI_LAYER_GZIP,
                )
            }
        };
        let blob = Blob {
            media_type: media_type.to_string(),
            digest: Digest::of(&bytes),
            size: bytes.len() as u64,
        };
        Ok(BuiltLayer {
            bytes,
            blob,
            diff_id,
        })
    }

    fn tar(&self) -> Result<Vec<u8>, BuildError> {
        let mut builder = tar::Builder::new(Vec::new());
        for e in &self.entries {
            let err = |source| BuildError::Entry {
                path: e.path.clone(),
                source,
            };
            let mut h = tar::Header::new_gnu();
            h.set_mtime(0);
            h.set_uid(e.uid.into());
            h.set_gid(e.gid.into());
            h.set_mode(e.mode);
            match &e.kind {
                Kind::File(bytes) => {
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_size(bytes.len() as u64);
                    builder
                        .append_data(&mut h, &e.path, &bytes[..])
                        .map_err(err)?;
                }
                Kind::Dir => {
                    h.set_entry_type(tar::EntryType::Directory);
                    h.set_size(0);
                    builder
                        .append_data(&mut h, &e.path, io::empty())
                        .map_err(err)?;
                }
                Kind::Symlink(target) | Kind::Hardlink(target) => {
                    let symlink = matches!(e.kind, Kind::Symlink(_));
                    h.set_entry_type(if symlink {
                        tar::EntryType::Symlink
                    } else {
                        tar::EntryType::Link
                    });
                    h.set_size(0);
                    builder.append_link(&mut h, &e.path, target).map_err(err)?;
                }
                Kind::Raw(bytes) => {
                    let name = e.path.as_bytes();
                    let field = &mut h.as_old_mut().name;
                    if name.len() > field.len() {
                        return Err(err(io::Error::new(
                            io::ErrorKind::InvalidInput,
                            "raw names are at most 100 bytes",
                        )));
                    }
                    field[..name.len()].copy_from_slice(name);
                    h.set_entry_type(tar::EntryType::Regular);
                    h.set_size(bytes.len() as u64);
                    h.set_cksum();
                    builder.append(&h, &bytes[..]).map_err(err)?;
                }
            }
        }
        builder.into_inner().map_err(BuildError::Write)
    }
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), BuildError> {
    let read = |source| BuildError::Read {
        path: dir.to_path_buf(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(read)? {
        let entry = entry.map_err(read)?;
        let path = entry.path();
        out.push(path.strip_prefix(root).unwrap_or(&path).to_path_buf());
        if entry.file_type().map_err(read)?.is_dir() {
            collect(root, &path, out)?;
        }
    }
    Ok(())
}

/// The image config's runtime part, and its platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageConfig {
    pub entrypoint: Vec<String>,
    pub cmd: Vec<String>,
    /// `USER`: `uid`, `uid:gid`, or anything else for refusal tests; None leaves it unset.
    pub user: Option<String>,
    pub labels: BTreeMap<String, String>,
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    pub os: String,
    pub architecture: String,
}

impl Default for ImageConfig {
    fn default() -> Self {
        Self {
            entrypoint: Vec::new(),
            cmd: Vec::new(),
            user: None,
            labels: BTreeMap::new(),
            env: Vec::new(),
            working_dir: None,
            os: crate::manifest::PLATFORM_OS.to_string(),
            architecture: crate::manifest::PLATFORM_ARCH.to_string(),
        }
    }
}

/// A built image: its blobs, config and manifest, ready to push.
#[derive(Debug, Clone)]
pub struct BuiltImage {
    pub layers: Vec<BuiltLayer>,
    pub config: Vec<u8>,
    pub config_blob: Blob,
    pub manifest: Vec<u8>,
    pub manifest_digest: Digest,
}

impl BuiltImage {
    /// The image's descriptor, for an index entry.
    pub fn descriptor(&self) -> Blob {
        Blob {
            media_type: media::OCI_MANIFEST.to_string(),
            digest: self.manifest_digest.clone(),
            size: self.manifest.len() as u64,
        }
    }
}

/// Assembles config and manifest over built layers (keys sorted, no timestamps).
pub fn build_image(config: &ImageConfig, layers: Vec<BuiltLayer>) -> BuiltImage {
    let diff_ids: Vec<String> = layers.iter().map(|l| l.diff_id.to_string()).collect();
    let mut runtime = serde_json::Map::new();
    if let Some(user) = &config.user {
        runtime.insert("User".into(), json!(user));
    }
    if !config.entrypoint.is_empty() {
        runtime.insert("Entrypoint".into(), json!(config.entrypoint));
    }
    if !config.cmd.is_empty() {
        runtime.insert("Cmd".into(), json!(config.cmd));
    }
    if !config.labels.is_empty() {
        runtime.insert("Labels".into(), json!(config.labels));
    }
    if !config.env.is_empty() {
        runtime.insert("Env".into(), json!(config.env));
    }
    if let Some(dir) = &config.working_dir {
        runtime.insert("WorkingDir".into(), json!(dir));
    }
    let config_json = json!({
        "architecture": config.architecture,
        "os": config.os,
        "config": runtime,
        "rootfs": {"type": "layers", "diff_ids": diff_ids},
    });
    let config_bytes = serde_json::to_vec(&config_json).expect("JSON of strings serializes");
    let config_blob = Blob {
        media_type: media::OCI_CONFIG.to_string(),
        digest: Digest::of(&config_bytes),
        size: config_bytes.len() as u64,
    };
    let manifest = json!({
        "schemaVersion": 2,
        "mediaType": media::OCI_MANIFEST,
        "config": descriptor_json(&config_blob),
        "layers": layers.iter().map(|l| descriptor_json(&l.blob)).collect::<Vec<_>>(),
    });
    let manifest = serde_json::to_vec(&manifest).expect("JSON of strings serializes");
    BuiltImage {
        manifest_digest: Digest::of(&manifest),
        layers,
        config: config_bytes,
        config_blob,
        manifest,
    }
}

/// An index over images, each with its platform (`(image, os, architecture)`); returns its
/// bytes and digest.
pub fn build_index(entries: &[(&BuiltImage, &str, &str)]) -> (Vec<u8>, Digest) {
    let manifests: Vec<serde_json::Value> = entries
        .iter()
        .map(|(image, os, arch)| {
            let mut d = descriptor_json(&image.descriptor());
            d["platform"] = json!({"os": os, "architecture": arch});
            d
        })
        .collect();
    let index = json!({"schemaVersion": 2, "mediaType": media::OCI_INDEX, "manifests": manifests});
    let bytes = serde_json::to_vec(&index).expect("JSON of strings serializes");
    let digest = Digest::of(&bytes);
    (bytes, digest)
}

pub(crate) fn descriptor_json(blob: &Blob) -> serde_json::Value {
    json!({"mediaType": blob.media_type, "digest": blob.digest.to_string(), "size": blob.size})
}

/// A plugin image laid out as the reference's "Image layout" asks, from host files: the
/// binary at `/<name>` (the entrypoint), `plugin_dir`'s tree (plugin.json, ui/...) at
/// /loop-plugin, an empty /data owned by `uid:gid`, /tmp (1777), `USER uid:gid`, label
/// dev.loop.plugin=1. Two gzip layers: the binary, then /loop-plugin, /data and /tmp. No base
/// image: the binary must be static (no libc in the image).
#[derive(Debug, Clone)]
pub struct PluginImageSpec {
    pub binary: PathBuf,
    pub binary_name: String,
    pub plugin_dir: PathBuf,
    pub uid: u32,
    pub gid: u32,
    pub labels: BTreeMap<String, String>,
    pub env: Vec<String>,
}

impl PluginImageSpec {
    pub fn build(&self) -> Result<BuiltImage, BuildError> {
        let read = |source| BuildError::Read {
            path: self.binary.clone(),
            source,
        };
        let binary = std::fs::read(&self.binary).map_err(read)?;
        let name = self.binary_name.trim_matches('/');
        let bin_layer = LayerBuilder::new().file(name, &binary, 0, 0, 0o755);
        let plugin_layer = LayerBuilder::new()
            .dir(crate::rootfs::LOOP_PLUGIN_DIR, 0, 0, 0o755)
            .from_dir(&self.plugin_dir, crate::rootfs::LOOP_PLUGIN_DIR, 0, 0)?
            .dir(crate::rootfs::DATA_DIR, self.uid, self.gid, 0o755)
            .dir("tmp", 0, 0, 0o1777);
        let mut labels = self.labels.clone();
        labels.insert(
            crate::checks::PLUGIN_LABEL.to_string(),
            crate::checks::PLUGIN_LABEL_VALUE.to_string(),
        );
        let config = ImageConfig {
            entrypoint: vec![format!("/{name}")],
            user: Some(format!("{}:{}", self.uid, self.gid)),
            labels,
            env: self.env.clone(),
            ..ImageConfig::default()
        };
        let layers = vec![
            bin_layer.build(LayerCompression::Gzip)?,
            plugin_layer.build(LayerCompression::Gzip)?,
        ];
        Ok(build_image(&config, layers))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> LayerBuilder {
        LayerBuilder::new().dir("data", 1000, 1000, 0o755).file(
            "loop-plugin/plugin.json",
            b"{}",
            0,
            0,
            0o644,
        )
    }

    #[test]
    fn same_inputs_same_digests() {
        let a = sample().build(LayerCompression::Gzip).unwrap();
        let b = sample().build(LayerCompression::Gzip).unwrap();
        assert_eq!(a.blob, b.blob);
        let config = ImageConfig {
            user: Some("1000:1000".into()),
            ..ImageConfig::default()
        };
        assert_eq!(
            build_image(&config, vec![a]).manifest_digest,
            build_image(&config, vec![b]).manifest_digest
        );
    }

    #[test]
    fn from_dir_is_sorted_and_owned_as_asked() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("ui/main")).unwrap();
        std::fs::write(dir.path().join("plugin.json"), b"{}").unwrap();
        std::fs::write(dir.path().join("ui/main/index.html"), b"<p>").unwrap();
        std::os::unix::fs::symlink("main/index.html", dir.path().join("ui/link")).unwrap();
        let layer = LayerBuilder::new()
            .from_dir(dir.path(), "loop-plugin", 7, 8)
            .unwrap();
        let paths: Vec<&str> = layer.entries.iter().map(|e| e.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "loop-plugin/plugin.json",
                "loop-plugin/ui",
                "loop-plugin/ui/link",
                "loop-plugin/ui/main",
                "loop-plugin/ui/main/index.html"
            ]
        );
        assert!(layer.entries.iter().all(|e| e.uid == 7 && e.gid == 8));
        let again = LayerBuilder::new()
            .from_dir(dir.path(), "loop-plugin", 7, 8)
            .unwrap();
        assert_eq!(
            layer.build(LayerCompression::Gzip).unwrap().blob,
            again.build(LayerCompression::Gzip).unwrap().blob
        );
    }

    #[test]
    fn raw_names_go_in_unchecked() {
        let layer = LayerBuilder::new()
            .raw_file("../escape", b"x")
            .build(LayerCompression::None)
            .unwrap();
        let mut archive = tar::Archive::new(&layer.bytes[..]);
        let entry = archive.entries().unwrap().next().unwrap().unwrap();
        assert_eq!(&*entry.path_bytes(), b"../escape");
    }
}
