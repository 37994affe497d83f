//! The seccomp filter, hand-assembled classic BPF (no libseccomp: the shipped binary is
//! statically linked). Pure: [`assemble`] turns a [`Plan`] into instructions; `child`
//! installs them.
//!
//! Layout: the architecture must be x86_64 (else the process is killed), x32 calls are
//! killed, calls above the table's last number answer ENOSYS, then one block per call in the
//! plan, each ending in a return, and finally ALLOW. Calls outside the plan never load an
//! argument, so the kernel's seccomp cache lets them through without running the filter.

use libc::sock_filter;

use crate::plan::{Action, Cond, Plan};
use crate::syscalls::{AUDIT_ARCH, MAX_KNOWN, X32_SYSCALL_BIT};

pub const RET_KILL_PROCESS: u32 = 0x8000_0000;
pub const RET_ERRNO: u32 = 0x0005_0000;
pub const RET_USER_NOTIF: u32 = 0x7fc0_0000;
pub const RET_ALLOW: u32 = 0x7fff_0000;

const LD_W_ABS: u16 = 0x20;
const JEQ_K: u16 = 0x15;
const JGE_K: u16 = 0x35;
const JGT_K: u16 = 0x25;
const JSET_K: u16 = 0x45;
const AND_K: u16 = 0x54;
const RET_K: u16 = 0x06;

const OFFSET_NR: u32 = 0;
const OFFSET_ARCH: u32 = 4;
const fn offset_arg(arg: u8) -> u32 {
    16 + 8 * arg as u32
}

fn ins(code: u16, jt: u8, jf: u8, k: u32) -> sock_filter {
    sock_filter { code, jt, jf, k }
}

fn ret(action: Action) -> sock_filter {
    ins(
        RET_K,
        0,
        0,
        match action {
            Action::Allow => RET_ALLOW,
            Action::Notify => RET_USER_NOTIF,
            Action::Errno(e) => RET_ERRNO | e as u32,
        },
    )
}

/// One call's block: every path through it returns.
fn block(checks: &[(Cond, Action)], otherwise: Action) -> Vec<sock_filter> {
    let mut out = Vec::new();
    for (cond, action) in checks {
        match *cond {
            Cond::Eq { arg, value } => {
                out.push(ins(LD_W_ABS, 0, 0, offset_arg(arg)));
                out.push(ins(JEQ_K, 0, 1, value));
            }
            Cond::Any { arg, mask } => {
                out.push(ins(LD_W_ABS, 0, 0, offset_arg(arg)));
                out.push(ins(JSET_K, 0, 1, mask));
            }
            Cond::MaskedEq { arg, mask, value } => {
                out.push(ins(LD_W_ABS, 0, 0, offset_arg(arg)));
                out.push(ins(AND_K, 0, 0, mask));
                out.push(ins(JEQ_K, 0, 1, value));
            }
        }
        out.push(ret(*action));
    }
    out.push(ret(otherwise));
    out
}

/// The filter's instructions for `plan`.
pub fn assemble(plan: &Plan) -> Vec<sock_filter> {
    let mut prog = vec![
        ins(LD_W_ABS, 0, 0, OFFSET_ARCH),
        ins(JEQ_K, 1, 0, AUDIT_ARCH),
        ins(RET_K, 0, 0, RET_KILL_PROCESS),
        ins(LD_W_ABS, 0, 0, OFFSET_NR),
        ins(JGE_K, 0, 1, X32_SYSCALL_BIT),
        ins(RET_K, 0, 0, RET_KILL_PROCESS),
        ins(JGT_K, 0, 1, MAX_KNOWN),
        ret(Action::Errno(libc::ENOSYS as u16)),
    ];
    for rule in &plan.rules {
        let body = block(&rule.checks, rule.otherwise);
        let skip = u8::try_from(body.len()).expect("a call's block fits a BPF jump");
        prog.push(ins(JEQ_K, 0, skip, rule.call.nr()));
        prog.extend(body);
        // Every block returns, so the accumulator still holds the call number here.
    }
    prog.push(ret(Action::Allow));
    prog
}

/// Runs a filter on one call, as the kernel would (only the instructions `assemble` emits).
/// For tests: what the filter answers for a number, arguments and architecture.
pub fn run(prog: &[sock_filter], arch: u32, nr: u32, args: [u64; 6]) -> u32 {
    let word = |k: u32| -> u32 {
        match k {
            OFFSET_NR => nr,
            OFFSET_ARCH => arch,
            k if (16..64).contains(&k) => {
                let i = ((k - 16) / 8) as usize;
                if (k - 16) % 8 == 0 {
                    args[i] as u32
                } else {
                    (args[i] >> 32) as u32
                }
            }
            _ => panic!("load of offset {k}"),
        }
    };
    let mut acc = 0u32;
    let mut pc = 0usize;
    loop {
        let i = prog[pc];
        pc += 1;
        let jump = |cond: bool| if cond { i.jt as usize } else { i.jf as usize };
        match i.code {
            LD_W_ABS => acc = word(i.k),
            AND_K => acc &= i.k,
            JEQ_K => pc += jump(acc == i.k),
            JGE_K => pc += jump(acc >= i.k),
            JGT_K => pc += jump(acc > i.k),
            JSET_K => pc += jump(acc & i.k != 0),
            RET_K => return i.k,
            other => panic!("instruction {other:#x}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::plan::{Features, MFD_NOEXEC_SEAL, plan};
    use crate::policy::Operation;
    use crate::syscalls::Call;

    fn prog(ops: &[Operation]) -> Vec<sock_filter> {
        let ops: BTreeSet<Operation> = ops.iter().copied().collect();
        assemble(&plan(&ops, Features::ALL))
    }

    fn call(p: &[sock_filter], c: Call, args: [u64; 6]) -> u32 {
        run(p, AUDIT_ARCH, c.nr(), args)
    }

    const ENOSYS: u32 = RET_ERRNO | libc::ENOSYS as u32;

    #[test]
    fn other_architectures_and_x32_are_killed() {
        let p = prog(&[]);
        assert_eq!(run(&p, 0x4000_0003, 5, [0; 6]), RET_KILL_PROCESS); // i386
        assert_eq!(
            run(&p, AUDIT_ARCH, X32_SYSCALL_BIT | 2, [0; 6]),
            RET_KILL_PROCESS
        );
        assert_eq!(run(&p, AUDIT_ARCH, MAX_KNOWN + 1, [0; 6]), ENOSYS);
        assert_eq!(
            run(&p, AUDIT_ARCH, libc::SYS_read as u32, [0; 6]),
            RET_ALLOW
        );
        assert!(p.len() < 512, "{} instructions", p.len());
    }

    #[test]
    fn register_rules() {
        let p = prog(&[]);
        let unix = libc::AF_UNIX as u64;
        let inet = libc::AF_INET as u64;
        assert_eq!(
            call(&p, Call::Socket, [unix, 1, 0, 0, 0, 0]),
            RET_USER_NOTIF
        );
        assert_eq!(call(&p, Call::Socket, [inet, 1, 0, 0, 0, 0]), RET_ALLOW);
        // The high half of an int argument is ignored, by the kernel and by the filter.
        assert_eq!(
            call(&p, Call::Socket, [unix | 1 << 32, 1, 0, 0, 0, 0]),
            RET_USER_NOTIF
        );
        let stream = (libc::SOCK_STREAM | libc::SOCK_CLOEXEC) as u64;
        let dgram = libc::SOCK_DGRAM as u64;
        assert_eq!(
            call(&p, Call::Socketpair, [unix, stream, 0, 0, 0, 0]),
            RET_ALLOW
        );
        assert_eq!(call(&p, Call::Socketpair, [unix, 5, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(
            call(&p, Call::Socketpair, [unix, dgram, 0, 0, 0, 0]),
            RET_USER_NOTIF
        );
        for c in [
            Call::IoUringSetup,
            Call::Ptrace,
            Call::ProcessVmWritev,
            Call::OpenByHandleAt,
            Call::Mount,
        ] {
            assert_eq!(call(&p, c, [0; 6]), RET_USER_NOTIF, "{c:?}");
        }
        let newuser = libc::CLONE_NEWUSER as u64;
        assert_eq!(
            call(&p, Call::Unshare, [newuser, 0, 0, 0, 0, 0]),
            RET_USER_NOTIF
        );
        assert_eq!(
            call(&p, Call::Unshare, [libc::CLONE_FILES as u64, 0, 0, 0, 0, 0]),
            RET_ALLOW
        );
        let thread = (libc::CLONE_VM | libc::CLONE_THREAD | libc::CLONE_SIGHAND) as u64;
        assert_eq!(call(&p, Call::Clone, [thread, 0, 0, 0, 0, 0]), RET_ALLOW);
        assert_eq!(
            call(&p, Call::Clone, [thread | newuser, 0, 0, 0, 0, 0]),
            RET_USER_NOTIF
        );
        assert_eq!(call(&p, Call::Clone3, [0; 6]), ENOSYS);
        assert_eq!(
            call(&p, Call::MemfdCreate, [0, 1, 0, 0, 0, 0]),
            RET_USER_NOTIF
        );
        let sealed = u64::from(MFD_NOEXEC_SEAL) | 1;
        assert_eq!(
            call(&p, Call::MemfdCreate, [0, sealed, 0, 0, 0, 0]),
            RET_ALLOW
        );
        assert_eq!(call(&p, Call::Openat2, [0; 6]), ENOSYS);
    }

    #[test]
    fn opens_reach_the_supervisor_only_when_a_rule_needs_them() {
        let creat = (libc::O_WRONLY | libc::O_CREAT) as u64;
        let rdonly = libc::O_RDONLY as u64;
        let p = prog(&[]);
        assert_eq!(call(&p, Call::Openat, [0, 0, creat, 0, 0, 0]), RET_ALLOW);
        assert_eq!(call(&p, Call::Openat, [0, 0, rdonly, 0, 0, 0]), RET_ALLOW);
        // Truncating without opening for writing: the supervisor's; with it: Landlock's.
        let trunc = libc::O_TRUNC as u64;
        let wtrunc = (libc::O_WRONLY | libc::O_TRUNC) as u64;
        assert_eq!(
            call(&p, Call::Openat, [0, 0, trunc, 0, 0, 0]),
            RET_USER_NOTIF
        );
        assert_eq!(call(&p, Call::Open, [0, trunc, 0, 0, 0, 0]), RET_USER_NOTIF);
        assert_eq!(call(&p, Call::Openat, [0, 0, wtrunc, 0, 0, 0]), RET_ALLOW);
        assert_eq!(call(&p, Call::Truncate, [0; 6]), RET_USER_NOTIF);
        assert_eq!(call(&p, Call::Execve, [0; 6]), RET_USER_NOTIF);
        assert_eq!(call(&p, Call::Chmod, [0; 6]), RET_USER_NOTIF);
        let p = prog(&[Operation::Write]);
        assert_eq!(
            call(&p, Call::Openat, [0, 0, creat, 0, 0, 0]),
            RET_USER_NOTIF
        );
        assert_eq!(call(&p, Call::Open, [0, creat, 0, 0, 0, 0]), RET_USER_NOTIF);
        assert_eq!(call(&p, Call::Openat, [0, 0, rdonly, 0, 0, 0]), RET_ALLOW);
        assert_eq!(call(&p, Call::Creat, [0; 6]), RET_USER_NOTIF);
        let p = prog(&[Operation::Read]);
        assert_eq!(
            call(&p, Call::Openat, [0, 0, rdonly, 0, 0, 0]),
            RET_USER_NOTIF
        );
        let path_only = libc::O_PATH as u64;
        assert_eq!(
            call(&p, Call::Openat, [0, 0, path_only, 0, 0, 0]),
            RET_ALLOW
        );
    }
}
