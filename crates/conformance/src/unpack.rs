//! What the check needs from an image, written to a folder: `/loop-plugin/plugin.json` (the
//! manifest the plugin reads and the check plans from) and the UI bundle under
//! `/loop-plugin/ui/`, from the tree the oci crate read and checked when the image was pulled
//! (the read the API server's UI cache makes). Only regular files are written, as the API
//! server serves only those: a symlink or a device is not a file of the bundle. Choosing is
//! pure ([`files`]); writing is thin.

use std::path::{Path, PathBuf};

use oci::TreeFacts;

use crate::error::SetupError;

/// The manifest's name under `/loop-plugin`.
pub const MANIFEST: &str = "plugin.json";
/// The UI bundle's folder under `/loop-plugin`.
pub const UI_DIR: &str = "ui";

/// The files to write, by path below `/loop-plugin`: the manifest, and with `ui` the
/// bundle's regular files.
pub fn files(tree: &TreeFacts, ui: bool) -> Vec<(String, &[u8])> {
    let mut files = vec![(MANIFEST.to_string(), tree.plugin_json.as_slice())];
    if ui {
        files.extend(
            tree.ui_files()
                .map(|(below, bytes)| (format!("{UI_DIR}/{below}"), bytes.as_slice())),
        );
    }
    files
}

/// Where the files went.
pub struct Unpacked {
    pub manifest: PathBuf,
    pub ui: PathBuf,
}

/// Writes [`files`] under `dir`.
pub fn unpack(tree: &TreeFacts, ui: bool, dir: &Path) -> Result<Unpacked, SetupError> {
    std::fs::create_dir_all(dir.join(UI_DIR)).map_err(|source| SetupError::Write {
        path: dir.join(UI_DIR),
        source,
    })?;
    for (path, bytes) in files(tree, ui) {
        let to = dir.join(&path);
        let write = || {
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent)?;
            }
            std::fs::write(&to, bytes)
        };
        write().map_err(|source| SetupError::Write {
            path: to.clone(),
            source,
        })?;
    }
    Ok(Unpacked {
        manifest: dir.join(MANIFEST),
        ui: dir.join(UI_DIR),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci::PluginEntry;
    use std::sync::Arc;

    fn tree() -> TreeFacts {
        let file = |s: &str| PluginEntry::File {
            bytes: Arc::new(s.as_bytes().to_vec()),
            mode: 0o644,
        };
        let loop_plugin = [
            ("plugin.json", file("{}")),
            ("ui", PluginEntry::Dir),
            ("ui/main", PluginEntry::Dir),
            ("ui/main/index.html", file("<html>")),
            (
                "ui/main/manifest",
                PluginEntry::Symlink {
                    target: "../../plugin.json".into(),
                },
            ),
            ("ui/main/fifo", PluginEntry::Other),
            ("uiother/x.js", file("not ui")),
            ("notes.txt", file("not ui")),
        ]
        .into_iter()
        .map(|(p, e)| (p.to_string(), e))
        .collect();
        TreeFacts {
            plugin_json: Arc::new(b"{\"id\": \"echo\"}".to_vec()),
            plugin_json_sha256: String::new(),
            loop_plugin,
            loop_plugin_bytes: 0,
            data: Default::default(),
        }
    }

    #[test]
    fn the_manifest_and_the_bundles_regular_files() {
        let tree = tree();
        let with_ui = files(&tree, true);
        let paths: Vec<&str> = with_ui.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["plugin.json", "ui/main/index.html"]);
        assert_eq!(files(&tree, true)[0].1, b"{\"id\": \"echo\"}");
        let without = files(&tree, false);
        let paths: Vec<&str> = without.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["plugin.json"]);
    }

    #[test]
    fn unpacked_where_the_check_reads_them() {
        let dir = tempfile::tempdir().unwrap();
        let out = unpack(&tree(), true, dir.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(&out.manifest).unwrap(),
            "{\"id\": \"echo\"}"
        );
        assert_eq!(
            std::fs::read_to_string(out.ui.join("main/index.html")).unwrap(),
            "<html>"
        );
        assert!(!out.ui.join("main/manifest").exists());
    }
}
