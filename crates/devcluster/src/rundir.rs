//! The folder of one run: keys, kubeconfigs, etcd's data, logs, the pods' volumes.

use std::path::{Path, PathBuf};

use super::error::{Error, Result};

const PREFIX: &str = "loop-plugins-devcluster-";
/// A file in a run's folder that says it is kept on purpose (for its logs).
const KEEP_MARK: &str = "KEPT";

/// A folder that is removed when dropped, unless kept (after a failure, or when asked to).
#[derive(Debug)]
pub struct RunDir {
    path: PathBuf,
    keep: bool,
}

impl RunDir {
    /// A fresh folder under the system's temp folder. Folders of earlier runs whose process
    /// is gone (killed before it could clean up) are removed first, unless kept on purpose.
    pub fn temporary() -> Result<Self> {
        remove_stale(&std::env::temp_dir());
        let name = format!(
            "{PREFIX}{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        );
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir_all(&path).map_err(Error::io("creating the run folder", &path))?;
        Ok(Self { path, keep: false })
    }

    /// A given folder, emptied first; it is kept after the run.
    pub fn at(path: &Path) -> Result<Self> {
        if path.exists() {
            std::fs::remove_dir_all(path).map_err(Error::io("emptying the run folder", path))?;
        }
        std::fs::create_dir_all(path).map_err(Error::io("creating the run folder", path))?;
        Ok(Self {
            path: path.to_path_buf(),
            keep: true,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Keep the folder after the run (for its logs).
    pub fn keep(&mut self) {
        self.keep = true;
        let _ = std::fs::write(self.path.join(KEEP_MARK), "kept for its logs\n");
    }

    /// Whether the folder stays after the run.
    pub fn kept(&self) -> bool {
        self.keep
    }

    /// A sub-folder, created if missing.
    pub fn sub(&self, name: &str) -> Result<PathBuf> {
        let path = self.path.join(name);
        std::fs::create_dir_all(&path).map_err(Error::io("creating a folder", &path))?;
        Ok(path)
    }
}

impl Drop for RunDir {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// Removes run folders under `dir` whose process no longer runs and that were not kept.
fn remove_stale(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix(PREFIX)) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let path = entry.path();
        if !Path::new(&format!("/proc/{pid}")).exists() && !path.join(KEEP_MARK).exists() {
            let _ = std::fs::remove_dir_all(path);
        }
    }
}
