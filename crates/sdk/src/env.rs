//! The environment the host starts a plugin container with (the reference's "Loop → plugin"
//! section; `crates/controller/src/pod.rs` sets it): read once at start.

use std::net::IpAddr;
use std::path::{Path, PathBuf};

pub const PORT: &str = "LOOP_PLUGIN_PORT";
pub const HOST: &str = "LOOP_PLUGIN_HOST";
pub const SECRET_FILE: &str = "LOOP_PLUGIN_SECRET_FILE";
pub const TOKEN_FILE: &str = "LOOP_PLUGIN_TOKEN_FILE";
pub const API_URL: &str = "LOOP_API_URL";
pub const DATA_DIR: &str = "LOOP_PLUGIN_DATA_DIR";
pub const MANIFEST: &str = "LOOP_PLUGIN_MANIFEST";

/// Where the host puts the manifest in the image.
pub const DEFAULT_MANIFEST: &str = "/loop-plugin/plugin.json";
/// The plugin's volume.
pub const DEFAULT_DATA_DIR: &str = "/data";
pub const DEFAULT_PORT: u16 = 8080;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Env {
    pub host: IpAddr,
    pub port: u16,
    /// The file holding the secret every request carries.
    pub secret_file: PathBuf,
    /// The file holding the Plugin API token (rotated: read it on every call).
    pub token_file: Option<PathBuf>,
    /// The Plugin API's base URL.
    pub api_url: Option<String>,
    pub data_dir: PathBuf,
    pub manifest: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("{0} is not set: the host sets it; set it yourself to run the plugin by hand")]
    Missing(&'static str),
    #[error("{name}={value:?}: {message}")]
    Invalid {
        name: &'static str,
        value: String,
        message: String,
    },
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0} is empty")]
    Empty(PathBuf),
}

impl Env {
    /// From the process environment.
    pub fn from_env() -> Result<Self, EnvError> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// From `var` (tests pass a map).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let var = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let parsed = |name: &'static str, default: &str| {
            let value = var(name).unwrap_or_else(|| default.to_string());
            (value.clone(), name)
        };
        let (port, name) = parsed(PORT, &DEFAULT_PORT.to_string());
        let port = port
            .trim()
            .parse()
            .map_err(|e: std::num::ParseIntError| EnvError::Invalid {
                name,
                value: port.clone(),
                message: e.to_string(),
            })?;
        let (host, name) = parsed(HOST, "0.0.0.0");
        let host =
            host.trim()
                .parse()
                .map_err(|e: std::net::AddrParseError| EnvError::Invalid {
                    name,
                    value: host.clone(),
                    message: e.to_string(),
                })?;
        Ok(Self {
            host,
            port,
            secret_file: var(SECRET_FILE)
                .ok_or(EnvError::Missing(SECRET_FILE))?
                .into(),
            token_file: var(TOKEN_FILE).map(PathBuf::from),
            api_url: var(API_URL),
            data_dir: var(DATA_DIR)
                .unwrap_or_else(|| DEFAULT_DATA_DIR.into())
                .into(),
            manifest: var(MANIFEST)
                .unwrap_or_else(|| DEFAULT_MANIFEST.into())
                .into(),
        })
    }

    /// The secret, trimmed; an empty one is an error (it would let anyone in).
    pub fn secret(&self) -> Result<String, EnvError> {
        read_trimmed(&self.secret_file)
    }

    /// The manifest at [`Env::manifest`], parsed and checked by the controller's rules.
    pub fn read_manifest(&self) -> Result<manifest::Manifest, ManifestReadError> {
        read_manifest(&self.manifest)
    }
}

/// A file's contents with surrounding whitespace trimmed, not empty.
pub fn read_trimmed(path: &Path) -> Result<String, EnvError> {
    let text = std::fs::read_to_string(path).map_err(|source| EnvError::Read {
        path: path.into(),
        source,
    })?;
    let text = text.trim();
    if text.is_empty() {
        return Err(EnvError::Empty(path.into()));
    }
    Ok(text.to_string())
}

#[derive(Debug, thiserror::Error)]
pub enum ManifestReadError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}: {source}")]
    Invalid {
        path: PathBuf,
        source: manifest::ManifestError,
    },
}

/// Reads and checks a `plugin.json` (JSON with comments and trailing commas).
pub fn read_manifest(path: &Path) -> Result<manifest::Manifest, ManifestReadError> {
    let text = std::fs::read_to_string(path).map_err(|source| ManifestReadError::Read {
        path: path.into(),
        source,
    })?;
    manifest::parse_str(&text).map_err(|source| ManifestReadError::Invalid {
        path: path.into(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn env(pairs: &[(&str, &str)]) -> Result<Env, EnvError> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Env::from_vars(|name| map.get(name).cloned())
    }

    #[test]
    fn defaults_are_the_hosts() {
        let e = env(&[(SECRET_FILE, "/s")]).unwrap();
        assert_eq!(e.port, 8080);
        assert_eq!(e.host.to_string(), "0.0.0.0");
        assert_eq!(e.data_dir, Path::new("/data"));
        assert_eq!(e.manifest, Path::new("/loop-plugin/plugin.json"));
        assert_eq!(e.token_file, None);
        assert_eq!(e.api_url, None);
    }

    #[test]
    fn what_is_set_wins_and_nonsense_is_named() {
        let e = env(&[
            (SECRET_FILE, "/s"),
            (PORT, "0"),
            (API_URL, "http://api"),
            (TOKEN_FILE, "/t"),
        ])
        .unwrap();
        assert_eq!(e.port, 0);
        assert_eq!(e.api_url.as_deref(), Some("http://api"));
        assert!(matches!(env(&[]), Err(EnvError::Missing(SECRET_FILE))));
        let err = env(&[(SECRET_FILE, "/s"), (PORT, "http")]).unwrap_err();
        assert!(
            err.to_string().starts_with("LOOP_PLUGIN_PORT=\"http\""),
            "{err}"
        );
    }

    #[test]
    fn the_secret_is_trimmed_and_never_empty() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("secret");
        std::fs::write(&path, " s3cret\n").unwrap();
        assert_eq!(read_trimmed(&path).unwrap(), "s3cret");
        std::fs::write(&path, "\n").unwrap();
        assert!(matches!(read_trimmed(&path), Err(EnvError::Empty(_))));
    }
}
