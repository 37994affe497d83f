//! Deciding a decoded call and, when allowed, doing it: the supervisor performs the call
//! itself on the object it pinned (a dir descriptor and one name, or the object's own
//! descriptor through `/proc/self/fd`) and answers with the result; an open answers with the
//! descriptor it opened (`ADDFD`). Exec is the one call the kernel runs (CONTINUE): the
//! supervisor only denies early and writes the line, Landlock holds the limit.
//!
//! Order in every call: resolve and pin, check the call is still pending (so /proc was about
//! the caller), decide on the pinned object's path, act on that same object.

use std::ffi::{CString, OsStr};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use crate::audit::Layer;
use crate::compiled::CompiledPolicy;
use crate::decide::{Reach, RuleRef, Verdict, decide, decide_all, decide_exec};
use crate::notify::Response;
use crate::plan::{MFD_EXEC, MFD_NOEXEC_SEAL, O_TMPFILE_BIT};
use crate::policy::Operation;
use crate::request::{At, Request};
use crate::resolve::{
    Caller, Entry, Errno, Object, Resolved, errno, fstat, is_type, openat, pin, resolve,
    resolve_fd, via_proc,
};

/// What the supervisor knows about the caller while handling one call.
pub struct Ctx<'a> {
    pub policy: &'a CompiledPolicy,
    pub caller: Caller,
    /// The caller's umask (read from /proc when a call creates something).
    pub umask: &'a dyn Fn() -> u32,
    /// The call is still pending (checked after resolving, before acting).
    pub pending: &'a dyn Fn() -> bool,
}

/// The answer and what the audit line says.
#[derive(Debug)]
pub struct Outcome {
    pub response: Response,
    pub op: Option<Operation>,
    pub path: Option<PathBuf>,
    pub path2: Option<PathBuf>,
    /// `None` when the call failed before any rule applied (a path that does not resolve).
    pub verdict: Option<Verdict>,
    pub layer: Layer,
}

impl Outcome {
    /// The errno the caller sees, if any.
    pub fn errno(&self) -> Option<i32> {
        match self.response {
            Response::Error(e) => Some(e),
            _ => None,
        }
    }
}

fn raw_path(raw: &[u8]) -> PathBuf {
    PathBuf::from(OsStr::from_bytes(raw))
}

fn done(r: Result<i64, Errno>) -> Response {
    match r {
        Ok(v) => Response::Value(v),
        Err(e) => Response::Error(e),
    }
}

fn check(r: libc::c_int) -> Result<i64, Errno> {
    if r < 0 {
        Err(errno())
    } else {
        Ok(i64::from(r))
    }
}

/// A denial: EACCES, as Landlock answers.
fn denied() -> Response {
    Response::Error(libc::EACCES)
}

struct Builder {
    op: Operation,
    layer: Layer,
    path: Option<PathBuf>,
    path2: Option<PathBuf>,
}

impl Builder {
    fn new(op: Operation, layer: Layer) -> Builder {
        Builder {
            op,
            layer,
            path: None,
            path2: None,
        }
    }

    fn path(mut self, p: Option<PathBuf>) -> Builder {
        self.path = p;
        self
    }

    fn path2(mut self, p: Option<PathBuf>) -> Builder {
        self.path2 = p;
        self
    }

    /// The call failed before a rule applied.
    fn failed(self, e: Errno) -> Outcome {
        Outcome {
            response: Response::Error(e),
            op: Some(self.op),
            path: self.path,
            path2: self.path2,
            verdict: None,
            layer: self.layer,
        }
    }

    fn decided(self, verdict: Verdict, response: Response) -> Outcome {
        Outcome {
            response,
            op: Some(self.op),
            path: self.path,
            path2: self.path2,
            verdict: Some(verdict),
            layer: self.layer,
        }
    }
}

/// The caller died while its call was handled: nothing may be done on its behalf.
fn gone(b: Builder) -> Outcome {
    b.failed(libc::ESRCH)
}

/// A decision on something a descriptor holds: by the path it is named by, or, for a pipe,
/// socket or anonymous inode, the plugin's own object.
fn decide_object(p: &CompiledPolicy, ops: &[Operation], o: &Object) -> Verdict {
    match &o.named {
        Some(path) => decide_all(p, ops, path, Reach::Path),
        None => Verdict::allow(RuleRef::OwnObject),
    }
}

/// Does a trapped call: decides it and, if allowed, performs it.
pub fn perform(ctx: &Ctx, req: &Request) -> Outcome {
    match req {
        Request::Exec {
            dirfd,
            raw,
            empty_path,
            argv: _,
        } => exec(ctx, *dirfd, raw, *empty_path),
        Request::Open {
            dirfd,
            raw,
            flags,
            mode,
        } => open(ctx, *dirfd, raw, *flags, *mode),
        Request::Make {
            dirfd,
            raw,
            mode,
            dev,
            dir,
        } => make(ctx, *dirfd, raw, *mode, *dev, *dir),
        Request::Unlink { dirfd, raw, dir } => unlink(ctx, *dirfd, raw, *dir),
        Request::Rename {
            old_dirfd,
            old,
            new_dirfd,
            new,
            flags,
        } => rename(ctx, (*old_dirfd, old), (*new_dirfd, new), *flags),
        Request::Link {
            old_dirfd,
            old,
            new_dirfd,
            new,
            flags,
        } => link(ctx, (*old_dirfd, old), (*new_dirfd, new), *flags),
        Request::Symlink {
            target,
            new_dirfd,
            new,
        } => symlink(ctx, target, *new_dirfd, new),
        Request::Truncate { raw, len } => truncate(ctx, raw, *len),
        Request::Memfd { name, flags } => memfd(ctx, name, *flags),
        Request::Chmod { at, mode } => metadata(ctx, at, Operation::Chmod, &|h| {
            if h.link {
                return Err(libc::EOPNOTSUPP);
            }
            let p = via_proc(&h.obj.fd);
            // SAFETY: plain syscall on our own path string.
            check(unsafe { libc::fchmodat(libc::AT_FDCWD, p.as_ptr(), *mode & 0o7777, 0) })
        }),
        Request::Chown { at, uid, gid } => metadata(ctx, at, Operation::Chown, &|h| {
            // SAFETY: plain syscall on our own descriptor.
            check(unsafe {
                libc::fchownat(
                    h.obj.fd.as_raw_fd(),
                    c"".as_ptr(),
                    *uid,
                    *gid,
                    libc::AT_EMPTY_PATH,
                )
            })
        }),
        Request::Utimes { at, times } => metadata(ctx, at, Operation::Setattr, &|h| {
            let ts = times.as_ref().map_or(std::ptr::null(), |t| t.as_ptr());
            match (&h.entry, h.link) {
                // A symbolic link itself: through its dir, not following it.
                (Some(e), true) => check(unsafe {
                    // SAFETY: plain syscall on our own descriptor and name.
                    libc::utimensat(
                        e.dir.as_raw_fd(),
                        e.name.as_ptr(),
                        ts,
                        libc::AT_SYMLINK_NOFOLLOW,
                    )
                }),
                _ => {
                    let p = via_proc(&h.obj.fd);
                    // SAFETY: plain syscall on our own path string.
                    check(unsafe { libc::utimensat(libc::AT_FDCWD, p.as_ptr(), ts, 0) })
                }
            }
        }),
        Request::SetXattr {
            at,
            name,
            value,
            flags,
        } => metadata(ctx, at, Operation::Setattr, &|h| {
            if h.link {
                return Err(libc::EPERM);
            }
            let p = via_proc(&h.obj.fd);
            let name = CString::new(name.clone()).map_err(|_| libc::EINVAL)?;
            // SAFETY: plain syscall; `value` outlives it.
            check(unsafe {
                libc::setxattr(
                    p.as_ptr(),
                    name.as_ptr(),
                    value.as_ptr().cast(),
                    value.len(),
                    *flags,
                )
            })
        }),
        Request::RemoveXattr { at, name } => metadata(ctx, at, Operation::Setattr, &|h| {
            if h.link {
                return Err(libc::EPERM);
            }
            let p = via_proc(&h.obj.fd);
            let name = CString::new(name.clone()).map_err(|_| libc::EINVAL)?;
            // SAFETY: plain syscall on our own strings.
            check(unsafe { libc::removexattr(p.as_ptr(), name.as_ptr()) })
        }),
    }
}

fn exec(ctx: &Ctx, dirfd: i32, raw: &[u8], empty_path: bool) -> Outcome {
    let b = Builder::new(Operation::Exec, Layer::Landlock);
    let (raw_p, canonical) = if empty_path {
        match resolve_fd(ctx.caller, dirfd) {
            // A file in the tree: judged by where it is.
            Ok(Object { path: Some(p), .. }) => (p.clone(), p),
            // A memfd, a deleted or anonymous file: not something the image ships.
            Ok(o) => {
                let b = b.path(o.named.clone());
                return b.decided(Verdict::deny(RuleRef::NoExec), denied());
            }
            Err(e) => return b.failed(e),
        }
    } else {
        match resolve(ctx.caller, dirfd, raw, true) {
            Ok(Resolved::Entry(e)) => (raw_path(raw), e.path),
            Ok(Resolved::Object(Object { path: Some(p), .. })) => (raw_path(raw), p),
            Ok(Resolved::Object(o)) => {
                let b = b.path(o.named.clone().or_else(|| Some(raw_path(raw))));
                return b.decided(Verdict::deny(RuleRef::NoExec), denied());
            }
            Err(e) => return b.path(Some(raw_path(raw))).failed(e),
        }
    };
    let b = b.path(Some(canonical.clone()));
    if !(ctx.pending)() {
        return gone(b);
    }
    let v = decide_exec(ctx.policy, &raw_p, &canonical);
    // Allowed: the kernel runs it, with Landlock's say on what it finally runs.
    let response = if v.allowed() {
        Response::Continue
    } else {
        denied()
    };
    b.decided(v, response)
}

fn access_ops(flags: i32, creating: bool) -> Vec<Operation> {
    let mut ops = Vec::new();
    match flags & libc::O_ACCMODE {
        libc::O_RDONLY => ops.push(Operation::Read),
        libc::O_WRONLY => ops.push(Operation::Write),
        _ => ops.extend([Operation::Read, Operation::Write]),
    }
    if flags & libc::O_TRUNC != 0 && !ops.contains(&Operation::Write) {
        ops.push(Operation::Write);
    }
    if creating {
        ops.push(Operation::Create);
    }
    ops
}

fn opened(fd: Result<OwnedFd, Errno>, flags: i32) -> Response {
    match fd {
        Ok(fd) => Response::Fd {
            fd,
            cloexec: flags & libc::O_CLOEXEC != 0,
        },
        Err(e) => Response::Error(e),
    }
}

fn open(ctx: &Ctx, dirfd: i32, raw: &[u8], flags: i32, mode: u32) -> Outcome {
    let b = Builder::new(Operation::Write, Layer::Emulated);
    let creat = flags & libc::O_CREAT != 0;
    let tmpfile = flags & O_TMPFILE_BIT != 0;
    // Never a controlling terminal for the supervisor (PID 1, a session leader in a pod).
    let flags = flags | libc::O_NOCTTY;
    let follow = flags & libc::O_NOFOLLOW == 0 && !(creat && flags & libc::O_EXCL != 0);
    let mode = if creat || tmpfile {
        mode & 0o7777 & !(ctx.umask)()
    } else {
        0
    };
    let resolved = match resolve(ctx.caller, dirfd, raw, follow) {
        Ok(r) => r,
        Err(e) => return b.path(Some(raw_path(raw))).failed(e),
    };
    match resolved {
        // Through a magic link: reopen the object the caller already holds.
        Resolved::Object(o) => {
            let ops = access_ops(flags, false);
            let b = Builder::new(ops[ops.len() - 1], Layer::Emulated).path(o.named.clone());
            if !(ctx.pending)() {
                return gone(b);
            }
            let v = decide_object(ctx.policy, &ops, &o);
            if !v.allowed() {
                return b.decided(v, denied());
            }
            let reopen = flags & !(libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW);
            let fd = openat(libc::AT_FDCWD, &via_proc(&o.fd), reopen, 0);
            b.decided(v, opened(fd, flags))
        }
        Resolved::Entry(e) => {
            let st = e.stat();
            let exists = st.is_ok();
            let creating = (creat && !exists) || tmpfile;
            let ops = access_ops(flags, creating);
            let primary = if creating {
                Operation::Create
            } else {
                ops[ops.len() - 1]
            };
            let b = Builder::new(primary, Layer::Emulated).path(Some(e.path.clone()));
            if !(ctx.pending)() {
                return gone(b);
            }
            let v = decide_all(ctx.policy, &ops, &e.path, Reach::Path);
            if !v.allowed() {
                return b.decided(v, denied());
            }
            if e.trailing_slash && !tmpfile {
                // "name/": it must be a dir, which is never opened for writing or created.
                let is_dir = matches!(&st, Ok(st) if is_type(st, libc::S_IFDIR));
                let refused = if creat {
                    Some(libc::EISDIR)
                } else if !exists {
                    Some(libc::ENOENT)
                } else if !is_dir {
                    Some(libc::ENOTDIR)
                } else {
                    None
                };
                if let Some(e) = refused {
                    return b.decided(v, Response::Error(e));
                }
                let fd = openat(
                    e.dir.as_raw_fd(),
                    &e.name,
                    flags | libc::O_DIRECTORY | libc::O_NOFOLLOW,
                    mode,
                );
                return b.decided(v, opened(fd, flags));
            }
            // The last component was followed already: a link there now is a race, ELOOP.
            let extra = if e.is_dir_itself() {
                0
            } else {
                libc::O_NOFOLLOW
            };
            let fd = openat(e.dir.as_raw_fd(), &e.name, flags | extra, mode);
            b.decided(v, opened(fd, flags))
        }
    }
}

fn entry(ctx: &Ctx, dirfd: i32, raw: &[u8]) -> Result<Entry, Errno> {
    match resolve(ctx.caller, dirfd, raw, false)? {
        Resolved::Entry(e) => Ok(e),
        // Only a trailing slash follows a link here; a magic link's object is no name.
        Resolved::Object(_) => Err(libc::EEXIST),
    }
}

fn make(ctx: &Ctx, dirfd: i32, raw: &[u8], mode: u32, dev: u64, dir: bool) -> Outcome {
    let b = Builder::new(Operation::Create, Layer::Emulated);
    let e = match entry(ctx, dirfd, raw) {
        Ok(e) => e,
        Err(err) => return b.path(Some(raw_path(raw))).failed(err),
    };
    let b = b.path(Some(e.path.clone()));
    if e.is_dir_itself() {
        return b.failed(libc::EEXIST);
    }
    if !(ctx.pending)() {
        return gone(b);
    }
    let v = decide(ctx.policy, Operation::Create, &e.path, Reach::Path);
    if !v.allowed() {
        return b.decided(v, denied());
    }
    let perm = mode & 0o7777 & !(ctx.umask)();
    // SAFETY: plain syscalls on our own descriptor and name.
    let r = if dir {
        check(unsafe { libc::mkdirat(e.dir.as_raw_fd(), e.name.as_ptr(), perm) })
    } else {
        check(unsafe {
            libc::mknodat(
                e.dir.as_raw_fd(),
                e.name.as_ptr(),
                (mode & libc::S_IFMT) | perm,
                dev,
            )
        })
    };
    b.decided(v, done(r))
}

fn unlink(ctx: &Ctx, dirfd: i32, raw: &[u8], dir: bool) -> Outcome {
    let b = Builder::new(Operation::Delete, Layer::Emulated);
    let e = match entry(ctx, dirfd, raw) {
        Ok(e) => e,
        Err(err) => return b.path(Some(raw_path(raw))).failed(err),
    };
    let b = b.path(Some(e.path.clone()));
    if e.is_dir_itself() {
        return b.failed(if dir { libc::EINVAL } else { libc::EISDIR });
    }
    if e.trailing_slash && !dir {
        // "name/" names a dir, which unlink refuses; a file there is not a dir at all.
        return b.failed(if is_dir(&e) {
            libc::EISDIR
        } else {
            libc::ENOTDIR
        });
    }
    if !(ctx.pending)() {
        return gone(b);
    }
    let v = decide(ctx.policy, Operation::Delete, &e.path, Reach::Path);
    if !v.allowed() {
        return b.decided(v, denied());
    }
    let flags = if dir { libc::AT_REMOVEDIR } else { 0 };
    // SAFETY: plain syscall on our own descriptor and name.
    let r = check(unsafe { libc::unlinkat(e.dir.as_raw_fd(), e.name.as_ptr(), flags) });
    b.decided(v, done(r))
}

fn is_dir(e: &Entry) -> bool {
    matches!(e.stat(), Ok(st) if is_type(&st, libc::S_IFDIR))
}

fn rename(ctx: &Ctx, old: (i32, &[u8]), new: (i32, &[u8]), flags: u32) -> Outcome {
    let b = Builder::new(Operation::Rename, Layer::Emulated);
    let (src, dst) = match (entry(ctx, old.0, old.1), entry(ctx, new.0, new.1)) {
        (Ok(s), Ok(d)) => (s, d),
        (Err(e), _) | (_, Err(e)) => {
            return b
                .path(Some(raw_path(old.1)))
                .path2(Some(raw_path(new.1)))
                .failed(e);
        }
    };
    let b = b.path(Some(src.path.clone())).path2(Some(dst.path.clone()));
    if src.is_dir_itself() || dst.is_dir_itself() {
        return b.failed(libc::EBUSY);
    }
    if (src.trailing_slash || dst.trailing_slash) && src.exists() && !is_dir(&src) {
        return b.failed(libc::ENOTDIR);
    }
    if !(ctx.pending)() {
        return gone(b);
    }
    use Operation::*;
    let reach = |e: &Entry| {
        if is_dir(e) {
            Reach::Subtree
        } else {
            Reach::Path
        }
    };
    let exchange = flags & libc::RENAME_EXCHANGE != 0;
    let replaces = dst.exists() && flags & libc::RENAME_NOREPLACE == 0;
    let src_ops: &[Operation] = if exchange {
        &[Rename, Delete, Create]
    } else {
        &[Rename, Delete]
    };
    let dst_ops: &[Operation] = if exchange || replaces {
        &[Rename, Create, Delete]
    } else {
        &[Rename, Create]
    };
    // The target takes the source's shape: a dir moved there brings its subtree.
    let src_reach = reach(&src);
    let dst_reach = if exchange { reach(&dst) } else { src_reach };
    let v = decide_all(ctx.policy, src_ops, &src.path, src_reach);
    let v = if v.allowed() {
        let v2 = decide_all(ctx.policy, dst_ops, &dst.path, dst_reach);
        if v2.allowed() { v } else { v2 }
    } else {
        v
    };
    if !v.allowed() {
        return b.decided(v, denied());
    }
    // SAFETY: plain syscall on our own descriptors and names.
    let r = check(unsafe {
        libc::syscall(
            libc::SYS_renameat2,
            src.dir.as_raw_fd(),
            src.name.as_ptr(),
            dst.dir.as_raw_fd(),
            dst.name.as_ptr(),
            flags,
        ) as libc::c_int
    });
    b.decided(v, done(r))
}

fn link(ctx: &Ctx, old: (i32, &[u8]), new: (i32, &[u8]), flags: i32) -> Outcome {
    let b = Builder::new(Operation::Link, Layer::Emulated);
    if flags & !(libc::AT_SYMLINK_FOLLOW | libc::AT_EMPTY_PATH) != 0 {
        return b.failed(libc::EINVAL);
    }
    let src: Result<Object, Errno> = if old.1.is_empty() && flags & libc::AT_EMPTY_PATH != 0 {
        resolve_fd(ctx.caller, old.0)
    } else {
        let follow = flags & libc::AT_SYMLINK_FOLLOW != 0;
        match resolve(ctx.caller, old.0, old.1, follow) {
            Ok(Resolved::Entry(e)) => pin(&e),
            Ok(Resolved::Object(o)) => Ok(o),
            Err(e) => Err(e),
        }
    };
    let src = match src {
        Ok(s) => s,
        Err(e) => return b.path(Some(raw_path(old.1))).failed(e),
    };
    let dst = match entry(ctx, new.0, new.1) {
        Ok(d) => d,
        Err(e) => {
            return b
                .path(src.named.clone())
                .path2(Some(raw_path(new.1)))
                .failed(e);
        }
    };
    let b = b.path(src.named.clone()).path2(Some(dst.path.clone()));
    if !(ctx.pending)() {
        return gone(b);
    }
    // A hard link makes the source writable under the new name: it must be writable now.
    let v = decide_object(ctx.policy, &[Operation::Write], &src);
    let v = if v.allowed() {
        decide_all(
            ctx.policy,
            &[Operation::Link, Operation::Create],
            &dst.path,
            Reach::Path,
        )
    } else {
        v
    };
    if !v.allowed() {
        return b.decided(v, denied());
    }
    let p = via_proc(&src.fd);
    // SAFETY: plain syscall; links the pinned object itself.
    let r = check(unsafe {
        libc::linkat(
            libc::AT_FDCWD,
            p.as_ptr(),
            dst.dir.as_raw_fd(),
            dst.name.as_ptr(),
            libc::AT_SYMLINK_FOLLOW,
        )
    });
    b.decided(v, done(r))
}

fn symlink(ctx: &Ctx, target: &[u8], new_dirfd: i32, new: &[u8]) -> Outcome {
    let b = Builder::new(Operation::Symlink, Layer::Emulated);
    let dst = match entry(ctx, new_dirfd, new) {
        Ok(d) => d,
        Err(e) => return b.path(Some(raw_path(new))).failed(e),
    };
    let b = b.path(Some(dst.path.clone())).path2(Some(raw_path(target)));
    if !(ctx.pending)() {
        return gone(b);
    }
    let v = decide_all(
        ctx.policy,
        &[Operation::Symlink, Operation::Create],
        &dst.path,
        Reach::Path,
    );
    if !v.allowed() {
        return b.decided(v, denied());
    }
    let Ok(target) = CString::new(target) else {
        return b.decided(v, Response::Error(libc::EINVAL));
    };
    // SAFETY: plain syscall on our own strings and descriptor.
    let r =
        check(unsafe { libc::symlinkat(target.as_ptr(), dst.dir.as_raw_fd(), dst.name.as_ptr()) });
    b.decided(v, done(r))
}

/// An object a metadata call acts on, pinned, with the entry it was reached by.
pub struct Held {
    pub obj: Object,
    pub entry: Option<Entry>,
    /// It is a symbolic link (the call does not follow links).
    pub link: bool,
}

fn hold(ctx: &Ctx, at: &At) -> Result<Held, Errno> {
    match at {
        At::Fd(fd) if *fd == libc::AT_FDCWD => hold(
            ctx,
            &At::Path {
                dirfd: libc::AT_FDCWD,
                raw: b".".to_vec(),
                follow: true,
            },
        ),
        At::Fd(fd) => {
            let obj = resolve_fd(ctx.caller, *fd)?;
            let link = matches!(obj.stat(), Ok(st) if is_type(&st, libc::S_IFLNK));
            Ok(Held {
                obj,
                entry: None,
                link,
            })
        }
        At::Path { dirfd, raw, follow } => match resolve(ctx.caller, *dirfd, raw, *follow)? {
            Resolved::Object(obj) => Ok(Held {
                obj,
                entry: None,
                link: false,
            }),
            Resolved::Entry(e) => {
                let obj = pin(&e)?;
                let link = is_type(&fstat(obj.fd.as_raw_fd())?, libc::S_IFLNK);
                if link && *follow {
                    // The link was followed while resolving: one here now is a race.
                    return Err(libc::ELOOP);
                }
                Ok(Held {
                    obj,
                    entry: Some(e),
                    link,
                })
            }
        },
    }
}

fn at_raw(at: &At) -> Option<PathBuf> {
    match at {
        At::Path { raw, .. } => Some(raw_path(raw)),
        At::Fd(_) => None,
    }
}

fn metadata(
    ctx: &Ctx,
    at: &At,
    op: Operation,
    act: &dyn Fn(&Held) -> Result<i64, Errno>,
) -> Outcome {
    let b = Builder::new(op, Layer::Emulated);
    let h = match hold(ctx, at) {
        Ok(h) => h,
        Err(e) => return b.path(at_raw(at)).failed(e),
    };
    let b = b.path(h.obj.named.clone().or_else(|| at_raw(at)));
    if !(ctx.pending)() {
        return gone(b);
    }
    let v = decide_object(ctx.policy, &[op], &h.obj);
    if !v.allowed() {
        return b.decided(v, denied());
    }
    b.decided(v, done(act(&h)))
}

/// A memfd made by the supervisor with `MFD_NOEXEC_SEAL`: Landlock would let the plugin run
/// a memfd (it is no file in the tree), and a racing thread could get an exec of one past
/// the supervisor's check; sealed, the kernel refuses to run it.
fn memfd(ctx: &Ctx, name: &[u8], flags: u32) -> Outcome {
    let mut shown = b"memfd:".to_vec();
    shown.extend_from_slice(name);
    let b = Builder::new(Operation::Create, Layer::Emulated).path(Some(raw_path(&shown)));
    if flags & MFD_EXEC != 0 {
        return b.decided(Verdict::deny(RuleRef::NoExec), denied());
    }
    if !(ctx.pending)() {
        return gone(b);
    }
    let Ok(cname) = CString::new(name) else {
        return b.failed(libc::EINVAL);
    };
    // SAFETY: plain syscall; the result is a new descriptor we own.
    let fd =
        unsafe { libc::memfd_create(cname.as_ptr(), flags | MFD_NOEXEC_SEAL | libc::MFD_CLOEXEC) };
    let v = Verdict::allow(RuleRef::MemfdNoExec);
    if fd < 0 {
        return b.decided(v, Response::Error(errno()));
    }
    // SAFETY: fresh descriptor.
    let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
    b.decided(
        v,
        Response::Fd {
            fd,
            cloexec: flags & libc::MFD_CLOEXEC != 0,
        },
    )
}

fn truncate(ctx: &Ctx, raw: &[u8], len: i64) -> Outcome {
    let at = At::Path {
        dirfd: libc::AT_FDCWD,
        raw: raw.to_vec(),
        follow: true,
    };
    metadata(ctx, &at, Operation::Write, &|h| {
        if h.link {
            return Err(libc::ELOOP);
        }
        let p = via_proc(&h.obj.fd);
        // SAFETY: plain syscall on our own path string.
        check(unsafe { libc::truncate(p.as_ptr(), len) })
    })
}
