//! The controller and the API server as processes of the run (the release binary, each under
//! its own identity, its log appended to across restarts), and the counters of their /metrics.

use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure};
use devcluster::process::{Process, ProcessSpec, tail};

use super::world::{CONTROLLER_LEASE, FANOUT_LEASE, SYSTEM_NAMESPACE};

/// A free port on loopback.
pub fn free_port() -> anyhow::Result<u16> {
    Ok(devcluster::free_port()?)
}

/// A process of ours and where its /healthz and /metrics answer.
pub struct Role {
    pub process: Process,
    /// The holderIdentity it elects with.
    pub identity: String,
    pub metrics: SocketAddr,
    /// The API server's address (the metrics address for the controller).
    pub listen: SocketAddr,
    spec: ProcessSpec,
}

impl Role {
    pub fn pid(&self) -> u32 {
        self.process.pid()
    }

    /// SIGKILL, and wait until it is gone.
    pub async fn kill(&mut self) {
        self.process.kill();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.process.wait()).await;
    }

    /// Starts it again as it was started, its log appended to; resolves once /healthz answers.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.process = Process::spawn(&self.spec).await?;
        wait_healthy(&mut self.process, self.metrics).await
    }

    /// Starts it again as a new replica would come up: under a new holder identity (as a
    /// replaced Pod has a new name), so a Lease it held is not simply renewed by the same
    /// identity but taken over after it runs out.
    pub async fn restart_as_new_replica(&mut self) -> anyhow::Result<()> {
        static GENERATION: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(1);
        let generation = GENERATION.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let base = self.identity.split('.').next().unwrap_or_default();
        let identity = format!("{base}.{generation}");
        for arg in &mut self.spec.args {
            if arg.starts_with("--leader-identity=") {
                *arg = format!("--leader-identity={identity}");
            }
        }
        self.identity = identity;
        self.restart().await
    }

    /// Whether it still runs.
    pub fn running(&mut self) -> bool {
        self.process.try_wait().is_none()
    }

    /// Fails when it exited.
    pub fn check_running(&mut self) -> anyhow::Result<()> {
        if let Some(status) = self.process.try_wait() {
            bail!(
                "{} exited with {status}:\n{}",
                self.process.name(),
                tail(self.process.log(), 30)
            );
        }
        Ok(())
    }
}

fn spec_for(
    name: &str,
    binary: &Path,
    kubeconfig: &Path,
    log: PathBuf,
    args: Vec<String>,
) -> ProcessSpec {
    let mut spec = ProcessSpec::new(name, binary, log).args(args);
    spec.append_log = true;
    spec.env
        .push(("KUBECONFIG".into(), kubeconfig.display().to_string()));
    // As the chart deploys them.
    spec.env.push((
        "RUST_LOG".into(),
        std::env::var("SCALE_RUST_LOG").unwrap_or_else(|_| "info,kube=warn".into()),
    ));
    spec.env.push(("NO_COLOR".into(), "1".into()));
    spec
}

/// Starts `loop-plugins controller` as the controller's identity, `self_image` its own image;
/// with `leader`, it elects on the chart's Lease as `identity`. `extra` goes on its command
/// line.
pub async fn start_controller(
    kubeconfig: &Path,
    run_dir: &Path,
    identity: &str,
    self_image: &str,
    api_url: &str,
    leader: bool,
    extra: &[String],
) -> anyhow::Result<Role> {
    let metrics = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()?));
    let mut args = vec![
        "controller".to_string(),
        format!("--self-image={self_image}"),
        format!("--api-url={api_url}"),
        format!("--metrics-addr={metrics}"),
    ];
    if leader {
        args.extend([
            format!("--leader-election-namespace={SYSTEM_NAMESPACE}"),
            format!("--lease-name={CONTROLLER_LEASE}"),
            format!("--leader-identity={identity}"),
        ]);
    }
    args.extend(extra.iter().cloned());
    let spec = spec_for(
        identity,
        &testkit::binary(),
        kubeconfig,
        run_dir.join(format!("{identity}.log")),
        args,
    );
    let mut process = Process::spawn(&spec).await?;
    wait_healthy(&mut process, metrics).await?;
    Ok(Role {
        process,
        identity: identity.into(),
        metrics,
        listen: metrics,
        spec,
    })
}

/// Starts `loop-plugins api` as the API server's identity, electing the fan-out on the chart's
/// Lease as `identity`, counting runs with the replicas in the release namespace.
pub async fn start_api(kubeconfig: &Path, run_dir: &Path, identity: &str) -> anyhow::Result<Role> {
    let replicas = [
        format!("--replicas-namespace={SYSTEM_NAMESPACE}"),
        format!("--leader-election-namespace={SYSTEM_NAMESPACE}"),
        format!("--fanout-lease-name={FANOUT_LEASE}"),
        format!("--leader-identity={identity}"),
    ];
    start_api_with(kubeconfig, run_dir, identity, &replicas).await
}

/// Starts `loop-plugins api` alone: one replica that counts runs and does the fan-out itself
/// (no Lease, no release namespace), as `make bench` runs it.
pub async fn start_single_api(
    kubeconfig: &Path,
    run_dir: &Path,
    identity: &str,
) -> anyhow::Result<Role> {
    start_api_with(kubeconfig, run_dir, identity, &[]).await
}

async fn start_api_with(
    kubeconfig: &Path,
    run_dir: &Path,
    identity: &str,
    extra: &[String],
) -> anyhow::Result<Role> {
    let listen = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()?));
    let metrics = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()?));
    let mut args = vec![
        "api".to_string(),
        format!("--listen={listen}"),
        format!("--metrics-addr={metrics}"),
    ];
    args.extend(extra.iter().cloned());
    let spec = spec_for(
        identity,
        &testkit::binary(),
        kubeconfig,
        run_dir.join(format!("{identity}.log")),
        args,
    );
    let mut process = Process::spawn(&spec).await?;
    wait_healthy(&mut process, metrics).await?;
    Ok(Role {
        process,
        identity: identity.into(),
        metrics,
        listen,
        spec,
    })
}

/// Waits until `GET /healthz` at `addr` answers 200, failing when the process exits.
async fn wait_healthy(process: &mut Process, addr: SocketAddr) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_secs(120);
    let url = format!("http://{addr}/healthz");
    let http = super::load::http_client()?;
    loop {
        if let Some(status) = process.try_wait() {
            bail!(
                "{} exited with {status}:\n{}",
                process.name(),
                tail(process.log(), 30)
            );
        }
        if let Ok(answer) = http.get(&url).send().await
            && answer.status().is_success()
        {
            return Ok(());
        }
        ensure!(
            Instant::now() < deadline,
            "{} did not answer /healthz within 120 s:\n{}",
            process.name(),
            tail(process.log(), 30)
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The sum of the counter `name` (a prometheus text line per label set) at `addr`'s /metrics,
/// over the series whose labels contain `labels`.
pub async fn counter(addr: SocketAddr, name: &str, labels: &str) -> anyhow::Result<f64> {
    let http = super::load::http_client()?;
    let text = http
        .get(format!("http://{addr}/metrics"))
        .send()
        .await?
        .text()
        .await?;
    Ok(sum_counter(&text, name, labels))
}

/// The pure part of [`counter`].
pub fn sum_counter(text: &str, name: &str, labels: &str) -> f64 {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            let (metric, rest) = series.split_once('{').unwrap_or((series, ""));
            (metric == name && rest.contains(labels)).then(|| value.parse::<f64>().ok())?
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_sum_over_the_matching_series() {
        let text = "# HELP x\n\
            loop_plugins_controller_reconciles_total{controller=\"chat\"} 12\n\
            loop_plugins_controller_reconciles_total{controller=\"instance\"} 30\n\
            loop_plugins_controller_writes_total{kind=\"Pod\",verb=\"create\"} 2\n";
        let name = "loop_plugins_controller_reconciles_total";
        assert_eq!(sum_counter(text, name, ""), 42.0);
        assert_eq!(sum_counter(text, name, "controller=\"chat\""), 12.0);
        assert_eq!(sum_counter(text, "nothing", ""), 0.0);
    }
}
