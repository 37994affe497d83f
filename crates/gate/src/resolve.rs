//! Resolving a path argument the way the trapped caller would, and pinning what it names.
//!
//! The supervisor opens the parent dir `O_PATH` (the pin), reads its canonical path back
//! from `/proc/self/fd`, and then acts on (pinned dir, one name) with no-follow semantics. It
//! decides on the pinned object's path and acts on that same object, so whatever a racing
//! thread or a swapped symlink does, the decision and the act are about one thing. Symbolic
//! links in the last component are followed here, in text, one at a time (up to 40, as the
//! kernel), except the magic links of `/proc/<pid>/fd`, which are opened through to the
//! object they hold. `/proc/self` and `/proc/thread-self` are read as the caller's.

use std::ffi::{CStr, CString, OsStr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// An errno.
pub type Errno = i32;

pub fn errno() -> Errno {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn cstr(bytes: &[u8]) -> Result<CString, Errno> {
    CString::new(bytes).map_err(|_| libc::EINVAL)
}

/// `openat` returning an owned descriptor, always close-on-exec.
pub fn openat(dir: RawFd, name: &CStr, flags: i32, mode: u32) -> Result<OwnedFd, Errno> {
    // SAFETY: plain syscall; the result is a new descriptor we own.
    let fd = unsafe { libc::openat(dir, name.as_ptr(), flags | libc::O_CLOEXEC, mode) };
    if fd < 0 {
        Err(errno())
    } else {
        // SAFETY: fd is a fresh descriptor.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }
}

/// `fstatat`.
pub fn fstatat(dir: RawFd, name: &CStr, flags: i32) -> Result<libc::stat, Errno> {
    // SAFETY: plain data filled by the kernel.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: plain syscall writing `st`.
    let r = unsafe { libc::fstatat(dir, name.as_ptr(), &mut st, flags) };
    if r < 0 { Err(errno()) } else { Ok(st) }
}

pub fn fstat(fd: RawFd) -> Result<libc::stat, Errno> {
    fstatat(fd, c"", libc::AT_EMPTY_PATH)
}

pub fn is_type(st: &libc::stat, kind: u32) -> bool {
    st.st_mode & libc::S_IFMT == kind
}

fn readlinkat(dir: RawFd, name: &CStr) -> Result<Vec<u8>, Errno> {
    let mut buf = vec![0u8; libc::PATH_MAX as usize + 1];
    // SAFETY: the kernel writes at most buf.len() bytes.
    let n = unsafe { libc::readlinkat(dir, name.as_ptr(), buf.as_mut_ptr().cast(), buf.len()) };
    if n < 0 {
        return Err(errno());
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// What `/proc/self/fd/<fd>` says the descriptor is: a path, or `pipe:[..]` and the like.
pub fn fd_text(fd: RawFd) -> Result<Vec<u8>, Errno> {
    let link = cstr(format!("/proc/self/fd/{fd}").as_bytes())?;
    readlinkat(libc::AT_FDCWD, &link)
}

/// The path of a descriptor that names a file in the tree (same device and inode found
/// there now), else `None` (a pipe, a socket, an anonymous or deleted file, a memfd).
pub fn fd_path(fd: RawFd) -> Option<PathBuf> {
    let text = fd_text(fd).ok()?;
    if !text.starts_with(b"/") {
        return None;
    }
    let path = PathBuf::from(OsStr::from_bytes(&text));
    let there = fstatat(
        libc::AT_FDCWD,
        &cstr(&text).ok()?,
        libc::AT_SYMLINK_NOFOLLOW,
    )
    .ok()?;
    let held = fstat(fd).ok()?;
    (there.st_dev == held.st_dev && there.st_ino == held.st_ino).then_some(path)
}

/// The path of a dir descriptor: what `/proc/self/fd` says, unless the dir was deleted.
/// (A dir's name in the kernel is its path; no second look is needed, unlike a file's,
/// which may be a pipe or a memfd.)
fn dir_path(fd: RawFd) -> Option<PathBuf> {
    let text = fd_text(fd).ok()?;
    if !text.starts_with(b"/") || text.ends_with(b" (deleted)") {
        return None;
    }
    Some(PathBuf::from(OsStr::from_bytes(&text)))
}

/// The caller, as /proc knows it.
#[derive(Clone, Copy, Debug)]
pub struct Caller {
    pub tid: i32,
    pub tgid: i32,
}

/// `/proc/self` and `/proc/thread-self` as the caller's.
pub fn rewrite_proc_self(raw: &[u8], caller: Caller) -> Vec<u8> {
    for (prefix, to) in [
        (&b"/proc/self"[..], format!("/proc/{}", caller.tgid)),
        (
            &b"/proc/thread-self"[..],
            format!("/proc/{}/task/{}", caller.tgid, caller.tid),
        ),
    ] {
        if let Some(rest) = raw.strip_prefix(prefix)
            && (rest.is_empty() || rest.starts_with(b"/"))
        {
            let mut out = to.into_bytes();
            out.extend_from_slice(rest);
            return out;
        }
    }
    raw.to_vec()
}

/// A dir of magic links: `/proc/<n>/fd` or `/proc/<n>/task/<n>/fd`.
pub fn is_proc_fd_dir(path: &Path) -> bool {
    let parts: Vec<&[u8]> = path
        .as_os_str()
        .as_bytes()
        .split(|b| *b == b'/')
        .filter(|p| !p.is_empty())
        .collect();
    let num = |p: &[u8]| !p.is_empty() && p.iter().all(u8::is_ascii_digit);
    match parts.as_slice() {
        [b"proc", n, b"fd"] => num(n),
        [b"proc", n, b"task", t, b"fd"] => num(n) && num(t),
        _ => false,
    }
}

/// A name in a pinned dir.
#[derive(Debug)]
pub struct Entry {
    /// The parent dir, `O_PATH`.
    pub dir: OwnedFd,
    /// One component (never `.`, `..` or containing `/`), or `.` for the dir itself.
    pub name: CString,
    /// The canonical path of what `dir` + `name` names.
    pub path: PathBuf,
    /// The path was written with a trailing slash (it must name a dir).
    pub trailing_slash: bool,
}

impl Entry {
    pub fn is_dir_itself(&self) -> bool {
        self.name.as_bytes() == b"."
    }

    /// `fstatat(dir, name, AT_SYMLINK_NOFOLLOW)`.
    pub fn stat(&self) -> Result<libc::stat, Errno> {
        fstatat(self.dir.as_raw_fd(), &self.name, libc::AT_SYMLINK_NOFOLLOW)
    }

    pub fn exists(&self) -> bool {
        self.stat().is_ok()
    }
}

/// An object the caller already holds (or reached through a magic link), pinned `O_PATH`.
#[derive(Debug)]
pub struct Object {
    pub fd: OwnedFd,
    /// Its path in the tree, when it has one now (checked: that path leads to it).
    pub path: Option<PathBuf>,
    /// The path the kernel names it by, checked or not (` (deleted)` taken off): what rules
    /// are matched against. `None` for a pipe, a socket or an anonymous inode.
    pub named: Option<PathBuf>,
}

impl Object {
    pub fn new(fd: OwnedFd) -> Object {
        let path = fd_path(fd.as_raw_fd());
        let named = path.clone().or_else(|| {
            let text = fd_text(fd.as_raw_fd()).ok()?;
            let text = text.strip_suffix(b" (deleted)").unwrap_or(&text);
            text.starts_with(b"/")
                .then(|| PathBuf::from(OsStr::from_bytes(text)))
        });
        Object { fd, path, named }
    }

    pub fn stat(&self) -> Result<libc::stat, Errno> {
        fstat(self.fd.as_raw_fd())
    }
}

/// What a path argument resolved to.
#[derive(Debug)]
pub enum Resolved {
    Entry(Entry),
    Object(Object),
}

const MAX_LINKS: usize = 40;

fn open_dir(base: RawFd, rel: &[u8]) -> Result<OwnedFd, Errno> {
    let rel = if rel.is_empty() { &b"."[..] } else { rel };
    openat(base, &cstr(rel)?, libc::O_PATH | libc::O_DIRECTORY, 0)
}

/// The starting dir of a relative path: the caller's cwd or its descriptor `dirfd`.
fn base_dir(caller: Caller, dirfd: i32) -> Result<OwnedFd, Errno> {
    let link = if dirfd == libc::AT_FDCWD {
        format!("/proc/{}/cwd", caller.tid)
    } else if dirfd < 0 {
        return Err(libc::EBADF);
    } else {
        format!("/proc/{}/fd/{dirfd}", caller.tid)
    };
    let fd = openat(libc::AT_FDCWD, &cstr(link.as_bytes())?, libc::O_PATH, 0)
        .map_err(|e| if e == libc::ENOENT { libc::EBADF } else { e })?;
    let st = fstat(fd.as_raw_fd())?;
    if !is_type(&st, libc::S_IFDIR) {
        return Err(libc::ENOTDIR);
    }
    Ok(fd)
}

/// Resolves `raw` relative to the caller's `dirfd` (or cwd), following a symbolic link in
/// the last component when `follow` (or when the path ends with a slash).
pub fn resolve(caller: Caller, dirfd: i32, raw: &[u8], follow: bool) -> Result<Resolved, Errno> {
    if raw.is_empty() {
        return Err(libc::ENOENT);
    }
    let mut path = rewrite_proc_self(raw, caller);
    // Where a relative path starts; an absolute one needs no descriptor.
    let mut base: Option<OwnedFd> = if path.starts_with(b"/") {
        None
    } else {
        Some(base_dir(caller, dirfd)?)
    };
    let raw_base = |b: &Option<OwnedFd>| b.as_ref().map_or(libc::AT_FDCWD, |fd| fd.as_raw_fd());
    for _ in 0..MAX_LINKS {
        let mut end = path.len();
        while end > 1 && path[end - 1] == b'/' {
            end -= 1;
        }
        let trimmed = &path[..end];
        let trailing_slash = end < path.len();
        let (parent, last): (&[u8], &[u8]) = match trimmed.iter().rposition(|b| *b == b'/') {
            Some(0) => (b"/", &trimmed[1..]),
            Some(i) => (&trimmed[..i], &trimmed[i + 1..]),
            None => (b"", trimmed),
        };
        if last.is_empty() || last == b"." || last == b".." {
            let dir = open_dir(raw_base(&base), trimmed)?;
            let canonical = dir_path(dir.as_raw_fd()).ok_or(libc::ENOENT)?;
            return Ok(Resolved::Entry(Entry {
                dir,
                name: c".".to_owned(),
                path: canonical,
                trailing_slash: true,
            }));
        }
        let dir = open_dir(raw_base(&base), parent)?;
        let dir_path = dir_path(dir.as_raw_fd()).ok_or(libc::ENOENT)?;
        let name = cstr(last)?;
        let st = fstatat(dir.as_raw_fd(), &name, libc::AT_SYMLINK_NOFOLLOW);
        let is_link = matches!(&st, Ok(st) if is_type(st, libc::S_IFLNK));
        if is_link && (follow || trailing_slash) {
            if is_proc_fd_dir(&dir_path) {
                let fd = openat(dir.as_raw_fd(), &name, libc::O_PATH, 0)?;
                return Ok(Resolved::Object(Object::new(fd)));
            }
            let target = readlinkat(dir.as_raw_fd(), &name)?;
            let mut next = rewrite_proc_self(&target, caller);
            if trailing_slash {
                next.push(b'/');
            }
            base = if next.starts_with(b"/") {
                None
            } else {
                Some(dir)
            };
            path = next;
            continue;
        }
        let full = dir_path.join(OsStr::from_bytes(last));
        return Ok(Resolved::Entry(Entry {
            dir,
            name,
            path: full,
            trailing_slash,
        }));
    }
    Err(libc::ELOOP)
}

/// The object behind the caller's descriptor `fd`, pinned.
pub fn resolve_fd(caller: Caller, fd: i32) -> Result<Object, Errno> {
    if fd < 0 {
        return Err(libc::EBADF);
    }
    let link = format!("/proc/{}/fd/{fd}", caller.tid);
    let pinned = openat(libc::AT_FDCWD, &cstr(link.as_bytes())?, libc::O_PATH, 0)
        .map_err(|e| if e == libc::ENOENT { libc::EBADF } else { e })?;
    Ok(Object::new(pinned))
}

/// Pins the object an entry names, not following a symbolic link.
pub fn pin(entry: &Entry) -> Result<Object, Errno> {
    let fd = openat(
        entry.dir.as_raw_fd(),
        &entry.name,
        libc::O_PATH | libc::O_NOFOLLOW,
        0,
    )?;
    Ok(Object::new(fd))
}

/// `/proc/self/fd/<fd>`: a path the supervisor's own calls follow to exactly that object.
pub fn via_proc(fd: &OwnedFd) -> CString {
    CString::new(format!("/proc/self/fd/{}", fd.as_raw_fd())).expect("no NUL in a number")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn me() -> Caller {
        // SAFETY: plain syscalls.
        Caller {
            tid: unsafe { libc::gettid() },
            tgid: unsafe { libc::getpid() },
        }
    }

    fn tempdir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gate-resolve-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::canonicalize(d).unwrap()
    }

    fn entry(r: Resolved) -> Entry {
        match r {
            Resolved::Entry(e) => e,
            Resolved::Object(o) => panic!("an object: {o:?}"),
        }
    }

    #[test]
    fn proc_self_is_the_callers() {
        let c = Caller { tid: 8, tgid: 7 };
        assert_eq!(rewrite_proc_self(b"/proc/self/fd/3", c), b"/proc/7/fd/3");
        assert_eq!(rewrite_proc_self(b"/proc/self", c), b"/proc/7");
        assert_eq!(
            rewrite_proc_self(b"/proc/thread-self/fd", c),
            b"/proc/7/task/8/fd"
        );
        assert_eq!(rewrite_proc_self(b"/proc/selfish", c), b"/proc/selfish");
        assert!(is_proc_fd_dir(Path::new("/proc/7/fd")));
        assert!(is_proc_fd_dir(Path::new("/proc/7/task/8/fd")));
        assert!(!is_proc_fd_dir(Path::new("/proc/7/fdinfo")));
        assert!(!is_proc_fd_dir(Path::new("/data/proc/7/fd")));
    }

    #[test]
    fn paths_resolve_to_a_pinned_parent_and_one_name() {
        let d = tempdir("pin");
        std::fs::create_dir(d.join("sub")).unwrap();
        std::fs::write(d.join("sub/file"), b"x").unwrap();
        std::os::unix::fs::symlink(d.join("sub"), d.join("link")).unwrap();
        std::os::unix::fs::symlink("sub/file", d.join("rel")).unwrap();
        std::os::unix::fs::symlink("loop", d.join("loop")).unwrap();
        let raw = d.join("link/file");
        let e = entry(resolve(me(), libc::AT_FDCWD, raw.as_os_str().as_bytes(), true).unwrap());
        assert_eq!(e.path, d.join("sub/file"));
        assert_eq!(e.name.as_bytes(), b"file");
        // The last component is followed only when asked.
        let raw = d.join("rel");
        let e = entry(resolve(me(), libc::AT_FDCWD, raw.as_os_str().as_bytes(), false).unwrap());
        assert_eq!(e.path, d.join("rel"));
        let e = entry(resolve(me(), libc::AT_FDCWD, raw.as_os_str().as_bytes(), true).unwrap());
        assert_eq!(e.path, d.join("sub/file"));
        let raw = d.join("loop");
        let err = resolve(me(), libc::AT_FDCWD, raw.as_os_str().as_bytes(), true).unwrap_err();
        assert_eq!(err, libc::ELOOP);
        // A dir with a trailing slash or a dot is the dir itself.
        let raw = format!("{}/sub/.", d.display());
        let e = entry(resolve(me(), libc::AT_FDCWD, raw.as_bytes(), true).unwrap());
        assert!(e.is_dir_itself());
        assert_eq!(e.path, d.join("sub"));
        // Relative to a descriptor.
        let dirfd = std::fs::File::open(d.join("sub")).unwrap();
        let e = entry(resolve(me(), dirfd.as_raw_fd(), b"new", false).unwrap());
        assert_eq!(e.path, d.join("sub/new"));
        assert!(!e.exists());
        assert_eq!(resolve(me(), 9999, b"x", false).unwrap_err(), libc::EBADF);
        assert_eq!(
            resolve(me(), libc::AT_FDCWD, b"", false).unwrap_err(),
            libc::ENOENT
        );
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn descriptors_resolve_to_the_object_they_hold() {
        let d = tempdir("fd");
        let f = std::fs::File::create(d.join("held")).unwrap();
        let raw = format!("/proc/self/fd/{}", f.as_raw_fd());
        match resolve(me(), libc::AT_FDCWD, raw.as_bytes(), true).unwrap() {
            Resolved::Object(o) => assert_eq!(o.path, Some(d.join("held"))),
            Resolved::Entry(e) => panic!("an entry: {e:?}"),
        }
        let o = resolve_fd(me(), f.as_raw_fd()).unwrap();
        assert_eq!(o.path, Some(d.join("held")));
        std::fs::remove_file(d.join("held")).unwrap();
        // Deleted: no path any more, but still named by the one it had.
        let o = resolve_fd(me(), f.as_raw_fd()).unwrap();
        assert_eq!((o.path, o.named), (None, Some(d.join("held"))));
        let (r, _w) = std::io::pipe().unwrap();
        let o = resolve_fd(me(), r.as_raw_fd()).unwrap();
        assert_eq!((o.path, o.named), (None, None));
        std::fs::remove_dir_all(&d).unwrap();
    }
}
