//! The merged view of an image's layers, holding only what the image checks need: every
//! path's kind, owner and mode, and the bytes of the files under /loop-plugin. Layer entries
//! are applied here with the OCI layer rules: whiteouts (`.wh.<name>`) and opaque directories
//! (`.wh..wh..opq`) hide what lower layers put there, paths with `..` or a leading `/` are
//! refused, parents that are symlinks are followed inside the tree, symlinks and hard links
//! that point out of the tree are refused. Pure: no I/O beyond reading an entry's bytes.
//!
//! The view is a tree of names, as a file system is: resolving a path walks each of its
//! components once, however deep it is, and an opaque marker looks through a directory's
//! tree at most once a layer. What it holds and does is capped, so that no image makes it use
//! unbounded memory or time:
//! - /loop-plugin's bytes, at every point of the layer stack, not only at the end (a lower
//!   layer that puts more there is refused even if an upper layer deletes it); a hard link
//!   counts its bytes again;
//! - the tree's own size ([`Limits::tree_bytes`]: [`PATH_COST`] for each path, plus its name
//!   and a symlink's target);
//! - the walking ([`Limits::resolve_steps`]: path components looked at, for all entries);
//! - Linux's own limits: a path or a link target of at most [`PATH_MAX`] bytes, a name of at
//!   most [`NAME_MAX`], at most 40 symlinks followed for one path.

use std::collections::{BTreeMap, HashSet};
use std::io::Read;
use std::sync::Arc;

use crate::limits::Limits;
use crate::quote::shown;

/// The directory the reference reserves for the plugin's manifest and UI bundle.
pub const LOOP_PLUGIN_DIR: &str = "loop-plugin";
/// The plugin's manifest inside it.
pub const PLUGIN_JSON: &str = "loop-plugin/plugin.json";
/// The plugin's state directory.
pub const DATA_DIR: &str = "data";

/// The longest entry path or link target, in bytes: Linux's PATH_MAX.
pub const PATH_MAX: usize = 4096;
/// The longest name of one path component, in bytes: Linux's NAME_MAX.
pub const NAME_MAX: usize = 255;
/// What one path costs the tree besides its name and target, in bytes: about what its node
/// takes in memory (measured by tests/hostile.rs).
pub const PATH_COST: u64 = 320;

const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE_MARKER: &str = ".wh..wh..opq";
/// Symlinks followed while resolving one path, as Linux's MAXSYMLINKS.
const MAX_SYMLINK_HOPS: u32 = 40;
/// What an entry's bytes are read into at first, whatever its header says its size is.
const FIRST_READ: u64 = 64 << 10;

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

/// A layer entry that breaks the layer rules or a cap; each names the entry's path as written
/// (quoted by its start when long).
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error("entry {path:?} has an absolute path")]
    Absolute { path: String },
    #[error("entry {path:?} has a '..' component")]
    DotDot { path: String },
    #[error("entry {path:?} is {bytes} bytes long, over Linux's PATH_MAX of {PATH_MAX}")]
    TooLong { path: String, bytes: usize },
    #[error(
        "entry {path:?} names {name:?}, {bytes} bytes long, over Linux's NAME_MAX of {NAME_MAX}"
    )]
    NameTooLong {
        path: String,
        name: String,
        bytes: usize,
    },
    #[error("link {path:?} has a target {bytes} bytes long, over Linux's PATH_MAX of {PATH_MAX}")]
    TargetTooLong { path: String, bytes: usize },
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
    #[error("entry {path:?}: the image's paths take more than the {limit}-byte cap on the tree")]
    TreeTooBig { path: String, limit: u64 },
    #[error(
        "entry {path:?}: resolving the image's paths takes more than {limit} steps (symlinks through symlinks)"
    )]
    TooManySteps { path: String, limit: u64 },
    #[error("reading entry {path:?}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
}

/// The root's slot; it has no node of its own in the view.
const ROOT: usize = 0;

/// One path: its node, its name in its parent, and its children by name.
#[derive(Debug, Clone)]
struct Slot {
    name: Box<str>,
    parent: usize,
    node: Node,
    children: BTreeMap<Box<str>, usize>,
    /// Below /loop-plugin (not /loop-plugin itself): its files' bytes are kept and counted.
    in_plugin: bool,
}

/// Where a walk is: an existing directory, and below it the names of directories that do not
/// exist yet (made when the walk creates them).
struct Pos {
    slot: usize,
    missing: Vec<String>,
}

/// The merged view of the layers applied so far.
#[derive(Debug, Clone)]
pub struct RootFs {
    /// Every path, the root first; removed ones are reused.
    slots: Vec<Slot>,
    free: Vec<usize>,
    layer: usize,
    plugin_bytes: u64,
    plugin_cap: u64,
    tree_bytes: u64,
    tree_cap: u64,
    steps_left: u64,
    steps_cap: u64,
    /// Directories an opaque marker of this layer has cleared: nothing lower is below them.
    opaque: HashSet<usize>,
}

impl RootFs {
    /// An empty root; /loop-plugin may hold at most `plugin_cap` bytes, the tree and the
    /// walking are capped as [`Limits::default`] caps them.
    pub fn new(plugin_cap: u64) -> Self {
        Self::for_limits(&Limits {
            loop_plugin_bytes: plugin_cap,
            ..Limits::default()
        })
    }

    /// An empty root under `limits`' caps on /loop-plugin, the tree and the walking.
    pub fn for_limits(limits: &Limits) -> Self {
        let root = Slot {
            name: Box::default(),
            parent: ROOT,
            node: Node {
                kind: NodeKind::Dir,
                meta: Meta {
                    uid: 0,
                    gid: 0,
                    mode: 0o755,
                },
                layer: 0,
                implicit: true,
            },
            children: BTreeMap::new(),
            in_plugin: false,
        };
        Self {
            slots: vec![root],
            free: Vec::new(),
            layer: 0,
            plugin_bytes: 0,
            plugin_cap: limits.loop_plugin_bytes,
            tree_bytes: 0,
            tree_cap: limits.tree_bytes,
            steps_left: limits.resolve_steps,
            steps_cap: limits.resolve_steps,
            opaque: HashSet::new(),
        }
    }

    /// Entries applied from now on belong to layer `index` (0 is the lowest).
    pub fn begin_layer(&mut self, index: usize) {
        self.layer = index;
        self.opaque.clear();
    }

    /// The node at a path (`loop-plugin/plugin.json`, no leading slash), symlinks not followed.
    pub fn get(&self, path: &str) -> Option<&Node> {
        self.find(path)
            .filter(|id| *id != ROOT)
            .map(|id| &self.slots[id].node)
    }

    /// Bytes of regular files under /loop-plugin now.
    pub fn loop_plugin_bytes(&self) -> u64 {
        self.plugin_bytes
    }

    /// What the tree takes now, as its cap counts it.
    pub fn tree_bytes(&self) -> u64 {
        self.tree_bytes
    }

    /// Every path under `dir` (not `dir` itself; `""` for the whole view) with its node, depth
    /// first, a directory's children in the order of their names; symlinks not followed.
    pub fn below<'a>(&'a self, dir: &str) -> impl Iterator<Item = (String, &'a Node)> + 'a {
        let mut stack: Vec<(usize, String)> = Vec::new();
        if let Some(id) = self.find(dir) {
            let base = dir.trim_matches('/');
            self.push_children(&mut stack, id, base);
        }
        std::iter::from_fn(move || {
            let (id, path) = stack.pop()?;
            self.push_children(&mut stack, id, &path);
            Some((path, &self.slots[id].node))
        })
    }

    fn push_children(&self, stack: &mut Vec<(usize, String)>, id: usize, base: &str) {
        for (name, child) in self.slots[id].children.iter().rev() {
            let path = if base.is_empty() {
                name.to_string()
            } else {
                format!("{base}/{name}")
            };
            stack.push((*child, path));
        }
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
        if *name == OPAQUE_MARKER {
            if let Some(dir) = self.resolve_existing(parents, raw)? {
                self.hide_lower_below(dir);
            }
            return Ok(());
        }
        if let Some(hidden) = name.strip_prefix(WHITEOUT_PREFIX) {
            // `.wh..wh.*` other than the opaque marker are AUFS bookkeeping: nothing to apply.
            if !hidden.starts_with(WHITEOUT_PREFIX)
                && !hidden.is_empty()
                && let Some(dir) = self.resolve_existing(parents, raw)?
                && let Some(id) = self.child(dir, hidden)
                && self.slots[id].node.layer < self.layer
            {
                self.remove(id);
            }
            return Ok(());
        }
        let dir = self.resolve_creating(parents, raw)?;
        let existing = self.child(dir, name);
        let in_plugin = self.child_in_plugin(dir);
        let node = match kind {
            EntryKind::Dir => {
                if let Some(id) = existing
                    && self.slots[id].node.kind == NodeKind::Dir
                {
                    let node = &mut self.slots[id].node;
                    node.meta = meta;
                    node.layer = self.layer;
                    node.implicit = false;
                    return Ok(());
                }
                self.node(NodeKind::Dir, meta)
            }
            EntryKind::File { size } => {
                let content = if in_plugin {
                    self.check_cap(existing, raw, size)?;
                    // The header's size is a claim: read what arrives, not what it says.
                    let mut bytes = Vec::with_capacity(size.min(FIRST_READ) as usize);
                    data.take(size)
                        .read_to_end(&mut bytes)
                        .map_err(|source| PathError::Read {
                            path: shown(raw),
                            source,
                        })?;
                    if (bytes.len() as u64) < size {
                        return Err(PathError::Read {
                            path: shown(raw),
                            source: std::io::Error::new(
                                std::io::ErrorKind::UnexpectedEof,
                                format!("{} bytes of {size}", bytes.len()),
                            ),
                        });
                    }
                    Some(Arc::new(bytes))
                } else {
                    None
                };
                self.node(NodeKind::File { size, content }, meta)
            }
            EntryKind::Symlink { target } => {
                if target.len() > PATH_MAX {
                    return Err(PathError::TargetTooLong {
                        path: shown(raw),
                        bytes: target.len(),
                    });
                }
                if escapes(self.depth(dir), &target) {
                    return Err(PathError::SymlinkEscape {
                        path: shown(raw),
                        target: shown(&target),
                    });
                }
                self.node(NodeKind::Symlink { target }, meta)
            }
            EntryKind::Hardlink { target } => self.hardlink(raw, in_plugin, existing, &target)?,
            EntryKind::Other => self.node(NodeKind::Other, meta),
        };
        if let Some(id) = existing {
            self.remove(id);
        }
        self.insert(dir, name, node, raw)?;
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

    fn child(&self, dir: usize, name: &str) -> Option<usize> {
        self.slots[dir].children.get(name).copied()
    }

    /// Whether a child of `dir` is below /loop-plugin.
    fn child_in_plugin(&self, dir: usize) -> bool {
        let slot = &self.slots[dir];
        slot.in_plugin || (dir != ROOT && slot.parent == ROOT && &*slot.name == LOOP_PLUGIN_DIR)
    }

    /// The slot at a path, by name from the root, symlinks not followed.
    fn find(&self, path: &str) -> Option<usize> {
        let mut at = ROOT;
        for c in path.split('/') {
            match c {
                "" | "." => {}
                ".." => return None,
                c => at = self.child(at, c)?,
            }
        }
        Some(at)
    }

    /// The path of a slot from the root.
    fn path_of(&self, mut id: usize) -> String {
        let mut names = Vec::new();
        while id != ROOT {
            names.push(&*self.slots[id].name);
            id = self.slots[id].parent;
        }
        names.reverse();
        names.join("/")
    }

    /// How many components a slot's path has.
    fn depth(&self, mut id: usize) -> usize {
        let mut depth = 0;
        while id != ROOT {
            depth += 1;
            id = self.slots[id].parent;
        }
        depth
    }

    /// What a node costs the tree's cap.
    fn cost(name: &str, node: &Node) -> u64 {
        let target = match &node.kind {
            NodeKind::Symlink { target } => target.len(),
            _ => 0,
        };
        PATH_COST + (name.len() + target) as u64
    }

    /// Puts `node` at `name` in `dir` (which has no child of that name) and returns its slot.
    fn insert(
        &mut self,
        dir: usize,
        name: &str,
        node: Node,
        raw: &str,
    ) -> Result<usize, PathError> {
        if name.len() > NAME_MAX {
            return Err(PathError::NameTooLong {
                path: shown(raw),
                name: shown(name),
                bytes: name.len(),
            });
        }
        let cost = Self::cost(name, &node);
        if self.tree_bytes.saturating_add(cost) > self.tree_cap {
            return Err(PathError::TreeTooBig {
                path: shown(raw),
                limit: self.tree_cap,
            });
        }
        self.tree_bytes += cost;
        let in_plugin = self.child_in_plugin(dir);
        if in_plugin && let NodeKind::File { size, .. } = &node.kind {
            self.plugin_bytes = self.plugin_bytes.saturating_add(*size);
        }
        let slot = Slot {
            name: name.into(),
            parent: dir,
            node,
            children: BTreeMap::new(),
            in_plugin,
        };
        let id = match self.free.pop() {
            Some(id) => {
                self.slots[id] = slot;
                id
            }
            None => {
                self.slots.push(slot);
                self.slots.len() - 1
            }
        };
        self.slots[dir].children.insert(name.into(), id);
        Ok(id)
    }

    /// Refuses a file of `size` bytes replacing `existing` if /loop-plugin would then hold
    /// too much.
    fn check_cap(&self, existing: Option<usize>, raw: &str, size: u64) -> Result<(), PathError> {
        let replaced = match existing.map(|id| &self.slots[id].node.kind) {
            Some(NodeKind::File { size, .. }) => *size,
            _ => 0,
        };
        let bytes = self
            .plugin_bytes
            .saturating_sub(replaced)
            .saturating_add(size);
        if bytes > self.plugin_cap {
            return Err(PathError::LoopPluginTooBig {
                path: shown(raw),
                bytes,
                limit: self.plugin_cap,
            });
        }
        Ok(())
    }

    fn hardlink(
        &mut self,
        raw: &str,
        in_plugin: bool,
        existing: Option<usize>,
        target: &str,
    ) -> Result<Node, PathError> {
        let err = |reason| PathError::Hardlink {
            path: shown(raw),
            target: shown(target),
            reason,
        };
        let comps = split(target).map_err(|e| match e {
            PathError::Absolute { .. } => err("the target is an absolute path"),
            PathError::TooLong { .. } => err("the target is longer than Linux's PATH_MAX"),
            _ => err("the target has a '..' component"),
        })?;
        let Some((name, parents)) = comps.split_last() else {
            return Err(err("the target is the root"));
        };
        let Some(id) = self
            .resolve_existing(parents, raw)?
            .and_then(|dir| self.child(dir, name))
        else {
            return Err(err("the target does not exist"));
        };
        let slot = &self.slots[id];
        match &slot.node.kind {
            NodeKind::Dir => return Err(err("the target is a directory")),
            NodeKind::File { size, .. } if in_plugin => {
                if !slot.in_plugin {
                    return Err(err("a file under /loop-plugin links to one outside it"));
                }
                self.check_cap(existing, raw, *size)?;
            }
            _ => {}
        }
        Ok(Node {
            layer: self.layer,
            implicit: false,
            ..self.slots[id].node.clone()
        })
    }

    /// Resolves directory components from the root, following symlinks inside the tree; a
    /// missing directory gives None.
    fn resolve_existing(
        &mut self,
        parents: &[&str],
        raw: &str,
    ) -> Result<Option<usize>, PathError> {
        let (mut hops, mut steps) = (0, 0);
        let start = Pos {
            slot: ROOT,
            missing: Vec::new(),
        };
        let walked = self.walk(
            start,
            parents.iter().copied(),
            false,
            &mut hops,
            &mut steps,
            raw,
        );
        self.steps_left = self.steps_left.saturating_sub(steps);
        Ok(walked?.map(|pos| pos.slot))
    }

    /// Resolves directory components from the root, making the missing ones (owner 0:0, as
    /// a runtime unpacking the layer would).
    fn resolve_creating(&mut self, parents: &[&str], raw: &str) -> Result<usize, PathError> {
        let (mut hops, mut steps) = (0, 0);
        let start = Pos {
            slot: ROOT,
            missing: Vec::new(),
        };
        let walked = self.walk(
            start,
            parents.iter().copied(),
            true,
            &mut hops,
            &mut steps,
            raw,
        );
        self.steps_left = self.steps_left.saturating_sub(steps);
        let Some(pos) = walked? else {
            unreachable!("a walk that creates ends somewhere");
        };
        let mut at = pos.slot;
        for name in pos.missing {
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
            at = self.insert(at, &name, node, raw)?;
        }
        Ok(at)
    }

    /// Resolves components from `pos`, following symlinks inside the tree. A missing
    /// directory is recorded in the position when `create` (and walked as if empty), else it
    /// ends the walk with None. Every component counts a step against the cap.
    fn walk<'a>(
        &self,
        mut pos: Pos,
        comps: impl Iterator<Item = &'a str>,
        create: bool,
        hops: &mut u32,
        steps: &mut u64,
        raw: &str,
    ) -> Result<Option<Pos>, PathError> {
        for c in comps {
            *steps += 1;
            if *steps > self.steps_left {
                return Err(PathError::TooManySteps {
                    path: shown(raw),
                    limit: self.steps_cap,
                });
            }
            match c {
                "" | "." => continue,
                ".." => {
                    if pos.missing.pop().is_none() {
                        if pos.slot == ROOT {
                            return Err(PathError::ResolvesOutside {
                                path: shown(raw),
                                at: "..".to_string(),
                            });
                        }
                        pos.slot = self.slots[pos.slot].parent;
                    }
                    continue;
                }
                _ => {}
            }
            if !pos.missing.is_empty() {
                pos.missing.push(c.to_string());
                continue;
            }
            let Some(id) = self.child(pos.slot, c) else {
                if !create {
                    return Ok(None);
                }
                pos.missing.push(c.to_string());
                continue;
            };
            match &self.slots[id].node.kind {
                NodeKind::Dir => pos.slot = id,
                NodeKind::Symlink { target } => {
                    *hops += 1;
                    if *hops > MAX_SYMLINK_HOPS {
                        return Err(PathError::SymlinkLoop { path: shown(raw) });
                    }
                    let base = Pos {
                        slot: if target.starts_with('/') {
                            ROOT
                        } else {
                            pos.slot
                        },
                        missing: Vec::new(),
                    };
                    match self.walk(base, target.split('/'), create, hops, steps, raw)? {
                        Some(resolved) => pos = resolved,
                        None => return Ok(None),
                    }
                }
                _ => {
                    return Err(PathError::NotADirectory {
                        path: shown(raw),
                        component: format!("/{}", self.path_of(id)),
                    });
                }
            }
        }
        Ok(Some(pos))
    }

    /// Removes a path and everything under it.
    fn remove(&mut self, id: usize) {
        let parent = self.slots[id].parent;
        let name = std::mem::take(&mut self.slots[id].name);
        self.slots[parent].children.remove(&name);
        self.slots[id].name = name;
        let mut stack = vec![id];
        while let Some(id) = stack.pop() {
            let slot = &mut self.slots[id];
            stack.extend(std::mem::take(&mut slot.children).into_values());
            let name = std::mem::take(&mut slot.name);
            let node = std::mem::replace(
                &mut slot.node,
                Node {
                    kind: NodeKind::Other,
                    meta: Meta::default(),
                    layer: 0,
                    implicit: true,
                },
            );
            if slot.in_plugin
                && let NodeKind::File { size, .. } = &node.kind
            {
                self.plugin_bytes = self.plugin_bytes.saturating_sub(*size);
            }
            self.tree_bytes = self.tree_bytes.saturating_sub(Self::cost(&name, &node));
            self.free.push(id);
        }
    }

    /// An opaque marker: hides what lower layers put under `dir`. A lower directory holding
    /// something of this layer stays, for it, as this layer's.
    fn hide_lower_below(&mut self, dir: usize) {
        let mut up = dir;
        loop {
            if self.opaque.contains(&up) {
                return; // cleared already in this layer, and nothing lower comes back
            }
            if up == ROOT {
                break;
            }
            up = self.slots[up].parent;
        }
        let mut dirs = Vec::new();
        let mut stack = vec![dir];
        while let Some(d) = stack.pop() {
            let children: Vec<usize> = self.slots[d].children.values().copied().collect();
            for c in children {
                let node = &self.slots[c].node;
                if node.kind == NodeKind::Dir {
                    dirs.push(c);
                    if !self.opaque.contains(&c) {
                        stack.push(c);
                    }
                } else if node.layer < self.layer {
                    self.remove(c);
                }
            }
        }
        // Deepest first, so that a directory is judged with its children already judged.
        for d in dirs.into_iter().rev() {
            let slot = &mut self.slots[d];
            if slot.node.layer >= self.layer {
                continue;
            }
            if slot.children.is_empty() {
                self.remove(d);
            } else {
                slot.node.layer = self.layer;
            }
        }
        self.opaque.insert(dir);
    }
}

/// An entry path's components: `./` and empty parts dropped; absolute paths, `..` and paths
/// over PATH_MAX refused.
fn split(raw: &str) -> Result<Vec<&str>, PathError> {
    if raw.len() > PATH_MAX {
        return Err(PathError::TooLong {
            path: shown(raw),
            bytes: raw.len(),
        });
    }
    if raw.starts_with('/') {
        return Err(PathError::Absolute { path: shown(raw) });
    }
    let mut comps = Vec::new();
    for c in raw.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                return Err(PathError::DotDot { path: shown(raw) });
            }
            c => comps.push(c),
        }
    }
    Ok(comps)
}

/// Does a symlink in a directory `depth` components deep pointing at `target` climb above
/// the root? Absolute targets are rooted at the image's root, so they stay inside.
fn escapes(depth: usize, target: &str) -> bool {
    if target.starts_with('/') {
        return false;
    }
    let mut depth = depth as i64;
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

    #[test]
    fn a_claimed_size_is_read_not_reserved() {
        let mut fs = RootFs::new(50_000_000);
        let err = fs
            .apply(
                "loop-plugin/ui/big.js",
                EntryKind::File { size: 40_000_000 },
                meta(0),
                &mut &b"ten bytes!"[..],
            )
            .unwrap_err();
        assert!(
            matches!(&err, PathError::Read { path, .. } if path == "loop-plugin/ui/big.js"),
            "{err}"
        );
        assert!(err.to_string().contains("10 bytes of 40000000"), "{err}");
        assert!(fs.get("loop-plugin/ui/big.js").is_none());
    }

    #[test]
    fn the_cap_holds_for_any_claimed_size() {
        let mut fs = RootFs::new(CAP);
        file(&mut fs, "loop-plugin/a", b"a").unwrap();
        let err = fs
            .apply(
                "loop-plugin/b",
                EntryKind::File { size: u64::MAX },
                meta(0),
                &mut std::io::empty(),
            )
            .unwrap_err();
        assert!(
            matches!(
                err,
                PathError::LoopPluginTooBig {
                    bytes: u64::MAX,
                    ..
                }
            ),
            "{err}"
        );
    }

    #[test]
    fn paths_names_and_targets_over_linux_limits_are_refused() {
        let mut fs = RootFs::new(CAP);
        let long = "a/".repeat(PATH_MAX / 2 + 1);
        let err = file(&mut fs, &long, b"").unwrap_err();
        assert!(
            matches!(&err, PathError::TooLong { bytes, path } if *bytes == long.len() && path.len() < 300),
            "{err}"
        );
        let name = "n".repeat(NAME_MAX + 1);
        let err = file(&mut fs, &format!("loop-plugin/{name}/x"), b"").unwrap_err();
        assert!(
            matches!(&err, PathError::NameTooLong { bytes, .. } if *bytes == NAME_MAX + 1),
            "{err}"
        );
        file(
            &mut fs,
            &format!("loop-plugin/{}", "n".repeat(NAME_MAX)),
            b"",
        )
        .unwrap();
        let link = |fs: &mut RootFs, path: &str, target: String| {
            fs.apply(
                path,
                EntryKind::Symlink { target },
                meta(0),
                &mut std::io::empty(),
            )
        };
        let err = link(&mut fs, "l", "t/".repeat(PATH_MAX / 2 + 1)).unwrap_err();
        assert!(matches!(err, PathError::TargetTooLong { .. }), "{err}");
        // A name too long that only a symlink's target holds is refused where it would be made.
        link(&mut fs, "m", format!("{name}/x")).unwrap();
        let err = file(&mut fs, "m/f", b"").unwrap_err();
        assert!(matches!(err, PathError::NameTooLong { .. }), "{err}");
    }

    #[test]
    fn the_tree_is_capped_and_removing_frees_it() {
        let limits = Limits {
            tree_bytes: 10 * PATH_COST,
            ..Limits::default()
        };
        let mut fs = RootFs::for_limits(&limits);
        file(&mut fs, "a/b/c/d/e/f/g/h", b"").unwrap();
        let err = file(&mut fs, "x/y/z", b"").unwrap_err();
        assert!(
            matches!(&err, PathError::TreeTooBig { path, limit } if path == "x/y/z" && *limit == 10 * PATH_COST),
            "{err}"
        );
        fs.begin_layer(1);
        marker(&mut fs, ".wh.a");
        assert_eq!(fs.tree_bytes(), PATH_COST + 1, "x, made before the refusal");
        file(&mut fs, "x/y/z", b"").unwrap();
    }

    #[test]
    fn walking_is_capped_for_the_whole_image() {
        let limits = Limits {
            resolve_steps: 100,
            ..Limits::default()
        };
        let mut fs = RootFs::for_limits(&limits);
        let deep = "d/".repeat(60);
        file(&mut fs, &format!("{deep}x"), b"").unwrap();
        let err = file(&mut fs, &format!("{deep}y"), b"").unwrap_err();
        assert!(
            matches!(err, PathError::TooManySteps { limit: 100, .. }),
            "{err}"
        );
    }

    #[test]
    fn an_opaque_marker_keeps_a_lower_directory_holding_this_layers_entries() {
        let mut fs = RootFs::new(CAP);
        dir(&mut fs, "a/b", 7);
        file(&mut fs, "a/b/old", b"o").unwrap();
        file(&mut fs, "a/gone", b"g").unwrap();
        fs.begin_layer(1);
        file(&mut fs, "a/b/new", b"n").unwrap();
        marker(&mut fs, "a/.wh..wh..opq");
        marker(&mut fs, "a/.wh..wh..opq"); // again: nothing more to hide
        marker(&mut fs, "a/b/.wh..wh..opq");
        let b = fs.get("a/b").expect("a/b holds a/b/new");
        assert_eq!((&b.kind, b.layer, b.meta.uid), (&NodeKind::Dir, 1, 7));
        assert!(fs.get("a/b/new").is_some());
        assert!(fs.get("a/b/old").is_none());
        assert!(fs.get("a/gone").is_none());
    }

    #[test]
    fn an_opaque_marker_at_the_root_hides_every_lower_path() {
        let mut fs = RootFs::new(CAP);
        file(&mut fs, "loop-plugin/plugin.json", b"{}").unwrap();
        dir(&mut fs, "data", 1000);
        fs.begin_layer(1);
        file(&mut fs, "new", b"").unwrap();
        marker(&mut fs, "./.wh..wh..opq");
        let left: Vec<String> = fs.below("").map(|(path, _)| path).collect();
        assert_eq!(left, ["new"]);
        assert_eq!(fs.loop_plugin_bytes(), 0);
    }

    #[test]
    fn below_lists_every_path_depth_first() {
        let mut fs = RootFs::new(CAP);
        file(&mut fs, "b/c", b"").unwrap();
        file(&mut fs, "a", b"").unwrap();
        dir(&mut fs, "b/d", 0);
        let all: Vec<String> = fs.below("").map(|(path, _)| path).collect();
        assert_eq!(all, ["a", "b", "b/c", "b/d"]);
        let under_b: Vec<String> = fs.below("/b/").map(|(path, _)| path).collect();
        assert_eq!(under_b, ["b/c", "b/d"]);
        assert_eq!(fs.below("nope").count(), 0);
    }
}
