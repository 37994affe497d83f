//! Chromium's process: a group of its own that never outlives us. The child gets
//! `PR_SET_PDEATHSIG(SIGKILL)`, which fires when the *thread* that spawned it ends, so every
//! browser is spawned from one thread that lives as long as the process; dropping the
//! [`Group`] kills the whole group (Chromium's renderers with it).
//!
//! devcluster's `process` does the same for the test control plane; it is test tooling,
//! never shipped, and `loop-plugins conformance` ships this crate, so the few lines it needs
//! are its own.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock, mpsc};
use std::time::{Duration, Instant};

/// A running program in its own process group, killed (group and all) when dropped.
pub(crate) struct Group {
    child: Child,
    pgid: libc::pid_t,
}

type Spawn = (Command, mpsc::Sender<std::io::Result<Child>>);

impl Group {
    /// Starts `program` with `args`, stdout and stderr to `log`.
    pub(crate) fn spawn(program: &Path, args: &[String], log: &Path) -> std::io::Result<Group> {
        if let Some(dir) = log.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let out = File::create(log)?;
        let err = out.try_clone()?;
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0);
        let parent = std::process::id() as libc::pid_t;
        // SAFETY: prctl, getppid and _exit are async-signal-safe; nothing here allocates.
        unsafe {
            command.pre_exec(move || {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // We may have died between fork and prctl: then nobody would send the signal.
                if libc::getppid() != parent {
                    libc::_exit(1);
                }
                Ok(())
            });
        }
        let (answer, answered) = mpsc::channel();
        spawner()
            .lock()
            .expect("never poisoned")
            .send((command, answer))
            .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
        let child = answered
            .recv()
            .map_err(|_| std::io::Error::other("the spawner thread is gone"))??;
        let pgid = child.id() as libc::pid_t;
        Ok(Group { child, pgid })
    }

    /// Whether the program has ended.
    pub(crate) fn ended(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }
}

impl Drop for Group {
    /// SIGKILL to the group, and a wait (at most 5 s) until none of it runs, so whatever it
    /// wrote (a profile folder) can go.
    fn drop(&mut self) {
        // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
        unsafe {
            libc::kill(-self.pgid, libc::SIGKILL);
        }
        let _ = self.child.wait();
        let until = Instant::now() + Duration::from_secs(5);
        while group_running(self.pgid) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The one thread every browser is spawned from (see the module doc).
fn spawner() -> &'static Mutex<mpsc::Sender<Spawn>> {
    static SPAWNER: OnceLock<Mutex<mpsc::Sender<Spawn>>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (send, receive) = mpsc::channel::<Spawn>();
        std::thread::Builder::new()
            .name("browser-spawner".into())
            .spawn(move || {
                for (mut command, answer) in receive {
                    let _ = answer.send(command.spawn());
                }
            })
            .expect("a thread starts");
        Mutex::new(send)
    })
}

/// Whether any process of the group `pgid` still runs (zombies do not count).
fn group_running(pgid: libc::pid_t) -> bool {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return false;
    };
    entries.flatten().any(|entry| {
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            return false;
        };
        // pid (comm) state ppid pgrp ...: comm may hold spaces, so split after its last ')'.
        let Some((_, rest)) = stat.rsplit_once(')') else {
            return false;
        };
        let mut fields = rest.split_whitespace();
        let state = fields.next();
        let pgrp = fields.nth(1).and_then(|f| f.parse::<libc::pid_t>().ok());
        pgrp == Some(pgid) && state != Some("Z") && state != Some("X")
    })
}

/// The last `lines` lines of Chromium's log (a few kB at start), for error messages.
pub(crate) fn tail(path: &Path, lines: usize) -> String {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let mut last: Vec<&str> = text.lines().rev().take(lines).collect();
            last.reverse();
            last.join("\n")
        }
        Err(_) => "(no log)".into(),
    }
}
