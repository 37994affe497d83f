//! Which cluster the suite runs against: the one switch, `LOOP_PLUGINS_E2E_CLUSTER`.
//!
//! - `local` (the default): the suite starts the local control plane (etcd, kube-apiserver,
//!   kube-controller-manager, the kubelet stand-in), and runs the controller and the API server
//!   as processes of its own under the chart's ServiceAccount and RBAC.
//! - `existing` (alias `kind`): a cluster from KUBECONFIG with the chart already installed
//!   (`make kind-e2e` on a machine with Docker, `make e2e-existing` on the local control
//!   plane). The chart's Deployment runs the controller and the API; the suite reaches the API
//!   at `LOOP_PLUGINS_E2E_API_URL` and restarts the controller by killing its Pod. Tests that
//!   read what only the local control plane has (its audit log, the stand-in's own behaviour,
//!   an API server process with working trees on this machine) are listed as ignored there,
//!   each with its reason.
//!
//! Everything else about the existing cluster comes from these variables, read once:
//!
//! | variable | meaning | default |
//! |---|---|---|
//! | `LOOP_PLUGINS_E2E_RELEASE` | the chart's release | `loop-plugins` |
//! | `LOOP_PLUGINS_E2E_RELEASE_NAMESPACE` | its namespace | `loop-plugins` |
//! | `LOOP_PLUGINS_E2E_REGISTRY` | a registry the cluster pulls from (`host:port`), where the suite pushes the plugin images it writes (see `support::images`) | a registry the run starts on 127.0.0.1 |
//! | `LOOP_PLUGINS_E2E_REGISTRY_MIRROR` | `<name>=<address>`: the cluster reaches the registry named `<name>` at `<address>` (HostConfig `plugins.registry.mirrors`) | none |
//! | `LOOP_PLUGINS_E2E_ECHO_BINARY` | the echo plugin's binary the images carry (static, for real containers) | the one built beside the tests |
//! | `LOOP_PLUGINS_E2E_API_URL` | `http://<ip>:<port>` of the API Service, from here | required |
//! | `LOOP_PLUGINS_E2E_PLUGIN_API_URL` | HostConfig `apiUrl` for plugin pods | the chart's |
//!
//! The release must be installed with `hostConfig.create=false` (the tests own the HostConfig)
//! and, with more than one replica, `service.sessionAffinity=ClientIP` (the breaker test needs
//! its calls to reach one API replica, which counts them; `make kind-e2e` installs two).

use std::net::SocketAddr;
use std::sync::OnceLock;

/// The variable that picks the cluster.
pub const CLUSTER_ENV: &str = "LOOP_PLUGINS_E2E_CLUSTER";

/// Where the suite runs.
#[derive(Clone, Debug)]
pub enum Target {
    /// The local control plane, started by the suite.
    Local,
    /// A cluster from KUBECONFIG with the chart installed.
    Existing(Existing),
}

/// An existing cluster and the chart's release on it.
#[derive(Clone, Debug)]
pub struct Existing {
    pub release: String,
    pub namespace: String,
    /// The API Service as the test process reaches it.
    pub api_addr: SocketAddr,
    /// HostConfig `apiUrl` for plugin pods (None: the chart's own).
    pub plugin_api_url: Option<String>,
    /// Whether Pods run as real containers whose logs `kubectl logs` reads (kind; not the
    /// kubelet stand-in of `make e2e-existing`).
    pub real_containers: bool,
}

impl Existing {
    /// The chart's name for the release's objects (`<release>-loop-plugins`).
    pub fn fullname(&self) -> String {
        if self.release.contains("loop-plugins") {
            self.release.clone()
        } else {
            format!("{}-loop-plugins", self.release)
        }
    }

    /// The Lease the controller replicas elect their leader on.
    pub fn lease(&self) -> String {
        format!("{}-controller", self.fullname())
    }

    /// The Lease the API replicas elect the one that does the fan-out on.
    pub fn fanout_lease(&self) -> String {
        format!("{}-api", self.fullname())
    }
}

/// Why the environment names no usable target.
#[derive(Debug, thiserror::Error)]
pub enum TargetError {
    #[error("{CLUSTER_ENV}={0:?}: use `local` (the default) or `existing` (alias `kind`)")]
    UnknownCluster(String),
    #[error("{CLUSTER_ENV}={cluster} needs {variable}: {why}")]
    Missing {
        cluster: String,
        variable: &'static str,
        why: &'static str,
    },
    #[error("{variable}={value:?}: {why}")]
    Invalid {
        variable: &'static str,
        value: String,
        why: &'static str,
    },
}

static TARGET: OnceLock<Target> = OnceLock::new();

/// The run's target (read from the environment on first use).
pub fn target() -> &'static Target {
    TARGET.get_or_init(|| match from_env(|name| std::env::var(name).ok()) {
        Ok(target) => target,
        Err(e) => panic!("{e}"),
    })
}

/// Reads the target, failing with the variable to fix.
pub fn try_target() -> Result<&'static Target, TargetError> {
    if let Some(target) = TARGET.get() {
        return Ok(target);
    }
    let target = from_env(|name| std::env::var(name).ok())?;
    Ok(TARGET.get_or_init(|| target))
}

/// The target the variables `var` gives name.
pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Result<Target, TargetError> {
    let cluster = var(CLUSTER_ENV).unwrap_or_default();
    match cluster.as_str() {
        "" | "local" => Ok(Target::Local),
        "existing" | "kind" => {
            let required = |variable: &'static str, why: &'static str| {
                var(variable)
                    .filter(|v| !v.is_empty())
                    .ok_or_else(|| TargetError::Missing {
                        cluster: cluster.clone(),
                        variable,
                        why,
                    })
            };
            required("KUBECONFIG", "the cluster's kubeconfig file")?;
            let api_url = required(
                "LOOP_PLUGINS_E2E_API_URL",
                "http://<ip>:<port> of the chart's API Service as this machine reaches it",
            )?;
            let api_addr = parse_addr(&api_url).ok_or_else(|| TargetError::Invalid {
                variable: "LOOP_PLUGINS_E2E_API_URL",
                value: api_url.clone(),
                why: "expected http://<ip>:<port>",
            })?;
            Ok(Target::Existing(Existing {
                release: var("LOOP_PLUGINS_E2E_RELEASE")
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| "loop-plugins".into()),
                namespace: var("LOOP_PLUGINS_E2E_RELEASE_NAMESPACE")
                    .filter(|v| !v.is_empty())
                    .unwrap_or_else(|| "loop-plugins".into()),
                api_addr,
                plugin_api_url: var("LOOP_PLUGINS_E2E_PLUGIN_API_URL").filter(|v| !v.is_empty()),
                real_containers: cluster == "kind",
            }))
        }
        other => Err(TargetError::UnknownCluster(other.to_string())),
    }
}

/// `http://<ip>:<port>[/]` as a socket address.
fn parse_addr(url: &str) -> Option<SocketAddr> {
    url.strip_prefix("http://")?
        .trim_end_matches('/')
        .parse()
        .ok()
}

/// The target's own tests: they need no cluster, so they run first in every run.
pub fn self_check() -> anyhow::Result<()> {
    use anyhow::ensure;
    let vars = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    };
    ensure!(matches!(from_env(vars(&[])), Ok(Target::Local)));
    ensure!(matches!(
        from_env(vars(&[(CLUSTER_ENV, "local")])),
        Ok(Target::Local)
    ));
    let unknown = from_env(vars(&[(CLUSTER_ENV, "minikube")])).unwrap_err();
    ensure!(
        unknown.to_string().contains("existing"),
        "{unknown} names the choices"
    );
    let missing = from_env(vars(&[(CLUSTER_ENV, "kind")])).unwrap_err();
    ensure!(missing.to_string().contains("KUBECONFIG"), "{missing}");
    let no_api = from_env(vars(&[(CLUSTER_ENV, "kind"), ("KUBECONFIG", "/k")])).unwrap_err();
    ensure!(
        no_api.to_string().contains("LOOP_PLUGINS_E2E_API_URL"),
        "{no_api}"
    );
    let bad_url = from_env(vars(&[
        (CLUSTER_ENV, "existing"),
        ("KUBECONFIG", "/k"),
        ("LOOP_PLUGINS_E2E_API_URL", "https://api.example:443"),
    ]))
    .unwrap_err();
    ensure!(
        bad_url.to_string().contains("http://<ip>:<port>"),
        "{bad_url}"
    );
    let Target::Existing(existing) = from_env(vars(&[
        (CLUSTER_ENV, "kind"),
        ("KUBECONFIG", "/k"),
        ("LOOP_PLUGINS_E2E_API_URL", "http://127.0.0.1:30080/"),
    ]))?
    else {
        anyhow::bail!("kind is an existing cluster");
    };
    ensure!(existing.api_addr == SocketAddr::from(([127, 0, 0, 1], 30080)));
    ensure!(existing.fullname() == "loop-plugins");
    ensure!(existing.lease() == "loop-plugins-controller");
    ensure!(existing.plugin_api_url.is_none());
    ensure!(existing.real_containers, "kind runs real containers");
    let other = Existing {
        release: "e2e".into(),
        ..existing
    };
    ensure!(other.fullname() == "e2e-loop-plugins");
    Ok(())
}
