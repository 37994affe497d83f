//! Child processes that never outlive us.
//!
//! Each child runs in its own process group and gets `PR_SET_PDEATHSIG(SIGKILL)`. That signal
//! fires when the *thread* that spawned the child exits, not the process, so every child is
//! spawned from one thread that lives as long as the process. On top of that, dropping a
//! [`Process`] kills its whole group, and [`Process::stop`] ends it gracefully.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::Duration;

use tokio::sync::oneshot;

use super::error::{Error, Result};

/// What to start: a program, its arguments and environment, and where its output goes.
#[derive(Clone, Debug)]
pub struct ProcessSpec {
    /// A short name for messages: `etcd`, `pod ns/name container`.
    pub name: String,
    pub program: PathBuf,
    pub args: Vec<String>,
    /// The whole environment when `clear_env`, else added to ours.
    pub env: Vec<(String, String)>,
    pub clear_env: bool,
    pub cwd: Option<PathBuf>,
    /// stdout and stderr go to this file.
    pub log: PathBuf,
    /// Append to the log instead of truncating it.
    pub append_log: bool,
    /// Run as this uid and gid, with these supplementary groups (started as root).
    pub user: Option<(u32, u32, Vec<u32>)>,
}

impl ProcessSpec {
    /// A spec with our environment, logging to `log`.
    pub fn new(
        name: impl Into<String>,
        program: impl Into<PathBuf>,
        log: impl Into<PathBuf>,
    ) -> Self {
        Self {
            name: name.into(),
            program: program.into(),
            args: Vec::new(),
            env: Vec::new(),
            clear_env: false,
            cwd: None,
            log: log.into(),
            append_log: false,
            user: None,
        }
    }

    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }
}

/// A running child process, in its own process group.
#[derive(Debug)]
pub struct Process {
    name: String,
    log: PathBuf,
    child: tokio::process::Child,
    pid: u32,
}

impl Process {
    /// Starts the process from the long-lived spawner thread.
    pub async fn spawn(spec: &ProcessSpec) -> Result<Self> {
        let log = open_log(&spec.log, spec.append_log)
            .map_err(Error::io("opening a process log", &spec.log))?;
        let err = log
            .try_clone()
            .map_err(Error::io("opening a process log", &spec.log))?;
        let mut cmd = std::process::Command::new(&spec.program);
        cmd.args(&spec.args)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .process_group(0);
        if spec.clear_env {
            cmd.env_clear();
        }
        cmd.envs(spec.env.iter().map(|(k, v)| (k, v)));
        if let Some(cwd) = &spec.cwd {
            cmd.current_dir(cwd);
        }
        let parent = std::process::id() as libc::pid_t;
        let user = spec.user.clone();
        // SAFETY: prctl, getppid, setgroups, setgid, setuid and _exit are async-signal-safe;
        // nothing here allocates (the groups were collected before the fork).
        unsafe {
            cmd.pre_exec(move || {
                if let Some((uid, gid, groups)) = &user
                    && (libc::setgroups(groups.len(), groups.as_ptr()) != 0
                        || libc::setgid(*gid) != 0
                        || libc::setuid(*uid) != 0)
                {
                    return Err(std::io::Error::last_os_error());
                }
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
        let spawn_error = |source| Error::Spawn {
            binary: spec.name.clone(),
            program: spec.program.clone(),
            source,
        };
        let child = spawn_on_spawner_thread(cmd).await.map_err(spawn_error)?;
        let pid = child.id().unwrap_or_default();
        Ok(Self {
            name: spec.name.clone(),
            log: spec.log.clone(),
            child,
            pid,
        })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The file stdout and stderr go to.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// Waits for the process to end.
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    /// The exit status, if the process has ended.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// SIGTERM to the group, then SIGKILL after `grace`; waits until the process is reaped.
    pub async fn stop(&mut self, grace: Duration) -> Option<ExitStatus> {
        if let Some(status) = self.try_wait() {
            self.signal_group(libc::SIGKILL);
            return Some(status);
        }
        self.signal_group(libc::SIGTERM);
        if let Ok(Ok(status)) = tokio::time::timeout(grace, self.child.wait()).await {
            self.signal_group(libc::SIGKILL);
            return Some(status);
        }
        self.signal_group(libc::SIGKILL);
        self.child.wait().await.ok()
    }

    /// SIGKILL to the whole group, without waiting.
    pub fn kill(&mut self) {
        self.signal_group(libc::SIGKILL);
    }

    /// Signals the process group, while the leader is not reaped yet (so the id is still ours).
    fn signal_group(&mut self, signal: libc::c_int) {
        // `id()` turns None once the child is reaped; until then its pid (and group) cannot be reused.
        // A reaped leader may leave group members behind: the group id stays theirs until they end.
        let pgid = self.child.id().unwrap_or(self.pid) as libc::pid_t;
        if pgid > 0 {
            // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
            unsafe {
                libc::kill(-pgid, signal);
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}

/// The last `lines` lines of a log file, for error messages.
pub fn tail(path: &Path, lines: usize) -> String {
    const MAX: u64 = 64 * 1024;
    let Ok(mut file) = File::open(path) else {
        return String::from("(no log)");
    };
    let len = file.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = file.seek(SeekFrom::Start(len.saturating_sub(MAX)));
    let mut text = String::new();
    let mut bytes = Vec::new();
    if file.read_to_end(&mut bytes).is_ok() {
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

/// Whether any process of the group `pgid` still runs (zombies do not count).
pub fn group_running(pgid: libc::pid_t) -> bool {
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

fn open_log(path: &Path, append: bool) -> std::io::Result<File> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::OpenOptions::new()
        .create(true)
        .append(append)
        .write(true)
        .truncate(!append)
        .open(path)
}

struct SpawnRequest {
    cmd: std::process::Command,
    runtime: tokio::runtime::Handle,
    reply: oneshot::Sender<std::io::Result<tokio::process::Child>>,
}

/// Hands the command to the spawner thread and waits for the child.
async fn spawn_on_spawner_thread(
    cmd: std::process::Command,
) -> std::io::Result<tokio::process::Child> {
    let (reply, answer) = oneshot::channel();
    let request = SpawnRequest {
        cmd,
        runtime: tokio::runtime::Handle::current(),
        reply,
    };
    spawner()
        .send(request)
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    answer
        .await
        .map_err(|_| std::io::Error::other("the spawner thread dropped the request"))?
}

/// The thread every child is spawned from; it is never joined, so it lives as long as the process.
fn spawner() -> &'static mpsc::Sender<SpawnRequest> {
    static SPAWNER: OnceLock<mpsc::Sender<SpawnRequest>> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("devcluster-spawner".into())
            .spawn(move || {
                for request in rx {
                    let _runtime = request.runtime.enter();
                    let child = tokio::process::Command::from(request.cmd)
                        .kill_on_drop(true)
                        .spawn();
                    let _ = request.reply.send(child);
                }
            })
            .expect("the spawner thread starts");
        tx
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_stopped_process_and_its_group_are_gone() {
        let dir = std::env::temp_dir().join(format!("devcluster-process-{}", std::process::id()));
        let spec = ProcessSpec::new("sleeper", "/bin/sh", dir.join("log"))
            .args(["-c", "sleep 30 & echo started; wait"]);
        let mut process = Process::spawn(&spec).await.unwrap();
        let pid = process.pid() as libc::pid_t;
        // Wait until the shell has started its child.
        for _ in 0..100 {
            if tail(&dir.join("log"), 1).contains("started") {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let status = process.stop(Duration::from_secs(2)).await;
        assert!(status.is_some());
        // Killed members may linger as zombies until reaped; none may still run.
        for _ in 0..100 {
            if !group_running(pid) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert!(!group_running(pid), "the process group outlived stop()");
        let _ = std::fs::remove_dir_all(dir);
    }
}
