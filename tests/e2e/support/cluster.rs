//! The cluster every test shares.

use std::path::{Path, PathBuf};

use loop_plugins::devcluster::{self, DevCluster, DevClusterOptions, ImageMap, LocalImage};
use tokio::sync::OnceCell;

/// An image the stand-in plays with /bin/sh.
pub const IMAGE_SH: &str = "e2e.local/sh";

/// The dev cluster of the run, and what tests share on it.
pub struct Cluster {
    dev: DevCluster,
    crds: OnceCell<()>,
}

impl Cluster {
    /// Starts the dev cluster with the images every test may use.
    pub async fn start() -> devcluster::Result<Self> {
        let images = ImageMap::new();
        images.insert(IMAGE_SH, LocalImage::new("/bin/sh"));
        let dev = DevCluster::start(DevClusterOptions {
            images,
            ..Default::default()
        })
        .await?;
        Ok(Self {
            dev,
            crds: OnceCell::new(),
        })
    }

    /// The dev cluster: clients, kubectl, the kubelet stand-in, the image map, pod logs.
    pub fn dev(&self) -> &DevCluster {
        &self.dev
    }

    /// Installs our CRDs once per run (later calls wait for the first).
    pub async fn ensure_crds(&self) -> anyhow::Result<()> {
        self.crds
            .get_or_try_init(|| async { self.dev.install_crds().await })
            .await?;
        Ok(())
    }

    /// The repository's crds/ folder.
    pub fn crds_dir(&self) -> PathBuf {
        devcluster::binaries::repo_root().join("crds")
    }

    pub fn keep_run_dir(&mut self) {
        self.dev.keep_run_dir();
    }

    pub async fn shutdown(self) {
        self.dev.shutdown().await;
    }
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
