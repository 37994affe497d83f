//! A real OCI registry for tests (feature `test-support`): distribution's `registry`, built by
//! hack/registry/build.sh, started on 127.0.0.1 with a free port and a temporary storage
//! directory, optionally behind htpasswd basic auth or token auth (with the token server of
//! [`token`]), and stopped when dropped.
//!
//! The binary is `$LOOP_PLUGINS_REGISTRY_BIN` when set; otherwise build.sh is run once per
//! process (a no-op when its cache is warm) from `$LOOP_PLUGINS_REPO/hack/registry` or, by
//! default, the repository this crate sits in.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine as _;

pub mod token;

use crate::digest::Digest;
use crate::reference::{ImageRef, ReferenceError};

/// Who the registry lets in.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum TestAuth {
    /// Anyone, for anything.
    #[default]
    Anonymous,
    /// HTTP basic auth against an htpasswd file (bcrypt) holding this one user.
    Basic { username: String, password: String },
    /// Bearer tokens from a token server that knows this one user (basic credentials).
    Token { username: String, password: String },
}

/// How to start the registry.
#[derive(Debug, Clone, Default)]
pub struct TestRegistryOptions {
    pub auth: TestAuth,
    /// Serve HTTPS with a certificate for 127.0.0.1 from a CA made for it ([`TestRegistry::ca_pem`]).
    pub tls: bool,
}

/// A running registry; stopped and its storage deleted on drop.
pub struct TestRegistry {
    child: Child,
    addr: SocketAddr,
    dir: tempfile::TempDir,
    options: TestRegistryOptions,
    issuer: Option<token::Issuer>,
    ca_pem: Option<Vec<u8>>,
    // Dropped after the registry process is killed (fields drop in order, after Drop::drop).
    _token_server: Option<token::TokenServer>,
}

/// Why the registry could not be started.
#[derive(Debug, thiserror::Error)]
pub enum TestRegistryError {
    #[error("hack/registry/build.sh at {script}: {message}")]
    Build { script: PathBuf, message: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        source: std::io::Error,
    },
    #[error("the registry on {addr} did not answer within {secs}s; its log:\n{log}")]
    NotReady {
        addr: SocketAddr,
        secs: u64,
        log: String,
    },
    #[error("hashing the htpasswd password: {0}")]
    Bcrypt(String),
}

static BINARY: OnceLock<Result<PathBuf, String>> = OnceLock::new();

/// The registry binary: `$LOOP_PLUGINS_REGISTRY_BIN`, or what hack/registry/build.sh builds.
pub fn registry_binary() -> Result<PathBuf, TestRegistryError> {
    if let Some(bin) = std::env::var_os("LOOP_PLUGINS_REGISTRY_BIN") {
        return Ok(PathBuf::from(bin));
    }
    let repo = std::env::var_os("LOOP_PLUGINS_REPO")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../.."));
    let script = repo.join("hack/registry/build.sh");
    BINARY
        .get_or_init(|| {
            let out = Command::new("bash")
                .arg(&script)
                .stderr(Stdio::inherit())
                .output()
                .map_err(|e| e.to_string())?;
            if !out.status.success() {
                return Err(format!("exited with {}", out.status));
            }
            let stdout = String::from_utf8_lossy(&out.stdout);
            let dir = stdout
                .lines()
                .last()
                .ok_or("printed nothing")?
                .trim()
                .to_string();
            Ok(PathBuf::from(dir).join("registry"))
        })
        .clone()
        .map_err(|message| TestRegistryError::Build { script, message })
}

impl TestRegistry {
    /// Starts a registry and waits until it answers. Installs reqwest's TLS provider (ring's,
    /// as each binary's main does): a test binary has no main of its own to install it in, and
    /// every test that reaches a registry starts this one first.
    pub fn start(options: TestRegistryOptions) -> Result<Self, TestRegistryError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let binary = registry_binary()?;
        let io = |what: &str| {
            let what = what.to_string();
            move |source| TestRegistryError::Io { what, source }
        };
        let dir = tempfile::Builder::new()
            .prefix("loop-plugins-registry-")
            .tempdir()
            .map_err(io("making the registry's temp dir"))?;
        let (issuer, token_server) = match &options.auth {
            TestAuth::Token { username, password } => {
                let issuer = token::Issuer::new(username, password)
                    .map_err(io("making the token issuer's key"))?;
                std::fs::write(dir.path().join("jwks.json"), issuer.jwks())
                    .map_err(io("writing the JWKS"))?;
                let server = token::TokenServer::start(issuer.clone())
                    .map_err(io("starting the token server"))?;
                (Some(issuer), Some(server))
            }
            _ => (None, None),
        };
        let realm = token_server.as_ref().map(token::TokenServer::realm);
        let ca_pem = if options.tls {
            Some(write_certificates(dir.path())?)
        } else {
            None
        };
        let mut last = None;
        // A port found free may be taken before the registry binds it: try a few.
        for _ in 0..3 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map_err(io("finding a free port"))?
                .port();
            let addr = SocketAddr::from(([127, 0, 0, 1], port));
            let config = dir.path().join("config.yml");
            std::fs::write(
                &config,
                config_yaml(dir.path(), addr, &options, realm.as_deref()),
            )
            .map_err(io("writing the registry config"))?;
            if let TestAuth::Basic {
                username: user,
                password,
            } = &options.auth
            {
                let hash = bcrypt::hash(password, 4)
                    .map_err(|e| TestRegistryError::Bcrypt(e.to_string()))?;
                std::fs::write(dir.path().join("htpasswd"), format!("{user}:{hash}\n"))
                    .map_err(io("writing htpasswd"))?;
            }
            let log_path = dir.path().join("registry.log");
            let log = std::fs::File::create(&log_path).map_err(io("creating the registry log"))?;
            let mut child = Command::new(&binary)
                .arg("serve")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log.try_clone().map_err(io("cloning the log handle"))?)
                .stderr(log)
                .spawn()
                .map_err(io(&format!("starting {}", binary.display())))?;
            match wait_ready(
                &mut child,
                addr,
                &log_path,
                options.tls,
                Duration::from_secs(15),
            ) {
                Ok(()) => {
                    return Ok(Self {
                        child,
                        addr,
                        dir,
                        options,
                        issuer,
                        ca_pem,
                        _token_server: token_server,
                    });
                }
                Err(e) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    last = Some(e);
                }
            }
        }
        Err(last.expect("three attempts were made"))
    }

    /// `127.0.0.1:<port>`: the registry part of references to it.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A reference in this registry, e.g. `reference("plugins/echo:dev")`.
    pub fn reference(&self, repository_and_tag: &str) -> Result<ImageRef, ReferenceError> {
        ImageRef::parse(&format!("{}/{repository_and_tag}", self.host()))
    }

    /// Where the registry keeps a blob's bytes (filesystem storage driver), for tests that
    /// corrupt one.
    pub fn blob_path(&self, digest: &Digest) -> PathBuf {
        let hex = digest.hex();
        self.dir
            .path()
            .join("storage/docker/registry/v2/blobs/sha256")
            .join(&hex[..2])
            .join(hex)
            .join("data")
    }

    /// A dockerconfigjson holding this registry's user's credentials (empty `auths` when
    /// anonymous).
    pub fn docker_config_json(&self) -> Vec<u8> {
        let auths = match &self.options.auth {
            TestAuth::Basic { username, password } | TestAuth::Token { username, password } => {
                let auth = base64::engine::general_purpose::STANDARD
                    .encode(format!("{username}:{password}"));
                serde_json::json!({ self.host(): {"auth": auth} })
            }
            TestAuth::Anonymous => serde_json::json!({}),
        };
        serde_json::to_vec(&serde_json::json!({ "auths": auths }))
            .expect("JSON of strings serializes")
    }

    /// With `tls`: the CA (PEM) that signed the registry's certificate.
    pub fn ca_pem(&self) -> Option<&[u8]> {
        self.ca_pem.as_deref()
    }

    /// With token auth: a bearer token for `scopes` (`repository:<name>:<actions>`), as a
    /// dockerconfigjson `registrytoken` would carry one.
    pub fn mint_token(&self, scopes: &[&str]) -> Option<String> {
        let scopes: Vec<String> = scopes.iter().map(|s| s.to_string()).collect();
        self.issuer
            .as_ref()
            .map(|issuer| issuer.mint("minted", &scopes))
    }

    /// The registry's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }
}

impl Drop for TestRegistry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_ready(
    child: &mut Child,
    addr: SocketAddr,
    log: &Path,
    tls: bool,
    timeout: Duration,
) -> Result<(), TestRegistryError> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        if let Ok(Some(_)) = child.try_wait() {
            break;
        }
        if let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_millis(200)) {
            if tls {
                return Ok(()); // it listens once its certificate is loaded
            }
            let _ = stream.set_read_timeout(Some(Duration::from_secs(2)));
            let request = format!("GET /v2/ HTTP/1.0\r\nHost: {addr}\r\n\r\n");
            let mut answer = [0u8; 12];
            if stream.write_all(request.as_bytes()).is_ok()
                && stream.read_exact(&mut answer).is_ok()
            {
                let status = String::from_utf8_lossy(&answer[9..12]).into_owned();
                if status == "200" || status == "401" {
                    return Ok(());
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(TestRegistryError::NotReady {
        addr,
        secs: timeout.as_secs(),
        log: std::fs::read_to_string(log).unwrap_or_default(),
    })
}

/// Writes a CA and a certificate for 127.0.0.1 signed by it (tls.crt, tls.key); returns the CA.
fn write_certificates(dir: &Path) -> Result<Vec<u8>, TestRegistryError> {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
    let cert_err = |e: rcgen::Error| TestRegistryError::Io {
        what: "making the test certificates".into(),
        source: std::io::Error::other(e.to_string()),
    };
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(cert_err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "loop-plugins test registry CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().map_err(cert_err)?)
        .map_err(cert_err)?;
    let key = KeyPair::generate().map_err(cert_err)?;
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .map_err(cert_err)?
        .signed_by(&key, &ca)
        .map_err(cert_err)?;
    let io = |what: &'static str| {
        move |source| TestRegistryError::Io {
            what: what.into(),
            source,
        }
    };
    std::fs::write(dir.join("tls.crt"), leaf.pem()).map_err(io("writing tls.crt"))?;
    std::fs::write(dir.join("tls.key"), key.serialize_pem()).map_err(io("writing tls.key"))?;
    Ok(ca.as_ref().pem().into_bytes())
}

fn config_yaml(
    dir: &Path,
    addr: SocketAddr,
    options: &TestRegistryOptions,
    realm: Option<&str>,
) -> String {
    let storage = dir.join("storage");
    let mut yaml = format!(
        "version: 0.1\nlog:\n  level: info\n  accesslog:\n    disabled: true\nstorage:\n  filesystem:\n    rootdirectory: {}\n  delete:\n    enabled: true\nhttp:\n  addr: {addr}\n",
        storage.display()
    );
    if options.tls {
        yaml.push_str(&format!(
            "  tls:\n    certificate: {}\n    key: {}\n",
            dir.join("tls.crt").display(),
            dir.join("tls.key").display()
        ));
    }
    match &options.auth {
        TestAuth::Anonymous => {}
        TestAuth::Basic { .. } => {
            yaml.push_str(&format!(
                "auth:\n  htpasswd:\n    realm: loop-plugins-test\n    path: {}\n",
                dir.join("htpasswd").display()
            ));
        }
        TestAuth::Token { .. } => {
            yaml.push_str(&format!(
                "auth:\n  token:\n    realm: {}\n    service: {}\n    issuer: {}\n    jwks: {}\n    signingalgorithms: [EdDSA]\n",
                realm.unwrap_or_default(),
                token::SERVICE,
                token::ISSUER,
                dir.join("jwks.json").display()
            ));
        }
    }
    yaml
}
