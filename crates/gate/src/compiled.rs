//! The policy made ready to decide with: globs compiled, dirs made canonical (symbolic links
//! on the host resolved, so a rule on `/data/cache/**` matches the paths the supervisor sees),
//! and the derived sets: the no-exec dirs grow by every dir the manifest lets the plugin write
//! outside the writable ones (whatever the plugin can write it must not run), and the audit
//! dir is protected when it lies inside a writable dir.
//!
//! Pure given a canonicalizer: the caller passes [`canonical_on_host`] in production and an
//! identity in tests.

use std::collections::BTreeSet;
use std::path::{Component, Path, PathBuf};

use crate::glob::{Components, Glob, literal_prefix, under};
use crate::policy::{AuditDestination, Decision, Operation, Policy, PolicyError};

/// The usual `/dev` files: every file op on them is in the baseline. With them the
/// container's termination message (Kubernetes mounts one file there per container).
pub const DEVICE_FILES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
    "/dev/termination-log",
];

/// `/dev` dirs whose contents are in the baseline: terminals and POSIX shared memory
/// (which is also a no-exec dir).
pub const DEVICE_DIRS: &[&str] = &["/dev/pts", "/dev/shm"];

pub use manifest::gate::CHANGING;

/// The canonical form of `path` on this host: the longest existing ancestor resolved with
/// realpath, the rest appended as written (normalised, `..` refused by keeping it literal).
pub fn canonical_on_host(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut rest = Vec::new();
    loop {
        if let Ok(c) = std::fs::canonicalize(&existing) {
            let mut out = c;
            for part in rest.iter().rev() {
                out.push(part);
            }
            return out;
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct CompiledFileRule {
    /// Its index in the manifest's `gate.files`.
    pub index: usize,
    pub globs: Vec<Glob>,
    pub ops: BTreeSet<Operation>,
    pub decision: Decision,
}

#[derive(Debug, Clone)]
pub struct CompiledCommandRule {
    /// Its index in the manifest's `gate.commands`.
    pub index: usize,
    pub names: Vec<String>,
    pub decision: Decision,
}

/// The policy ready to decide with.
#[derive(Debug, Clone)]
pub struct CompiledPolicy {
    pub writable: Vec<PathBuf>,
    pub no_exec: Vec<PathBuf>,
    pub device_files: Vec<PathBuf>,
    pub device_dirs: Vec<PathBuf>,
    /// Dirs the plugin may read but never change (the audit dir inside a writable dir).
    pub protected: Vec<PathBuf>,
    pub files: Vec<CompiledFileRule>,
    pub commands: Vec<CompiledCommandRule>,
}

fn dedup(mut v: Vec<PathBuf>) -> Vec<PathBuf> {
    v.sort();
    v.dedup();
    v
}

fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in path.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

impl CompiledPolicy {
    /// Compiles `policy`, making every path canonical with `canon`.
    pub fn compile(
        policy: &Policy,
        canon: impl Fn(&Path) -> PathBuf,
    ) -> Result<CompiledPolicy, PolicyError> {
        policy.validate()?;
        let canon = |p: &Path| canon(&normalise(p));
        let writable = dedup(policy.writable.iter().map(|p| canon(p)).collect());
        let device_files = DEVICE_FILES.iter().map(|p| PathBuf::from(*p)).collect();
        let device_dirs: Vec<PathBuf> = DEVICE_DIRS.iter().map(|p| PathBuf::from(*p)).collect();
        // Whatever the plugin can write it must not run: the writable dirs and /dev/shm are
        // no-exec whatever the policy lists.
        let mut no_exec: Vec<PathBuf> = policy.no_exec.iter().map(|p| canon(p)).collect();
        no_exec.extend(writable.iter().cloned());
        no_exec.extend(device_dirs.iter().cloned());

        let mut files = Vec::new();
        let mut components = Components::default();
        for (index, rule) in policy.gate.files.iter().enumerate() {
            let ops: BTreeSet<Operation> = if rule.operations.is_empty() {
                Operation::ALL.into_iter().collect()
            } else {
                rule.operations.iter().copied().collect()
            };
            let mut globs = Vec::new();
            for (j, text) in rule.paths.iter().enumerate() {
                let raw_prefix = literal_prefix(text);
                let prefix = canon(&raw_prefix);
                // The rule written against the canonical prefix: the prefix escaped, the rest
                // (from the first component with glob syntax) as written.
                let rest = text
                    .strip_prefix(raw_prefix.to_str().unwrap_or_default())
                    .unwrap_or("");
                let pattern = format!(
                    "{}{}",
                    globset::escape(prefix.to_str().unwrap_or_default()).trim_end_matches('/'),
                    if rest.is_empty() || rest.starts_with('/') {
                        rest.to_string()
                    } else {
                        format!("/{rest}")
                    }
                );
                let compiled = Glob::new(text.clone(), prefix.clone(), &pattern, &mut components)
                    .map_err(|e| PolicyError::Field {
                    field: format!("gate.files[{index}].paths[{j}]"),
                    reason: e.to_string(),
                })?;
                if rule.decision == Decision::Allow && CHANGING.iter().any(|o| ops.contains(o)) {
                    if prefix == Path::new("/") {
                        return Err(PolicyError::Field {
                            field: format!("gate.files[{index}].paths[{j}]"),
                            reason: format!(
                                "{text:?} allows changing files anywhere: an allow rule that changes files must name a dir below /, which then becomes a no-exec dir"
                            ),
                        });
                    }
                    no_exec.push(prefix.clone());
                }
                globs.push(compiled);
            }
            files.push(CompiledFileRule {
                index,
                globs,
                ops,
                decision: rule.decision,
            });
        }
        let commands = policy
            .gate
            .commands
            .iter()
            .enumerate()
            .map(|(index, r)| CompiledCommandRule {
                index,
                names: r.commands.clone(),
                decision: r.decision,
            })
            .collect();

        let mut protected = Vec::new();
        if policy.audit.protect
            && let AuditDestination::Dir(d) = &policy.audit.destination
        {
            let d = canon(d);
            let inside = writable
                .iter()
                .chain(device_dirs.iter())
                .any(|w| under(&d, w));
            if inside {
                protected.push(d);
            }
        }
        Ok(CompiledPolicy {
            writable,
            no_exec: dedup(no_exec),
            device_files,
            device_dirs,
            protected,
            files,
            commands,
        })
    }

    /// The operations some rule (a manifest rule or the audit dir's protection) decides
    /// differently from what Landlock alone would, so the calls behind them must be trapped:
    /// a deny, or an allow beyond the writable dirs. An allow inside them, or of reads, is the
    /// baseline already.
    pub fn ops_needing_traps(&self) -> BTreeSet<Operation> {
        let inside = |p: &Path| {
            self.writable
                .iter()
                .chain(self.device_dirs.iter())
                .any(|w| under(p, w))
        };
        let mut ops = BTreeSet::new();
        for rule in &self.files {
            for op in &rule.ops {
                let needed = match rule.decision {
                    Decision::Deny => true,
                    Decision::Allow => {
                        *op != Operation::Read && rule.globs.iter().any(|g| !inside(&g.prefix))
                    }
                };
                if needed && *op != Operation::Exec {
                    ops.insert(*op);
                }
            }
        }
        if !self.protected.is_empty() {
            ops.extend(CHANGING.iter().copied());
        }
        ops
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::{FileRule, GateRules};

    fn same(p: &Path) -> PathBuf {
        p.to_path_buf()
    }

    #[test]
    fn rules_follow_canonical_dirs() {
        let mut policy = Policy::from_rules(GateRules {
            files: vec![FileRule {
                paths: vec!["/data/cache/**".into()],
                operations: vec![Operation::Delete],
                decision: Decision::Deny,
            }],
            commands: vec![],
        })
        .unwrap();
        policy.writable = vec!["/data".into()];
        let canon = |p: &Path| match p.strip_prefix("/data") {
            Ok(rest) => Path::new("/mnt/vol-1/data").join(rest),
            Err(_) => p.to_path_buf(),
        };
        let c = CompiledPolicy::compile(&policy, canon).unwrap();
        assert_eq!(c.writable, vec![PathBuf::from("/mnt/vol-1/data")]);
        assert!(c.files[0].globs[0].matches(Path::new("/mnt/vol-1/data/cache/a")));
        assert!(!c.files[0].globs[0].matches(Path::new("/data/cache/a")));
        assert_eq!(
            c.files[0].globs[0].prefix,
            PathBuf::from("/mnt/vol-1/data/cache")
        );
    }

    #[test]
    fn allowed_writes_outside_become_no_exec() {
        let policy = Policy::from_rules(GateRules {
            files: vec![FileRule {
                paths: vec!["/opt/app/cache/**".into()],
                operations: vec![Operation::Write, Operation::Create],
                decision: Decision::Allow,
            }],
            commands: vec![],
        })
        .unwrap();
        let c = CompiledPolicy::compile(&policy, same).unwrap();
        assert!(c.no_exec.contains(&PathBuf::from("/opt/app/cache")));
        let mut narrow = policy.clone();
        narrow.no_exec = vec!["/srv".into()];
        let c2 = CompiledPolicy::compile(&narrow, same).unwrap();
        for d in ["/srv", "/data", "/tmp", "/dev/shm"] {
            assert!(c2.no_exec.contains(&PathBuf::from(d)), "{d}");
        }
        assert!(c.no_exec.contains(&PathBuf::from("/dev/shm")));
        let trapped = c.ops_needing_traps();
        assert!(trapped.contains(&Operation::Write) && trapped.contains(&Operation::Create));
        // Refused as a policy already (what admission checks), not only when compiled.
        let everywhere = GateRules {
            files: vec![FileRule {
                paths: vec!["/**".into()],
                operations: vec![],
                decision: Decision::Allow,
            }],
            commands: vec![],
        };
        let err = Policy::from_rules(everywhere.clone())
            .unwrap_err()
            .to_string();
        assert!(err.contains("gate.files[0].paths[0]"), "{err}");
        let unchecked = Policy {
            gate: everywhere,
            ..Policy::default()
        };
        let err = CompiledPolicy::compile(&unchecked, same)
            .unwrap_err()
            .to_string();
        assert!(err.contains("allows changing files anywhere"), "{err}");
    }

    #[test]
    fn allows_inside_writable_dirs_need_no_traps() {
        let mut policy = Policy::from_rules(GateRules {
            files: vec![FileRule {
                paths: vec!["/data/x/**".into(), "/etc/**".into()],
                operations: vec![Operation::Write, Operation::Read],
                decision: Decision::Allow,
            }],
            commands: vec![],
        })
        .unwrap();
        policy.audit.destination = AuditDestination::Stdout;
        let c = CompiledPolicy::compile(&policy, same).unwrap();
        assert_eq!(
            c.ops_needing_traps(),
            [Operation::Write].into_iter().collect()
        );
        policy.gate.files[0].paths.pop();
        let c = CompiledPolicy::compile(&policy, same).unwrap();
        assert!(c.ops_needing_traps().is_empty());
        policy.gate.files[0].decision = Decision::Deny;
        let c = CompiledPolicy::compile(&policy, same).unwrap();
        assert_eq!(
            c.ops_needing_traps(),
            [Operation::Read, Operation::Write].into_iter().collect()
        );
    }

    #[test]
    fn the_audit_dir_is_protected_only_inside_a_writable_dir() {
        let c = CompiledPolicy::compile(&Policy::default(), same).unwrap();
        assert_eq!(c.protected, vec![PathBuf::from("/data/.loop-audit")]);
        assert!(c.ops_needing_traps().contains(&Operation::Delete));
        let mut p = Policy::default();
        p.audit.destination = AuditDestination::Dir("/var/log/loop-audit".into());
        let c = CompiledPolicy::compile(&p, same).unwrap();
        assert!(c.protected.is_empty());
        assert!(c.ops_needing_traps().is_empty());
        p.audit.destination = AuditDestination::Stdout;
        assert!(
            CompiledPolicy::compile(&p, same)
                .unwrap()
                .protected
                .is_empty()
        );
    }
}
