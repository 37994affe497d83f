//! The Landlock ruleset: the kernel's exec and write limits.
//!
//! - EXECUTE is granted on everything except the no-exec dirs and the files a command rule
//!   denies: walking down from `/` along each excluded path, every sibling is granted (a dir
//!   with all beneath it, a file on its own), the excluded path itself is not. What appears
//!   later in a dir on such a path (only possible in the writable dirs) is not granted.
//!   Symbolic links are never granted: what they point to is, where it lies.
//! - Writes (write, make, remove, refer) are granted beneath the writable dirs and
//!   `/dev/shm`; write on the usual `/dev` files and `/dev/pts`. Truncation is not handled
//!   (it would cost a path walk on every open): the filter traps what truncates without the
//!   write right (`plan`).
//! - Reads are not handled: reading is allowed everywhere.
//! - Where the kernel has it (ABI 6), the plugin may not connect to abstract unix sockets
//!   outside its domain nor signal processes outside it (the gate).
//!
//! The walk is pure over a dir lister ([`exec_grants`]); building the ruleset opens paths.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, PathFd, Ruleset,
    RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};

use crate::compiled::CompiledPolicy;
use crate::decide::decide_exec;
use crate::glob::under;

/// Why the ruleset could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RulesetError {
    #[error("building the Landlock ruleset: {0}")]
    Landlock(#[from] landlock::RulesetError),
    #[error("walking {path} for the exec grants: too many entries (more than {limit})")]
    TooBig { path: String, limit: usize },
}

/// What a dir entry is, for the walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Dir,
    File,
    Symlink,
}

/// The paths to grant EXECUTE on so that everything but `excluded` (canonical paths) can
/// run. `list` returns a dir's entries.
pub fn exec_grants(
    excluded: &[PathBuf],
    list: &mut dyn FnMut(&Path) -> Vec<(OsString, Kind)>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    walk(Path::new("/"), excluded, list, &mut out);
    out
}

fn walk(
    dir: &Path,
    excluded: &[PathBuf],
    list: &mut dyn FnMut(&Path) -> Vec<(OsString, Kind)>,
    out: &mut Vec<PathBuf>,
) {
    let mut entries = list(dir);
    entries.sort();
    for (name, kind) in entries {
        let child = dir.join(&name);
        if kind == Kind::Symlink || excluded.contains(&child) {
            continue;
        }
        let holds_excluded = excluded.iter().any(|e| under(e, &child));
        if holds_excluded && kind == Kind::Dir {
            walk(&child, excluded, list, out);
        } else {
            out.push(child);
        }
    }
}

/// Lists a dir on this host (unreadable: nothing, so nothing there is granted).
pub fn list_host(dir: &Path) -> Vec<(OsString, Kind)> {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| {
            let t = e.file_type().ok()?;
            let kind = if t.is_symlink() {
                Kind::Symlink
            } else if t.is_dir() {
                Kind::Dir
            } else {
                Kind::File
            };
            Some((e.file_name(), kind))
        })
        .collect()
}

/// The standard dirs searched for commands a rule names, besides the plugin's PATH.
pub const COMMAND_DIRS: &[&str] = &[
    "/usr/local/sbin",
    "/usr/local/bin",
    "/usr/sbin",
    "/usr/bin",
    "/sbin",
    "/bin",
];

/// Files on this host a rule denies running (canonical), found under PATH and the standard
/// dirs for command names, and under the literal prefix of file rules on `exec`; and notes on
/// what only the supervisor can deny (a command that is a link to a multi-call binary).
pub fn denied_executables(p: &CompiledPolicy, path_env: &str) -> (Vec<PathBuf>, Vec<String>) {
    const LIMIT: usize = 200_000;
    let mut files = BTreeSet::new();
    let mut notes = Vec::new();
    let dirs: Vec<PathBuf> = path_env
        .split(':')
        .filter(|d| d.starts_with('/'))
        .map(PathBuf::from)
        .chain(COMMAND_DIRS.iter().map(PathBuf::from))
        .collect();
    let consider = |raw: &Path, files: &mut BTreeSet<PathBuf>, notes: &mut Vec<String>| {
        let Ok(canonical) = std::fs::canonicalize(raw) else {
            return;
        };
        if decide_exec(p, raw, &canonical).allowed() {
            return;
        }
        if decide_exec(p, &canonical, &canonical).allowed() {
            notes.push(format!(
                "{} runs {}, which other names run too: denied by name in the supervisor only",
                raw.display(),
                canonical.display()
            ));
        } else {
            files.insert(canonical);
        }
    };
    for rule in &p.commands {
        for name in &rule.names {
            if name.starts_with('/') {
                consider(Path::new(name), &mut files, &mut notes);
            } else {
                for d in &dirs {
                    consider(&d.join(name), &mut files, &mut notes);
                }
            }
        }
    }
    for rule in &p.files {
        if !rule.ops.contains(&crate::policy::Operation::Exec) {
            continue;
        }
        for g in &rule.globs {
            let mut seen = 0usize;
            let mut stack = vec![g.prefix.clone()];
            while let Some(d) = stack.pop() {
                let Ok(rd) = std::fs::read_dir(&d) else {
                    consider(&d, &mut files, &mut notes);
                    continue;
                };
                for e in rd.flatten() {
                    seen += 1;
                    if seen > LIMIT {
                        notes.push(format!(
                            "{}: more than {LIMIT} entries under {}, the rest denied by the supervisor only",
                            g.text,
                            g.prefix.display()
                        ));
                        stack.clear();
                        break;
                    }
                    let path = e.path();
                    match e.file_type() {
                        Ok(t) if t.is_dir() => stack.push(path),
                        Ok(t) if t.is_file() && g.matches(&path) => {
                            consider(&path, &mut files, &mut notes)
                        }
                        _ => {}
                    }
                }
            }
        }
    }
    (files.into_iter().collect(), notes)
}

/// The write rights granted beneath the writable dirs (and `/dev/shm`).
fn write_rights() -> BitFlags<AccessFs> {
    AccessFs::WriteFile
        | AccessFs::RemoveDir
        | AccessFs::RemoveFile
        | AccessFs::MakeChar
        | AccessFs::MakeDir
        | AccessFs::MakeReg
        | AccessFs::MakeSock
        | AccessFs::MakeFifo
        | AccessFs::MakeBlock
        | AccessFs::MakeSym
        | AccessFs::Refer
}

/// What the ruleset handles (and so denies unless granted).
fn handled() -> BitFlags<AccessFs> {
    write_rights() | AccessFs::Execute
}

/// What the built ruleset grants, for the start line and the tests.
#[derive(Clone, Debug, Default)]
pub struct Grants {
    pub exec: Vec<PathBuf>,
    pub write: Vec<PathBuf>,
    pub device_files: Vec<PathBuf>,
}

/// The grants for a policy on this host: `excluded_files` are the denied executables.
pub fn grants(p: &CompiledPolicy, excluded_files: &[PathBuf]) -> Grants {
    let mut excluded: Vec<PathBuf> = p.no_exec.clone();
    excluded.extend(excluded_files.iter().cloned());
    let exec = exec_grants(&excluded, &mut list_host);
    let mut write: Vec<PathBuf> = p.writable.clone();
    write.push(PathBuf::from("/dev/shm"));
    let mut device_files = p.device_files.clone();
    device_files.push(PathBuf::from("/dev/pts"));
    Grants {
        exec,
        write,
        device_files,
    }
}

/// Builds the ruleset (not yet enforced: the child calls `restrict_self`). Paths that do not
/// exist are left out (nothing to grant).
pub fn build(g: &Grants) -> Result<RulesetCreated, RulesetError> {
    let abi = ABI::V6;
    let mut rs = Ruleset::default()
        .set_compatibility(CompatLevel::BestEffort)
        .handle_access(handled() & AccessFs::from_all(abi))?
        .scope(Scope::from_all(abi))?
        .create()?;
    let rule = |p: &Path, rights: BitFlags<AccessFs>| {
        PathFd::new(p).ok().map(|fd| PathBeneath::new(fd, rights))
    };
    for p in &g.exec {
        if let Some(r) = rule(p, AccessFs::Execute.into()) {
            rs = rs.add_rule(r)?;
        }
    }
    for p in &g.write {
        if let Some(r) = rule(p, write_rights()) {
            rs = rs.add_rule(r)?;
        }
    }
    for p in &g.device_files {
        if let Some(r) = rule(p, AccessFs::WriteFile.into()) {
            rs = rs.add_rule(r)?;
        }
    }
    Ok(rs)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn tree() -> BTreeMap<PathBuf, Vec<(OsString, Kind)>> {
        let e = |n: &str, k| (OsString::from(n), k);
        BTreeMap::from([
            (
                PathBuf::from("/"),
                vec![
                    e("usr", Kind::Dir),
                    e("bin", Kind::Symlink),
                    e("data", Kind::Dir),
                    e("tmp", Kind::Dir),
                    e("dev", Kind::Dir),
                    e("etc", Kind::Dir),
                ],
            ),
            (
                PathBuf::from("/usr"),
                vec![e("bin", Kind::Dir), e("lib", Kind::Dir)],
            ),
            (
                PathBuf::from("/usr/bin"),
                vec![
                    e("curl", Kind::File),
                    e("true", Kind::File),
                    e("wget", Kind::Symlink),
                ],
            ),
            (
                PathBuf::from("/dev"),
                vec![
                    e("shm", Kind::Dir),
                    e("pts", Kind::Dir),
                    e("null", Kind::File),
                ],
            ),
        ])
    }

    #[test]
    fn everything_but_the_excluded_is_granted() {
        let t = tree();
        let mut list = |d: &Path| t.get(d).cloned().unwrap_or_default();
        let excluded = [
            PathBuf::from("/data"),
            PathBuf::from("/tmp"),
            PathBuf::from("/dev/shm"),
            PathBuf::from("/usr/bin/curl"),
        ];
        let got = exec_grants(&excluded, &mut list);
        let want: Vec<PathBuf> = ["/dev/null", "/dev/pts", "/etc", "/usr/bin/true", "/usr/lib"]
            .iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(got, want);
        // Only the no-exec dirs: whole trees.
        let got = exec_grants(&excluded[..3], &mut list);
        assert!(got.contains(&PathBuf::from("/usr")));
        assert!(
            !got.iter()
                .any(|p| p.starts_with("/data") || p.starts_with("/tmp"))
        );
    }
}
