//! The merged view of an image's layers, holding only what the image checks need: every
//! path's kind, owner and mode, and the bytes of the files under /loop-plugin. Layer entries
//! are applied here with the OCI layer rules: whiteouts (`.wh.<name>`) and opaque directories
//! (`.wh..wh..opq`) hide what lower layers put there, paths with `..` or a leading `/` are
//! refused, parents that are symlinks are followed inside the tree, symlinks and hard links
//! that point out of the tree are refused. Pure: no I/O beyond reading an entry's bytes.
//!
//! /loop-plugin is capped while layers are applied, not only at the end: the bytes it holds
//! never exceed the cap at any point, so memory stays bounded (a lower layer that puts more
//! there is refused even if an upper layer deletes it). A hard link counts its bytes again.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;

/// The directory the reference reserves for the plugin's manifest and UI bundle.
pub const LOOP_PLUGIN_DIR: &str = "loop-plugin";
/// The plugin's manifest inside it.
pub const PLUGIN_JSON: &str = "loop-plugin/plugin.json";
/// The plugin's state directory.
pub const DATA_DIR: &str = "data";

const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE_MARKER: &str = ".wh..wh..opq";
/// Symlinks followed while resolving one path, as Linux's MAXSYMLINKS.
const MAX_SYMLINK_HOPS: u32 = 40;

/// Owner and permission bits of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Meta {
    pub uid: u32,
    pub gid: u32,
    pub mode: u32,
}

/// What a path is in the merged view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeKind {
    Dir,
    /// A regular file; `content` is kept for files under /loop-plugin only.
    File {
        size: u64,
        content: Option<Arc<Vec<u8>>>,
    },
    Symlink {
        target: String,
    },
    /// A device or FIFO.
    Other,
}

/// A path of the merged view.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub kind: NodeKind,
    pub meta: Meta,
    /// The layer that last wrote it; whiteouts only hide lower layers' paths.
    pub layer: usize,
    /// Made because a deeper path needed it, not by an entry of its own (owner 0:0).
    pub implicit: bool,
}

/// What one layer entry asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EntryKind {
    Dir,
    File { size: u64 },
    Symlink { target: String },
    Hardlink { target: String },
    Other,
}

/// A layer entry that breaks the layer rules; each names the entry's path as written.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("entry {path:?} has an absolute path")]
    Absolute { path: String },
    #[error("entry {path:?} has a '..' component")]
    DotDot { path: String },
    #[error("symlink {path:?} -> {target:?} points outside the image")]
    SymlinkEscape { path: String, target: String },
    #[error("entry {path:?} resolves through a symlink that leaves the image at {at:?}")]
    ResolvesOutside { path: String, at: String },
    #[error("entry {path:?}: more than {MAX_SYMLINK_HOPS} symlinks to follow")]
    SymlinkLoop { path: String },
    #[error("entry {path:?}: {component:?} is not a directory")]
    NotADirectory { path: String, component: String },
    #[error("hard link {path:?} -> {target:?}: {reason}")]
    Hardlink {
        path: String,
        target: String,
        reason: &'static str,
    },
    #[error("/loop-plugin holds {bytes} bytes at entry {path:?}, over the {limit}-byte cap")]
    LoopPluginTooBig {
        path: String,
        bytes: u64,
        limit: u64,
    },
    #[error("reading entry {path:?}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

/// The merged view of the layers applied so far.
#[derive(Debug, Clone)]
pub struct RootFs {
    nodes: BTreeMap<String, Node>,
    layer: usize,
    plugin_bytes: u64,
    plugin_cap: u64,
}

impl RootFs {
    /// An empty root; /loop-plugin may hold at most `plugin_cap` bytes.
    pub fn new(plugin_cap: u64) -> Self {
        Self {
            nodes: BTreeMap::new(),
            layer: 0,
            plugin_bytes: 0,
            plugin_cap,
        }
    }

    /// Entries applied from now on belong to layer `index` (0 is the lowest).
    pub fn begin_layer(&mut self, index: usize) {
        self.layer = index;
    }

    /// The node at a path (`loop-plugin/plugin.json`, no leading slash), symlinks not followed.
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.nodes.get(path.trim_matches('/'))
    }

    /// Bytes of regular files under /loop-plugin now.
    pub fn loop_plugin_bytes(&self) -> u64 {
        self.plugin_bytes
    }

    /// Every path under `dir` (not `dir` itself), in order.
    pub fn below<'a>(&'a self, dir: &str) -> impl Iterator<Item = (&'a String, &'a Node)> + 'a {
        let prefix = format!("{}/", dir.trim_matches('/'));
        self.nodes
            .range(prefix.clone()..)
            .take_while(move |(k, _)| k.starts_with(&prefix))
    }

    /// Applies one layer entry; `data` is its bytes, read only for files under /loop-plugin.
    pub fn apply(
        &mut self,
        raw: &str,
        kind: EntryKind,
        meta: Meta,
        data: &mut dyn Read,
    ) -> Result<(), PathError> {
        let comps = split(raw)?;
        let Some((name, parents)) = comps.split_last() else {
            return Ok(()); // the root itself
        };
        if name == OPAQUE_MARKER {
            if let Some(dir) = self.resolve_existing(parents, raw)? {
                self.hide_lower_below(&dir.join("/"));
            }
            return Ok(());
        }
        if let Some(hidden) = name.strip_prefix(WHITEOUT_PREFIX) {
            // `.wh..wh.*` other than the opaque marker are AUFS bookkeeping: nothing to apply.
            if !hidden.starts_with(WHITEOUT_PREFIX)
                && !hidden.is_empty()
                && let Some(mut dir) = self.resolve_existing(parents, raw)?
            {
                dir.push(hidden.to_string());
                self.hide_lower(&dir.join("/"));
            }
            return Ok(());
        }
        let mut path = self.resolve_creating(parents, raw)?;
        path.push(name.clone());
        let path = path.join("/");
        let node = match kind {
            EntryKind::Dir => {
                if let Some(existing) = self
                    .nodes
                    .get_mut(&path)
                    .filter(|n| n.kind == NodeKind::Dir)
                {
                    existing.meta = meta;
                    existing.layer = self.layer;
                    existing.implicit = false;
                    return Ok(());
                }
                self.node(NodeKind::Dir, meta)
            }
            EntryKind::File { size } => {
                let content = if in_plugin_tree(&path) {
                    self.check_cap(&path, raw, size)?;
                    let mut bytes = Vec::with_capacity(size as usize);
                    data.take(size)
                        .read_to_end(&mut bytes)
                        .map_err(|source| PathError::Read {
                            path: raw.to_string(),
                            source,
                        })?;
                    Some(Arc::new(bytes))
                } else {
                    None
                };
                self.node(NodeKind::File { size, content }, meta)
            }
            EntryKind::Symlink { target } => {
                if escapes(&path, &target) {
                    return Err(PathError::SymlinkEscape {
                        path: raw.to_string(),
                        target,
                    });
                }
                self.node(NodeKind::Symlink { target }, meta)
            }
            EntryKind::Hardlink { target } => self.hardlink(raw, &path, &target)?,
            EntryKind::Other => self.node(NodeKind::Other, meta),
        };
        self.remove(&path);
        if let NodeKind::File { size, .. } = &node.kind
            && in_plugin_tree(&path)
        {
            self.plugin_bytes += size;
        }
        self.nodes.insert(path, node);
        Ok(())
    }

    fn node(&self, kind: NodeKind, meta: Meta) -> Node {
        Node {
            kind,
            meta,
            layer: self.layer,
            implicit: false,
        }
    }

    /// Refuses a file of `size` bytes at `path` if /loop-plugin would then hold too much.
    fn check_cap(&self, path: &str, raw: &str, size: u64) -> Result<(), PathError> {
        let replaced = match self.nodes.get(path) {
            Some(Node {
                kind: NodeKind::File { size, .. },
                ..
            }) => *size,
            _ => 0,
        };
        let bytes = self.plugin_bytes - replaced + size;
        if bytes > self.plugin_cap {
            return Err(PathError::LoopPluginTooBig {
                path: raw.to_string(),
                bytes,
                limit: self.plugin_cap,
            });
        }
        Ok(())
    }

    fn hardlink(&self, raw: &str, path: &str, target: &str) -> Result<Node, PathError> {
        let err = |reason| PathError::Hardlink {
            path: raw.to_string(),
            target: target.to_string(),
            reason,
        };
        let comps = split(target).map_err(|e| match e {
            PathError::Absolute { .. } => err("the target is an absolute path"),
            _ => err("the target has a '..' component"),
        })?;
        let Some((name, parents)) = comps.split_last() else {
            return Err(err("the target is the root"));
        };
        let Some(mut resolved) = self.resolve_existing(parents, raw)? else {
            return Err(err("the target does not exist"));
        };
        resolved.push(name.clone());
        let resolved = resolved.join("/");
        let Some(node) = self.nodes.get(&resolved) else {
            return Err(err("the target does not exist"));
        };
        match &node.kind {
            NodeKind::Dir => Err(err("the target is a directory")),
            NodeKind::File { size, .. } if in_plugin_tree(path) => {
                if !in_plugin_tree(&resolved) {
                    return Err(err("a file under /loop-plugin links to one outside it"));
                }
                self.check_cap(path, raw, *size)?;
                Ok(Node {
                    layer: self.layer,
                    implicit: false,
                    ..node.clone()
                })
            }
            _ => Ok(Node {
                layer: self.layer,
                implicit: false,
                ..node.clone()
            }),
        }
    }

    /// Resolves directory components from the root, following symlinks inside the tree; a
    /// missing directory gives None.
    fn resolve_existing(
        &self,
        parents: &[String],
        raw: &str,
    ) -> Result<Option<Vec<String>>, PathError> {
        self.walk(
            Vec::new(),
            parents.iter().map(String::as_str),
            None,
            &mut 0,
            raw,
        )
    }

    /// Resolves directory components from the root, making the missing ones (owner 0:0, as
    /// a runtime unpacking the layer would).
    fn resolve_creating(
        &mut self,
        parents: &[String],
        raw: &str,
    ) -> Result<Vec<String>, PathError> {
        let mut missing = Vec::new();
        let resolved = self.walk(
            Vec::new(),
            parents.iter().map(String::as_str),
            Some(&mut missing),
            &mut 0,
            raw,
        )?;
        for here in missing {
            let node = Node {
                kind: NodeKind::Dir,
                meta: Meta {
                    uid: 0,
                    gid: 0,
                    mode: 0o755,
                },
                layer: self.layer,
                implicit: true,
            };
            self.nodes.insert(here, node);
        }
        Ok(resolved.unwrap_or_default())
    }

    /// Resolves directory components from `start`, following symlinks inside the tree. A
    /// missing directory is recorded in `missing` when given (and walked as if empty), else
    /// it ends the walk with None.
    fn walk<'a>(
        &self,
        start: Vec<String>,
        comps: impl Iterator<Item = &'a str>,
        mut missing: Option<&mut Vec<String>>,
        hops: &mut u32,
        raw: &str,
    ) -> Result<Option<Vec<String>>, PathError> {
        let mut stack = start;
        for c in comps {
            match c {
                "" | "." => continue,
                ".." => {
                    if stack.pop().is_none() {
                        return Err(PathError::ResolvesOutside {
                            path: raw.to_string(),
                            at: "..".to_string(),
                        });
                    }
                    continue;
                }
                _ => {}
            }
            stack.push(c.to_string());
            let here = stack.join("/");
            let known_missing = missing.as_ref().is_some_and(|m| m.contains(&here));
            match self.nodes.get(&here).map(|n| &n.kind) {
                _ if known_missing => {}
                Some(NodeKind::Dir) => {}
                Some(NodeKind::Symlink { target }) => {
                    *hops += 1;
                    if *hops > MAX_SYMLINK_HOPS {
                        return Err(PathError::SymlinkLoop {
                            path: raw.to_string(),
                        });
                    }
                    stack.pop();
                    let base = if target.starts_with('/') {
                        Vec::new()
                    } else {
                        stack.clone()
                    };
                    match self.walk(base, target.split('/'), missing.as_deref_mut(), hops, raw)? {
                        Some(resolved) => stack = resolved,
                        None => return Ok(None),
                    }
                }
                Some(_) => {
                    return Err(PathError::NotADirectory {
                        path: raw.to_string(),
                        component: format!("/{here}"),
                    });
                }
                None => match missing.as_deref_mut() {
                    Some(missing) => missing.push(here),
                    None => return Ok(None),
                },
            }
        }
        Ok(Some(stack))
    }

    /// Removes a path and everything under it.
    fn remove(&mut self, path: &str) {
        let mut gone: Vec<String> = self.below(path).map(|(k, _)| k.clone()).collect();
        gone.push(path.to_string());
        for key in gone {
            self.drop_node(&key);
        }
    }

    /// A whiteout: hides `path` (and what is under it) if a lower layer made it.
    fn hide_lower(&mut self, path: &str) {
        if self.nodes.get(path).is_some_and(|n| n.layer < self.layer) {
            self.remove(path);
        }
    }

    /// An opaque directory: hides what lower layers put under `dir`.
    fn hide_lower_below(&mut self, dir: &str) {
        let gone: Vec<String> = self
            .below(dir)
            .filter(|(_, n)| n.layer < self.layer)
            .map(|(k, _)| k.clone())
            .collect();
        for key in gone {
            self.drop_node(&key);
        }
    }

    fn drop_node(&mut self, key: &str) {
        if let Some(Node {
            kind: NodeKind::File { size, .. },
            ..
        }) = self.nodes.remove(key)
            && in_plugin_tree(key)
        {
            self.plugin_bytes -= size;
        }
    }
}

fn in_plugin_tree(path: &str) -> bool {
    path.strip_prefix(LOOP_PLUGIN_DIR)
        .is_some_and(|rest| rest.starts_with('/'))
}

/// An entry path's components: `./` and empty parts dropped; absolute paths and `..` refused.
fn split(raw: &str) -> Result<Vec<String>, PathError> {
    if raw.starts_with('/') {
        return Err(PathError::Absolute {
            path: raw.to_string(),
        });
    }
    let mut comps = Vec::new();
    for c in raw.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                return Err(PathError::DotDot {
                    path: raw.to_string(),
                });
            }
            c => comps.push(c.to_string()),
        }
    }
    Ok(comps)
}

/// Does a symlink at `path` pointing at `target` climb above the root? Absolute targets are
/// rooted at the image's root, so they stay inside.
fn escapes(path: &str, target: &str) -> bool {
    if target.starts_with('/') {
        return false;
    }
    let mut depth = path.split('/').count() as i64 - 1; // the link's directory
    for c in target.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                depth -= 1;
                if depth < 0 {
                    return true;
                }
            }
            _ => depth += 1,
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const CAP: u64 = 1000;

    fn meta(uid: u32) -> Meta {
        Meta {
            uid,
            gid: uid,
            mode: 0o755,
        }
    }

    fn file(fs: &mut RootFs, path: &str, body: &[u8]) -> Result<(), PathError> {
        fs.apply(
            path,
            EntryKind::File {
                size: body.len() as u64,
            },
            meta(0),
            &mut &body[..],
        )
    }

    fn dir(fs: &mut RootFs, path: &str, uid: u32) {
        fs.apply(path, EntryKind::Dir, meta(uid), &mut std::io::empty())
            .unwrap();
    }

    fn marker(fs: &mut RootFs, path: &str) {
        fs.apply(
            path,
            EntryKind::File { size: 0 },
            meta(0),
            &mut std::io::empty(),
        )
        .unwrap();
    }

    fn content(fs: &RootFs, path: &str) -> Option<Vec<u8>> {
        match &fs.get(path)?.kind {
            NodeKind::File { content, .. } => content.as_ref().map(|c| c.to_vec()),
            _ => None,
        }
    }

    #[test]
    fn keeps_plugin_bytes_and_only_those() {
        let mut fs = RootFs::new(CAP);
        file(&mut fs, "./loop-plugin/plugin.json", b"{}").unwrap();
        file(&mut fs, "bin/app", b"binary").unwrap();
        assert_eq!(content(&fs, PLUGIN_JSON).unwrap(), b"{}");
        assert!(matches!(
            fs.get("bin/app").unwrap().kind,
            NodeKind::File {
                size: 6,
                content: None
            }
        ));
        assert!(fs.get("loop-plugin").unwrap().implicit);
        assert_eq!(fs.loop_plugin_bytes(), 2);
    }

    #[test]
    fn whiteout_hides_a_lower_file_not_a_same_layer_one() {
        let mut fs = RootFs::new(CAP);
        file(&mut fs, "loop-plugin/plugin.json", b"{}").unwrap();
        file(&mut fs, "loop-plugin/a", b"a").unwrap();
        fs.begin_layer(1);
        marker(&mut fs, "loop-plugin/.wh.plugin.json");
        file(&mut fs, "loop-plugin/b", b"b").unwrap();
        marker(&mut fs, "loop-plugin/.wh.b");
        assert!(fs.get(PLUGIN_JSON).is_none());
        assert!(fs.get("loop-plugin/a").is_some());
        assert!(
            fs.get("loop-plugin/b").is_some(),
            "a whiteout does not hide its own layer's file"
        );
        assert_eq!(fs.loop_plugin_bytes(), 2);
    }

    #[test]
    fn whiteout_of_a_directory_hides_its_tree() {
        let mut fs = RootFs::new(CAP);
        file(&mut fs, "loop-plugin/ui/main/index.html", b"<p>").unwrap();
        fs.begin_layer(1);
        marker(&mut fs, "loop-plugin/.wh.ui");
        assert_eq!(fs.below("loop-plugin").count(), 0);
        assert_eq!(fs.loop_plugin_bytes(), 0);
    }

    #[test]
    fn opaque_dir_hides_lower_children_and_keeps_readded_ones() {
        let mut fs = RootFs::new(CAP);
        file(&mut fs, "loop-plugin/plugin.json", b"old").unwrap();
        file(&mut fs, "loop-plugin/ui/x", b"x").unwrap();
        fs.begin_layer(1);
        file(&mut fs, "loop-plugin/plugin.json", b"new!").unwrap();
        marker(&mut fs, "loop-plugin/.wh..wh..opq");
        assert_eq!(
            content(&fs, PLUGIN_JSON).unwrap(),
            b"new!",
            "same-layer entries survive the opaque marker"
        );
        assert!(fs.get("loop-plugin/ui/x").is_none());
        assert!(fs.get("loop-plugin").is_some());
        assert_eq!(fs.loop_plugin_bytes(), 4);
    }

    #[test]
    fn refuses_dotdot_and_absolute_paths() {
        let mut fs = RootFs::new(CAP);
        assert!(matches!(
            file(&mut fs, "loop-plugin/../../etc/passwd", b"x"),
            Err(PathError::DotDot { .. })
        ));
        assert!(matches!(
            file(&mut fs, "/etc/passwd", b"x"),
            Err(PathError::Absolute { .. })
        ));
        let err = fs
            .apply(
                "loop-plugin/..",
                EntryKind::Dir,
                meta(0),
                &mut std::io::empty(),
            )
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("loop-plugin/..") && err.contains("'..'"),
            "{err}"
        );
    }

    #[test]
    fn symlinks_stay_inside() {
        let mut fs = RootFs::new(CAP);
        let link = |fs: &mut RootFs, path: &str, target: &str| {
            fs.apply(
                path,
                EntryKind::Symlink {
                    target: target.into(),
                },
                meta(0),
                &mut std::io::empty(),
            )
        };
        link(&mut fs, "bin", "usr/bin").unwrap();
        link(&mut fs, "usr/lib/libx.so", "../../lib/libx.so.1").unwrap();
        link(&mut fs, "etc/alternatives/sh", "/bin/dash").unwrap();
        assert!(matches!(
            link(&mut fs, "a/b", "../../etc"),
            Err(PathError::SymlinkEscape { .. })
        ));
        // A parent that is a symlink is followed inside the tree.
        file(&mut fs, "bin/tool", b"x").unwrap();
        assert!(fs.get("usr/bin/tool").is_some());
        // /loop-plugin as a symlink to elsewhere puts its files there, not under /loop-plugin.
        link(&mut fs, "loop-plugin", "opt/p").unwrap();
        file(&mut fs, "loop-plugin/plugin.json", b"{}").unwrap();
        assert!(fs.get("opt/p/plugin.json").is_some());
        assert!(fs.get(PLUGIN_JSON).is_none());
    }

    #[test]
    fn symlink_loops_and_files_as_dirs_are_refused() {
        let mut fs = RootFs::new(CAP);
        fs.apply(
            "a",
            EntryKind::Symlink { target: "b".into() },
            meta(0),
            &mut std::io::empty(),
        )
        .unwrap();
        fs.apply(
            "b",
            EntryKind::Symlink { target: "a".into() },
            meta(0),
            &mut std::io::empty(),
        )
        .unwrap();
        assert!(matches!(
            file(&mut fs, "a/x", b""),
            Err(PathError::SymlinkLoop { .. })
        ));
        file(&mut fs, "f", b"").unwrap();
        assert!(matches!(
            file(&mut fs, "f/x", b""),
            Err(PathError::NotADirectory { .. })
        ));
    }

    #[test]
    fn hardlinks_inside_only() {
        let mut fs = RootFs::new(CAP);
        file(&mut fs, "loop-plugin/plugin.json", b"{}").unwrap();
        file(&mut fs, "etc/passwd", b"root").unwrap();
        let hl = |fs: &mut RootFs, path: &str, target: &str| {
            fs.apply(
                path,
                EntryKind::Hardlink {
                    target: target.into(),
                },
                meta(0),
                &mut std::io::empty(),
            )
        };
        hl(&mut fs, "loop-plugin/copy.json", "loop-plugin/plugin.json").unwrap();
        assert_eq!(content(&fs, "loop-plugin/copy.json").unwrap(), b"{}");
        assert_eq!(fs.loop_plugin_bytes(), 4);
        hl(&mut fs, "usr/passwd", "etc/passwd").unwrap();
        let reason = |r: Result<(), PathError>| match r {
            Err(PathError::Hardlink { reason, .. }) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            reason(hl(&mut fs, "x", "../etc/passwd")),
            "the target has a '..' component"
        );
        assert_eq!(
            reason(hl(&mut fs, "x", "/etc/passwd")),
            "the target is an absolute path"
        );
        assert_eq!(
            reason(hl(&mut fs, "x", "nope")),
            "the target does not exist"
        );
        assert_eq!(reason(hl(&mut fs, "x", "etc")), "the target is a directory");
        assert_eq!(
            reason(hl(&mut fs, "loop-plugin/pw", "etc/passwd")),
            "a file under /loop-plugin links to one outside it"
        );
    }

    #[test]
    fn loop_plugin_cap_holds_at_every_entry() {
        let mut fs = RootFs::new(10);
        file(&mut fs, "loop-plugin/a", &[0; 6]).unwrap();
        file(&mut fs, "loop-plugin/a", &[0; 9]).unwrap(); // replacing counts the new size only
        let err = file(&mut fs, "loop-plugin/b", &[0; 2]).unwrap_err();
        assert!(
            matches!(
                err,
                PathError::LoopPluginTooBig {
                    bytes: 11,
                    limit: 10,
                    ..
                }
            ),
            "{err}"
        );
        file(&mut fs, "elsewhere", &[0; 100]).unwrap();
        fs.begin_layer(1);
        marker(&mut fs, "loop-plugin/.wh.a");
        file(&mut fs, "loop-plugin/b", &[0; 10]).unwrap();
    }

    #[test]
    fn directories_keep_children_and_owner_updates() {
        let mut fs = RootFs::new(CAP);
        file(&mut fs, "data/keep", b"k").unwrap();
        assert_eq!(fs.get("data").unwrap().meta.uid, 0);
        dir(&mut fs, "data/", 1000);
        assert_eq!(fs.get("data").unwrap().meta.uid, 1000);
        assert!(!fs.get("data").unwrap().implicit);
        assert!(fs.get("data/keep").is_some());
        // A file replacing a directory drops its tree.
        file(&mut fs, "data", b"").unwrap();
        assert!(fs.get("data/keep").is_none());
    }
}
