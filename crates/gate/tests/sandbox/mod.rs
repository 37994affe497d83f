//! The tests' sandbox: a temp dir with `data` and `tmp` (writable), `outside` (not), `bin`
//! (the gate and the probe, copied so uid 65534 can run them), `audit`; and the two ways the
//! gate starts: as root dropping to uid 65534 (`--uid`), or as uid 65534 itself (setpriv),
//! the pod's way. Not root: only the second, as the current user.

#![allow(dead_code)]

use std::ffi::CString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use serde_json::Value;

/// The uid the plugin runs as in the tests (nobody).
pub const UID: u32 = 65534;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The gate starts as root and drops to `--uid` (the reference's way).
    RootDrop,
    /// The gate starts as the plugin's uid (the pod's way: restricted Pod Security).
    SameUid,
}

pub fn is_root() -> bool {
    // SAFETY: plain call.
    unsafe { libc::geteuid() == 0 }
}

/// The modes this host can run.
pub fn modes() -> Vec<Mode> {
    if is_root() {
        vec![Mode::RootDrop, Mode::SameUid]
    } else {
        vec![Mode::SameUid]
    }
}

/// Why the gate cannot run here at all (then the tests say so and pass nothing off).
pub fn unsupported() -> Option<String> {
    let k = loop_plugins_gate::probe_kernel();
    loop_plugins_gate::kernel::check(k)
        .err()
        .map(|e| e.to_string())
}

/// Skips the test with a clear message when the kernel lacks what the gate needs.
#[macro_export]
macro_rules! require_kernel {
    () => {
        if let Some(why) = $crate::sandbox::unsupported() {
            eprintln!("SKIPPED: {why}");
            return;
        }
    };
}

pub struct Sandbox {
    pub root: PathBuf,
    pub data: PathBuf,
    pub tmp: PathBuf,
    pub outside: PathBuf,
    pub bin: PathBuf,
    pub audit: PathBuf,
    pub gate: PathBuf,
    pub probe: PathBuf,
}

fn chown(path: &Path) {
    if is_root() {
        std::os::unix::fs::chown(path, Some(UID), Some(UID)).unwrap();
    }
}

impl Sandbox {
    pub fn new(name: &str) -> Sandbox {
        let root = std::env::temp_dir().join(format!("gate-it-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let s = Sandbox {
            data: root.join("data"),
            tmp: root.join("tmp"),
            outside: root.join("outside"),
            bin: root.join("bin"),
            audit: root.join("audit"),
            gate: root.join("bin/loop-plugins-gate"),
            probe: root.join("bin/gate-probe"),
            root,
        };
        for d in [&s.root, &s.data, &s.tmp, &s.outside, &s.bin] {
            std::fs::create_dir_all(d).unwrap();
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
        std::fs::create_dir_all(&s.audit).unwrap();
        for d in [&s.data, &s.tmp, &s.outside, &s.audit] {
            chown(d);
        }
        copy_exec(Path::new(env!("CARGO_BIN_EXE_loop-plugins-gate")), &s.gate);
        copy_exec(Path::new(env!("CARGO_BIN_EXE_gate-probe")), &s.probe);
        s
    }

    /// An executable copy of `src` at `dst`, owned by the plugin's uid.
    pub fn exec_copy(&self, src: &Path, dst: &Path) {
        copy_exec(src, dst);
        chown(dst);
    }

    /// A file owned by the plugin's uid.
    pub fn file(&self, path: &Path, body: &[u8], mode: u32) {
        std::fs::write(path, body).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
        chown(path);
    }

    /// A dir (and its missing parents) owned by the plugin's uid.
    pub fn dir(&self, path: &Path) {
        if path.exists() {
            return;
        }
        if let Some(parent) = path.parent() {
            self.dir(parent);
        }
        std::fs::create_dir(path).unwrap();
        chown(path);
    }

    /// The gate's options for this sandbox: its writable and no-exec dirs and audit dir.
    pub fn options(&self) -> Vec<String> {
        let s = |p: &Path| p.display().to_string();
        vec![
            "--writable".into(),
            s(&self.data),
            "--writable".into(),
            s(&self.tmp),
            "--no-exec".into(),
            s(&self.data),
            "--no-exec".into(),
            s(&self.tmp),
            "--no-exec".into(),
            "/dev/shm".into(),
            "--audit".into(),
            s(&self.audit),
        ]
    }

    /// The command that starts the gate in `mode` with `extra` options and `cmd`.
    pub fn command(&self, mode: Mode, extra: &[String], cmd: &[String]) -> Command {
        let mut c = match (mode, is_root()) {
            (Mode::RootDrop, _) => {
                let mut c = Command::new(&self.gate);
                c.arg("--uid").arg(UID.to_string());
                c
            }
            (Mode::SameUid, true) => {
                let mut c = Command::new("setpriv");
                c.arg(format!("--reuid={UID}"))
                    .arg(format!("--regid={UID}"))
                    .arg("--clear-groups")
                    .arg("--")
                    .arg(&self.gate);
                c
            }
            (Mode::SameUid, false) => Command::new(&self.gate),
        };
        let mut options = self.options();
        if extra.iter().any(|a| a == "--audit") {
            options.truncate(options.len() - 2);
        }
        c.args(options).args(extra).arg("--").args(cmd);
        c.current_dir(&self.root);
        c
    }

    pub fn run(&self, mode: Mode, extra: &[String], cmd: &[String]) -> Output {
        self.command(mode, extra, cmd)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    }

    /// The probe's answer to one op, under the gate.
    pub fn probe(&self, mode: Mode, extra: &[String], op: &[&str]) -> String {
        let mut cmd = vec![self.probe.display().to_string()];
        cmd.extend(op.iter().map(|s| s.to_string()));
        let out = self.run(mode, extra, &cmd);
        let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
        assert!(
            !text.is_empty(),
            "{op:?} in {mode:?}: no answer; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        text
    }

    /// Starts the gate and the probe with pipes, for tests that talk to it.
    pub fn spawn(&self, mode: Mode, extra: &[String], op: &[&str]) -> Child {
        let mut cmd = vec![self.probe.display().to_string()];
        cmd.extend(op.iter().map(|s| s.to_string()));
        self.command(mode, extra, &cmd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Every audit line so far, parsed (a line that is not JSON fails the test).
    pub fn audit_lines(&self) -> Vec<Value> {
        audit_lines_in(&self.audit)
    }

    /// Writes a policy file and returns the options that name it.
    pub fn policy(&self, name: &str, json: &Value) -> Vec<String> {
        let path = self.bin.join(name);
        std::fs::write(&path, serde_json::to_vec_pretty(json).unwrap()).unwrap();
        vec!["--policy".into(), path.display().to_string()]
    }
}

/// Every audit line in an audit dir, parsed, segments in order.
pub fn audit_lines_in(dir: &Path) -> Vec<Value> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    let mut files: Vec<PathBuf> = rd
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    for f in files {
        for line in std::fs::read_to_string(&f).unwrap().lines() {
            out.push(
                serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {line}", f.display())),
            );
        }
    }
    out
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

/// Copies an executable with `cp`, so this (multi-threaded) test process never holds a
/// descriptor open for writing on it: one inherited by a child another test forks at that
/// moment would make running the file fail with ETXTBSY.
pub fn copy_exec(src: &Path, dst: &Path) {
    let st = Command::new("cp")
        .arg("--")
        .arg(src)
        .arg(dst)
        .status()
        .unwrap();
    assert!(st.success(), "cp {} {}", src.display(), dst.display());
    std::fs::set_permissions(dst, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Reads the probe's first line (it says `ready`) from a spawned gate.
pub fn read_line(child: &mut Child) -> String {
    let out = child.stdout.as_mut().unwrap();
    let mut r = BufReader::new(out);
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    line.trim().to_string()
}

pub fn write_line(child: &mut Child) {
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
}

/// Reaps `pid` without touching the child's pipes (`Child::wait` closes its stdin).
pub fn reap(pid: u32) {
    let mut status = 0;
    // SAFETY: plain call.
    unsafe { libc::waitpid(pid as i32, &mut status, 0) };
}

/// What a tree looks like: every path with its type, mode, size, owner, times, content and
/// extended attributes. Equal snapshots: nothing changed.
pub fn snapshot(root: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        let m = std::fs::symlink_metadata(&p).unwrap();
        let body = if m.is_file() {
            format!("{:?}", std::fs::read(&p).unwrap())
        } else {
            String::new()
        };
        let cp = CString::new(p.as_os_str().as_bytes()).unwrap();
        let mut xattrs = vec![0u8; 1024];
        // SAFETY: the kernel writes at most the buffer's length.
        let n = unsafe { libc::llistxattr(cp.as_ptr(), xattrs.as_mut_ptr().cast(), xattrs.len()) };
        xattrs.truncate(n.max(0) as usize);
        out.push(format!(
            "{} mode={:o} size={} uid={} mtime={}.{} xattrs={:?} body={body}",
            p.display(),
            m.mode(),
            m.len(),
            m.uid(),
            m.mtime(),
            m.mtime_nsec(),
            xattrs
        ));
        if m.is_dir() {
            for e in std::fs::read_dir(&p).unwrap().flatten() {
                stack.push(e.path());
            }
        }
    }
    out.sort();
    out
}

/// The audit lines of decisions that match.
pub fn decisions<'a>(lines: &'a [Value], syscall: &str, decision: &str) -> Vec<&'a Value> {
    lines
        .iter()
        .filter(|l| {
            l["event"] == "decision" && l["syscall"] == syscall && l["decision"] == decision
        })
        .collect()
}
