//! Starts a plugin as the host would, as a local process: a fresh secret, the fake host's
//! Plugin API URL and token, its own `/data`, the manifest, a free loopback port; waits for
//! it to answer, and stops it when dropped. Thin: what is checked is `check`'s, what every
//! start shares is [`crate::started`]'s.

use std::path::Path;
use std::process::{Child, Command, Stdio};

use crate::error::SetupError;
use crate::started::{self, Files, PluginPaths, Started};

pub use crate::started::START_LIMIT;

/// A plugin process, stopped (and its files removed) when dropped.
pub struct Launched {
    child: Child,
    program: String,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    pub secret: String,
    files: Files,
}

impl Launched {
    /// Where the plugin's stderr goes (its log, shown when it fails to start).
    pub fn log(&self) -> std::path::PathBuf {
        self.files.path("plugin.log")
    }
}

impl Started for Launched {
    fn url(&self) -> &str {
        &self.url
    }

    fn secret(&self) -> &str {
        &self.secret
    }

    fn what(&self) -> &str {
        &self.program
    }

    fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.to_string()),
            _ => None,
        }
    }

    fn log_tail(&self) -> String {
        started::tail(&std::fs::read_to_string(self.log()).unwrap_or_default())
    }
}

impl Drop for Launched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `command` (program and arguments) with `manifest` and the Plugin API at
/// `api_url` with `token`, and waits until it answers HTTP.
pub async fn launch(
    command: &[String],
    manifest: &Path,
    api_url: &str,
    token: &str,
) -> Result<Launched, SetupError> {
    let (program, args) = command.split_first().ok_or(SetupError::NoCommand)?;
    let files = Files::new(token)?;
    let manifest = std::path::absolute(manifest).map_err(|source| SetupError::Read {
        path: manifest.into(),
        source,
    })?;
    let port = started::free_port()?;
    let log_path = files.path("plugin.log");
    let log = std::fs::File::create(&log_path).map_err(|source| SetupError::Write {
        path: log_path.clone(),
        source,
    })?;
    let env = started::plugin_env(
        &PluginPaths {
            secret_file: &files.secret_file,
            token_file: &files.token_file,
            data: &files.data,
            manifest: &manifest,
        },
        port,
        api_url,
    );
    let child = Command::new(program)
        .args(args)
        .envs(env)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|source| SetupError::Start {
            program: program.clone(),
            source,
        })?;
    let mut launched = Launched {
        child,
        program: program.clone(),
        url: format!("http://127.0.0.1:{port}"),
        secret: files.secret.clone(),
        files,
    };
    started::wait_until_up(&mut launched).await?;
    Ok(launched)
}
