//! The decision, as the reference's Agentgate section orders it, in one pure function per
//! kind of call:
//!
//! 1. a deny on running files from the no-exec dirs (`/data`, `/tmp`, `/dev/shm`, and any
//!    dir the manifest lets the plugin write);
//! 2. the gate's own rule: the audit dir, when it lies in a writable dir, is read-only;
//! 3. the manifest's `gate` rules, commands then files, the first that matches deciding;
//! 4. the baseline: every file op under the writable dirs and on the usual `/dev` files,
//!    reads anywhere, exec of anything outside the no-exec dirs;
//! 5. everything else denied.
//!
//! (No unix-socket connects is a BPF rule, decided without a path: see `filter`.)
//!
//! Paths here are canonical: the supervisor resolved them on the object it pinned.

use std::fmt;
use std::path::Path;

use crate::compiled::CompiledPolicy;
use crate::glob::under;
use crate::policy::{Decision, Operation};

/// Which rule decided: named in every audit line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleRef {
    /// Running a file from a no-exec dir.
    NoExec,
    /// The audit dir is the gate's.
    AuditDir,
    /// `gate.commands[i]`.
    Command(usize),
    /// `gate.files[i]`.
    File(usize),
    /// A baseline rule.
    Baseline(Baseline),
    /// A rule of the BPF filter (no path involved).
    Bpf(&'static str),
    /// A call on an object the plugin already holds (a pipe, a socket, an anonymous file).
    OwnObject,
    /// A memfd, made so it can never run.
    MemfdNoExec,
}

/// The baseline's rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Baseline {
    Read,
    Writable,
    Device,
    Exec,
    /// Outside everything the baseline allows: denied.
    Outside,
}

impl fmt::Display for RuleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleRef::NoExec => f.write_str("no-exec"),
            RuleRef::AuditDir => f.write_str("gate.audit"),
            RuleRef::Command(i) => write!(f, "gate.commands[{i}]"),
            RuleRef::File(i) => write!(f, "gate.files[{i}]"),
            RuleRef::Baseline(b) => f.write_str(match b {
                Baseline::Read => "baseline.read",
                Baseline::Writable => "baseline.writable",
                Baseline::Device => "baseline.dev",
                Baseline::Exec => "baseline.exec",
                Baseline::Outside => "baseline.outside",
            }),
            RuleRef::Bpf(name) => write!(f, "bpf.{name}"),
            RuleRef::OwnObject => f.write_str("baseline.own-object"),
            RuleRef::MemfdNoExec => f.write_str("baseline.memfd-noexec"),
        }
    }
}

/// A decision and the rule that made it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub decision: Decision,
    pub rule: RuleRef,
}

impl Verdict {
    pub fn allow(rule: RuleRef) -> Verdict {
        Verdict {
            decision: Decision::Allow,
            rule,
        }
    }

    pub fn deny(rule: RuleRef) -> Verdict {
        Verdict {
            decision: Decision::Deny,
            rule,
        }
    }

    pub fn allowed(&self) -> bool {
        self.decision == Decision::Allow
    }
}

/// How a path is touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// The path itself.
    Path,
    /// The path and everything beneath it (the source or target of renaming a directory):
    /// a deny rule on anything under it applies too.
    Subtree,
}

fn in_device_files(p: &CompiledPolicy, path: &Path) -> bool {
    p.device_files.iter().any(|d| d == path) || p.device_dirs.iter().any(|d| under(path, d))
}

/// A file operation other than exec on `path`.
pub fn decide(p: &CompiledPolicy, op: Operation, path: &Path, reach: Reach) -> Verdict {
    if op == Operation::Exec {
        return decide_exec(p, path, path);
    }
    let subtree = reach == Reach::Subtree;
    if op != Operation::Read
        && p.protected
            .iter()
            .any(|d| under(path, d) || (subtree && under(d, path)))
    {
        return Verdict::deny(RuleRef::AuditDir);
    }
    // Moving a dir moves everything beneath it: any deny that may match there holds.
    if subtree {
        for rule in &p.files {
            if rule.decision == Decision::Deny
                && rule.ops.contains(&op)
                && rule
                    .globs
                    .iter()
                    .any(|g| g.matches(path) || g.may_match_below(path))
            {
                return Verdict::deny(RuleRef::File(rule.index));
            }
        }
    }
    for rule in &p.files {
        if rule.ops.contains(&op) && rule.globs.iter().any(|g| g.matches(path)) {
            return Verdict {
                decision: rule.decision,
                rule: RuleRef::File(rule.index),
            };
        }
    }
    if op == Operation::Read {
        Verdict::allow(RuleRef::Baseline(Baseline::Read))
    } else if p.writable.iter().any(|w| under(path, w)) {
        Verdict::allow(RuleRef::Baseline(Baseline::Writable))
    } else if in_device_files(p, path) {
        Verdict::allow(RuleRef::Baseline(Baseline::Device))
    } else {
        Verdict::deny(RuleRef::Baseline(Baseline::Outside))
    }
}

/// Every op of one call on one path must be allowed; the first denial is the answer.
pub fn decide_all(p: &CompiledPolicy, ops: &[Operation], path: &Path, reach: Reach) -> Verdict {
    let mut last = Verdict::allow(RuleRef::Baseline(Baseline::Read));
    for op in ops {
        let v = decide(p, *op, path, reach);
        if !v.allowed() {
            return v;
        }
        last = v;
    }
    last
}

fn file_name(path: &Path) -> Option<&str> {
    path.file_name().and_then(|n| n.to_str())
}

/// Running a file: `raw` as the plugin named it (after PATH search), `canonical` the file the
/// kernel runs (symbolic links followed).
pub fn decide_exec(p: &CompiledPolicy, raw: &Path, canonical: &Path) -> Verdict {
    if p.no_exec
        .iter()
        .any(|d| under(canonical, d) || under(raw, d))
    {
        return Verdict::deny(RuleRef::NoExec);
    }
    for rule in &p.commands {
        let hit = rule.names.iter().any(|name| {
            if name.starts_with('/') {
                Path::new(name) == raw || Path::new(name) == canonical
            } else {
                file_name(raw) == Some(name) || file_name(canonical) == Some(name)
            }
        });
        if hit {
            return Verdict {
                decision: rule.decision,
                rule: RuleRef::Command(rule.index),
            };
        }
    }
    for rule in &p.files {
        if rule.ops.contains(&Operation::Exec)
            && rule
                .globs
                .iter()
                .any(|g| g.matches(canonical) || g.matches(raw))
        {
            return Verdict {
                decision: rule.decision,
                rule: RuleRef::File(rule.index),
            };
        }
    }
    Verdict::allow(RuleRef::Baseline(Baseline::Exec))
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;
    use crate::policy::{CommandRule, FileRule, GateRules, Policy};

    fn compiled(rules: GateRules) -> CompiledPolicy {
        let p = Policy::from_rules(rules).unwrap();
        CompiledPolicy::compile(&p, |p| p.to_path_buf()).unwrap()
    }

    fn reference_rules() -> GateRules {
        GateRules {
            files: vec![
                FileRule {
                    paths: vec!["/data/cache/keep/**".into()],
                    operations: vec![Operation::Delete],
                    decision: Decision::Allow,
                },
                FileRule {
                    paths: vec!["/data/cache/**".into()],
                    operations: vec![Operation::Delete],
                    decision: Decision::Deny,
                },
                FileRule {
                    paths: vec!["/opt/app/state/**".into()],
                    operations: vec![Operation::Write, Operation::Create],
                    decision: Decision::Allow,
                },
            ],
            commands: vec![
                CommandRule {
                    commands: vec!["git".into()],
                    decision: Decision::Allow,
                },
                CommandRule {
                    commands: vec!["curl".into(), "wget".into()],
                    decision: Decision::Deny,
                },
                CommandRule {
                    commands: vec!["/usr/bin/git".into(), "/usr/local/bin/tool".into()],
                    decision: Decision::Deny,
                },
            ],
        }
    }

    /// One row: an op on a path, what it decides and which rule says so.
    struct Row(Operation, &'static str, Reach, Decision, &'static str);

    #[test]
    fn the_order_of_the_reference_holds() {
        use Decision::*;
        use Operation::*;
        use Reach::*;
        let p = compiled(reference_rules());
        let rows = [
            Row(Read, "/etc/passwd", Path, Allow, "baseline.read"),
            Row(Read, "/data/cache/a", Path, Allow, "baseline.read"),
            Row(Write, "/etc/passwd", Path, Deny, "baseline.outside"),
            Row(Create, "/usr/bin/x", Path, Deny, "baseline.outside"),
            Row(Chmod, "/etc/hosts", Path, Deny, "baseline.outside"),
            Row(Write, "/data/x", Path, Allow, "baseline.writable"),
            Row(Write, "/tmp/x/y", Path, Allow, "baseline.writable"),
            Row(Write, "/datax/y", Path, Deny, "baseline.outside"),
            Row(Write, "/dev/null", Path, Allow, "baseline.dev"),
            Row(Create, "/dev/shm/seg", Path, Allow, "baseline.dev"),
            Row(Create, "/dev/sda", Path, Deny, "baseline.outside"),
            Row(Delete, "/data/cache/a/b", Path, Deny, "gate.files[1]"),
            Row(Delete, "/data/cache/keep/a", Path, Allow, "gate.files[0]"),
            Row(Write, "/data/cache/a", Path, Allow, "baseline.writable"),
            Row(Delete, "/data/other", Path, Allow, "baseline.writable"),
            // Renaming a dir that holds a protected subtree is a delete of all of it (here the
            // audit dir's protection comes first).
            Row(Delete, "/data", Subtree, Deny, "gate.audit"),
            Row(Delete, "/data/cache", Subtree, Deny, "gate.files[1]"),
            Row(Delete, "/data/cache", Path, Allow, "baseline.writable"),
            Row(Delete, "/data/other", Subtree, Allow, "baseline.writable"),
            Row(Write, "/opt/app/state/db", Path, Allow, "gate.files[2]"),
            Row(Delete, "/opt/app/state/db", Path, Deny, "baseline.outside"),
            // The audit dir is the gate's.
            Row(Write, "/data/.loop-audit/x.jsonl", Path, Deny, "gate.audit"),
            Row(Delete, "/data/.loop-audit", Path, Deny, "gate.audit"),
            Row(Rename, "/data", Subtree, Deny, "gate.audit"),
            Row(
                Read,
                "/data/.loop-audit/x.jsonl",
                Path,
                Allow,
                "baseline.read",
            ),
        ];
        for Row(op, path, reach, decision, rule) in rows {
            let v = decide(&p, op, std::path::Path::new(path), reach);
            assert_eq!(
                (v.decision, v.rule.to_string().as_str()),
                (decision, rule),
                "{op} {path} {reach:?}"
            );
        }
    }

    #[test]
    fn exec_is_no_exec_then_commands_then_files_then_baseline() {
        let p = compiled(reference_rules());
        let exec = |raw: &str, canonical: &str| {
            let v = decide_exec(
                &p,
                std::path::Path::new(raw),
                std::path::Path::new(canonical),
            );
            (v.decision, v.rule.to_string())
        };
        let deny = Decision::Deny;
        let allow = Decision::Allow;
        assert_eq!(exec("/data/true", "/data/true"), (deny, "no-exec".into()));
        assert_eq!(exec("/tmp/x", "/tmp/x"), (deny, "no-exec".into()));
        assert_eq!(exec("/dev/shm/x", "/dev/shm/x"), (deny, "no-exec".into()));
        // What the manifest lets the plugin write it may not run.
        assert_eq!(
            exec("/opt/app/state/x", "/opt/app/state/x"),
            (deny, "no-exec".into())
        );
        // A link in a no-exec dir to an image file is the image file: Landlock runs it too.
        assert_eq!(
            exec("/usr/bin/curl", "/usr/bin/curl"),
            (deny, "gate.commands[1]".into())
        );
        assert_eq!(
            exec("/usr/bin/wget", "/usr/bin/busybox"),
            (deny, "gate.commands[1]".into())
        );
        assert_eq!(
            exec("/usr/bin/dl", "/usr/bin/curl"),
            (deny, "gate.commands[1]".into())
        );
        // git is allowed by name before the path rule would deny it.
        assert_eq!(
            exec("/usr/bin/git", "/usr/bin/git"),
            (allow, "gate.commands[0]".into())
        );
        assert_eq!(
            exec("/usr/local/bin/tool", "/usr/local/bin/tool"),
            (deny, "gate.commands[2]".into())
        );
        assert_eq!(
            exec("/usr/bin/true", "/usr/bin/true"),
            (allow, "baseline.exec".into())
        );
    }

    #[test]
    fn a_call_needs_every_op_allowed() {
        let p = compiled(reference_rules());
        let v = decide_all(
            &p,
            &[Operation::Rename, Operation::Delete],
            &PathBuf::from("/data/cache/a"),
            Reach::Path,
        );
        assert_eq!(v.rule, RuleRef::File(1));
        let v = decide_all(
            &p,
            &[Operation::Rename, Operation::Create],
            &PathBuf::from("/data/cache/a"),
            Reach::Path,
        );
        assert!(v.allowed());
    }
}
