//! What every way of starting a plugin for the check shares: its files (a fresh secret, the
//! fake host's token, an empty `/data`), the environment the host gives a plugin, the wait
//! until it answers, and the handle the check drives it through ([`Started`]). Two ways start
//! one: [`crate::launch`] as a local process, [`crate::container`] from its image with a
//! container engine.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::error::SetupError;
use crate::probe;

/// How long a started plugin has to answer its first request.
pub const START_LIMIT: Duration = Duration::from_secs(30);

/// A plugin started for the check, stopped when dropped.
pub trait Started {
    /// Where it answers: `http://127.0.0.1:<port>`.
    fn url(&self) -> &str;
    /// The secret it was started with.
    fn secret(&self) -> &str;
    /// What was started, for messages: the program, or the image.
    fn what(&self) -> &str;
    /// How it ended, once it has (`exit status: 3`); None while it runs.
    fn exited(&mut self) -> Option<String>;
    /// The last lines of its log.
    fn log_tail(&self) -> String;
}

/// A started plugin's own files, removed when dropped.
pub struct Files {
    dir: tempfile::TempDir,
    pub secret: String,
    pub secret_file: PathBuf,
    pub token_file: PathBuf,
    /// Its empty `/data`.
    pub data: PathBuf,
}

impl Files {
    /// A fresh secret, `token` (the fake host's), an empty data folder.
    pub fn new(token: &str) -> Result<Self, SetupError> {
        let dir = tempfile::tempdir().map_err(|source| SetupError::Read {
            path: std::env::temp_dir(),
            source,
        })?;
        let secret = format!("conformance-{:x}", std::process::id() as u64 ^ nanos());
        let write = |name: &str, text: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, text).map_err(|source| SetupError::Write {
                path: path.clone(),
                source,
            })?;
            Ok::<_, SetupError>(path)
        };
        let secret_file = write("secret", &secret)?;
        let token_file = write("token", token)?;
        let data = dir.path().join("data");
        std::fs::create_dir(&data).map_err(|source| SetupError::Write {
            path: data.clone(),
            source,
        })?;
        Ok(Self {
            dir,
            secret,
            secret_file,
            token_file,
            data,
        })
    }

    /// A path in the files' own folder.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// Where the plugin finds what the host gives it, as paths it sees.
pub struct PluginPaths<'a> {
    pub secret_file: &'a Path,
    pub token_file: &'a Path,
    pub data: &'a Path,
    pub manifest: &'a Path,
}

/// The environment the host gives a plugin listening on 127.0.0.1:`port` with the Plugin
/// API at `api_url` (the reference's "Loop → plugin" environment).
pub fn plugin_env(paths: &PluginPaths, port: u16, api_url: &str) -> Vec<(&'static str, String)> {
    let path = |p: &Path| p.display().to_string();
    vec![
        ("LOOP_PLUGIN_HOST", "127.0.0.1".into()),
        ("LOOP_PLUGIN_PORT", port.to_string()),
        ("LOOP_PLUGIN_SECRET_FILE", path(paths.secret_file)),
        ("LOOP_PLUGIN_TOKEN_FILE", path(paths.token_file)),
        ("LOOP_API_URL", api_url.into()),
        ("LOOP_PLUGIN_DATA_DIR", path(paths.data)),
        ("LOOP_PLUGIN_MANIFEST", path(paths.manifest)),
    ]
}

/// Waits until `started` answers `/healthz` (any answer), it ends, or [`START_LIMIT`] passes;
/// the last two are errors with its log's last lines.
pub async fn wait_until_up(started: &mut dyn Started) -> Result<(), SetupError> {
    let client = probe::client(reqwest::Client::builder()).map_err(SetupError::Client)?;
    let start = Instant::now();
    let health = format!("{}/healthz", started.url());
    loop {
        if let Some(status) = started.exited() {
            return Err(SetupError::Exited {
                program: started.what().into(),
                status,
                log: started.log_tail(),
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
                program: started.what().into(),
                url: started.url().into(),
                limit: START_LIMIT,
                log: started.log_tail(),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The last 20 lines of `text`.
pub fn tail(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// A loopback port free now.
pub fn free_port() -> Result<u16, SetupError> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port());
    port.map_err(|source| SetupError::Read {
        path: "127.0.0.1:0".into(),
        source,
    })
}

/// A value that differs between runs (secrets, container names).
pub fn nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_is_the_hosts() {
        let env = plugin_env(
            &PluginPaths {
                secret_file: Path::new("/s"),
                token_file: Path::new("/t"),
                data: Path::new("/data"),
                manifest: Path::new("/loop-plugin/plugin.json"),
            },
            8123,
            "http://127.0.0.1:9",
        );
        let names: Vec<&str> = env.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            [
                "LOOP_PLUGIN_HOST",
                "LOOP_PLUGIN_PORT",
                "LOOP_PLUGIN_SECRET_FILE",
                "LOOP_PLUGIN_TOKEN_FILE",
                "LOOP_API_URL",
                "LOOP_PLUGIN_DATA_DIR",
                "LOOP_PLUGIN_MANIFEST"
            ]
        );
        assert_eq!(env[1].1, "8123");
        assert_eq!(env[4].1, "http://127.0.0.1:9");
    }

    #[test]
    fn a_tail_is_the_last_twenty_lines() {
        let text: String = (1..=25).map(|i| format!("{i}\n")).collect();
        assert_eq!(tail(&text).lines().next(), Some("6"));
        assert_eq!(tail("one"), "one");
    }
}
