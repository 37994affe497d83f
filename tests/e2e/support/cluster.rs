//! The cluster every test shares: the local control plane the suite starts, or an existing
//! cluster with the chart installed (see [`super::target`]).

use std::path::{Path, PathBuf};

use anyhow::Context;
use devcluster::binaries::{Binaries, repo_root};
use devcluster::kubectl::Kubectl;
use devcluster::{DevCluster, DevClusterOptions, ImageMap, LocalImage};
use k8s_openapi::api::apps::v1::Deployment;
use kube::{Api, Client};
use tokio::sync::OnceCell;

use super::images::Images;
use super::target::{Existing, Target, target};

/// An image the stand-in plays with /bin/sh.
pub const IMAGE_SH: &str = "e2e.local/sh";

/// The cluster of the run, and what tests share on it.
pub struct Cluster {
    client: Client,
    /// The admin's client config, for clients with other credentials.
    config: kube::Config,
    kubectl: Kubectl,
    run_dir: PathBuf,
    /// The API server's URL.
    server: String,
    /// Keep the run's folder after the run.
    keep: bool,
    /// The local control plane, when the suite started it.
    local: Option<DevCluster>,
    crds: OnceCell<()>,
    /// The suite's fan-out replica (see `crate::host::start_fanout_replica`), stopped before
    /// the control plane.
    fanout_replica: OnceCell<server::serve::Server>,
    /// The registry plugin images are pushed to (after `local`: it outlives no cluster).
    images: Images,
}

impl Cluster {
    /// Starts the local control plane, or connects to the existing cluster: per
    /// `LOOP_PLUGINS_E2E_CLUSTER`.
    pub async fn start() -> anyhow::Result<Self> {
        match super::target::try_target()? {
            Target::Local => Self::start_local().await,
            Target::Existing(existing) => Self::connect(existing).await,
        }
    }

    /// Starts the dev cluster with the images every test may use.
    async fn start_local() -> anyhow::Result<Self> {
        let plugin_images = start_images().await?;
        let images = ImageMap::new();
        images.insert(IMAGE_SH, LocalImage::new("/bin/sh"));
        // The stand-in plays every echo image of the run with the echo plugin's binary.
        images.insert(
            &plugin_images.echo_repository(),
            LocalImage::new(Images::echo_binary()).in_image_at(testkit::images::ECHO_ENTRYPOINT),
        );
        // And the quiz example's (on the SDK) with its own.
        let quiz = testkit::images::QUIZ;
        images.insert(
            &plugin_images.repository(quiz),
            LocalImage::new(Images::binary(quiz)).in_image_at(quiz.entrypoint),
        );
        // Containers run as their runAsUser, as in a cluster (when the suite runs as root): a
        // plugin image's USER, the gate's refusal to run a plugin as root.
        let dev = DevCluster::start(DevClusterOptions {
            images,
            run_as_pod_users: true,
            ..Default::default()
        })
        .await?;
        Ok(Self {
            client: dev.client(),
            config: dev.control_plane().config().clone(),
            kubectl: dev.kubectl(),
            run_dir: dev.run_dir().to_path_buf(),
            server: dev.control_plane().server().to_string(),
            keep: false,
            local: Some(dev),
            crds: OnceCell::new(),
            fanout_replica: OnceCell::new(),
            images: plugin_images,
        })
    }

    /// The cluster of KUBECONFIG, once the chart's Deployment is there.
    async fn connect(existing: &Existing) -> anyhow::Result<Self> {
        let kubeconfig = std::env::var_os("KUBECONFIG").context("KUBECONFIG is not set")?;
        let config = kube::Config::infer().await.context("reading KUBECONFIG")?;
        let server = config.cluster_url.to_string();
        let client = Client::try_from(config.clone()).context("connecting with KUBECONFIG")?;
        let kubectl = Kubectl::new(Binaries::locate()?.path("kubectl"), kubeconfig.into());
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), &existing.namespace);
        let name = existing.fullname();
        deployments.get(&name).await.with_context(|| {
            format!(
                "reading the chart's Deployment {}/{name}: is release {} installed \
                 (make kind-e2e, make e2e-existing)?",
                existing.namespace, existing.release
            )
        })?;
        let run_dir = std::env::temp_dir().join(format!("loop-plugins-e2e-{}", std::process::id()));
        std::fs::create_dir_all(&run_dir)
            .with_context(|| format!("making {}", run_dir.display()))?;
        Ok(Self {
            client,
            config,
            kubectl,
            run_dir,
            server,
            keep: false,
            local: None,
            crds: OnceCell::new(),
            fanout_replica: OnceCell::new(),
            images: start_images().await?,
        })
    }

    /// An admin client.
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// The admin's client config (a server of the test's own reaches the cluster as a person
    /// with it, their token in place of the admin's credentials).
    pub fn config(&self) -> kube::Config {
        self.config.clone()
    }

    /// A client that authenticates with a bearer token (a ServiceAccount's), on either target.
    pub fn client_with_token(&self, token: &str) -> anyhow::Result<Client> {
        let config = devcluster::kubeconfig::with_token(&self.config, token);
        Client::try_from(config).context("a client with a bearer token")
    }

    /// The built kubectl, as the admin.
    pub fn kubectl(&self) -> &Kubectl {
        &self.kubectl
    }

    /// Where the run keeps its files (logs, kubeconfigs, rendered charts).
    pub fn run_dir(&self) -> &Path {
        &self.run_dir
    }

    /// The API server's address, for the summary line.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// The local control plane: clients, the kubelet stand-in, the image map, pod logs, the
    /// audit log. Tests that need it are marked `local_only`, so on an existing cluster this is
    /// an error naming the test's assumption.
    pub fn dev(&self) -> anyhow::Result<&DevCluster> {
        self.local.as_ref().context(
            "this needs the local control plane, but the suite runs against an existing cluster \
             (mark the test local_only)",
        )
    }

    /// The registry plugin images go to, and the images of the run.
    pub fn plugin_images(&self) -> &Images {
        &self.images
    }

    /// The local control plane, if the suite started it.
    pub fn local(&self) -> Option<&DevCluster> {
        self.local.as_ref()
    }

    /// The existing cluster's release, if the suite runs against one.
    pub fn existing(&self) -> Option<&'static Existing> {
        match target() {
            Target::Existing(existing) => Some(existing),
            Target::Local => None,
        }
    }

    /// Installs our CRDs once per run (later calls wait for the first). On an existing cluster
    /// the chart installed them; applying the same files again changes nothing.
    pub async fn ensure_crds(&self) -> anyhow::Result<()> {
        self.crds
            .get_or_try_init(|| async {
                devcluster::install_crds(&self.kubectl, &self.client, &self.crds_dir()).await
            })
            .await?;
        Ok(())
    }

    /// Starts the suite's one long-lived host API with `start`, once.
    pub async fn keep_fanout_replica(
        &self,
        start: impl std::future::Future<Output = anyhow::Result<server::serve::Server>>,
    ) -> anyhow::Result<()> {
        self.fanout_replica.get_or_try_init(|| start).await?;
        Ok(())
    }

    /// The repository's crds/ folder.
    pub fn crds_dir(&self) -> PathBuf {
        repo_root().join("crds")
    }

    pub fn keep_run_dir(&mut self) {
        self.keep = true;
        if let Some(dev) = &mut self.local {
            dev.keep_run_dir();
        }
    }

    pub async fn shutdown(self) {
        if let Some(replica) = self.fanout_replica.into_inner() {
            replica.stop().await;
        }
        match self.local {
            Some(dev) => dev.shutdown().await,
            None if !self.keep => {
                let _ = std::fs::remove_dir_all(&self.run_dir);
            }
            None => {}
        }
    }
}

/// The run's registry (started off the runtime's threads: it waits for the process).
async fn start_images() -> anyhow::Result<Images> {
    tokio::task::spawn_blocking(Images::start).await?
}

/// A program's absolute path: the system's own first (a version manager's shim may need a
/// HOME the Pod does not have), else the first on PATH.
pub fn program(name: &str) -> PathBuf {
    for dir in ["/usr/bin", "/bin", "/usr/local/bin"] {
        let path = Path::new(dir).join(name);
        if path.exists() {
            return path;
        }
    }
    std::env::var_os("PATH")
        .and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|dir| dir.join(name))
                .find(|p| p.exists())
        })
        .unwrap_or_else(|| PathBuf::from(name))
}
