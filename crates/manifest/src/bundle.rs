//! What a manifest names in the image's `/loop-plugin` tree, checked against the tree the
//! image ships: each panel's and card's entry page is a file of the bundle, and each composer
//! switch's icon is a file of at most 16 KB (the reference: "an .svg under ui/, at most
//! 16 KB"). Pure: the caller (install, admission) lists the tree; symbolic links are followed
//! inside it and never out of it.

use std::collections::BTreeMap;

use super::Manifest;
use super::error::Problem;

/// A switch icon's cap: 16 KB, in the reference's binary units ([`crate::sizes`]).
pub const MAX_ICON_BYTES: u64 = crate::sizes::SWITCH_ICON_MAX_BYTES;

/// How many links a path may go through before it counts as a loop.
const MAX_LINKS: usize = 16;

/// One path under /loop-plugin, relative to it (`ui/main/index.html`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BundleEntry {
    File {
        size: u64,
    },
    Dir,
    /// A symbolic link and its target as stored.
    Symlink {
        target: String,
    },
    /// A device, FIFO or anything else that is not a file.
    Other,
}

/// Every problem of the bundle against the manifest, each at the manifest path that names
/// the missing or oversized file.
pub fn check(manifest: &Manifest, tree: &BTreeMap<String, BundleEntry>) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut need = |path: String, file: &str, max: Option<u64>, what: &str| {
        let message = match resolve(tree, file) {
            Err(why) => Some(format!("{what} \"{file}\" {why}")),
            Ok(size) => max.filter(|max| size > *max).map(|max| {
                format!("{what} \"{file}\" is {size} bytes; the reference allows at most {max}")
            }),
        };
        if let Some(message) = message {
            problems.push(Problem { path, message });
        }
    };
    for (i, panel) in manifest.ui.panels.iter().enumerate() {
        need(
            format!("ui.panels[{i}].entry"),
            &panel.entry,
            None,
            "the panel's page",
        );
    }
    for (i, card) in manifest.ui.cards.iter().enumerate() {
        need(
            format!("ui.cards[{i}].entry"),
            &card.entry,
            None,
            "the card's page",
        );
    }
    for (i, switch) in manifest.ui.composer_switches.iter().enumerate() {
        need(
            format!("ui.composer_switches[{i}].icon"),
            &switch.icon,
            Some(MAX_ICON_BYTES),
            "the switch's icon",
        );
    }
    problems
}

/// The size of the regular file at `path`, following links inside the tree.
fn resolve(tree: &BTreeMap<String, BundleEntry>, path: &str) -> Result<u64, String> {
    let mut current = normalize(path).ok_or("leaves /loop-plugin")?;
    for _ in 0..MAX_LINKS {
        match lookup(tree, &current)? {
            BundleEntry::File { size } => return Ok(*size),
            BundleEntry::Dir => return Err("is a directory in the image, not a file".into()),
            BundleEntry::Other => return Err("is not a regular file in the image".into()),
            BundleEntry::Symlink { target } => {
                let base = current.rsplit_once('/').map_or("", |(dir, _)| dir);
                let joined = if target.starts_with('/') {
                    // An absolute target counts from the image's root.
                    match target.strip_prefix("/loop-plugin/") {
                        Some(inside) => inside.to_string(),
                        None => return Err(format!("links to {target}, outside /loop-plugin")),
                    }
                } else if base.is_empty() {
                    target.clone()
                } else {
                    format!("{base}/{target}")
                };
                current = normalize(&joined)
                    .ok_or_else(|| format!("links to {target}, outside /loop-plugin"))?;
            }
        }
    }
    Err("goes through too many symbolic links".into())
}

/// The entry at `path`, following links in the directories on the way.
fn lookup<'a>(
    tree: &'a BTreeMap<String, BundleEntry>,
    path: &str,
) -> Result<&'a BundleEntry, String> {
    if let Some(entry) = tree.get(path) {
        return Ok(entry);
    }
    // A parent may be a link (ui -> dist/ui): resolve the first one that is.
    let parts: Vec<&str> = path.split('/').collect();
    for end in 1..parts.len() {
        let dir = parts[..end].join("/");
        if let Some(BundleEntry::Symlink { .. }) = tree.get(&dir) {
            let rest = parts[end..].join("/");
            let mut hops = 0;
            let mut base = dir;
            while let Some(BundleEntry::Symlink { target }) = tree.get(&base) {
                hops += 1;
                if hops > MAX_LINKS || target.starts_with('/') {
                    break;
                }
                let parent = base.rsplit_once('/').map_or("", |(d, _)| d);
                let joined = if parent.is_empty() {
                    target.clone()
                } else {
                    format!("{parent}/{target}")
                };
                base = normalize(&joined).ok_or("leaves /loop-plugin")?;
            }
            let resolved = format!("{base}/{rest}");
            return tree
                .get(&resolved)
                .ok_or_else(|| "is not in the image's /loop-plugin".to_string());
        }
    }
    Err("is not in the image's /loop-plugin".into())
}

/// `a/./b/../c` → `a/c`; None when it climbs above the tree.
fn normalize(path: &str) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                out.pop()?;
            }
            p => out.push(p),
        }
    }
    Some(out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse_str;

    fn manifest() -> Manifest {
        parse_str(
            r#"{ "id": "echo", "name": "Echo", "version": "1", "api": "1",
                 "capabilities": ["ui.panel", "ui.notification.card", "ui.composer_switch"],
                 "ui": {
                   "panels": [{ "id": "main", "label": "Main", "entry": "ui/main/index.html" }],
                   "cards": [{ "id": "score", "entry": "ui/score.html" }],
                   "composer_switches": [{ "id": "mode", "label": "Mode", "icon": "ui/mode.svg" }]
                 } }"#,
        )
        .unwrap()
    }

    fn file(size: u64) -> BundleEntry {
        BundleEntry::File { size }
    }

    fn tree(entries: &[(&str, BundleEntry)]) -> BTreeMap<String, BundleEntry> {
        entries
            .iter()
            .map(|(p, e)| (p.to_string(), e.clone()))
            .collect()
    }

    fn complete() -> BTreeMap<String, BundleEntry> {
        tree(&[
            ("plugin.json", file(10)),
            ("ui", BundleEntry::Dir),
            ("ui/main", BundleEntry::Dir),
            ("ui/main/index.html", file(100)),
            ("ui/score.html", file(100)),
            ("ui/mode.svg", file(MAX_ICON_BYTES)),
        ])
    }

    #[test]
    fn a_complete_bundle_passes() {
        assert_eq!(check(&manifest(), &complete()), vec![]);
    }

    #[test]
    fn an_icon_over_16_kb_is_refused() {
        let mut t = complete();
        t.insert("ui/mode.svg".into(), file(16 * 1024 + 1));
        let problems = check(&manifest(), &t);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].path, "ui.composer_switches[0].icon");
        assert!(problems[0].message.contains("16385 bytes"), "{problems:?}");
    }

    /// 16 KB read the generous way: 16,384 bytes (over 16,000) pass.
    #[test]
    fn an_icon_of_16_kib_passes() {
        let mut t = complete();
        t.insert("ui/mode.svg".into(), file(16 * 1024));
        assert_eq!(check(&manifest(), &t), vec![]);
    }

    #[test]
    fn missing_pages_and_icons_are_named() {
        let t = tree(&[
            ("plugin.json", file(10)),
            ("ui/score.html", BundleEntry::Dir),
        ]);
        let problems = check(&manifest(), &t);
        let paths: Vec<&str> = problems.iter().map(|p| p.path.as_str()).collect();
        assert_eq!(
            paths,
            [
                "ui.panels[0].entry",
                "ui.cards[0].entry",
                "ui.composer_switches[0].icon"
            ]
        );
        assert!(problems[0].message.contains("not in the image"));
        assert!(problems[1].message.contains("directory"));
    }

    #[test]
    fn links_are_followed_inside_the_tree_only() {
        let mut t = complete();
        t.insert(
            "ui/mode.svg".into(),
            BundleEntry::Symlink {
                target: "icons/mode.svg".into(),
            },
        );
        t.insert("ui/icons/mode.svg".into(), file(20));
        assert_eq!(check(&manifest(), &t), vec![]);
        t.insert(
            "ui/mode.svg".into(),
            BundleEntry::Symlink {
                target: "../../etc/passwd".into(),
            },
        );
        let problems = check(&manifest(), &t);
        assert!(problems[0].message.contains("outside"), "{problems:?}");
        t.insert(
            "ui/mode.svg".into(),
            BundleEntry::Symlink {
                target: "mode.svg".into(),
            },
        );
        let problems = check(&manifest(), &t);
        assert!(problems[0].message.contains("too many"), "{problems:?}");
        // A linked directory on the way.
        let mut t = complete();
        t.remove("ui/main/index.html");
        t.insert(
            "ui/main".into(),
            BundleEntry::Symlink {
                target: "dist".into(),
            },
        );
        t.insert("ui/dist/index.html".into(), file(5));
        assert_eq!(check(&manifest(), &t), vec![]);
    }
}
