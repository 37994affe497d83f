//! Where the upstream binaries (kube-apiserver, kube-controller-manager, kubectl, etcd, helm) are.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::error::{Error, Result};

/// The environment variable naming the folder of binaries (hack/test.sh exports it).
pub const CONTROLPLANE_ENV: &str = "LOOP_PLUGINS_CONTROLPLANE";

/// The binaries a control plane needs.
pub const REQUIRED: [&str; 4] = [
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kubectl",
];

/// The folder of upstream binaries.
#[derive(Clone, Debug)]
pub struct Binaries {
    dir: PathBuf,
}

impl Binaries {
    /// The folder in `$LOOP_PLUGINS_CONTROLPLANE`, else the one `hack/controlplane/build.sh`
    /// prints (building it when it is missing).
    pub fn locate() -> Result<Self> {
        match std::env::var_os(CONTROLPLANE_ENV) {
            Some(dir) if !dir.is_empty() => Self::at(PathBuf::from(dir)),
            _ => Self::build(),
        }
    }

    /// The binaries in `dir`, checked.
    pub fn at(dir: PathBuf) -> Result<Self> {
        let missing: Vec<&str> = REQUIRED
            .iter()
            .copied()
            .filter(|b| !is_executable(&dir.join(b)))
            .collect();
        if missing.is_empty() {
            Ok(Self { dir })
        } else {
            Err(Error::Binaries(format!(
                "{} lacks {}; run `make controlplane` or set {CONTROLPLANE_ENV}",
                dir.display(),
                missing.join(", ")
            )))
        }
    }

    /// Runs `hack/controlplane/build.sh` (which does nothing when the cache is up to date).
    pub fn build() -> Result<Self> {
        let script = repo_root().join("hack/controlplane/build.sh");
        let output = Command::new(&script)
            .output()
            .map_err(|e| Error::Binaries(format!("running {}: {e}", script.display())))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        if !output.status.success() {
            let stderr = String::from_utf8_lossy(&output.stderr);
            let tail: Vec<&str> = stderr.lines().rev().take(20).collect();
            return Err(Error::Binaries(format!(
                "{} exited with {}:\n{}",
                script.display(),
                output.status,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            )));
        }
        let dir = stdout
            .lines()
            .last()
            .ok_or_else(|| Error::Binaries(format!("{} printed no folder", script.display())))?;
        Self::at(PathBuf::from(dir.trim()))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The path of one binary.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

/// The repository this crate was built from (where crds/, examples/ and hack/ are).
pub fn repo_root() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The product's binary, `loop-plugins`: `$LOOP_PLUGINS_BIN`, else the one cargo built beside
/// the running program (`loop-plugins-dev`, a test or a bench: cargo puts those in the same
/// target folder or its `deps/`). `cargo build --workspace --bins` builds it.
pub fn product_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("LOOP_PLUGINS_BIN").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(path));
    }
    let me = std::env::current_exe()
        .map_err(|e| Error::Binaries(format!("finding the running program: {e}")))?;
    let dir = me.parent().unwrap_or(Path::new("."));
    let candidates = [dir.join("loop-plugins"), dir.join("../loop-plugins")];
    candidates
        .iter()
        .find(|p| is_executable(p))
        .cloned()
        .ok_or_else(|| {
            Error::Binaries(format!(
                "no loop-plugins binary beside {}: build it with `cargo build --workspace --bins` \
                 or name it in LOOP_PLUGINS_BIN",
                me.display()
            ))
        })
}
