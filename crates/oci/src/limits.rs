//! Size caps on what a registry sends us, so an image cannot make a pull use unbounded memory
//! or time. The /loop-plugin cap is the reference's (50 MB, in the binary units of
//! `manifest::sizes`); the others are ours. A pull holds at most a manifest, a config,
//! /loop-plugin's bytes and the merged view's tree at once (the layers stream through).

/// The reference's cap on /loop-plugin: "at most 50 MB; install refuses a bigger one", as
/// `manifest::sizes` counts a megabyte (50 MiB).
pub const LOOP_PLUGIN_MAX_BYTES: u64 = ::manifest::sizes::LOOP_PLUGIN_MAX_BYTES;

/// Caps applied while pulling and reading an image.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// A manifest or index body (containerd uses the same 4 MiB).
    pub manifest_bytes: u64,
    /// The image config blob, by its descriptor's size and by what arrives.
    pub config_bytes: u64,
    /// One layer blob as stored (compressed), by its descriptor's size.
    pub layer_bytes: u64,
    /// All layers decompressed together: the guard against compression bombs.
    pub decompressed_bytes: u64,
    /// How many layers an image may have.
    pub layers: usize,
    /// How many tar entries all layers may hold together.
    pub entries: u64,
    /// The bytes /loop-plugin may hold, at every point of the layer stack.
    pub loop_plugin_bytes: u64,
    /// The merged view's own size, as [`crate::rootfs::RootFs`] counts it: a fixed
    /// [`crate::rootfs::PATH_COST`] for each path (about what it takes in memory) plus its
    /// name and a symlink's target. The default holds some 800,000 short paths.
    pub tree_bytes: u64,
    /// Path components all entries together may walk through while the layers are applied,
    /// symlinks followed included: what bounds the time the merged view takes (an image's
    /// entries walk a few each).
    pub resolve_steps: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            manifest_bytes: 4 << 20,
            config_bytes: 4 << 20,
            layer_bytes: 1 << 30,
            decompressed_bytes: 4 << 30,
            layers: 128,
            entries: 1_000_000,
            loop_plugin_bytes: LOOP_PLUGIN_MAX_BYTES,
            tree_bytes: 256 << 20,
            resolve_steps: 64_000_000,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;
    use crate::rootfs::{EntryKind, Meta, PathError, RootFs};

    fn add(fs: &mut RootFs, path: &str, size: u64) -> Result<(), PathError> {
        let kind = EntryKind::File { size };
        fs.apply(
            path,
            kind,
            Meta::default(),
            &mut std::io::repeat(0).take(size),
        )
    }

    /// The reference's "/loop-plugin may hold at most 50 MB" read the generous way: 52,000,000
    /// bytes (over 50 × 10^6, within 50 × 2^20) are taken; a byte past 50 MiB is not.
    #[test]
    fn loop_plugin_holds_fifty_mebibytes() {
        let mut fs = RootFs::new(Limits::default().loop_plugin_bytes);
        add(&mut fs, "loop-plugin/ui/blob.bin", 52_000_000).unwrap();
        add(
            &mut fs,
            "loop-plugin/ui/rest.bin",
            50 * 1024 * 1024 - 52_000_000,
        )
        .unwrap();
        assert!(matches!(
            add(&mut fs, "loop-plugin/ui/one-more.bin", 1),
            Err(PathError::LoopPluginTooBig { .. })
        ));
    }
}
