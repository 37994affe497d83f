//! etcd, kube-apiserver and kube-controller-manager on free loopback ports.
//!
//! Authorization is RBAC; the admin authenticates with a static token (group system:masters);
//! service-account tokens are signed with a key generated per run; the serving certificate comes
//! from a CA generated per run, which the kubeconfig carries.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ServiceAccount;
use kube::runtime::wait::await_condition;
use kube::{Api, Client, Config};

use super::binaries::Binaries;
use super::error::{Error, Result};
use super::kubeconfig;
use super::kubectl::Kubectl;
use super::pki::{self, ADMIN_USER, CONTROLLER_MANAGER_USER, Pki};
use super::ports::free_port;
use super::process::{Process, ProcessSpec, tail};
use super::rundir::RunDir;

/// How long each piece may take to come up on a busy 2-core machine.
const START_TIMEOUT: Duration = Duration::from_secs(120);
/// How many times a process that lost its port to someone else is started again.
const PORT_ATTEMPTS: usize = 3;
/// Lines of a log shown when a process fails.
const TAIL_LINES: usize = 30;

/// A running control plane. Dropping it kills every process; [`ControlPlane::shutdown`] stops
/// them gracefully.
pub struct ControlPlane {
    // Field order is drop order: processes die before their folder goes.
    processes: Vec<Process>,
    audit_log: PathBuf,
    binaries: Binaries,
    pki: Pki,
    server: String,
    apiserver_port: u16,
    kubeconfig: PathBuf,
    config: Config,
    client: Client,
    run_dir: RunDir,
}

/// What a successful start made.
struct Parts {
    processes: Vec<Process>,
    audit_log: PathBuf,
    pki: Pki,
    server: String,
    apiserver_port: u16,
    kubeconfig: PathBuf,
    config: Config,
    client: Client,
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver and kube-controller-manager with their files in `run_dir`,
    /// and waits until the API server is ready and the `default` ServiceAccount exists. When
    /// that fails, the processes are killed and the run's folder is kept for its logs.
    pub async fn start(binaries: Binaries, mut run_dir: RunDir) -> Result<Self> {
        match Self::start_in(&binaries, &run_dir).await {
            Ok(parts) => Ok(Self {
                processes: parts.processes,
                audit_log: parts.audit_log,
                binaries,
                pki: parts.pki,
                server: parts.server,
                apiserver_port: parts.apiserver_port,
                kubeconfig: parts.kubeconfig,
                config: parts.config,
                client: parts.client,
                run_dir,
            }),
            Err(e) => {
                run_dir.keep();
                Err(e)
            }
        }
    }

    async fn start_in(binaries: &Binaries, run_dir: &RunDir) -> Result<Parts> {
        let pki = Pki::generate(&run_dir.sub("pki")?)?;
        let logs = run_dir.sub("logs")?;

        let (etcd, etcd_port) = start_etcd(binaries, run_dir, &logs).await?;
        let mut processes = vec![etcd];

        let audit_log = logs.join("audit.log");
        let audit = Audit {
            policy: write_audit_policy(run_dir)?,
            log: audit_log.clone(),
        };
        let (apiserver, apiserver_port) =
            start_apiserver(binaries, &pki, &audit, etcd_port, &logs).await?;
        processes.push(apiserver);
        let server = format!("https://127.0.0.1:{apiserver_port}");

        let kubeconfig = run_dir.path().join("kubeconfig");
        kubeconfig::write(
            &kubeconfig,
            &server,
            &pki.ca_pem,
            ADMIN_USER,
            &pki.admin_token,
        )?;
        let kcm_kubeconfig = run_dir.path().join("kube-controller-manager.kubeconfig");
        kubeconfig::write(
            &kcm_kubeconfig,
            &server,
            &pki.ca_pem,
            CONTROLLER_MANAGER_USER,
            &pki.controller_manager_token,
        )?;
        let config = kubeconfig::load_config(&kubeconfig).await?;
        let client = Client::try_from(config.clone()).map_err(Error::kube("the admin client"))?;
        let apiserver = processes.last_mut().expect("the API server was just added");
        wait_ready(&client, apiserver, apiserver_port).await?;

        let kcm = start_controller_manager(binaries, &pki, &kcm_kubeconfig, &logs).await?;
        processes.push(kcm);
        let kcm = processes
            .last_mut()
            .expect("the controller manager was just added");
        wait_default_service_account(&client, kcm).await?;

        Ok(Parts {
            processes,
            audit_log,
            pki,
            server,
            apiserver_port,
            kubeconfig,
            config,
            client,
        })
    }

    /// An admin client (group system:masters).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The admin client's configuration, to derive other identities from.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A client that authenticates with `token` (a ServiceAccount's, say).
    pub fn client_with_token(&self, token: &str) -> Result<Client> {
        Client::try_from(kubeconfig::with_token(&self.config, token))
            .map_err(Error::kube("a client with a bearer token"))
    }

    /// The control plane's processes by name (etcd, kube-apiserver, ...) and their pids, for
    /// a bench that accounts for their CPU time.
    pub fn pids(&self) -> Vec<(&str, u32)> {
        self.processes.iter().map(|p| (p.name(), p.pid())).collect()
    }

    /// The API server's audit log: one JSON event per line for every write (create, update,
    /// patch, delete), with the user, verb and object.
    pub fn audit_log(&self) -> &Path {
        &self.audit_log
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The API server's URL, `https://127.0.0.1:<port>`.
    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn apiserver_port(&self) -> u16 {
        self.apiserver_port
    }

    /// The CA certificate (PEM) that signed the API server's serving certificate.
    pub fn ca_pem(&self) -> &str {
        &self.pki.ca_pem
    }

    /// The admin's bearer token.
    pub fn admin_token(&self) -> &str {
        &self.pki.admin_token
    }

    /// The folder of upstream binaries in use.
    pub fn binaries(&self) -> &Binaries {
        &self.binaries
    }

    /// kubectl against this control plane, as the admin.
    pub fn kubectl(&self) -> Kubectl {
        Kubectl::new(self.binaries.path("kubectl"), self.kubeconfig.clone())
    }

    /// The run's folder (logs are in `logs/`).
    pub fn run_dir(&self) -> &RunDir {
        &self.run_dir
    }

    /// Keep the run's folder after the control plane stops.
    pub fn keep_run_dir(&mut self) {
        self.run_dir.keep();
    }

    /// Stops the controller manager, the API server, then etcd, each gracefully for a moment.
    pub async fn shutdown(mut self) {
        while let Some(mut process) = self.processes.pop() {
            process.stop(Duration::from_secs(3)).await;
        }
    }
}

async fn start_etcd(binaries: &Binaries, run_dir: &RunDir, logs: &Path) -> Result<(Process, u16)> {
    let data = run_dir.sub("etcd")?;
    // etcd wants its data folder private.
    std::fs::set_permissions(&data, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .map_err(Error::io("making etcd's folder private", &data))?;
    let mut last = None;
    for _ in 0..PORT_ATTEMPTS {
        let (client_port, peer_port) = (free_port()?, free_port()?);
        let client_url = format!("http://127.0.0.1:{client_port}");
        let peer_url = format!("http://127.0.0.1:{peer_port}");
        let spec = ProcessSpec::new("etcd", binaries.path("etcd"), logs.join("etcd.log")).args([
            "--name=devcluster".to_string(),
            format!("--data-dir={}", data.display()),
            format!("--listen-client-urls={client_url}"),
            format!("--advertise-client-urls={client_url}"),
            format!("--listen-peer-urls={peer_url}"),
            format!("--initial-advertise-peer-urls={peer_url}"),
            format!("--initial-cluster=devcluster={peer_url}"),
            "--unsafe-no-fsync=true".to_string(),
            "--log-level=warn".to_string(),
        ]);
        let mut etcd = Process::spawn(&spec).await?;
        match wait_tcp(&mut etcd, "etcd", client_port).await {
            Ok(()) => return Ok((etcd, client_port)),
            Err(e) if lost_port(&e) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.expect("at least one attempt"))
}

/// The API server's audit policy and log.
struct Audit {
    policy: PathBuf,
    log: PathBuf,
}

/// Every write (not get, list or watch), at Metadata level: who did what to which object.
const AUDIT_POLICY: &str = "\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
- level: None
  verbs: [get, list, watch]
- level: Metadata
";

fn write_audit_policy(run_dir: &RunDir) -> Result<PathBuf> {
    let path = run_dir.path().join("audit-policy.yaml");
    std::fs::write(&path, AUDIT_POLICY).map_err(Error::io("writing the audit policy", &path))?;
    Ok(path)
}

async fn start_apiserver(
    binaries: &Binaries,
    pki: &Pki,
    audit: &Audit,
    etcd_port: u16,
    logs: &Path,
) -> Result<(Process, u16)> {
    let mut last = None;
    for _ in 0..PORT_ATTEMPTS {
        let port = free_port()?;
        let spec = ProcessSpec::new(
            "kube-apiserver",
            binaries.path("kube-apiserver"),
            logs.join("kube-apiserver.log"),
        )
        .args([
            format!("--etcd-servers=http://127.0.0.1:{etcd_port}"),
            "--bind-address=127.0.0.1".to_string(),
            "--advertise-address=127.0.0.1".to_string(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", pki.serving_cert.display()),
            format!("--tls-private-key-file={}", pki.serving_key.display()),
            format!("--client-ca-file={}", pki.ca_cert.display()),
            format!("--token-auth-file={}", pki.tokens.display()),
            "--authorization-mode=RBAC".to_string(),
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local".to_string(),
            format!("--service-account-key-file={}", pki.sa_pub.display()),
            format!(
                "--service-account-signing-key-file={}",
                pki.sa_key.display()
            ),
            format!("--service-cluster-ip-range={}", pki::SERVICE_RANGE),
            "--allow-privileged=true".to_string(),
            "--endpoint-reconciler-type=none".to_string(),
            format!("--audit-policy-file={}", audit.policy.display()),
            format!("--audit-log-path={}", audit.log.display()),
            "--audit-log-format=json".to_string(),
            // No rotation (the apiserver's default rotates at 100 MB): the benches read the
            // writes of a phase from one file, and the run's folder is temporary.
            "--audit-log-maxsize=1000000".to_string(),
            "--v=1".to_string(),
        ]);
        let mut apiserver = Process::spawn(&spec).await?;
        match wait_tcp(&mut apiserver, "kube-apiserver", port).await {
            Ok(()) => return Ok((apiserver, port)),
            Err(e) if lost_port(&e) => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.expect("at least one attempt"))
}

async fn start_controller_manager(
    binaries: &Binaries,
    pki: &Pki,
    kubeconfig: &Path,
    logs: &Path,
) -> Result<Process> {
    let spec = ProcessSpec::new(
        "kube-controller-manager",
        binaries.path("kube-controller-manager"),
        logs.join("kube-controller-manager.log"),
    )
    .args([
        format!("--kubeconfig={}", kubeconfig.display()),
        "--secure-port=0".to_string(),
        "--leader-elect=false".to_string(),
        "--controllers=*".to_string(),
        "--use-service-account-credentials=true".to_string(),
        format!("--root-ca-file={}", pki.ca_cert.display()),
        format!(
            "--service-account-private-key-file={}",
            pki.sa_key.display()
        ),
        format!("--cluster-signing-cert-file={}", pki.ca_cert.display()),
        format!("--cluster-signing-key-file={}", pki.ca_key.display()),
        // The binder makes three writes per claim: at the default limit, binding a bench's
        // thousands of claims took minutes and was the slowest thing on the machine.
        "--kube-api-qps=1000".to_string(),
        "--kube-api-burst=2000".to_string(),
        "--v=1".to_string(),
    ]);
    Process::spawn(&spec).await
}

/// Waits until `port` accepts TCP, failing early when the process ends.
async fn wait_tcp(process: &mut Process, binary: &'static str, port: u16) -> Result<()> {
    let started = Instant::now();
    loop {
        if let Some(status) = process.try_wait() {
            return Err(exited(process, binary, port, status.to_string()));
        }
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return Ok(());
        }
        if started.elapsed() > START_TIMEOUT {
            return Err(not_ready(
                process,
                binary,
                port,
                started,
                "the port never accepted".into(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until GET /readyz answers `ok`.
async fn wait_ready(client: &Client, apiserver: &mut Process, port: u16) -> Result<()> {
    let started = Instant::now();
    let mut last_error;
    loop {
        if let Some(status) = apiserver.try_wait() {
            return Err(exited(
                apiserver,
                "kube-apiserver",
                port,
                status.to_string(),
            ));
        }
        let request = http::Request::get("/readyz")
            .body(Vec::new())
            .expect("a static request builds");
        match client.request_text(request).await {
            Ok(body) if body.trim() == "ok" => return Ok(()),
            Ok(body) => last_error = body,
            Err(e) => last_error = e.to_string(),
        }
        if started.elapsed() > START_TIMEOUT {
            return Err(not_ready(
                apiserver,
                "kube-apiserver",
                port,
                started,
                last_error,
            ));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Waits (by watch) until the ServiceAccount controller has made `default/default`.
async fn wait_default_service_account(client: &Client, kcm: &mut Process) -> Result<()> {
    let started = Instant::now();
    let api: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
    let watch = await_condition(api, "default", |sa: Option<&ServiceAccount>| sa.is_some());
    let outcome = tokio::select! {
        found = tokio::time::timeout(START_TIMEOUT, watch) => Ok(found),
        status = kcm.wait() => Err(status.map(|s| s.to_string()).unwrap_or_else(|e| e.to_string())),
    };
    let found = match outcome {
        Ok(found) => found,
        Err(status) => return Err(exited(kcm, "kube-controller-manager", 0, status)),
    };
    match found {
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => Err(not_ready(
            kcm,
            "kube-controller-manager",
            0,
            started,
            e.to_string(),
        )),
        Err(_) => Err(not_ready(
            kcm,
            "kube-controller-manager",
            0,
            started,
            "the default ServiceAccount never appeared in namespace default".into(),
        )),
    }
}

fn exited(process: &Process, binary: &'static str, port: u16, status: String) -> Error {
    Error::Exited {
        binary,
        port,
        status,
        log: process.log().to_path_buf(),
        tail: tail(process.log(), TAIL_LINES),
    }
}

fn not_ready(
    process: &Process,
    binary: &'static str,
    port: u16,
    started: Instant,
    last_error: String,
) -> Error {
    Error::NotReady {
        binary,
        port,
        waited: started.elapsed(),
        last_error,
        log: process.log().to_path_buf(),
        tail: tail(process.log(), TAIL_LINES),
    }
}

fn lost_port(error: &Error) -> bool {
    matches!(error, Error::Exited { tail, .. } if tail.contains("address already in use"))
}
