//! The container environment: which variables the plugin reads, and the files they name.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// Where the image puts the manifest.
pub const DEFAULT_MANIFEST: &str = "/loop-plugin/plugin.json";
/// Where the plugin keeps its state.
pub const DEFAULT_DATA_DIR: &str = "/data";
/// The port when `LOOP_PLUGIN_PORT` is unset.
pub const DEFAULT_PORT: u16 = 8080;

/// What the environment says. Files are named here and read by [`read_secret`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `LOOP_PLUGIN_HOST`: the address to bind (default 0.0.0.0).
    pub host: IpAddr,
    /// `LOOP_PLUGIN_PORT` (default 8080; 0 picks a free port).
    pub port: u16,
    /// `LOOP_API_URL`: the Plugin API's base URL, when there is one.
    pub api_url: Option<String>,
    /// `LOOP_PLUGIN_TOKEN_FILE`: the Plugin API token, read on every call.
    pub token_file: Option<PathBuf>,
    /// `LOOP_PLUGIN_SECRET_FILE`: the secret every request must carry (required).
    pub secret_file: PathBuf,
    /// `LOOP_PLUGIN_DATA_DIR` (default /data).
    pub data_dir: PathBuf,
    /// `LOOP_PLUGIN_MANIFEST` (default /loop-plugin/plugin.json).
    pub manifest: PathBuf,
}

impl Config {
    /// Reads the configuration through `var`, which answers a variable's value
    /// (`std::env::var(..).ok()` in the binary). Empty values count as unset.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        let get = |name: &str| {
            var(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        let host = match get("LOOP_PLUGIN_HOST") {
            Some(h) => h
                .parse()
                .with_context(|| format!("LOOP_PLUGIN_HOST: {h:?} is not an IP address"))?,
            None => IpAddr::V4(Ipv4Addr::UNSPECIFIED),
        };
        let port = match get("LOOP_PLUGIN_PORT") {
            Some(p) => p
                .parse()
                .with_context(|| format!("LOOP_PLUGIN_PORT: {p:?} is not a port number"))?,
            None => DEFAULT_PORT,
        };
        let Some(secret_file) = get("LOOP_PLUGIN_SECRET_FILE") else {
            bail!(
                "LOOP_PLUGIN_SECRET_FILE is not set: the plugin refuses to serve without a secret"
            );
        };
        Ok(Self {
            host,
            port,
            api_url: get("LOOP_API_URL").map(|u| u.trim_end_matches('/').to_owned()),
            token_file: get("LOOP_PLUGIN_TOKEN_FILE").map(PathBuf::from),
            secret_file: secret_file.into(),
            data_dir: get("LOOP_PLUGIN_DATA_DIR")
                .unwrap_or_else(|| DEFAULT_DATA_DIR.into())
                .into(),
            manifest: get("LOOP_PLUGIN_MANIFEST")
                .unwrap_or_else(|| DEFAULT_MANIFEST.into())
                .into(),
        })
    }
}

/// Reads a secret or token file: its contents with surrounding whitespace trimmed, refused
/// when that leaves nothing.
pub fn read_secret(path: &Path) -> anyhow::Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let text = text.trim();
    if text.is_empty() {
        bail!("{} is empty", path.display());
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn defaults() {
        let c = Config::from_env(env(&[("LOOP_PLUGIN_SECRET_FILE", "/run/secret")])).unwrap();
        assert_eq!(c.host, IpAddr::V4(Ipv4Addr::UNSPECIFIED));
        assert_eq!(c.port, DEFAULT_PORT);
        assert_eq!(c.data_dir, PathBuf::from("/data"));
        assert_eq!(c.manifest, PathBuf::from(DEFAULT_MANIFEST));
        assert_eq!(c.api_url, None);
        assert_eq!(c.token_file, None);
    }

    #[test]
    fn every_variable() {
        let c = Config::from_env(env(&[
            ("LOOP_PLUGIN_HOST", "127.0.3.7"),
            ("LOOP_PLUGIN_PORT", " 9000 "),
            ("LOOP_API_URL", "http://api:8081/"),
            ("LOOP_PLUGIN_TOKEN_FILE", "/run/token"),
            ("LOOP_PLUGIN_SECRET_FILE", "/run/secret"),
            ("LOOP_PLUGIN_DATA_DIR", "/tmp/d"),
            ("LOOP_PLUGIN_MANIFEST", "/m.json"),
        ]))
        .unwrap();
        assert_eq!(c.host.to_string(), "127.0.3.7");
        assert_eq!(c.port, 9000);
        assert_eq!(c.api_url.as_deref(), Some("http://api:8081"));
        assert_eq!(c.token_file, Some(PathBuf::from("/run/token")));
        assert_eq!(c.data_dir, PathBuf::from("/tmp/d"));
        assert_eq!(c.manifest, PathBuf::from("/m.json"));
    }

    #[test]
    fn bad_values_name_the_variable() {
        let no_secret = Config::from_env(env(&[])).unwrap_err().to_string();
        assert!(no_secret.contains("LOOP_PLUGIN_SECRET_FILE"), "{no_secret}");
        let port = Config::from_env(env(&[
            ("LOOP_PLUGIN_SECRET_FILE", "s"),
            ("LOOP_PLUGIN_PORT", "http"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(port.contains("LOOP_PLUGIN_PORT"), "{port}");
        let host = Config::from_env(env(&[
            ("LOOP_PLUGIN_SECRET_FILE", "s"),
            ("LOOP_PLUGIN_HOST", "pod-1"),
        ]))
        .unwrap_err()
        .to_string();
        assert!(host.contains("LOOP_PLUGIN_HOST"), "{host}");
    }

    #[test]
    fn secret_files_are_trimmed_and_not_empty() {
        let dir = std::env::temp_dir().join(format!("echo-plugin-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("secret");
        std::fs::write(&file, "  s3cret\n").unwrap();
        assert_eq!(read_secret(&file).unwrap(), "s3cret");
        std::fs::write(&file, " \n").unwrap();
        assert!(
            read_secret(&file)
                .unwrap_err()
                .to_string()
                .contains("empty")
        );
        assert!(read_secret(&dir.join("missing")).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
