//! One image's UI bundle: the regular files under `/loop-plugin/ui/`, by their path below it,
//! and the one lookup every request goes through. Only regular files are kept, so a symlink
//! (even one the layer rules allowed, pointing inside the image) or a directory is not a file
//! of the bundle; a requested path is looked up as written, never resolved, so `..`, `.` and
//! empty segments are refused before the lookup and cannot reach `plugin.json` or another
//! plugin's files. Pure.

use std::collections::BTreeMap;
use std::sync::Arc;

use oci::TreeFacts;

/// The bundle's directory under /loop-plugin.
pub const UI_DIR: &str = "ui/";

/// The `ui/` files of one image.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bundle {
    files: BTreeMap<String, Arc<Vec<u8>>>,
    bytes: u64,
}

/// Why a requested path names no file of the bundle (answered 404).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathRefused {
    #[error("path {0:?} has an empty, '.' or '..' segment")]
    Segment(String),
    #[error("path {0:?} holds a backslash, a NUL or a percent sign")]
    Character(String),
    #[error("path {0:?} is not a file of the bundle")]
    NotAFile(String),
}

impl Bundle {
    /// The bundle of an image's checked /loop-plugin tree.
    pub fn of_tree(tree: &TreeFacts) -> Self {
        Self::from_files(
            tree.ui_files()
                .map(|(below, bytes)| (below.to_string(), bytes.clone())),
        )
    }

    /// A bundle of these files, by path below `ui/`.
    pub fn from_files(files: impl IntoIterator<Item = (String, Arc<Vec<u8>>)>) -> Self {
        let files: BTreeMap<_, _> = files.into_iter().collect();
        let bytes = files.values().map(|b| b.len() as u64).sum();
        Self { files, bytes }
    }

    /// The bytes the bundle's files hold.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// The file at `path` (below `ui/`, as the request's decoded path has it).
    pub fn file(&self, path: &str) -> Result<&Arc<Vec<u8>>, PathRefused> {
        if path.contains(['\\', '\0', '%']) {
            return Err(PathRefused::Character(path.into()));
        }
        if path
            .split('/')
            .any(|segment| segment.is_empty() || segment == "." || segment == "..")
        {
            return Err(PathRefused::Segment(path.into()));
        }
        self.files
            .get(path)
            .ok_or_else(|| PathRefused::NotAFile(path.into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use oci::PluginEntry;

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
            ("ui/main/app.js", file("js")),
            (
                "ui/main/manifest",
                PluginEntry::Symlink {
                    target: "../../plugin.json".into(),
                },
            ),
            (
                "ui/main/sibling",
                PluginEntry::Symlink {
                    target: "app.js".into(),
                },
            ),
            ("ui/main/fifo", PluginEntry::Other),
            ("uiother/x.js", file("not ui")),
        ]
        .into_iter()
        .map(|(p, e)| (p.to_string(), e))
        .collect();
        TreeFacts {
            plugin_json: Arc::new(b"{}".to_vec()),
            plugin_json_sha256: String::new(),
            loop_plugin,
            loop_plugin_bytes: 0,
            data: Default::default(),
        }
    }

    #[test]
    fn only_regular_files_below_ui_are_kept() {
        let bundle = Bundle::of_tree(&tree());
        assert_eq!(
            bundle.file("main/index.html").unwrap().as_slice(),
            b"<html>"
        );
        assert_eq!(bundle.file("main/app.js").unwrap().as_slice(), b"js");
        assert_eq!(bundle.bytes(), 8);
    }

    #[test]
    fn symlinks_directories_and_devices_are_not_files() {
        let bundle = Bundle::of_tree(&tree());
        for path in ["main/manifest", "main/sibling", "main", "main/fifo"] {
            assert_eq!(
                bundle.file(path),
                Err(PathRefused::NotAFile(path.into())),
                "{path}"
            );
        }
    }

    #[test]
    fn paths_out_of_the_bundle_are_refused_before_the_lookup() {
        let bundle = Bundle::of_tree(&tree());
        for path in [
            "../plugin.json",
            "main/../../plugin.json",
            "main/./index.html",
            "main//index.html",
            "/main/index.html",
            "",
        ] {
            assert!(
                matches!(bundle.file(path), Err(PathRefused::Segment(_))),
                "{path}"
            );
        }
        for path in ["..%2fplugin.json", "main\\..\\..\\plugin.json", "main/\0"] {
            assert!(
                matches!(bundle.file(path), Err(PathRefused::Character(_))),
                "{path}"
            );
        }
    }

    #[test]
    fn files_beside_ui_are_not_in_it() {
        let bundle = Bundle::of_tree(&tree());
        assert!(bundle.file("plugin.json").is_err());
        assert!(bundle.file("../uiother/x.js").is_err());
        assert!(bundle.file("other/x.js").is_err());
    }
}
