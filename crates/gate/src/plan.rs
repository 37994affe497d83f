//! Which calls the filter traps, answers or lets through, derived from what the policy needs
//! (pure). The rule of thumb, from the notes: the kernel is the boundary wherever it can be.
//!
//! - Register rules (no path involved) are decided in BPF: a unix socket, a datagram
//!   socketpair, io_uring, ptrace, process_vm_writev, open_by_handle_at, pidfd_getfd,
//!   namespaces and mounts. The denied combinations are handed to the supervisor only so the
//!   denial is audited; its answer is the fixed errno below, and without a supervisor the
//!   kernel answers ENOSYS: denied either way.
//! - `clone3` and `openat2` (arguments behind a pointer) and calls newer than the table answer
//!   ENOSYS in BPF; the C library falls back to `clone` and `openat`.
//! - `execve` and `execveat` are trapped to be audited and to deny early; Landlock holds the
//!   exec limits whatever the supervisor answers.
//! - Metadata calls Landlock cannot limit (chmod, chown, timestamps, xattrs) are always
//!   trapped and performed by the supervisor.
//! - File calls (opens for writing, create, delete, rename, link, symlink, truncate) are
//!   trapped only when a rule needs their path: a manifest rule that decides differently from
//!   Landlock, or the audit dir's protection. Otherwise Landlock alone decides them.
//! - Truncation: Landlock's truncate right (ABI 3) is not used, because handling it makes
//!   the kernel walk the path on every open, reads included (+15% on an open/read loop
//!   here). An open for writing needs Landlock's write right anyway; what truncates without
//!   it, `truncate(2)` and an `O_RDONLY|O_TRUNC` open, is rare and always trapped.

use std::collections::BTreeSet;

use crate::policy::Operation;
use crate::syscalls::Call;

/// What the filter does with a call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Allow,
    /// Hand it to the supervisor.
    Notify,
    /// Answer this errno in the kernel.
    Errno(u16),
}

/// A test on the low 32 bits of an argument (every argument tested is a C `int`, which the
/// kernel truncates the same way).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cond {
    /// `arg == value`
    Eq { arg: u8, value: u32 },
    /// `arg & mask != 0`
    Any { arg: u8, mask: u32 },
    /// `arg & mask == value`
    MaskedEq { arg: u8, mask: u32, value: u32 },
}

/// One call's rule: the first check that holds decides, else `otherwise`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FilterRule {
    pub call: Call,
    pub checks: Vec<(Cond, Action)>,
    pub otherwise: Action,
}

/// Which opens are trapped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenTrap {
    /// Those whose flags have any of these bits, and read-only ones with `O_TRUNC`.
    Flags(u32),
    /// All but `O_PATH` opens (a rule decides reads).
    All,
}

/// The filter's rules and what they trap.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub rules: Vec<FilterRule>,
    pub open_trap: OpenTrap,
    /// The operations the supervisor decides (beyond exec and metadata, always decided).
    pub trapped_ops: BTreeSet<Operation>,
}

impl Plan {
    pub fn rule(&self, call: Call) -> Option<&FilterRule> {
        self.rules.iter().find(|r| r.call == call)
    }

    /// The calls handed to the supervisor in some case, by name (for the start line).
    pub fn trapped_names(&self) -> Vec<&'static str> {
        self.rules
            .iter()
            .filter(|r| {
                r.otherwise == Action::Notify || r.checks.iter().any(|(_, a)| *a == Action::Notify)
            })
            .map(|r| r.call.name())
            .collect()
    }
}

const CLONE_NAMESPACES: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;
/// `CLONE_NEWTIME` (0x80) only means a namespace to `unshare`: in `clone` it is part of the
/// exit signal.
const UNSHARE_NAMESPACES: u32 = CLONE_NAMESPACES | 0x80;

pub const O_WRITE_FLAGS: u32 =
    (libc::O_WRONLY | libc::O_RDWR | libc::O_CREAT | libc::O_TRUNC | O_TMPFILE_BIT) as u32;
pub const O_CREATE_FLAGS: u32 = (libc::O_CREAT | O_TMPFILE_BIT) as u32;
/// `__O_TMPFILE`, without the `O_DIRECTORY` that `O_TMPFILE` carries.
pub const O_TMPFILE_BIT: i32 = libc::O_TMPFILE & !libc::O_DIRECTORY;

/// The errno and rule name of a call the filter denies on registers (and passes on to the
/// supervisor for the audit only).
pub fn register_denial(call: Call) -> Option<(&'static str, i32)> {
    let rule = match call {
        Call::Socket => "unix-socket",
        Call::Socketpair => "unix-datagram-pair",
        Call::IoUringSetup | Call::IoUringEnter | Call::IoUringRegister => "io_uring",
        Call::Ptrace => "ptrace",
        Call::ProcessVmWritev => "process_vm_writev",
        Call::OpenByHandleAt => "open_by_handle_at",
        Call::PidfdGetfd => "pidfd_getfd",
        Call::Unshare | Call::Clone | Call::Setns => "namespaces",
        Call::Chroot
        | Call::PivotRoot
        | Call::Mount
        | Call::Umount2
        | Call::OpenTree
        | Call::MoveMount
        | Call::Fsopen
        | Call::Fsconfig
        | Call::Fsmount
        | Call::Fspick
        | Call::MountSetattr
        | Call::OpenTreeAttr => "mounts",
        _ => return None,
    };
    Some((rule, libc::EPERM))
}

fn always(call: Call, action: Action) -> FilterRule {
    FilterRule {
        call,
        checks: vec![],
        otherwise: action,
    }
}

/// `MFD_NOEXEC_SEAL`: a memfd that can never be made executable (Linux 6.3).
pub const MFD_NOEXEC_SEAL: u32 = 0x0008;
/// `MFD_EXEC`: asks for an executable memfd.
pub const MFD_EXEC: u32 = 0x0010;

/// What the kernel lets the filter rely on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Features {
    /// `memfd_create` takes `MFD_NOEXEC_SEAL` (Linux 6.3); then memfds are made without exec.
    pub memfd_noexec: bool,
}

impl Features {
    /// A kernel with everything (tests).
    pub const ALL: Features = Features { memfd_noexec: true };
}

/// The filter for a policy whose rules need `ops` trapped, on a kernel with `features`.
pub fn plan(ops: &BTreeSet<Operation>, features: Features) -> Plan {
    use Action::*;
    use Operation as O;
    let has = |o: O| ops.contains(&o);
    let mut rules = Vec::new();

    // Always observed or performed.
    for call in [Call::Execve, Call::Execveat] {
        rules.push(always(call, Notify));
    }
    for call in [
        Call::Chmod,
        Call::Fchmod,
        Call::Fchmodat,
        Call::Fchmodat2,
        Call::Chown,
        Call::Lchown,
        Call::Fchown,
        Call::Fchownat,
        Call::Utime,
        Call::Utimes,
        Call::Futimesat,
        Call::Utimensat,
        Call::Setxattr,
        Call::Lsetxattr,
        Call::Fsetxattr,
        Call::Removexattr,
        Call::Lremovexattr,
        Call::Fremovexattr,
    ] {
        rules.push(always(call, Notify));
    }

    // Memfds: one the plugin made non-executable itself goes through; any other is made by
    // the supervisor with MFD_NOEXEC_SEAL (Landlock would let a memfd run).
    if features.memfd_noexec {
        rules.push(FilterRule {
            call: Call::MemfdCreate,
            checks: vec![(
                Cond::Any {
                    arg: 1,
                    mask: MFD_NOEXEC_SEAL,
                },
                Allow,
            )],
            otherwise: Notify,
        });
    }

    // Register rules.
    rules.push(FilterRule {
        call: Call::Socket,
        checks: vec![(
            Cond::Eq {
                arg: 0,
                value: libc::AF_UNIX as u32,
            },
            Notify,
        )],
        otherwise: Allow,
    });
    let stream_type = |value: i32| {
        (
            Cond::MaskedEq {
                arg: 1,
                mask: 0xf,
                value: value as u32,
            },
            Allow,
        )
    };
    rules.push(FilterRule {
        call: Call::Socketpair,
        checks: vec![
            stream_type(libc::SOCK_STREAM),
            stream_type(libc::SOCK_SEQPACKET),
            (
                Cond::Eq {
                    arg: 0,
                    value: libc::AF_UNIX as u32,
                },
                Notify,
            ),
        ],
        otherwise: Allow,
    });
    for (call, mask) in [
        (Call::Clone, CLONE_NAMESPACES),
        (Call::Unshare, UNSHARE_NAMESPACES),
    ] {
        rules.push(FilterRule {
            call,
            checks: vec![(Cond::Any { arg: 0, mask }, Notify)],
            otherwise: Allow,
        });
    }
    for call in Call::ALL {
        if register_denial(*call).is_some()
            && !matches!(
                call,
                Call::Socket | Call::Socketpair | Call::Clone | Call::Unshare
            )
        {
            rules.push(always(*call, Notify));
        }
    }
    for call in [
        Call::Clone3,
        Call::Openat2,
        Call::Uselib,
        Call::Setxattrat,
        Call::Removexattrat,
        Call::FileSetattr,
    ] {
        rules.push(always(call, Errno(libc::ENOSYS as u16)));
    }

    // File calls, when a rule needs their path.
    let open_trap = if has(O::Read) {
        OpenTrap::All
    } else {
        let mut mask = 0;
        if has(O::Write) {
            mask |= O_WRITE_FLAGS;
        }
        if has(O::Create) {
            mask |= O_CREATE_FLAGS;
        }
        OpenTrap::Flags(mask)
    };
    for (call, flags_arg) in [(Call::Open, 1u8), (Call::Openat, 2u8)] {
        let any = |mask: u32| Cond::Any {
            arg: flags_arg,
            mask,
        };
        let o_path = (any(libc::O_PATH as u32), Allow);
        rules.push(match open_trap {
            OpenTrap::All => FilterRule {
                call,
                checks: vec![o_path],
                otherwise: Notify,
            },
            OpenTrap::Flags(mask) => {
                let mut checks = vec![o_path];
                if mask != 0 {
                    checks.push((any(mask), Notify));
                }
                // Truncation is not Landlock's here (see `ruleset`): an open for writing
                // needs Landlock's write right anyway, but O_RDONLY|O_TRUNC truncates
                // without it, so that one (rare) combination is the supervisor's.
                checks.push((any((libc::O_WRONLY | libc::O_RDWR) as u32), Allow));
                checks.push((any(libc::O_TRUNC as u32), Notify));
                FilterRule {
                    call,
                    checks,
                    otherwise: Allow,
                }
            }
        });
    }
    let mut trap = |on: bool, calls: &[Call]| {
        if on {
            for c in calls {
                rules.push(always(*c, Notify));
            }
        }
    };
    trap(has(O::Write) || has(O::Create), &[Call::Creat]);
    // truncate(2) names a path Landlock does not check without its truncate right: always.
    trap(true, &[Call::Truncate]);
    trap(
        has(O::Create),
        &[Call::Mkdir, Call::Mkdirat, Call::Mknod, Call::Mknodat],
    );
    trap(has(O::Delete), &[Call::Unlink, Call::Unlinkat, Call::Rmdir]);
    trap(
        has(O::Rename) || has(O::Delete) || has(O::Create),
        &[Call::Rename, Call::Renameat, Call::Renameat2],
    );
    trap(
        has(O::Link) || has(O::Create) || has(O::Write),
        &[Call::Link, Call::Linkat],
    );
    trap(
        has(O::Symlink) || has(O::Create),
        &[Call::Symlink, Call::Symlinkat],
    );

    // The filter tests calls in this order; the ones it reads arguments of run it on every
    // call (the kernel caches the others' answers), so the frequent ones go first.
    let hot = |c: Call| match c {
        Call::Openat => 0,
        Call::Open => 1,
        Call::Clone => 2,
        Call::Socket => 3,
        Call::MemfdCreate => 4,
        Call::Socketpair => 5,
        Call::Unshare => 6,
        _ => 7,
    };
    rules.sort_by_key(|r| hot(r.call));

    let mut trapped_ops = ops.clone();
    trapped_ops.extend([O::Exec, O::Chmod, O::Chown, O::Setattr]);
    Plan {
        rules,
        open_trap,
        trapped_ops,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ops(list: &[Operation]) -> BTreeSet<Operation> {
        list.iter().copied().collect()
    }

    #[test]
    fn without_rules_only_exec_metadata_truncation_and_register_rules_are_trapped() {
        let p = plan(&ops(&[]), Features::ALL);
        assert_eq!(p.open_trap, OpenTrap::Flags(0));
        assert!(p.rule(Call::Unlink).is_none());
        assert!(p.rule(Call::Creat).is_none());
        assert!(p.rule(Call::Truncate).is_some());
        assert!(p.rule(Call::Execve).is_some());
        assert!(p.rule(Call::Chmod).is_some());
        assert!(p.rule(Call::Socket).is_some());
        assert!(p.rule(Call::MemfdCreate).is_some());
        assert_eq!(
            p.rule(Call::Openat2).unwrap().otherwise,
            Action::Errno(libc::ENOSYS as u16)
        );
        let old = Features {
            memfd_noexec: false,
        };
        assert!(plan(&ops(&[]), old).rule(Call::MemfdCreate).is_none());
    }

    #[test]
    fn a_delete_rule_traps_deletes_and_renames_only() {
        let p = plan(&ops(&[Operation::Delete]), Features::ALL);
        assert_eq!(p.open_trap, OpenTrap::Flags(0));
        for c in [
            Call::Unlink,
            Call::Unlinkat,
            Call::Rmdir,
            Call::Rename,
            Call::Renameat2,
        ] {
            assert!(p.rule(c).is_some(), "{c:?}");
        }
        for c in [Call::Mkdir, Call::Link, Call::Creat, Call::Symlink] {
            assert!(p.rule(c).is_none(), "{c:?}");
        }
    }

    #[test]
    fn opens_are_trapped_by_flags_or_all() {
        let p = plan(&ops(&[Operation::Write]), Features::ALL);
        assert_eq!(p.open_trap, OpenTrap::Flags(O_WRITE_FLAGS));
        let p = plan(&ops(&[Operation::Create]), Features::ALL);
        assert_eq!(p.open_trap, OpenTrap::Flags(O_CREATE_FLAGS));
        let p = plan(&ops(&[Operation::Read]), Features::ALL);
        assert_eq!(p.open_trap, OpenTrap::All);
        let open = p.rule(Call::Openat).unwrap();
        assert_eq!(
            open.checks[0].0,
            Cond::Any {
                arg: 2,
                mask: libc::O_PATH as u32
            }
        );
    }
}
