//! A trapped call decoded: its registers read by position and every pointer argument copied
//! out of the caller's memory once. From here on the supervisor only looks at its copy.

use crate::notify::Notification;
use crate::remote::{read_argv, read_bytes, read_cstring, read_path, read_value};
use crate::resolve::Errno;
use crate::syscalls::Call;

/// What a metadata call names: a path (relative to a dir descriptor), or a descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum At {
    Path {
        dirfd: i32,
        raw: Vec<u8>,
        follow: bool,
    },
    Fd(i32),
}

/// A trapped call, with its arguments copied.
#[derive(Clone, Debug)]
pub enum Request {
    Exec {
        dirfd: i32,
        raw: Vec<u8>,
        /// `execveat(fd, "", AT_EMPTY_PATH)`: run what `dirfd` holds.
        empty_path: bool,
        argv: Vec<String>,
    },
    Open {
        dirfd: i32,
        raw: Vec<u8>,
        flags: i32,
        mode: u32,
    },
    /// `mkdir` when `dir`, else `mknod`.
    Make {
        dirfd: i32,
        raw: Vec<u8>,
        mode: u32,
        dev: u64,
        dir: bool,
    },
    /// `rmdir` when `dir`, else `unlink`.
    Unlink {
        dirfd: i32,
        raw: Vec<u8>,
        dir: bool,
    },
    Rename {
        old_dirfd: i32,
        old: Vec<u8>,
        new_dirfd: i32,
        new: Vec<u8>,
        flags: u32,
    },
    Link {
        old_dirfd: i32,
        old: Vec<u8>,
        new_dirfd: i32,
        new: Vec<u8>,
        flags: i32,
    },
    Symlink {
        target: Vec<u8>,
        new_dirfd: i32,
        new: Vec<u8>,
    },
    Truncate {
        raw: Vec<u8>,
        len: i64,
    },
    Memfd {
        name: Vec<u8>,
        flags: u32,
    },
    Chmod {
        at: At,
        mode: u32,
    },
    Chown {
        at: At,
        uid: u32,
        gid: u32,
    },
    /// `None` times: now.
    Utimes {
        at: At,
        times: Option<[libc::timespec; 2]>,
    },
    SetXattr {
        at: At,
        name: Vec<u8>,
        value: Vec<u8>,
        flags: i32,
    },
    RemoveXattr {
        at: At,
        name: Vec<u8>,
    },
}

const XATTR_NAME_MAX: usize = 255;
const MFD_NAME_MAX: usize = 249;
const XATTR_SIZE_MAX: usize = 65_536;

fn int(v: u64) -> i32 {
    v as u32 as i32
}

fn err(e: std::io::Error) -> Errno {
    e.raw_os_error().unwrap_or(libc::EFAULT)
}

/// `At` for a path argument: `AT_EMPTY_PATH` with an empty path (or, for `utimensat`, a
/// NULL path) names the descriptor `dirfd` itself.
fn at_path(tid: i32, dirfd: i32, ptr: u64, flags: i32, follow_default: bool) -> Result<At, Errno> {
    let raw = read_path(tid, ptr).map_err(err)?;
    if raw.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
        return Ok(At::Fd(dirfd));
    }
    if raw.is_empty() {
        return Err(libc::ENOENT);
    }
    Ok(At::Path {
        dirfd,
        raw,
        follow: follow_default && flags & libc::AT_SYMLINK_NOFOLLOW == 0,
    })
}

fn timeval_to_timespec(tv: libc::timeval) -> libc::timespec {
    libc::timespec {
        tv_sec: tv.tv_sec,
        tv_nsec: tv.tv_usec * 1000,
    }
}

/// Decodes a trapped file or exec call (register denials never reach here).
pub fn decode(call: Call, n: &Notification) -> Result<Request, Errno> {
    let t = n.tid;
    let a = n.args;
    let path = |i: usize| read_path(t, a[i]).map_err(err);
    let cwd = libc::AT_FDCWD;
    let req = match call {
        Call::Execve => Request::Exec {
            dirfd: cwd,
            raw: path(0)?,
            empty_path: false,
            argv: read_argv(t, a[1], 16),
        },
        Call::Execveat => {
            let raw = if a[1] == 0 { Vec::new() } else { path(1)? };
            Request::Exec {
                dirfd: int(a[0]),
                empty_path: raw.is_empty() && int(a[4]) & libc::AT_EMPTY_PATH != 0,
                raw,
                argv: read_argv(t, a[2], 16),
            }
        }
        Call::Open => Request::Open {
            dirfd: cwd,
            raw: path(0)?,
            flags: int(a[1]),
            mode: a[2] as u32,
        },
        Call::Openat => Request::Open {
            dirfd: int(a[0]),
            raw: path(1)?,
            flags: int(a[2]),
            mode: a[3] as u32,
        },
        Call::Creat => Request::Open {
            dirfd: cwd,
            raw: path(0)?,
            flags: libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
            mode: a[1] as u32,
        },
        Call::Mkdir => Request::Make {
            dirfd: cwd,
            raw: path(0)?,
            mode: a[1] as u32,
            dev: 0,
            dir: true,
        },
        Call::Mkdirat => Request::Make {
            dirfd: int(a[0]),
            raw: path(1)?,
            mode: a[2] as u32,
            dev: 0,
            dir: true,
        },
        Call::Mknod => Request::Make {
            dirfd: cwd,
            raw: path(0)?,
            mode: a[1] as u32,
            dev: a[2],
            dir: false,
        },
        Call::Mknodat => Request::Make {
            dirfd: int(a[0]),
            raw: path(1)?,
            mode: a[2] as u32,
            dev: a[3],
            dir: false,
        },
        Call::Unlink => Request::Unlink {
            dirfd: cwd,
            raw: path(0)?,
            dir: false,
        },
        Call::Rmdir => Request::Unlink {
            dirfd: cwd,
            raw: path(0)?,
            dir: true,
        },
        Call::Unlinkat => {
            let flags = int(a[2]);
            if flags & !libc::AT_REMOVEDIR != 0 {
                return Err(libc::EINVAL);
            }
            Request::Unlink {
                dirfd: int(a[0]),
                raw: path(1)?,
                dir: flags & libc::AT_REMOVEDIR != 0,
            }
        }
        Call::Rename => Request::Rename {
            old_dirfd: cwd,
            old: path(0)?,
            new_dirfd: cwd,
            new: path(1)?,
            flags: 0,
        },
        Call::Renameat => Request::Rename {
            old_dirfd: int(a[0]),
            old: path(1)?,
            new_dirfd: int(a[2]),
            new: path(3)?,
            flags: 0,
        },
        Call::Renameat2 => Request::Rename {
            old_dirfd: int(a[0]),
            old: path(1)?,
            new_dirfd: int(a[2]),
            new: path(3)?,
            flags: a[4] as u32,
        },
        Call::Link => Request::Link {
            old_dirfd: cwd,
            old: path(0)?,
            new_dirfd: cwd,
            new: path(1)?,
            flags: 0,
        },
        Call::Linkat => {
            let flags = int(a[4]);
            let old = if a[1] == 0 { Vec::new() } else { path(1)? };
            Request::Link {
                old_dirfd: int(a[0]),
                old,
                new_dirfd: int(a[2]),
                new: path(3)?,
                flags,
            }
        }
        Call::Symlink => Request::Symlink {
            target: path(0)?,
            new_dirfd: cwd,
            new: path(1)?,
        },
        Call::Symlinkat => Request::Symlink {
            target: path(0)?,
            new_dirfd: int(a[1]),
            new: path(2)?,
        },
        Call::Truncate => Request::Truncate {
            raw: path(0)?,
            len: a[1] as i64,
        },
        Call::MemfdCreate => Request::Memfd {
            name: read_cstring(t, a[0], MFD_NAME_MAX).map_err(|e| match err(e) {
                libc::ENAMETOOLONG => libc::EINVAL,
                other => other,
            })?,
            flags: a[1] as u32,
        },
        Call::Chmod => Request::Chmod {
            at: at_path(t, cwd, a[0], 0, true)?,
            mode: a[1] as u32,
        },
        Call::Fchmod => Request::Chmod {
            at: At::Fd(int(a[0])),
            mode: a[1] as u32,
        },
        Call::Fchmodat => Request::Chmod {
            at: at_path(t, int(a[0]), a[1], 0, true)?,
            mode: a[2] as u32,
        },
        Call::Fchmodat2 => Request::Chmod {
            at: at_path(t, int(a[0]), a[1], int(a[3]), true)?,
            mode: a[2] as u32,
        },
        Call::Chown => Request::Chown {
            at: at_path(t, cwd, a[0], 0, true)?,
            uid: a[1] as u32,
            gid: a[2] as u32,
        },
        Call::Lchown => Request::Chown {
            at: at_path(t, cwd, a[0], 0, false)?,
            uid: a[1] as u32,
            gid: a[2] as u32,
        },
        Call::Fchown => Request::Chown {
            at: At::Fd(int(a[0])),
            uid: a[1] as u32,
            gid: a[2] as u32,
        },
        Call::Fchownat => Request::Chown {
            at: at_path(t, int(a[0]), a[1], int(a[4]), true)?,
            uid: a[2] as u32,
            gid: a[3] as u32,
        },
        Call::Utime => {
            let times = if a[1] == 0 {
                None
            } else {
                let b: libc::utimbuf = read_value(t, a[1]).map_err(err)?;
                Some([
                    libc::timespec {
                        tv_sec: b.actime,
                        tv_nsec: 0,
                    },
                    libc::timespec {
                        tv_sec: b.modtime,
                        tv_nsec: 0,
                    },
                ])
            };
            Request::Utimes {
                at: at_path(t, cwd, a[0], 0, true)?,
                times,
            }
        }
        Call::Utimes | Call::Futimesat => {
            let (dirfd, p, tv) = if call == Call::Utimes {
                (cwd, a[0], a[1])
            } else {
                (int(a[0]), a[1], a[2])
            };
            let times = if tv == 0 {
                None
            } else {
                let v: [libc::timeval; 2] = read_value(t, tv).map_err(err)?;
                Some([timeval_to_timespec(v[0]), timeval_to_timespec(v[1])])
            };
            Request::Utimes {
                at: at_path(t, dirfd, p, 0, true)?,
                times,
            }
        }
        Call::Utimensat => {
            let times = if a[2] == 0 {
                None
            } else {
                Some(read_value::<[libc::timespec; 2]>(t, a[2]).map_err(err)?)
            };
            let at = if a[1] == 0 {
                At::Fd(int(a[0]))
            } else {
                at_path(t, int(a[0]), a[1], int(a[3]), true)?
            };
            Request::Utimes { at, times }
        }
        Call::Setxattr | Call::Lsetxattr | Call::Fsetxattr => {
            let at = match call {
                Call::Fsetxattr => At::Fd(int(a[0])),
                _ => at_path(t, cwd, a[0], 0, call == Call::Setxattr)?,
            };
            let size = a[3] as usize;
            if size > XATTR_SIZE_MAX {
                return Err(libc::E2BIG);
            }
            Request::SetXattr {
                at,
                name: read_cstring(t, a[1], XATTR_NAME_MAX).map_err(|e| match err(e) {
                    libc::ENAMETOOLONG => libc::ERANGE,
                    other => other,
                })?,
                value: if size == 0 {
                    Vec::new()
                } else {
                    read_bytes(t, a[2], size).map_err(err)?
                },
                flags: int(a[4]),
            }
        }
        Call::Removexattr | Call::Lremovexattr | Call::Fremovexattr => {
            let at = match call {
                Call::Fremovexattr => At::Fd(int(a[0])),
                _ => at_path(t, cwd, a[0], 0, call == Call::Removexattr)?,
            };
            Request::RemoveXattr {
                at,
                name: read_cstring(t, a[1], XATTR_NAME_MAX).map_err(|e| match err(e) {
                    libc::ENAMETOOLONG => libc::ERANGE,
                    other => other,
                })?,
            }
        }
        _ => return Err(libc::ENOSYS),
    };
    Ok(req)
}
