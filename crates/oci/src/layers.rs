//! Reading one layer blob onto a [`RootFs`]: its bytes checked against the descriptor (size
//! and digest) and the config's diff_id, gzip or plain tar, decompressed bytes (sparse files'
//! holes included) and entries counted against the image's budget, each tar entry read by
//! [`TarReader`] and applied with the layer rules. Sync and pure over a `Read`; the caller
//! feeds it the registry's stream on a blocking thread.

use std::io::{self, Read};

use crate::digest::{Digest, Hasher};
use crate::manifest::Blob;
use crate::media::{self, Compression};
use crate::quote;
use crate::rootfs::{EntryKind, Meta, PathError, RootFs};
use crate::tarstream::{Kind, TarError, TarReader};

/// The decompressed bytes and tar entries all layers of one image may hold together, and
/// what the layers applied so far used.
#[derive(Debug, Clone)]
pub struct Budget {
    pub decompressed_limit: u64,
    pub entries_limit: u64,
    decompressed_used: u64,
    entries_used: u64,
}

impl Budget {
    pub fn new(decompressed_limit: u64, entries_limit: u64) -> Self {
        Self {
            decompressed_limit,
            entries_limit,
            decompressed_used: 0,
            entries_used: 0,
        }
    }
}

/// Why a layer cannot be applied; each names what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    #[error("the registry stream failed: {0}")]
    Source(#[source] io::Error),
    #[error("blob is {actual} bytes or more, but its descriptor says {expected}")]
    SizeMismatch { expected: u64, actual: u64 },
    #[error("blob digest is {actual}, but its descriptor says {expected}")]
    DigestMismatch { expected: Digest, actual: Digest },
    #[error("uncompressed digest is {actual}, but the image config's diff_id says {expected}")]
    DiffIdMismatch { expected: Digest, actual: Digest },
    #[error("layers decompress to more than {limit} bytes in all")]
    DecompressedTooBig { limit: u64 },
    #[error("layers hold more than {limit} tar entries in all")]
    TooManyEntries { limit: u64 },
    #[error("media type {0:?} is not a tar or tar+gzip layer")]
    MediaType(String),
    #[error("not a valid {compression} tar stream: {source}")]
    Format {
        compression: &'static str,
        source: io::Error,
    },
    #[error(transparent)]
    Tar(TarError),
    #[error("entry {path:?}: {what} is not a valid number: {source}")]
    Header {
        path: String,
        what: &'static str,
        source: io::Error,
    },
    #[error(transparent)]
    Path(#[from] PathError),
}

/// Applies one layer. `budget` is shared by the image's layers; `diff_id` is the config's
/// `rootfs.diff_ids` entry for this layer.
pub fn apply_layer(
    fs: &mut RootFs,
    index: usize,
    blob: &Blob,
    diff_id: Option<&Digest>,
    source: impl Read,
    budget: &mut Budget,
) -> Result<(), LayerError> {
    let compression = media::layer_compression(&blob.media_type)
        .ok_or_else(|| LayerError::MediaType(blob.media_type.clone()))?;
    fs.begin_layer(index);
    let mut raw = Counted::new(source, blob.size);
    let room = budget
        .decompressed_limit
        .saturating_sub(budget.decompressed_used);
    let (applied, uncompressed, holes, holes_over) = {
        let decoder: Box<dyn Read + '_> = match compression {
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(&mut raw)),
            Compression::None => Box::new(&mut raw),
        };
        let mut tar_bytes = Counted::new(decoder, room);
        let mut tar = TarReader::new(&mut tar_bytes, room);
        let applied = apply_entries(fs, &mut tar, budget, compression);
        let (holes, holes_over) = (tar.holes(), tar.over_budget());
        // The tar reader stops at its end marker: the rest still counts for the digests.
        let drained = applied.and_then(|()| {
            io::copy(&mut tar_bytes, &mut io::sink())
                .map(drop)
                .map_err(format_error(compression))
        });
        (drained, tar_bytes.finish(), holes, holes_over)
    };
    budget.decompressed_used += uncompressed.bytes + holes;
    // A blob the decoder calls corrupt is read to its end too: if its digest is wrong, that
    // is the cause to report.
    let corrupt = matches!(applied, Err(LayerError::Format { .. } | LayerError::Tar(_)));
    let drained = applied.and_then(|()| {
        io::copy(&mut raw, &mut io::sink())
            .map(drop)
            .map_err(format_error(compression))
    });
    if corrupt {
        let _ = io::copy(&mut raw, &mut io::sink());
    }
    let stored = raw.finish();
    if corrupt
        && stored.source_error.is_none()
        && !stored.over
        && (stored.bytes != blob.size || stored.digest != blob.digest)
    {
        return Err(LayerError::DigestMismatch {
            expected: blob.digest.clone(),
            actual: stored.digest,
        });
    }
    // A failure of the stream itself, or of a cap, explains whatever the decoder made of it.
    if let Some(err) = stored.source_error {
        return Err(LayerError::Source(err));
    }
    if stored.over {
        return Err(LayerError::SizeMismatch {
            expected: blob.size,
            actual: stored.bytes,
        });
    }
    if uncompressed.over || holes_over {
        return Err(LayerError::DecompressedTooBig {
            limit: budget.decompressed_limit,
        });
    }
    drained?;
    if stored.bytes != blob.size {
        return Err(LayerError::SizeMismatch {
            expected: blob.size,
            actual: stored.bytes,
        });
    }
    if stored.digest != blob.digest {
        return Err(LayerError::DigestMismatch {
            expected: blob.digest.clone(),
            actual: stored.digest,
        });
    }
    if let Some(expected) = diff_id
        && *expected != uncompressed.digest
    {
        return Err(LayerError::DiffIdMismatch {
            expected: expected.clone(),
            actual: uncompressed.digest,
        });
    }
    Ok(())
}

fn format_error(compression: Compression) -> impl Fn(io::Error) -> LayerError {
    move |source| LayerError::Format {
        compression: compression_name(compression),
        source,
    }
}

fn compression_name(c: Compression) -> &'static str {
    match c {
        Compression::Gzip => "gzip",
        Compression::None => "uncompressed",
    }
}

fn apply_entries(
    fs: &mut RootFs,
    tar: &mut TarReader<impl Read>,
    budget: &mut Budget,
    compression: Compression,
) -> Result<(), LayerError> {
    let tar_error = |e| match e {
        TarError::Stream(source) => LayerError::Format {
            compression: compression_name(compression),
            source,
        },
        e => LayerError::Tar(e),
    };
    while let Some(entry) = tar.next_entry().map_err(tar_error)? {
        budget.entries_used += 1;
        if budget.entries_used > budget.entries_limit {
            return Err(LayerError::TooManyEntries {
                limit: budget.entries_limit,
            });
        }
        let path = String::from_utf8_lossy(&entry.path).into_owned();
        let shown = quote::shown_bytes(&entry.path);
        let meta = Meta {
            uid: id(entry.uid, &shown, "uid")?,
            gid: id(entry.gid, &shown, "gid")?,
            mode: entry.mode,
        };
        let link = || String::from_utf8_lossy(&entry.link).into_owned();
        let kind = match entry.kind {
            Kind::File => EntryKind::File { size: entry.size },
            Kind::Dir => EntryKind::Dir,
            Kind::Symlink => EntryKind::Symlink { target: link() },
            Kind::Hardlink => EntryKind::Hardlink { target: link() },
            Kind::Other(_) => EntryKind::Other,
        };
        fs.apply(&path, kind, meta, &mut tar.content())?;
    }
    Ok(())
}

fn id(v: u64, path: &str, what: &'static str) -> Result<u32, LayerError> {
    u32::try_from(v).map_err(|_| LayerError::Header {
        path: path.to_string(),
        what,
        source: io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{v} does not fit in 32 bits"),
        ),
    })
}

/// A reader that hashes and counts what passes, refusing to pass more than `max` bytes (a
/// blob longer than its descriptor, or decompressed bytes over the budget), and keeping the
/// source's own error so it is reported as such, not as whatever a decoder made of it.
struct Counted<R> {
    inner: R,
    hasher: Hasher,
    max: u64,
    source_error: Option<io::Error>,
    over: bool,
}

/// What a [`Counted`] saw.
struct Counts {
    bytes: u64,
    digest: Digest,
    source_error: Option<io::Error>,
    over: bool,
}

impl<R: Read> Counted<R> {
    fn new(inner: R, max: u64) -> Self {
        Self {
            inner,
            hasher: Hasher::default(),
            max,
            source_error: None,
            over: false,
        }
    }

    fn finish(self) -> Counts {
        Counts {
            bytes: self.hasher.bytes(),
            digest: self.hasher.finish(),
            source_error: self.source_error,
            over: self.over,
        }
    }
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = match self.inner.read(buf) {
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Err(e),
            Err(e) => {
                let message = e.to_string();
                self.source_error.get_or_insert(e);
                return Err(io::Error::other(message));
            }
        };
        self.hasher.update(&buf[..n]);
        if self.hasher.bytes() > self.max {
            self.over = true;
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "more bytes than allowed",
            ));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::build::{LayerBuilder, LayerCompression};
    use crate::rootfs::{NodeKind, PLUGIN_JSON};
    use crate::tarstream;

    fn budget() -> Budget {
        Budget::new(1 << 30, 1000)
    }

    fn apply(
        fs: &mut RootFs,
        index: usize,
        layer: &LayerBuilder,
        compression: LayerCompression,
    ) -> Result<(), LayerError> {
        let built = layer.build(compression).unwrap();
        apply_layer(
            fs,
            index,
            &built.blob,
            Some(&built.diff_id),
            &built.bytes[..],
            &mut budget(),
        )
    }

    #[test]
    fn gzip_and_plain_tar_apply_the_same() {
        for compression in [LayerCompression::Gzip, LayerCompression::None] {
            let mut fs = RootFs::new(1 << 20);
            let layer = LayerBuilder::new().dir("data", 1000, 1000, 0o755).file(
                "loop-plugin/plugin.json",
                b"{}",
                0,
                0,
                0o644,
            );
            apply(&mut fs, 0, &layer, compression).unwrap();
            assert_eq!(fs.get("data").unwrap().meta.uid, 1000);
            assert!(
                matches!(&fs.get(PLUGIN_JSON).unwrap().kind, NodeKind::File { content: Some(c), .. } if c.as_slice() == b"{}")
            );
        }
    }

    #[test]
    fn upper_layer_whiteouts_and_opaque_dirs() {
        let mut fs = RootFs::new(1 << 20);
        let lower = LayerBuilder::new()
            .file("loop-plugin/plugin.json", b"{}", 0, 0, 0o644)
            .file("loop-plugin/ui/old.html", b"old", 0, 0, 0o644);
        apply(&mut fs, 0, &lower, LayerCompression::Gzip).unwrap();
        let upper = LayerBuilder::new()
            .whiteout("loop-plugin/plugin.json")
            .opaque("loop-plugin/ui")
            .file("loop-plugin/ui/new.html", b"new", 0, 0, 0o644);
        apply(&mut fs, 1, &upper, LayerCompression::Gzip).unwrap();
        assert!(fs.get(PLUGIN_JSON).is_none());
        assert!(fs.get("loop-plugin/ui/old.html").is_none());
        assert!(fs.get("loop-plugin/ui/new.html").is_some());
    }

    #[test]
    fn dotdot_entry_is_refused_naming_it() {
        let mut fs = RootFs::new(1 << 20);
        let layer = LayerBuilder::new().raw_file("loop-plugin/../../etc/evil", b"x");
        let err = apply(&mut fs, 0, &layer, LayerCompression::Gzip).unwrap_err();
        assert!(
            matches!(err, LayerError::Path(PathError::DotDot { ref path }) if path == "loop-plugin/../../etc/evil"),
            "{err}"
        );
    }

    #[test]
    fn digest_size_and_diff_id_are_checked() {
        let layer = LayerBuilder::new()
            .file("a", b"a", 0, 0, 0o644)
            .build(LayerCompression::Gzip)
            .unwrap();
        let mut wrong = layer.blob.clone();
        wrong.digest = Digest::of(b"something else");
        let err = apply_layer(
            &mut RootFs::new(10),
            0,
            &wrong,
            None,
            &layer.bytes[..],
            &mut budget(),
        )
        .unwrap_err();
        assert!(matches!(err, LayerError::DigestMismatch { .. }), "{err}");

        let mut short = layer.blob.clone();
        short.size -= 1;
        let err = apply_layer(
            &mut RootFs::new(10),
            0,
            &short,
            None,
            &layer.bytes[..],
            &mut budget(),
        )
        .unwrap_err();
        assert!(matches!(err, LayerError::SizeMismatch { .. }), "{err}");

        let mut long = layer.blob.clone();
        long.size += 1;
        let err = apply_layer(
            &mut RootFs::new(10),
            0,
            &long,
            None,
            &layer.bytes[..],
            &mut budget(),
        )
        .unwrap_err();
        assert!(matches!(err, LayerError::SizeMismatch { .. }), "{err}");

        // Corrupt bytes the decoder trips on are reported by their digest, the actual cause.
        let mut corrupt = layer.bytes.clone();
        let last = corrupt.len() - 1;
        corrupt[last] ^= 0xff;
        let err = apply_layer(
            &mut RootFs::new(10),
            0,
            &layer.blob,
            None,
            &corrupt[..],
            &mut budget(),
        )
        .unwrap_err();
        assert!(matches!(err, LayerError::DigestMismatch { .. }), "{err}");

        let other = Digest::of(b"x");
        let err = apply_layer(
            &mut RootFs::new(10),
            0,
            &layer.blob,
            Some(&other),
            &layer.bytes[..],
            &mut budget(),
        )
        .unwrap_err();
        assert!(matches!(err, LayerError::DiffIdMismatch { .. }), "{err}");
    }

    #[test]
    fn decompression_bomb_and_entry_count_are_capped() {
        let layer = LayerBuilder::new()
            .file("zeros", &vec![0; 1 << 20], 0, 0, 0o644)
            .build(LayerCompression::Gzip)
            .unwrap();
        assert!(layer.bytes.len() < 10_000);
        let mut small = Budget::new(100_000, 10);
        let err = apply_layer(
            &mut RootFs::new(10),
            0,
            &layer.blob,
            None,
            &layer.bytes[..],
            &mut small,
        )
        .unwrap_err();
        assert!(
            matches!(err, LayerError::DecompressedTooBig { limit: 100_000 }),
            "{err}"
        );

        let many = (0..5).fold(LayerBuilder::new(), |l, i| {
            l.file(&format!("f{i}"), b"", 0, 0, 0o644)
        });
        let many = many.build(LayerCompression::None).unwrap();
        let mut few = Budget::new(1 << 30, 3);
        let err = apply_layer(
            &mut RootFs::new(10),
            0,
            &many.blob,
            None,
            &many.bytes[..],
            &mut few,
        )
        .unwrap_err();
        assert!(
            matches!(err, LayerError::TooManyEntries { limit: 3 }),
            "{err}"
        );
    }

    #[test]
    fn a_failing_source_is_reported_as_such() {
        struct Failing;
        impl Read for Failing {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::new(
                    io::ErrorKind::ConnectionReset,
                    "peer went away",
                ))
            }
        }
        let layer = LayerBuilder::new()
            .file("a", b"a", 0, 0, 0o644)
            .build(LayerCompression::Gzip)
            .unwrap();
        let err = apply_layer(
            &mut RootFs::new(10),
            0,
            &layer.blob,
            None,
            Failing,
            &mut budget(),
        )
        .unwrap_err();
        assert!(
            matches!(err, LayerError::Source(ref e) if e.kind() == io::ErrorKind::ConnectionReset),
            "{err}"
        );
    }

    #[test]
    fn pax_uid_overrides_the_header() {
        let mut b = tar::Builder::new(Vec::new());
        let record = b"18 uid=4000000000\n";
        let mut pax = tar::Header::new_ustar();
        pax.set_entry_type(tar::EntryType::XHeader);
        pax.set_path("PaxHeaders/data").unwrap();
        pax.set_size(record.len() as u64);
        pax.set_cksum();
        b.append(&pax, &record[..]).unwrap();
        let mut dir = tar::Header::new_ustar();
        dir.set_entry_type(tar::EntryType::Directory);
        dir.set_path("data").unwrap();
        dir.set_size(0);
        dir.set_mode(0o755);
        dir.set_gid(0);
        dir.set_cksum();
        b.append(&dir, io::empty()).unwrap();
        let bytes = b.into_inner().unwrap();
        let blob = Blob {
            media_type: media::OCI_LAYER_TAR.into(),
            digest: Digest::of(&bytes),
            size: bytes.len() as u64,
        };
        let mut fs = RootFs::new(10);
        apply_layer(&mut fs, 0, &blob, None, &bytes[..], &mut budget()).unwrap();
        assert_eq!(fs.get("data").unwrap().meta.uid, 4_000_000_000);
    }

    #[test]
    fn gnu_large_uids_and_long_names_are_read() {
        let long = format!("loop-plugin/{}/plugin.json", "d".repeat(150));
        let layer = LayerBuilder::new()
            .dir("data", 3_000_000, 3_000_000, 0o755)
            .file(&long, b"{}", 0, 0, 0o644);
        let mut fs = RootFs::new(1 << 20);
        apply(&mut fs, 0, &layer, LayerCompression::None).unwrap();
        assert_eq!(fs.get("data").unwrap().meta.uid, 3_000_000);
        assert!(fs.get(&long).is_some());
    }

    fn plain(bytes: Vec<u8>) -> (Blob, Vec<u8>) {
        let blob = Blob {
            media_type: media::OCI_LAYER_TAR.into(),
            digest: Digest::of(&bytes),
            size: bytes.len() as u64,
        };
        (blob, bytes)
    }

    #[test]
    fn extension_headers_are_capped_before_they_are_read() {
        let name = "a/".repeat(1 << 20);
        let mut b = tar::Builder::new(Vec::new());
        let mut h = tar::Header::new_gnu();
        h.set_size(0);
        b.append_data(&mut h, &name, io::empty()).unwrap();
        let (blob, bytes) = plain(b.into_inner().unwrap());
        let err = apply_layer(
            &mut RootFs::new(10),
            0,
            &blob,
            None,
            &bytes[..],
            &mut budget(),
        )
        .unwrap_err();
        assert!(
            matches!(
                err,
                LayerError::Tar(TarError::Entry {
                    reason: tarstream::Reason::ExtensionTooBig { .. },
                    ..
                })
            ),
            "{err}"
        );
    }

    #[test]
    fn sparse_holes_count_as_decompressed_bytes() {
        let mut bytes =
            tarstream::tests::sparse("loop-plugin/holes", &[(1 << 20, 1)], (1 << 20) + 1, b"x");
        bytes.extend_from_slice(&[0; 1024]);
        let (blob, bytes) = plain(bytes);
        let mut small = Budget::new(100_000, 10);
        let err = apply_layer(
            &mut RootFs::new(1 << 30),
            0,
            &blob,
            None,
            &bytes[..],
            &mut small,
        )
        .unwrap_err();
        assert!(
            matches!(err, LayerError::DecompressedTooBig { limit: 100_000 }),
            "{err}"
        );
        let mut fs = RootFs::new(1 << 30);
        let mut room = budget();
        apply_layer(&mut fs, 0, &blob, None, &bytes[..], &mut room).unwrap();
        assert_eq!(room.decompressed_used, bytes.len() as u64 + (1 << 20));
        let NodeKind::File {
            content: Some(c), ..
        } = &fs.get("loop-plugin/holes").unwrap().kind
        else {
            panic!("a file with its bytes");
        };
        assert_eq!((c.len(), c[1 << 20]), ((1 << 20) + 1, b'x'));
    }

    #[test]
    fn a_corrupt_stream_is_named_by_its_compression() {
        let layer = LayerBuilder::new()
            .file("a", &[7; 4000], 0, 0, 0o644)
            .build(LayerCompression::Gzip)
            .unwrap();
        let cut = &layer.bytes[..layer.bytes.len() / 2];
        let blob = Blob {
            media_type: media::OCI_LAYER_GZIP.into(),
            digest: Digest::of(cut),
            size: cut.len() as u64,
        };
        let err = apply_layer(&mut RootFs::new(10), 0, &blob, None, cut, &mut budget())
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("not a valid gzip tar stream: "), "{err}");
    }
}
