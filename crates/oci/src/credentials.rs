//! Registry credentials from a dockerconfigjson (a `kubernetes.io/dockerconfigjson` Secret's
//! `.dockerconfigjson` bytes, or `~/.docker/config.json`): which username and password, or
//! which registry token, goes to which registry. Pure: parsing and lookup only.
//!
//! Keys are matched the way the kubelet matches them: the scheme and any path are dropped
//! (`https://index.docker.io/v1/` is Docker Hub), an exact `host[:port]` wins, then a key
//! whose labels are `*` globs (`*.example.com`) matching label by label.

use std::collections::BTreeMap;
use std::fmt;

use base64::Engine as _;
use serde::Deserialize;

use crate::reference::DOCKER_HUB;

/// The key of a `kubernetes.io/dockerconfigjson` Secret that holds the dockerconfigjson.
pub const DOCKER_CONFIG_SECRET_KEY: &str = ".dockerconfigjson";

/// What we send a registry to prove who we are.
#[derive(Clone, PartialEq, Eq)]
pub enum Credential {
    /// HTTP basic credentials; also what a token server is asked with.
    Basic { username: String, password: String },
    /// A registry bearer token used as is (dockerconfigjson's `registrytoken`).
    Bearer(String),
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Credential::Basic { username, .. } => write!(f, "Basic({username}, <redacted>)"),
            Credential::Bearer(_) => write!(f, "Bearer(<redacted>)"),
        }
    }
}

/// The credentials of a dockerconfigjson, by registry.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct DockerConfig {
    by_registry: BTreeMap<String, Credential>,
}

impl fmt::Debug for DockerConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.by_registry.iter()).finish()
    }
}

/// Why a dockerconfigjson cannot be used; each names the registry entry and field.
#[derive(Debug, thiserror::Error)]
pub enum CredentialsError {
    #[error("dockerconfigjson is not JSON of the form {{\"auths\": {{...}}}}: {0}")]
    Json(#[source] serde_json::Error),
    #[error("dockerconfigjson auths[{registry:?}].auth is not base64 of username:password")]
    Auth { registry: String },
    #[error(
        "dockerconfigjson auths[{registry:?}] has only an identitytoken (an OAuth2 refresh token), which is not supported; use username/password or registrytoken"
    )]
    IdentityToken { registry: String },
    #[error("dockerconfigjson auths[{registry:?}] has no auth, username/password or registrytoken")]
    Empty { registry: String },
}

#[derive(Deserialize)]
struct File {
    #[serde(default)]
    auths: BTreeMap<String, Entry>,
}

#[derive(Deserialize)]
struct Entry {
    auth: Option<String>,
    username: Option<String>,
    password: Option<String>,
    identitytoken: Option<String>,
    registrytoken: Option<String>,
}

impl DockerConfig {
    /// Parses dockerconfigjson bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self, CredentialsError> {
        let file: File = serde_json::from_slice(bytes).map_err(CredentialsError::Json)?;
        let mut by_registry = BTreeMap::new();
        for (key, entry) in file.auths {
            let credential = entry_credential(&key, entry)?;
            by_registry.insert(normalize_key(&key), credential);
        }
        Ok(Self { by_registry })
    }

    /// Adds (or replaces) the credential of one registry (`host[:port]`).
    pub fn insert(&mut self, registry: &str, credential: Credential) {
        self.by_registry.insert(normalize_key(registry), credential);
    }

    /// The credential for a registry as an [`crate::ImageRef`] names it (`host[:port]`).
    pub fn for_registry(&self, registry: &str) -> Option<&Credential> {
        let wanted = normalize_key(registry);
        if let Some(c) = self.by_registry.get(&wanted) {
            return Some(c);
        }
        self.by_registry
            .iter()
            .find(|(key, _)| key.contains('*') && glob_matches(key, &wanted))
            .map(|(_, c)| c)
    }

    pub fn is_empty(&self) -> bool {
        self.by_registry.is_empty()
    }
}

fn entry_credential(key: &str, entry: Entry) -> Result<Credential, CredentialsError> {
    if let Some(token) = entry.registrytoken.filter(|t| !t.is_empty()) {
        return Ok(Credential::Bearer(token));
    }
    if let (Some(username), Some(password)) = (&entry.username, &entry.password)
        && !username.is_empty()
    {
        return Ok(Credential::Basic {
            username: username.clone(),
            password: password.clone(),
        });
    }
    if let Some(auth) = entry.auth.filter(|a| !a.is_empty()) {
        let bad = || CredentialsError::Auth {
            registry: key.to_string(),
        };
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(auth.trim())
            .map_err(|_| bad())?;
        let decoded = String::from_utf8(decoded).map_err(|_| bad())?;
        let (username, password) = decoded.split_once(':').ok_or_else(bad)?;
        return Ok(Credential::Basic {
            username: username.to_string(),
            password: password.to_string(),
        });
    }
    if entry.identitytoken.is_some_and(|t| !t.is_empty()) {
        return Err(CredentialsError::IdentityToken {
            registry: key.to_string(),
        });
    }
    Err(CredentialsError::Empty {
        registry: key.to_string(),
    })
}

/// `https://index.docker.io/v1/` → `docker.io`; `http://Reg.example:5000/x` → `reg.example:5000`.
fn normalize_key(key: &str) -> String {
    let key = key.trim();
    let key = key
        .strip_prefix("https://")
        .or_else(|| key.strip_prefix("http://"))
        .unwrap_or(key);
    let host = key
        .split('/')
        .next()
        .unwrap_or_default()
        .to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            DOCKER_HUB.to_string()
        }
        _ => host,
    }
}

/// `*.example.com` matches `reg.example.com` (one label per `*`); ports must be equal.
fn glob_matches(pattern: &str, host: &str) -> bool {
    let split = |s: &str| -> (String, Option<String>) {
        match s.rsplit_once(':') {
            Some((h, p)) => (h.to_string(), Some(p.to_string())),
            None => (s.to_string(), None),
        }
    };
    let ((pattern_host, pattern_port), (host, port)) = (split(pattern), split(host));
    if pattern_port != port {
        return false;
    }
    let (p, h): (Vec<&str>, Vec<&str>) =
        (pattern_host.split('.').collect(), host.split('.').collect());
    p.len() == h.len() && p.iter().zip(&h).all(|(p, h)| *p == "*" || p == h)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    #[test]
    fn reads_auth_username_password_and_tokens() {
        let json = serde_json::json!({"auths": {
            "127.0.0.1:5000": {"auth": b64("alice:s3cret:with:colons")},
            "https://index.docker.io/v1/": {"username": "bob", "password": "pw"},
            "ghcr.io": {"registrytoken": "tok"},
            "*.example.com": {"auth": b64("carol:x")},
        }});
        let cfg = DockerConfig::parse(json.to_string().as_bytes()).unwrap();
        assert_eq!(
            cfg.for_registry("127.0.0.1:5000"),
            Some(&Credential::Basic {
                username: "alice".into(),
                password: "s3cret:with:colons".into()
            })
        );
        assert_eq!(
            cfg.for_registry("docker.io"),
            Some(&Credential::Basic {
                username: "bob".into(),
                password: "pw".into()
            })
        );
        assert_eq!(
            cfg.for_registry("ghcr.io"),
            Some(&Credential::Bearer("tok".into()))
        );
        assert!(
            matches!(cfg.for_registry("reg.example.com"), Some(Credential::Basic { username, .. }) if username == "carol")
        );
        assert_eq!(cfg.for_registry("a.b.example.com"), None);
        assert_eq!(cfg.for_registry("reg.example.com:5000"), None);
        assert_eq!(cfg.for_registry("127.0.0.1:5001"), None);
        assert!(!format!("{cfg:?}").contains("s3cret"));
    }

    #[test]
    fn errors_name_the_entry() {
        let bad_auth = serde_json::json!({"auths": {"reg.io": {"auth": "!!!"}}}).to_string();
        let err = DockerConfig::parse(bad_auth.as_bytes())
            .unwrap_err()
            .to_string();
        assert!(err.contains("reg.io") && err.contains("auth"), "{err}");
        let no_colon = serde_json::json!({"auths": {"reg.io": {"auth": b64("alice")}}}).to_string();
        assert!(matches!(
            DockerConfig::parse(no_colon.as_bytes()),
            Err(CredentialsError::Auth { .. })
        ));
        let identity = serde_json::json!({"auths": {"reg.io": {"identitytoken": "x"}}}).to_string();
        assert!(matches!(
            DockerConfig::parse(identity.as_bytes()),
            Err(CredentialsError::IdentityToken { .. })
        ));
        let empty = serde_json::json!({"auths": {"reg.io": {}}}).to_string();
        assert!(matches!(
            DockerConfig::parse(empty.as_bytes()),
            Err(CredentialsError::Empty { .. })
        ));
        assert!(matches!(
            DockerConfig::parse(b"not json"),
            Err(CredentialsError::Json(_))
        ));
    }
}
