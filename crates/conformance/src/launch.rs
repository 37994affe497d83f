//! Starts a plugin as the host would, as a local process: a fresh secret, the fake host's
//! Plugin API URL and token, its own `/data`, the manifest, a free loopback port; waits for
//! it to answer, and stops it when dropped. Thin: what is checked is `check`'s.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::SetupError;

/// How long a started plugin has to answer its first request.
pub const START_LIMIT: Duration = Duration::from_secs(30);

/// A plugin process, stopped (and its files removed) when dropped.
pub struct Launched {
    child: Child,
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    pub secret: String,
    dir: tempfile::TempDir,
}

impl Launched {
    /// Where the plugin's stderr goes (its log, shown when it fails to start).
    pub fn log(&self) -> PathBuf {
        self.dir.path().join("plugin.log")
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
    let dir = tempfile::tempdir().map_err(|source| SetupError::Read {
        path: std::env::temp_dir(),
        source,
    })?;
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).map_err(|source| SetupError::Read {
            path: path.clone(),
            source,
        })?;
        Ok::<_, SetupError>(path)
    };
    let secret = format!("conformance-{:x}", std::process::id() as u64 ^ nanos());
    let secret_file = write("secret", &secret)?;
    let token_file = write("token", token)?;
    let data = dir.path().join("data");
    std::fs::create_dir(&data).map_err(|source| SetupError::Read {
        path: data.clone(),
        source,
    })?;
    let manifest = std::path::absolute(manifest).map_err(|source| SetupError::Read {
        path: manifest.into(),
        source,
    })?;
    let port = free_port().map_err(|source| SetupError::Read {
        path: "127.0.0.1:0".into(),
        source,
    })?;
    let log = std::fs::File::create(dir.path().join("plugin.log")).map_err(|source| {
        SetupError::Read {
            path: dir.path().join("plugin.log"),
            source,
        }
    })?;
    let child = Command::new(program)
        .args(args)
        .env("LOOP_PLUGIN_HOST", "127.0.0.1")
        .env("LOOP_PLUGIN_PORT", port.to_string())
        .env("LOOP_PLUGIN_SECRET_FILE", &secret_file)
        .env("LOOP_PLUGIN_TOKEN_FILE", &token_file)
        .env("LOOP_API_URL", api_url)
        .env("LOOP_PLUGIN_DATA_DIR", &data)
        .env("LOOP_PLUGIN_MANIFEST", &manifest)
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
        url: format!("http://127.0.0.1:{port}"),
        secret,
        dir,
    };
    wait_until_up(&mut launched, program).await?;
    Ok(launched)
}

async fn wait_until_up(launched: &mut Launched, program: &str) -> Result<(), SetupError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let start = Instant::now();
    let health = format!("{}/healthz", launched.url);
    loop {
        if let Ok(Some(status)) = launched.child.try_wait() {
            return Err(SetupError::Exited {
                program: program.into(),
                status: status.to_string(),
                log: tail(&launched.log()),
            });
        }
        let answer = client
            .get(&health)
            .timeout(Duration::from_secs(1))
            .send()
            .await;
        if answer.is_ok() {
            return Ok(());
        }
        if start.elapsed() > START_LIMIT {
            return Err(SetupError::NeverUp {
                program: program.into(),
                url: launched.url.clone(),
                limit: START_LIMIT,
                log: tail(&launched.log()),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The last lines of the plugin's log.
fn tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}
