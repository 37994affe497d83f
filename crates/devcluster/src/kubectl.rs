//! The built kubectl, pointed at one kubeconfig.

use std::path::{Path, PathBuf};

use super::error::{Error, Result};

/// Runs the upstream kubectl against a cluster.
#[derive(Clone, Debug)]
pub struct Kubectl {
    program: PathBuf,
    kubeconfig: PathBuf,
}

impl Kubectl {
    pub fn new(program: PathBuf, kubeconfig: PathBuf) -> Self {
        Self {
            program,
            kubeconfig,
        }
    }

    /// The kubectl binary.
    pub fn program(&self) -> &Path {
        &self.program
    }

    /// Runs kubectl with `args`; returns its stdout, or its stderr in the error.
    pub async fn run<I, S>(&self, args: I) -> Result<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let args: Vec<String> = args.into_iter().map(|a| a.as_ref().to_string()).collect();
        let output = tokio::process::Command::new(&self.program)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .args(&args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true)
            .output()
            .await
            .map_err(Error::io("running kubectl", &self.program))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).into_owned())
        } else {
            Err(Error::Kubectl {
                args: args.join(" "),
                status: output.status.to_string(),
                stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            })
        }
    }

    /// `kubectl apply --server-side -f <path>` (a file or a folder).
    pub async fn apply_server_side(&self, path: &Path) -> Result<String> {
        let path = path.to_string_lossy();
        self.run([
            "apply",
            "--server-side",
            "--field-manager=loop-plugins-dev",
            "-f",
            &path,
        ])
        .await
    }
}
