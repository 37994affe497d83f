//! One container as a local process: started, probed for readiness, restarted by the Pod's
//! policy, stopped when asked. It tells the Pod's worker what happened through [`Event`]s.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use tokio::sync::{mpsc, watch};

use super::status::{Ended, RestartPolicy};
use crate::process::{Process, ProcessSpec};

/// How long a stopped container gets between SIGTERM and SIGKILL, at most.
pub const MAX_GRACE: Duration = Duration::from_secs(3);
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(20);

/// Everything needed to run a container.
#[derive(Clone, Debug)]
pub struct ContainerRun {
    pub name: String,
    pub program: PathBuf,
    pub argv: Vec<String>,
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    pub log: PathBuf,
    /// Where readiness is checked (TCP accept); None: ready once started.
    pub probe: Option<SocketAddr>,
    /// When the process runs again after it exits.
    pub restart: RestartPolicy,
    pub grace: Duration,
    /// Who the process runs as (None: as the stand-in does).
    pub user: Option<(u32, u32, Vec<u32>)>,
    /// The file the container's `terminationMessagePath` stands for: read when it exits.
    pub termination_log: Option<PathBuf>,
}

/// The most of a termination message a kubelet keeps.
pub const MAX_TERMINATION_MESSAGE: u64 = 4096;

/// The termination message the process left, as a kubelet reads it: at most 4096 bytes.
fn termination_message(path: Option<&PathBuf>) -> Option<String> {
    use std::io::Read;
    let file = std::fs::File::open(path?).ok()?;
    let mut bytes = Vec::new();
    file.take(MAX_TERMINATION_MESSAGE)
        .read_to_end(&mut bytes)
        .ok()?;
    (!bytes.is_empty()).then(|| String::from_utf8_lossy(&bytes).into_owned())
}

/// What happened to a container.
#[derive(Clone, Debug)]
pub enum Event {
    Started {
        name: String,
        pid: u32,
        at: Timestamp,
    },
    Ready {
        name: String,
    },
    Exited {
        name: String,
        ended: Ended,
        restarting: bool,
    },
}

/// The process groups running now, so they can be killed at once when the stand-in stops.
#[derive(Clone, Debug, Default)]
pub struct Running(Arc<Mutex<BTreeSet<u32>>>);

impl Running {
    fn add(&self, pid: u32) {
        self.0.lock().expect("never poisoned").insert(pid);
    }

    fn remove(&self, pid: u32) {
        self.0.lock().expect("never poisoned").remove(&pid);
    }

    /// SIGKILL to every group still running.
    pub fn kill_all(&self) {
        for pid in std::mem::take(&mut *self.0.lock().expect("never poisoned")) {
            // SAFETY: kill(2) on a process group we started and have not seen reaped.
            unsafe {
                libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
            }
        }
    }
}

/// Runs the container until it ends for good or `stop` turns true.
pub async fn supervise(
    run: ContainerRun,
    events: mpsc::Sender<Event>,
    mut stop: watch::Receiver<bool>,
    running: Running,
) {
    let mut backoff = FIRST_BACKOFF;
    let mut first = true;
    loop {
        let mut spec = ProcessSpec::new(format!("container {}", run.name), &run.program, &run.log);
        spec.args = run.argv.clone();
        spec.env = run.env.clone();
        spec.clear_env = true;
        spec.cwd = Some(run.cwd.clone());
        spec.user = run.user.clone();
        spec.append_log = !first;
        first = false;
        let started_at = Timestamp::now();
        let outcome = match Process::spawn(&spec).await {
            Ok(mut process) => {
                running.add(process.pid());
                let _ = events
                    .send(Event::Started {
                        name: run.name.clone(),
                        pid: process.pid(),
                        at: started_at,
                    })
                    .await;
                let outcome = watch_process(&run, &mut process, &events, &mut stop).await;
                running.remove(process.pid());
                outcome
            }
            Err(e) => {
                append_to_log(&run.log, &format!("devkubelet: {e}\n"));
                Outcome::Exited(127, None)
            }
        };
        let (code, signal) = match outcome {
            Outcome::Stopped => return,
            Outcome::Exited(code, signal) => (code, signal),
        };
        let restarting = run.restart.restarts(code) && !*stop.borrow();
        let ended = Ended {
            exit_code: code,
            signal,
            started_at,
            finished_at: Timestamp::now(),
            message: termination_message(run.termination_log.as_ref()),
        };
        let _ = events
            .send(Event::Exited {
                name: run.name.clone(),
                ended,
                restarting,
            })
            .await;
        if !restarting {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop.changed() => return,
        }
        backoff = (backoff * 2).min(MAX_BACKOFF);
    }
}

enum Outcome {
    Stopped,
    Exited(i32, Option<i32>),
}

async fn watch_process(
    run: &ContainerRun,
    process: &mut Process,
    events: &mpsc::Sender<Event>,
    stop: &mut watch::Receiver<bool>,
) -> Outcome {
    let probe = readiness(run.probe);
    tokio::pin!(probe);
    let mut ready = false;
    loop {
        tokio::select! {
            status = process.wait() => {
                // Whatever the leader left behind in its group goes with it.
                process.kill();
                return match status {
                    Ok(status) => {
                        use std::os::unix::process::ExitStatusExt;
                        let signal = status.signal();
                        Outcome::Exited(status.code().unwrap_or(128 + signal.unwrap_or(0)), signal)
                    }
                    Err(_) => Outcome::Exited(128, None),
                };
            }
            () = &mut probe, if !ready => {
                ready = true;
                let _ = events.send(Event::Ready { name: run.name.clone() }).await;
            }
            _ = stop.changed() => {
                process.stop(run.grace.min(MAX_GRACE)).await;
                return Outcome::Stopped;
            }
        }
    }
}

/// Completes once `addr` accepts a TCP connection (at once when there is nothing to probe).
async fn readiness(addr: Option<SocketAddr>) {
    let Some(addr) = addr else { return };
    loop {
        let attempt =
            tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(addr))
                .await;
        if let Ok(Ok(_)) = attempt {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn append_to_log(path: &std::path::Path, line: &str) {
    use std::io::Write;
    if let Some(dir) = path.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(mut file) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let _ = file.write_all(line.as_bytes());
    }
}
