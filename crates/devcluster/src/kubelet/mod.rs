//! A kubelet stand-in, the one piece of the dev cluster that is not upstream.
//!
//! It registers a Node (Ready, its Lease renewed), binds unscheduled Pods to it (no
//! kube-scheduler runs), gives each Pod its own 127.x.y.z address, writes its volumes to
//! folders, and runs each container as a local process: the program an [`ImageMap`] names for
//! the container's image, with the Pod's command, args and env (paths under a volume mount
//! rewritten to that volume's folder). It reports Running, Ready once the container's port
//! accepts TCP, and the exit status when a process ends; it kills the processes when the Pod is
//! deleted, then deletes the Pod for good. Pending claims get a PersistentVolume pre-bound to
//! them, which kube-controller-manager's binder completes.
//!
//! Everything is driven by watches. All Pods share the machine's network, so processes must
//! listen on their Pod's address (the downward API's `status.podIP`); the wildcard address in
//! a container's args or env (`--listen=0.0.0.0:8080`) is rewritten to it. Containers that
//! mount their ServiceAccount's token get a kubeconfig of it in `KUBECONFIG` (in-cluster
//! clients read fixed paths this machine cannot give each Pod; see `incluster`), with
//! `KUBERNETES_SERVICE_HOST`/`_PORT` naming the API server. A minimal kube-proxy serves the
//! node ports of NodePort and LoadBalancer Services on 127.0.0.1, as kind's port mappings do
//! (see `nodeports`); there are no cluster IPs.

mod addresses;
mod claims;
mod container;
pub mod env;
mod identity;
mod images;
mod incluster;
mod node;
mod nodeports;
mod pods;
mod scheduler;
pub mod status;
mod volumes;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use kube::Client;
use tokio::task::JoinHandle;

pub use images::{ImageMap, LocalImage, repository};
pub use node::MANAGER;
pub use worker::probe_port;

use super::error::{Error, Result};
use addresses::Addresses;
use container::Running;

/// The Node's name unless told otherwise.
pub const DEFAULT_NODE: &str = "devkubelet";

/// What the stand-in needs to know.
#[derive(Clone, Debug)]
pub struct KubeletConfig {
    pub node_name: String,
    /// Its folder: `pods/<uid>/` (volumes, work folders), `claims/`, `logs/`.
    pub root: PathBuf,
    pub images: ImageMap,
    /// The API server's port on 127.0.0.1, for KUBERNETES_SERVICE_PORT.
    pub apiserver_port: u16,
    /// Run each container as its `runAsUser` (and hand it its volumes' folders) when the
    /// stand-in runs as root; otherwise every container runs as we do.
    pub run_as_pod_users: bool,
}

/// What every task of the stand-in shares.
pub(crate) struct Shared {
    client: Client,
    node: String,
    root: PathBuf,
    images: ImageMap,
    addresses: Addresses,
    apiserver_port: u16,
    running: Running,
    run_as_pod_users: bool,
}

impl Shared {
    fn claims_dir(&self) -> PathBuf {
        self.root.join("claims")
    }
}

/// The running stand-in. Dropping it stops its tasks and kills every container process.
pub struct Kubelet {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
    /// Whether claims' volumes wait (see [`Kubelet::hold_volumes`]).
    volumes_held: tokio::sync::watch::Sender<bool>,
}

impl Kubelet {
    /// Registers the Node and starts watching.
    pub async fn start(client: Client, config: KubeletConfig) -> Result<Self> {
        for sub in ["pods", "claims", "logs"] {
            let dir = config.root.join(sub);
            std::fs::create_dir_all(&dir)
                .map_err(Error::io("creating the kubelet's folders", &dir))?;
        }
        let node = node::register(&client, &config.node_name).await?;
        let shared = Arc::new(Shared {
            client: client.clone(),
            node: config.node_name.clone(),
            // Absolute: every path handed to a container (its volumes, its programs) must hold
            // in the container's own working folder (make dev's root is `.dev/run/kubelet`).
            root: std::path::absolute(&config.root)
                .map_err(Error::io("resolving the kubelet's folder", &config.root))?,
            images: config.images,
            addresses: Addresses::random(),
            apiserver_port: config.apiserver_port,
            running: Running::default(),
            run_as_pod_users: config.run_as_pod_users && identity::can_switch(),
        });
        let (volumes_held, held) = tokio::sync::watch::channel(false);
        let tasks = vec![
            tokio::spawn(node::heartbeat(client.clone(), node)),
            tokio::spawn(scheduler::run(client.clone(), config.node_name.clone())),
            tokio::spawn(claims::run(client.clone(), shared.claims_dir(), held)),
            tokio::spawn(pods::run(shared.clone())),
            tokio::spawn(nodeports::run(client.clone())),
        ];
        Ok(Self {
            shared,
            tasks,
            volumes_held,
        })
    }

    /// Claims made from now on wait for their volume until [`Kubelet::release_volumes`]: the
    /// binding (a volume made, then bound by kube-controller-manager) stays out of what a
    /// bench measures, as a provisioner's pace would be.
    pub fn hold_volumes(&self) {
        self.volumes_held.send_replace(true);
    }

    /// Makes the volumes the held claims wait for, and every later one at once.
    pub fn release_volumes(&self) {
        self.volumes_held.send_replace(false);
    }

    /// The Node's name.
    pub fn node_name(&self) -> &str {
        &self.shared.node
    }

    /// The images and the programs that play them; insert into it at any time.
    pub fn images(&self) -> &ImageMap {
        &self.shared.images
    }

    /// The stand-in's folder.
    pub fn root(&self) -> &Path {
        &self.shared.root
    }

    /// The log file of a Pod's container (stdout and stderr, across restarts).
    pub fn log_path(&self, namespace: &str, pod: &str, container: &str) -> PathBuf {
        worker::log_path(&self.shared.root, namespace, pod, container)
    }

    /// Stops watching and kills every container process.
    pub async fn shutdown(mut self) {
        self.stop();
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
    }

    fn stop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
        self.shared.running.kill_all();
    }
}

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.stop();
    }
}
