//! What the kernel offers, probed before anything starts: the gate refuses to run a plugin
//! unconfined, so a kernel without Landlock (ABI 2, Linux 5.19) or seccomp user
//! notification is an error that says so (gVisor, for one, has neither).

use std::fmt;

/// The oldest Landlock ABI the gate runs on: ABI 2 handles renames and links across dirs
/// (without it every cross-dir rename fails). Linux 5.19 also has everything the seccomp
/// side uses (`ADDFD` with `SEND`, `WAIT_KILLABLE_RECV`).
pub const MIN_LANDLOCK_ABI: i32 = 2;

/// The probe's findings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Kernel {
    /// Landlock's ABI version, or the negated errno (`-ENOSYS`: not built; `-EOPNOTSUPP`:
    /// not enabled at boot).
    pub landlock_abi: i32,
    /// `SECCOMP_RET_USER_NOTIF` is available.
    pub user_notif: bool,
    /// `memfd_create` takes `MFD_NOEXEC_SEAL` (Linux 6.3).
    pub memfd_noexec: bool,
    /// Yama's `ptrace_scope` (0 when Yama is absent): 2 and 3 keep the supervisor from
    /// reading the plugin's memory, which every trapped call with a path needs.
    pub ptrace_scope: u8,
}

/// Why the gate will not start the plugin on this kernel.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    #[error(
        "this kernel has no Landlock ({0}); the gate will not run a plugin unconfined (it needs Linux 5.19 or later with landlock in the lsm= list, or gates.agentgate.enabled off)"
    )]
    NoLandlock(String),
    #[error(
        "this kernel's Landlock is ABI {0}; the gate needs ABI {MIN_LANDLOCK_ABI} (Linux 5.19) or later, or gates.agentgate.enabled off"
    )]
    OldLandlock(i32),
    #[error(
        "this kernel has no seccomp user notification; the gate will not run a plugin unconfined (it needs Linux 5.19 or later, or gates.agentgate.enabled off)"
    )]
    NoUserNotif,
    #[error(
        "kernel.yama.ptrace_scope is {0}: the gate could not read the plugin's call arguments (it needs 0 or 1), so it will not start the plugin"
    )]
    PtraceScope(u8),
}

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "landlock ABI {}, seccomp user notification {}, memfd noexec {}",
            self.landlock_abi,
            if self.user_notif { "yes" } else { "no" },
            if self.memfd_noexec { "yes" } else { "no" }
        )
    }
}

const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;
const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;

/// Asks the kernel.
pub fn probe() -> Kernel {
    // SAFETY: the version query takes no ruleset.
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    let landlock_abi = if v < 0 {
        -std::io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::ENOSYS)
    } else {
        v as i32
    };
    let action: u32 = crate::filter::RET_USER_NOTIF;
    // SAFETY: the kernel reads one u32.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32,
        )
    };
    let flags = crate::plan::MFD_NOEXEC_SEAL | libc::MFD_CLOEXEC;
    // SAFETY: creates and closes a descriptor of our own.
    let memfd_noexec = unsafe {
        let fd = libc::memfd_create(c"loop-gate-probe".as_ptr(), flags);
        if fd >= 0 {
            libc::close(fd);
        }
        fd >= 0
    };
    let ptrace_scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    Kernel {
        landlock_abi,
        user_notif: r == 0,
        memfd_noexec,
        ptrace_scope,
    }
}

/// The gate can run on `k`, or why not.
pub fn check(k: Kernel) -> Result<(), KernelError> {
    match k.landlock_abi {
        v if v == -libc::EOPNOTSUPP => {
            return Err(KernelError::NoLandlock(
                "built but not enabled at boot".into(),
            ));
        }
        v if v < 0 => return Err(KernelError::NoLandlock("not built in".into())),
        v if v < MIN_LANDLOCK_ABI => return Err(KernelError::OldLandlock(v)),
        _ => {}
    }
    if !k.user_notif {
        return Err(KernelError::NoUserNotif);
    }
    if k.ptrace_scope >= 2 {
        return Err(KernelError::PtraceScope(k.ptrace_scope));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_without_either_is_refused_with_a_reason() {
        let ok = Kernel {
            landlock_abi: 7,
            user_notif: true,
            memfd_noexec: true,
            ptrace_scope: 1,
        };
        assert_eq!(check(ok), Ok(()));
        let cases = [
            (
                Kernel {
                    landlock_abi: -libc::ENOSYS,
                    ..ok
                },
                "no Landlock (not built in)",
            ),
            (
                Kernel {
                    landlock_abi: -libc::EOPNOTSUPP,
                    ..ok
                },
                "not enabled at boot",
            ),
            (
                Kernel {
                    landlock_abi: 1,
                    ..ok
                },
                "ABI 1",
            ),
            (
                Kernel {
                    user_notif: false,
                    ..ok
                },
                "no seccomp user notification",
            ),
        ];
        for (k, want) in cases {
            let err = check(k).unwrap_err().to_string();
            assert!(err.contains(want), "{k}: {err}");
            assert!(
                err.contains("unconfined") || err.contains("or later"),
                "{err}"
            );
        }
    }

    #[test]
    fn this_kernel_is_probed() {
        let k = probe();
        // Whatever the host, the probe answers something coherent.
        assert!(k.landlock_abi != 0, "{k}");
    }
}
