//! The system calls the gate knows by name: their numbers on this architecture and where
//! their arguments are. One table, read both by the filter (which calls to trap or answer)
//! and by the supervisor (what a trapped call means).
//!
//! Only x86_64 is built: the numbers of another architecture would be untested here.

#[cfg(not(target_arch = "x86_64"))]
compile_error!("loop-plugins-gate knows the system call numbers of x86_64 only");

/// `AUDIT_ARCH_X86_64`: any other architecture (i386 through `int 0x80`) is killed.
pub const AUDIT_ARCH: u32 = 0xc000_003e;

/// Calls with this bit set are x32 calls: killed.
pub const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// The highest call number this table was written against (`file_setattr`, Linux 6.17):
/// anything above answers ENOSYS, so a call added later cannot get around the gate.
pub const MAX_KNOWN: u32 = 469;

/// A system call the gate treats specially.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Call {
    // Observed for the audit and the command rules; Landlock holds the exec limits.
    Execve,
    Execveat,
    // File calls the supervisor performs itself when a rule needs their path.
    Open,
    Openat,
    Creat,
    Mkdir,
    Mkdirat,
    Mknod,
    Mknodat,
    Unlink,
    Unlinkat,
    Rmdir,
    Rename,
    Renameat,
    Renameat2,
    Link,
    Linkat,
    Symlink,
    Symlinkat,
    Truncate,
    /// Made non-executable by the supervisor (`MFD_NOEXEC_SEAL`): Landlock does not stop
    /// running a memfd.
    MemfdCreate,
    // Metadata calls Landlock cannot limit: always performed by the supervisor.
    Chmod,
    Fchmod,
    Fchmodat,
    Fchmodat2,
    Chown,
    Lchown,
    Fchown,
    Fchownat,
    Utime,
    Utimes,
    Futimesat,
    Utimensat,
    Setxattr,
    Lsetxattr,
    Fsetxattr,
    Removexattr,
    Lremovexattr,
    Fremovexattr,
    // Decided on registers by the filter; denials are passed on for the audit.
    Socket,
    Socketpair,
    IoUringSetup,
    IoUringEnter,
    IoUringRegister,
    Ptrace,
    ProcessVmWritev,
    OpenByHandleAt,
    PidfdGetfd,
    Unshare,
    Clone,
    Setns,
    Chroot,
    PivotRoot,
    Mount,
    Umount2,
    OpenTree,
    MoveMount,
    Fsopen,
    Fsconfig,
    Fsmount,
    Fspick,
    MountSetattr,
    OpenTreeAttr,
    // Answered ENOSYS by the filter: their arguments are behind pointers the filter cannot
    // read, and the C library falls back to a call it can (`clone`, `openat`).
    Clone3,
    Openat2,
    Uselib,
    Setxattrat,
    Removexattrat,
    FileSetattr,
}

impl Call {
    pub const ALL: &'static [Call] = &[
        Call::Execve,
        Call::Execveat,
        Call::Open,
        Call::Openat,
        Call::Creat,
        Call::Mkdir,
        Call::Mkdirat,
        Call::Mknod,
        Call::Mknodat,
        Call::Unlink,
        Call::Unlinkat,
        Call::Rmdir,
        Call::Rename,
        Call::Renameat,
        Call::Renameat2,
        Call::Link,
        Call::Linkat,
        Call::Symlink,
        Call::Symlinkat,
        Call::Truncate,
        Call::MemfdCreate,
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
        Call::Socket,
        Call::Socketpair,
        Call::IoUringSetup,
        Call::IoUringEnter,
        Call::IoUringRegister,
        Call::Ptrace,
        Call::ProcessVmWritev,
        Call::OpenByHandleAt,
        Call::PidfdGetfd,
        Call::Unshare,
        Call::Clone,
        Call::Setns,
        Call::Chroot,
        Call::PivotRoot,
        Call::Mount,
        Call::Umount2,
        Call::OpenTree,
        Call::MoveMount,
        Call::Fsopen,
        Call::Fsconfig,
        Call::Fsmount,
        Call::Fspick,
        Call::MountSetattr,
        Call::OpenTreeAttr,
        Call::Clone3,
        Call::Openat2,
        Call::Uselib,
        Call::Setxattrat,
        Call::Removexattrat,
        Call::FileSetattr,
    ];

    /// The call's number on x86_64.
    pub fn nr(self) -> u32 {
        use libc::*;
        let n: c_long = match self {
            Call::Execve => SYS_execve,
            Call::Execveat => SYS_execveat,
            Call::Open => SYS_open,
            Call::Openat => SYS_openat,
            Call::Creat => SYS_creat,
            Call::Mkdir => SYS_mkdir,
            Call::Mkdirat => SYS_mkdirat,
            Call::Mknod => SYS_mknod,
            Call::Mknodat => SYS_mknodat,
            Call::Unlink => SYS_unlink,
            Call::Unlinkat => SYS_unlinkat,
            Call::Rmdir => SYS_rmdir,
            Call::Rename => SYS_rename,
            Call::Renameat => SYS_renameat,
            Call::Renameat2 => SYS_renameat2,
            Call::Link => SYS_link,
            Call::Linkat => SYS_linkat,
            Call::Symlink => SYS_symlink,
            Call::Symlinkat => SYS_symlinkat,
            Call::Truncate => SYS_truncate,
            Call::MemfdCreate => SYS_memfd_create,
            Call::Chmod => SYS_chmod,
            Call::Fchmod => SYS_fchmod,
            Call::Fchmodat => SYS_fchmodat,
            Call::Fchmodat2 => 452,
            Call::Chown => SYS_chown,
            Call::Lchown => SYS_lchown,
            Call::Fchown => SYS_fchown,
            Call::Fchownat => SYS_fchownat,
            Call::Utime => SYS_utime,
            Call::Utimes => SYS_utimes,
            Call::Futimesat => SYS_futimesat,
            Call::Utimensat => SYS_utimensat,
            Call::Setxattr => SYS_setxattr,
            Call::Lsetxattr => SYS_lsetxattr,
            Call::Fsetxattr => SYS_fsetxattr,
            Call::Removexattr => SYS_removexattr,
            Call::Lremovexattr => SYS_lremovexattr,
            Call::Fremovexattr => SYS_fremovexattr,
            Call::Socket => SYS_socket,
            Call::Socketpair => SYS_socketpair,
            Call::IoUringSetup => 425,
            Call::IoUringEnter => 426,
            Call::IoUringRegister => 427,
            Call::Ptrace => SYS_ptrace,
            Call::ProcessVmWritev => SYS_process_vm_writev,
            Call::OpenByHandleAt => SYS_open_by_handle_at,
            Call::PidfdGetfd => 438,
            Call::Unshare => SYS_unshare,
            Call::Clone => SYS_clone,
            Call::Setns => SYS_setns,
            Call::Chroot => SYS_chroot,
            Call::PivotRoot => SYS_pivot_root,
            Call::Mount => SYS_mount,
            Call::Umount2 => SYS_umount2,
            Call::OpenTree => 428,
            Call::MoveMount => 429,
            Call::Fsopen => 430,
            Call::Fsconfig => 431,
            Call::Fsmount => 432,
            Call::Fspick => 433,
            Call::MountSetattr => 442,
            Call::OpenTreeAttr => 467,
            Call::Clone3 => 435,
            Call::Openat2 => 437,
            Call::Uselib => SYS_uselib,
            Call::Setxattrat => 463,
            Call::Removexattrat => 466,
            Call::FileSetattr => 469,
        };
        n as u32
    }

    /// The call's name, as the audit writes it.
    pub fn name(self) -> &'static str {
        match self {
            Call::Execve => "execve",
            Call::Execveat => "execveat",
            Call::Open => "open",
            Call::Openat => "openat",
            Call::Creat => "creat",
            Call::Mkdir => "mkdir",
            Call::Mkdirat => "mkdirat",
            Call::Mknod => "mknod",
            Call::Mknodat => "mknodat",
            Call::Unlink => "unlink",
            Call::Unlinkat => "unlinkat",
            Call::Rmdir => "rmdir",
            Call::Rename => "rename",
            Call::Renameat => "renameat",
            Call::Renameat2 => "renameat2",
            Call::Link => "link",
            Call::Linkat => "linkat",
            Call::Symlink => "symlink",
            Call::Symlinkat => "symlinkat",
            Call::Truncate => "truncate",
            Call::MemfdCreate => "memfd_create",
            Call::Chmod => "chmod",
            Call::Fchmod => "fchmod",
            Call::Fchmodat => "fchmodat",
            Call::Fchmodat2 => "fchmodat2",
            Call::Chown => "chown",
            Call::Lchown => "lchown",
            Call::Fchown => "fchown",
            Call::Fchownat => "fchownat",
            Call::Utime => "utime",
            Call::Utimes => "utimes",
            Call::Futimesat => "futimesat",
            Call::Utimensat => "utimensat",
            Call::Setxattr => "setxattr",
            Call::Lsetxattr => "lsetxattr",
            Call::Fsetxattr => "fsetxattr",
            Call::Removexattr => "removexattr",
            Call::Lremovexattr => "lremovexattr",
            Call::Fremovexattr => "fremovexattr",
            Call::Socket => "socket",
            Call::Socketpair => "socketpair",
            Call::IoUringSetup => "io_uring_setup",
            Call::IoUringEnter => "io_uring_enter",
            Call::IoUringRegister => "io_uring_register",
            Call::Ptrace => "ptrace",
            Call::ProcessVmWritev => "process_vm_writev",
            Call::OpenByHandleAt => "open_by_handle_at",
            Call::PidfdGetfd => "pidfd_getfd",
            Call::Unshare => "unshare",
            Call::Clone => "clone",
            Call::Setns => "setns",
            Call::Chroot => "chroot",
            Call::PivotRoot => "pivot_root",
            Call::Mount => "mount",
            Call::Umount2 => "umount2",
            Call::OpenTree => "open_tree",
            Call::MoveMount => "move_mount",
            Call::Fsopen => "fsopen",
            Call::Fsconfig => "fsconfig",
            Call::Fsmount => "fsmount",
            Call::Fspick => "fspick",
            Call::MountSetattr => "mount_setattr",
            Call::OpenTreeAttr => "open_tree_attr",
            Call::Clone3 => "clone3",
            Call::Openat2 => "openat2",
            Call::Uselib => "uselib",
            Call::Setxattrat => "setxattrat",
            Call::Removexattrat => "removexattrat",
            Call::FileSetattr => "file_setattr",
        }
    }

    /// The call with this number, if the gate knows it.
    pub fn from_nr(nr: u32) -> Option<Call> {
        Call::ALL.iter().copied().find(|c| c.nr() == nr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_distinct_and_known() {
        let mut seen = std::collections::BTreeMap::new();
        for c in Call::ALL {
            assert!(c.nr() <= MAX_KNOWN, "{c:?}");
            if let Some(other) = seen.insert(c.nr(), *c) {
                panic!("{c:?} and {other:?} share {}", c.nr());
            }
            assert_eq!(Call::from_nr(c.nr()), Some(*c));
        }
        assert_eq!(Call::Openat.nr(), 257);
        assert_eq!(Call::Execve.nr(), 59);
    }
}
