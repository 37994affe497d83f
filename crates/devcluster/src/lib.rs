//! A real Kubernetes control plane for tests and `make dev`: etcd, kube-apiserver and
//! kube-controller-manager built from upstream (hack/controlplane/), started on free loopback
//! ports, plus a kubelet stand-in that runs Pods as local processes.
//!
//! ```no_run
//! # async fn demo() -> loop_plugins_devcluster::Result<()> {
//! use loop_plugins_devcluster::{DevCluster, DevClusterOptions, LocalImage};
//! let cluster = DevCluster::start(DevClusterOptions::default()).await?;
//! cluster.images().insert("example.com/web", LocalImage::new("python3").entrypoint_args(["-m", "http.server"]));
//! let client = cluster.client();
//! // ... create Pods whose image is example.com/web:<tag> or @sha256:<digest> ...
//! let log = cluster.pod_log("default", "web", "web");
//! cluster.shutdown().await;
//! # Ok(()) }
//! ```

pub mod binaries;
pub mod components;
pub mod controlplane;
pub mod demo_model;
pub mod dev;
pub mod dev_images;
mod error;
pub mod kubeconfig;
pub mod kubectl;
pub mod kubelet;
pub mod pki;
mod ports;
/// A loopback port nothing listens on right now, for tests and tools that start servers.
pub use ports::free_port;
pub mod process;
pub mod registry;
mod rundir;

use std::path::{Path, PathBuf};

use kube::Client;

pub use binaries::Binaries;
pub use controlplane::ControlPlane;
pub use error::{Error, Result};
pub use kubectl::Kubectl;
pub use kubelet::{ImageMap, Kubelet, KubeletConfig, LocalImage};
pub use rundir::RunDir;

/// How to start a dev cluster.
#[derive(Clone, Debug, Default)]
pub struct DevClusterOptions {
    /// The folder of upstream binaries; default: [`Binaries::locate`].
    pub binaries: Option<PathBuf>,
    /// The run's folder (emptied first, kept after); default: a temporary folder removed after.
    pub run_dir: Option<PathBuf>,
    /// Images and their local programs; more can be added while the cluster runs.
    pub images: ImageMap,
    /// The Node's name; default [`kubelet::DEFAULT_NODE`].
    pub node_name: Option<String>,
    /// Run containers as their `runAsUser` when we are root (see `KubeletConfig`).
    pub run_as_pod_users: bool,
}

/// A control plane and the kubelet stand-in, together.
pub struct DevCluster {
    // Drop order: the kubelet's processes go before the control plane's.
    kubelet: Kubelet,
    control_plane: ControlPlane,
}

impl DevCluster {
    /// Starts the control plane, then the kubelet stand-in.
    pub async fn start(options: DevClusterOptions) -> Result<Self> {
        let binaries = match options.binaries {
            Some(dir) => Binaries::at(dir)?,
            None => tokio::task::spawn_blocking(Binaries::locate)
                .await
                .map_err(|e| Error::Binaries(format!("locating the binaries: {e}")))??,
        };
        let run_dir = match &options.run_dir {
            Some(dir) => RunDir::at(dir)?,
            None => RunDir::temporary()?,
        };
        let kubelet_root = run_dir.sub("kubelet")?;
        let control_plane = ControlPlane::start(binaries, run_dir).await?;
        let config = KubeletConfig {
            node_name: options
                .node_name
                .unwrap_or_else(|| kubelet::DEFAULT_NODE.to_string()),
            root: kubelet_root,
            images: options.images,
            apiserver_port: control_plane.apiserver_port(),
            run_as_pod_users: options.run_as_pod_users,
        };
        let kubelet = Kubelet::start(control_plane.client(), config).await?;
        Ok(Self {
            kubelet,
            control_plane,
        })
    }

    /// An admin client.
    pub fn client(&self) -> Client {
        self.control_plane.client()
    }

    pub fn control_plane(&self) -> &ControlPlane {
        &self.control_plane
    }

    pub fn kubelet(&self) -> &Kubelet {
        &self.kubelet
    }

    /// The images the stand-in can run; insert into it at any time.
    pub fn images(&self) -> &ImageMap {
        self.kubelet.images()
    }

    /// The admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        self.control_plane.kubeconfig()
    }

    /// kubectl against this cluster, as the admin.
    pub fn kubectl(&self) -> Kubectl {
        self.control_plane.kubectl()
    }

    /// The log file of a Pod's container.
    pub fn pod_log_path(&self, namespace: &str, pod: &str, container: &str) -> PathBuf {
        self.kubelet.log_path(namespace, pod, container)
    }

    /// What a Pod's container has written so far (empty when it has not started).
    pub fn pod_log(&self, namespace: &str, pod: &str, container: &str) -> String {
        std::fs::read_to_string(self.pod_log_path(namespace, pod, container)).unwrap_or_default()
    }

    /// Applies every CRD in crds/ with `kubectl apply --server-side` and waits until each is
    /// Established.
    pub async fn install_crds(&self) -> Result<()> {
        install_crds(
            &self.kubectl(),
            &self.client(),
            &binaries::repo_root().join("crds"),
        )
        .await
    }

    /// The run's folder.
    pub fn run_dir(&self) -> &Path {
        self.control_plane.run_dir().path()
    }

    /// Keep the run's folder (logs, volumes) after the cluster stops.
    pub fn keep_run_dir(&mut self) {
        self.control_plane.keep_run_dir();
    }

    /// Stops the kubelet stand-in's processes, then the control plane.
    pub async fn shutdown(self) {
        let Self {
            kubelet,
            control_plane,
        } = self;
        kubelet.shutdown().await;
        control_plane.shutdown().await;
    }
}

/// Server-side applies the CRDs in `dir` with kubectl and waits until each is Established.
pub async fn install_crds(kubectl: &Kubectl, client: &Client, dir: &Path) -> Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use kube::runtime::wait::{await_condition, conditions};

    kubectl.apply_server_side(dir).await?;
    let api: kube::Api<CustomResourceDefinition> = kube::Api::all(client.clone());
    let waited = std::time::Duration::from_secs(60);
    for crd in model::crdgen::all() {
        let name = crd.metadata.name.clone().unwrap_or_default();
        let established = await_condition(api.clone(), &name, conditions::is_crd_established());
        match tokio::time::timeout(waited, established).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                return Err(Error::Timeout {
                    what: format!("CRD {name} Established ({e})"),
                    waited,
                });
            }
            Err(_) => {
                return Err(Error::Timeout {
                    what: format!("CRD {name} Established"),
                    waited,
                });
            }
        }
    }
    Ok(())
}
