//! What `loop-plugins dev` runs beside the cluster: our own binary's roles (the API server, the
//! controller) as child processes, each with the admin kubeconfig and its log in the run's
//! `logs/` folder. This is the one place to add or change them.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::ports::free_port;
use super::process::{Process, ProcessSpec, tail};
use super::{DevCluster, Result};

/// The running components; [`Components::stop`] ends them.
pub struct Components {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
    /// Where plugin pods reach the Plugin API.
    pub api_url: String,
}

/// One of our binary's roles, as a child process.
fn role(
    name: &str,
    program: &Path,
    kubeconfig: &Path,
    logs: &Path,
    args: Vec<String>,
) -> ProcessSpec {
    let mut spec = ProcessSpec::new(name, program, logs.join(format!("{name}.log")));
    spec.env
        .push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
    spec.args = args;
    spec
}

/// Starts the API server and the controller from `program` (our binary); `self_image` is our
/// image pinned by digest, as pushed to the dev registry (the stand-in plays it with
/// `program`).
pub async fn start(cluster: &DevCluster, program: &Path, self_image: &str) -> Result<Components> {
    let kubeconfig = absolute(cluster.kubeconfig());
    let logs = absolute(&cluster.run_dir().join("logs"));
    let api_port = free_port()?;
    let api_url = format!("http://127.0.0.1:{api_port}");
    let specs = vec![
        role(
            "api",
            program,
            &kubeconfig,
            &logs,
            vec![
                "api".into(),
                format!("--listen=127.0.0.1:{api_port}"),
                format!("--metrics-addr=127.0.0.1:{}", free_port()?),
            ],
        ),
        role(
            "controller",
            program,
            &kubeconfig,
            &logs,
            vec![
                "controller".into(),
                format!("--self-image={self_image}"),
                format!("--api-url={api_url}"),
                format!("--metrics-addr=127.0.0.1:{}", free_port()?),
            ],
        ),
    ];
    let (stop, stopped) = watch::channel(false);
    let mut tasks = Vec::new();
    for spec in specs {
        let process = Process::spawn(&spec).await?;
        eprintln!("dev: started {} (log {})", spec.name, spec.log.display());
        tasks.push(tokio::spawn(watch_over(process, stopped.clone())));
    }
    Ok(Components {
        stop,
        tasks,
        api_url,
    })
}

impl Components {
    /// Stops every component (SIGTERM, then SIGKILL after a moment).
    pub async fn stop(self) {
        self.stop.send_replace(true);
        for task in self.tasks {
            let _ = task.await;
        }
    }
}

/// Waits for the process; says so when it ends on its own, stops it when asked.
async fn watch_over(mut process: Process, mut stop: watch::Receiver<bool>) {
    tokio::select! {
        status = process.wait() => {
            let status = status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string());
            eprintln!(
                "dev: {} exited with {status}; last lines of {}:\n{}",
                process.name(),
                process.log().display(),
                tail(process.log(), 20)
            );
        }
        _ = stop.changed() => {
            process.stop(Duration::from_secs(5)).await;
        }
    }
}

/// `path` made absolute against the current folder (as it is, when that fails).
pub(crate) fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}
