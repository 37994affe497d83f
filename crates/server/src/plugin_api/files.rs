//! `files.read`: reading a file of the chat's working tree, confined to it.
//!
//! The API server sees each working tree as a local folder: `--worktree-root DIR` holds one
//! folder per claim, `DIR/<namespace>/<claimName>`, and the chat's tree is `<subPath>` within
//! it (the API server's Pod mounts the claims there, or a test makes the folders).
//!
//! The rules, each checked before any file is opened:
//! - the path is relative, `/`-separated, with no empty, `.` or `..` component, no NUL or
//!   backslash, at most 4096 bytes;
//! - it resolves beneath the tree: on Linux `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`
//!   refuses a symlink (or `..` a symlink brings) that leads out, while symlinks that stay in
//!   the tree work; where `openat2` is missing, the canonical path must start with the tree's;
//! - only regular files: the path is first opened `O_PATH` and checked with `fstat`, so a
//!   fifo, a device or a socket is never opened for reading;
//! - at most [`MAX_FILE_BYTES`] (8 MiB, the reference's cap on an /x body): a larger file is
//!   refused whole, never cut.

use std::fs::File;
use std::io::Read;
use std::path::{Component, Path, PathBuf};

use super::error::{ApiError, Code};

/// The largest file `GET /files/{path}` returns.
pub use sdk::api::limits::MAX_FILE_BYTES;

/// A path of the request, checked: relative, with only normal components.
pub fn check_path(path: &str) -> Result<PathBuf, ApiError> {
    sdk::api::limits::check_file_path(path).map_err(|why| ApiError::new(Code::InvalidPath, why))?;
    let rel = PathBuf::from(path);
    debug_assert!(rel.components().all(|c| matches!(c, Component::Normal(_))));
    Ok(rel)
}

/// The folder of a chat's working tree under `root`: `root/<namespace>/<claim>/<sub_path>`.
pub fn tree_dir(
    root: &Path,
    namespace: &str,
    claim: &str,
    sub_path: Option<&str>,
) -> Result<PathBuf, ApiError> {
    let no_tree = |why: String| ApiError::new(Code::NoWorkingTree, why);
    let single = |what: &str, v: &str| match check_path(v) {
        Ok(p) if p.components().count() == 1 => Ok(p),
        _ => Err(no_tree(format!(
            "the chat's {what} \"{v}\" is not a plain name"
        ))),
    };
    let mut dir = root
        .join(single("namespace", namespace)?)
        .join(single("claimName", claim)?);
    if let Some(sub) = sub_path
        .map(|s| s.trim_matches('/'))
        .filter(|s| !s.is_empty())
    {
        let sub = check_path(sub).map_err(|_| {
            no_tree(format!(
                "the chat's subPath \"{sub}\" is not a relative path"
            ))
        })?;
        dir = dir.join(sub);
    }
    Ok(dir)
}

/// Reads `rel` beneath `tree`, by the rules above. Blocking: run it off the async threads.
pub fn read_confined(tree: &Path, rel: &Path, max: u64) -> Result<Vec<u8>, ApiError> {
    let file = open_beneath(tree, rel)?;
    let meta = file.metadata().map_err(|e| io_error(rel, e))?;
    if !meta.is_file() {
        return Err(not_regular(rel));
    }
    if meta.len() > max {
        return Err(too_large(rel, max));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error(rel, e))?;
    if bytes.len() as u64 > max {
        return Err(too_large(rel, max));
    }
    Ok(bytes)
}

fn not_regular(rel: &Path) -> ApiError {
    ApiError::new(
        Code::NotARegularFile,
        format!(
            "{} is not a regular file (a directory, fifo, device or socket)",
            rel.display()
        ),
    )
}

fn too_large(rel: &Path, max: u64) -> ApiError {
    ApiError::new(
        Code::FileTooLarge,
        format!("{} is larger than {max} bytes", rel.display()),
    )
}

fn outside(rel: &Path) -> ApiError {
    ApiError::new(
        Code::OutsideWorkingTree,
        format!("{} leads outside the chat's working tree", rel.display()),
    )
}

fn io_error(rel: &Path, err: std::io::Error) -> ApiError {
    match err.raw_os_error() {
        Some(libc::ENOENT) | Some(libc::ENOTDIR) => ApiError::new(
            Code::FileNotFound,
            format!("{} does not exist", rel.display()),
        ),
        Some(libc::EXDEV) => outside(rel),
        Some(libc::ELOOP) => ApiError::new(
            Code::FileNotFound,
            format!("{} is a symlink loop", rel.display()),
        ),
        Some(libc::ENXIO) => not_regular(rel),
        _ => ApiError::new(
            Code::FileNotFound,
            format!("{} cannot be read: {err}", rel.display()),
        ),
    }
}

fn open_tree(tree: &Path) -> Result<File, ApiError> {
    File::open(tree).map_err(|e| {
        ApiError::new(
            Code::NoWorkingTree,
            format!("the chat's working tree is not available here: {e}"),
        )
    })
}

#[cfg(target_os = "linux")]
fn open_beneath(tree: &Path, rel: &Path) -> Result<File, ApiError> {
    let dir = open_tree(tree)?;
    // First without opening the file itself: a fifo or a device is refused before any read.
    match linux::openat2(&dir, rel, libc::O_PATH) {
        Ok(handle) => {
            let meta = handle.metadata().map_err(|e| io_error(rel, e))?;
            if !meta.is_file() {
                return Err(not_regular(rel));
            }
            linux::openat2(
                &dir,
                rel,
                libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY,
            )
            .map_err(|e| io_error(rel, e))
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOSYS) | Some(libc::EPERM)) => {
            open_by_prefix(tree, rel)
        }
        Err(e) => Err(io_error(rel, e)),
    }
}

#[cfg(not(target_os = "linux"))]
fn open_beneath(tree: &Path, rel: &Path) -> Result<File, ApiError> {
    open_tree(tree)?;
    open_by_prefix(tree, rel)
}

/// Where `openat2` is missing: the canonical path must lie beneath the canonical tree, and the
/// last component is opened without following a symlink.
fn open_by_prefix(tree: &Path, rel: &Path) -> Result<File, ApiError> {
    use std::os::unix::fs::OpenOptionsExt;
    let tree = tree.canonicalize().map_err(|e| io_error(rel, e))?;
    let full = tree
        .join(rel)
        .canonicalize()
        .map_err(|e| io_error(rel, e))?;
    if !full.starts_with(&tree) {
        return Err(outside(rel));
    }
    if !std::fs::metadata(&full)
        .map_err(|e| io_error(rel, e))?
        .is_file()
    {
        return Err(not_regular(rel));
    }
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY)
        .open(&full)
        .map_err(|e| io_error(rel, e))
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::CString;
    use std::fs::File;
    use std::os::fd::{AsRawFd, FromRawFd};
    use std::os::unix::ffi::OsStrExt;
    use std::path::Path;

    /// `openat2(dir, rel, flags, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`.
    pub fn openat2(dir: &File, rel: &Path, flags: libc::c_int) -> std::io::Result<File> {
        let path = CString::new(rel.as_os_str().as_bytes())
            .map_err(|_| std::io::Error::from_raw_os_error(libc::EINVAL))?;
        let mut how: libc::open_how = unsafe { std::mem::zeroed() };
        how.flags = (flags | libc::O_CLOEXEC) as u64;
        how.resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
        // SAFETY: the path is NUL-terminated and `how` lives across the call; the size passed
        // is the struct's.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir.as_raw_fd(),
                path.as_ptr(),
                &how as *const libc::open_how,
                std::mem::size_of::<libc::open_how>(),
            )
        };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the kernel just gave us this descriptor and nothing else owns it.
        Ok(unsafe { File::from_raw_fd(fd as libc::c_int) })
    }
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;
    use crate::plugin_api::tests::fixtures::TempDir;

    fn code(r: Result<impl Sized, ApiError>) -> Code {
        match r {
            Ok(_) => panic!("expected an error"),
            Err(e) => e.code,
        }
    }

    #[test]
    fn paths_must_be_plain_and_relative() {
        assert_eq!(
            check_path("src/main.rs").unwrap(),
            PathBuf::from("src/main.rs")
        );
        assert_eq!(
            check_path(".github/x.yml").unwrap(),
            PathBuf::from(".github/x.yml")
        );
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../../x",
            "a/./b",
            "a//b",
            "a/",
            "a\\b",
            "a\0b",
            "..",
        ] {
            assert_eq!(code(check_path(bad)), Code::InvalidPath, "{bad:?}");
        }
        assert_eq!(code(check_path(&"a".repeat(5000))), Code::InvalidPath);
    }

    #[test]
    fn the_tree_dir_is_root_namespace_claim_sub_path() {
        let root = Path::new("/trees");
        assert_eq!(
            tree_dir(root, "team", "repo", None).unwrap(),
            PathBuf::from("/trees/team/repo")
        );
        assert_eq!(
            tree_dir(root, "team", "repo", Some("/wt/feature/")).unwrap(),
            PathBuf::from("/trees/team/repo/wt/feature")
        );
        assert_eq!(
            code(tree_dir(root, "team", "..", None)),
            Code::NoWorkingTree
        );
        assert_eq!(
            code(tree_dir(root, "team", "repo", Some("../x"))),
            Code::NoWorkingTree
        );
    }

    #[test]
    fn reads_stay_in_the_tree() {
        let dir = TempDir::new("files");
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(tree.join("src")).unwrap();
        std::fs::write(tree.join("src/lib.rs"), "fn main() {}").unwrap();
        std::fs::write(dir.path().join("secret"), "outside").unwrap();
        symlink("../../secret", tree.join("src/out")).unwrap();
        symlink(dir.path().join("secret"), tree.join("abs")).unwrap();
        symlink("lib.rs", tree.join("src/in")).unwrap();
        let fifo =
            std::ffi::CString::new(tree.join("fifo").as_os_str().as_encoded_bytes()).unwrap();
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        std::fs::write(tree.join("big"), vec![b'x'; 101]).unwrap();

        let read = |p: &str| read_confined(&tree, Path::new(p), 100);
        assert_eq!(read("src/lib.rs").unwrap(), b"fn main() {}");
        assert_eq!(
            read("src/in").unwrap(),
            b"fn main() {}",
            "a symlink within the tree works"
        );
        assert_eq!(code(read("src/out")), Code::OutsideWorkingTree);
        assert_eq!(code(read("abs")), Code::OutsideWorkingTree);
        assert_eq!(
            code(read("fifo")),
            Code::NotARegularFile,
            "a fifo is refused without blocking"
        );
        assert_eq!(code(read("src")), Code::NotARegularFile);
        assert_eq!(code(read("missing")), Code::FileNotFound);
        assert_eq!(code(read("big")), Code::FileTooLarge);
        assert_eq!(
            code(read_confined(&dir.path().join("nope"), Path::new("x"), 100)),
            Code::NoWorkingTree
        );
    }

    #[test]
    fn the_prefix_fallback_keeps_the_same_rules() {
        let dir = TempDir::new("files-fallback");
        let tree = dir.path().join("tree");
        std::fs::create_dir_all(&tree).unwrap();
        std::fs::write(tree.join("a"), "a").unwrap();
        std::fs::write(dir.path().join("secret"), "outside").unwrap();
        symlink("../secret", tree.join("out")).unwrap();
        assert_eq!(open_by_prefix(&tree, Path::new("a")).map(|_| ()), Ok(()));
        assert_eq!(
            code(open_by_prefix(&tree, Path::new("out"))),
            Code::OutsideWorkingTree
        );
        assert_eq!(
            code(open_by_prefix(&tree, Path::new("."))),
            Code::NotARegularFile
        );
    }
}
