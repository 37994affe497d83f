//! Talking to a registry: resolving a reference to its image manifest (an index's
//! linux/amd64 child, pinned), fetching blobs by digest with their size and digest checked,
//! pushing blobs and manifests. oci-client does the authentication (basic, and the bearer
//! token dance) and the blob transfers; manifests are fetched here through a size cap,
//! because oci-client reads a manifest body whole. Loopback registries and the `insecure`
//! list are reached over plain HTTP, every other one over HTTPS (rustls with ring, the
//! system's roots plus `ca_certificates`). An `endpoints` entry reaches a registry, as
//! references name it, at another address (kind's `localhost:5001` is `kind-registry:5000`
//! from inside the cluster); references, digests and signatures keep the name.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{Stream, StreamExt, TryStreamExt};
use oci_client::RegistryOperation;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::secrets::RegistryAuth;
use oci_spec::image::ImageManifest;

use crate::build::BuiltImage;
use crate::credentials::{Credential, DockerConfig};
use crate::digest::{Digest, Hasher};
use crate::limits::Limits;
use crate::manifest::{self, Blob, Manifest, ManifestError};
use crate::media;
use crate::reference::ImageRef;

const USER_AGENT: &str = concat!("loop-plugins-oci/", env!("CARGO_PKG_VERSION"));

/// How to reach registries.
#[derive(Debug, Clone)]
pub struct RegistryOptions {
    /// Credentials by registry (a dockerconfigjson); registries not in it are asked anonymously.
    pub credentials: DockerConfig,
    /// Registries (`host:port` as references name them) reached over plain HTTP, besides
    /// loopback ones (localhost, 127.0.0.0/8, `[::1]`), which always are.
    pub insecure: Vec<String>,
    /// Registries (as references name them) reached at another address.
    pub endpoints: BTreeMap<String, Endpoint>,
    /// PEM certificates trusted besides the system's roots (a private registry's CA).
    pub ca_certificates: Vec<Vec<u8>>,
    pub limits: Limits,
    pub connect_timeout: Duration,
    /// How long a read may wait for bytes before the transfer fails.
    pub read_timeout: Duration,
}

impl Default for RegistryOptions {
    fn default() -> Self {
        Self {
            credentials: DockerConfig::default(),
            insecure: Vec::new(),
            endpoints: BTreeMap::new(),
            ca_certificates: Vec::new(),
            limits: Limits::default(),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(60),
        }
    }
}

/// Where a registry is reached when not at its own name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoint {
    /// `host:port` to connect to.
    pub host: String,
    pub plain_http: bool,
}

/// A registry client; cheap to clone, safe to share.
#[derive(Clone)]
pub struct Registry {
    options: Arc<RegistryOptions>,
    http: reqwest::Client,
    clients: Arc<Mutex<HashMap<String, oci_client::Client>>>,
}

/// Why a registry call failed. `is_transient` tells a retry from a refusal.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    #[error("{what}: registry unreachable or failing (will retry): {message}")]
    Unavailable { what: String, message: String },
    #[error("{what}: the registry refused our credentials or asked for some: {message}")]
    Unauthorized { what: String, message: String },
    #[error("{what}: not found in the registry")]
    NotFound { what: String },
    #[error("{what}: the registry answered {message}")]
    Protocol { what: String, message: String },
    #[error("{what} is over the {limit}-byte cap")]
    TooBig { what: String, limit: u64 },
    #[error("{what}: content digest is {actual}, but {expected} was asked for")]
    DigestMismatch {
        what: String,
        expected: String,
        actual: String,
    },
    #[error("{what}: {actual} bytes arrived, but its descriptor says {expected}")]
    SizeMismatch {
        what: String,
        expected: u64,
        actual: u64,
    },
    #[error("{what}: {source}")]
    Manifest { what: String, source: ManifestError },
    #[error("building the HTTP client: {0}")]
    Client(#[source] reqwest::Error),
    #[error("ca_certificates[{index}] is not PEM certificates: {message}")]
    Certificate { index: usize, message: String },
}

impl RegistryError {
    /// A failure that may pass on its own (network, 5xx, 429): requeue rather than refuse.
    pub fn is_transient(&self) -> bool {
        matches!(self, RegistryError::Unavailable { .. })
    }

    /// A stable name for conditions and Events.
    pub fn reason(&self) -> &'static str {
        match self {
            RegistryError::Unavailable { .. } | RegistryError::Client(_) => "RegistryUnavailable",
            RegistryError::Certificate { .. } => "RegistryConfigInvalid",
            RegistryError::Unauthorized { .. } => "RegistryUnauthorized",
            RegistryError::NotFound { .. } => "ImageNotFound",
            RegistryError::Protocol { .. } => "RegistryProtocol",
            RegistryError::TooBig { .. } => "ImageTooBig",
            RegistryError::DigestMismatch { .. } | RegistryError::SizeMismatch { .. } => {
                "ImageDigestMismatch"
            }
            RegistryError::Manifest { .. } => "ImageManifestInvalid",
        }
    }
}

/// A manifest body as the registry returned it, digest checked.
#[derive(Debug, Clone)]
pub struct FetchedManifest {
    pub bytes: Vec<u8>,
    pub digest: Digest,
    pub content_type: Option<String>,
}

/// A reference resolved to its image manifest.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The image manifest's digest: what the Plugin is pinned to.
    pub manifest_digest: Digest,
    /// The index's digest when the reference named an index.
    pub index_digest: Option<Digest>,
    pub manifest: ImageManifest,
    pub manifest_bytes: Vec<u8>,
}

impl Registry {
    /// A client with these options. Its process installs rustls' provider first (ring's, at
    /// the top of each binary's main).
    pub fn new(options: RegistryOptions) -> Result<Self, RegistryError> {
        let mut roots = Vec::new();
        for (index, pem) in options.ca_certificates.iter().enumerate() {
            let certs = reqwest::Certificate::from_pem_bundle(pem).map_err(|e| {
                RegistryError::Certificate {
                    index,
                    message: e.to_string(),
                }
            })?;
            if certs.is_empty() {
                return Err(RegistryError::Certificate {
                    index,
                    message: "no certificate in it".into(),
                });
            }
            roots.extend(certs);
        }
        let http = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .read_timeout(options.read_timeout)
            .user_agent(USER_AGENT)
            .tls_certs_merge(roots)
            .build()
            .map_err(RegistryError::Client)?;
        Ok(Self {
            options: Arc::new(options),
            http,
            clients: Arc::default(),
        })
    }

    pub fn limits(&self) -> &Limits {
        &self.options.limits
    }

    /// Where `r`'s registry is reached: `(host:port, plain HTTP?)`.
    fn endpoint(&self, r: &ImageRef) -> (String, bool) {
        if let Some(e) = self.options.endpoints.get(r.registry()) {
            return (e.host.clone(), e.plain_http);
        }
        let plain = r.is_loopback() || self.options.insecure.iter().any(|i| i == r.registry());
        // Docker Hub's API is not at docker.io (oci-spec knows where).
        let host = oci_client::Reference::with_tag(
            r.registry().to_string(),
            r.repository().to_string(),
            "latest".into(),
        )
        .resolve_registry()
        .to_string();
        (host, plain)
    }

    /// The oci-client form of a reference, naming the registry by where it is reached.
    fn oci_ref(&self, r: &ImageRef) -> oci_client::Reference {
        let (host, repository) = (self.endpoint(r).0, r.repository().to_string());
        match (r.tag(), r.digest()) {
            (Some(t), Some(d)) => oci_client::Reference::with_tag_and_digest(
                host,
                repository,
                t.to_string(),
                d.to_string(),
            ),
            (None, Some(d)) => oci_client::Reference::with_digest(host, repository, d.to_string()),
            (Some(t), None) => oci_client::Reference::with_tag(host, repository, t.to_string()),
            (None, None) => oci_client::Reference::with_tag(host, repository, "latest".to_string()),
        }
    }

    fn auth(&self, r: &ImageRef) -> RegistryAuth {
        match self.options.credentials.for_registry(r.registry()) {
            Some(Credential::Basic { username, password }) => {
                RegistryAuth::Basic(username.clone(), password.clone())
            }
            Some(Credential::Bearer(token)) => RegistryAuth::Bearer(token.clone()),
            None => RegistryAuth::Anonymous,
        }
    }

    /// The oci-client of a registry (one per registry: its protocol and token cache).
    fn client(&self, r: &ImageRef) -> oci_client::Client {
        let (host, plain) = self.endpoint(r);
        let mut clients = self.clients.lock().unwrap_or_else(|e| e.into_inner());
        clients
            .entry(format!("{host} {plain}"))
            .or_insert_with(|| {
                let certificates = self
                    .options
                    .ca_certificates
                    .iter()
                    .map(|pem| oci_client::client::Certificate {
                        encoding: oci_client::client::CertificateEncoding::Pem,
                        data: pem.clone(),
                    })
                    .collect();
                oci_client::Client::new(ClientConfig {
                    protocol: if plain {
                        ClientProtocol::Http
                    } else {
                        ClientProtocol::Https
                    },
                    extra_root_certificates: certificates,
                    connect_timeout: Some(self.options.connect_timeout),
                    read_timeout: Some(self.options.read_timeout),
                    user_agent: USER_AGENT,
                    platform_resolver: None,
                    ..ClientConfig::default()
                })
            })
            .clone()
    }

    /// Authenticates for `op` (fetching a token when the registry asks for one) and returns
    /// the client and the Authorization header value for our own requests.
    async fn authorized(
        &self,
        r: &ImageRef,
        op: RegistryOperation,
        what: &str,
    ) -> Result<(oci_client::Client, Option<String>), RegistryError> {
        let client = self.client(r);
        let auth = self.auth(r);
        let token = client
            .auth(&self.oci_ref(r), &auth, op)
            .await
            .map_err(|e| map_oci(what, e))?;
        let header = match (token, &auth) {
            (Some(token), _) => Some(format!("Bearer {token}")),
            (None, RegistryAuth::Basic(user, password)) => {
                use base64::Engine as _;
                Some(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
                ))
            }
            (None, _) => None,
        };
        Ok((client, header))
    }

    /// Fetches a manifest or index by tag or digest, through the manifest cap (and `expected`
    /// size, when a descriptor gave one); its digest is checked against the reference's digest
    /// and the registry's Docker-Content-Digest header.
    pub async fn fetch_manifest(
        &self,
        r: &ImageRef,
        expected: Option<u64>,
    ) -> Result<FetchedManifest, RegistryError> {
        let what = format!("manifest {r}");
        let (_, auth) = self.authorized(r, RegistryOperation::Pull, &what).await?;
        let (host, plain) = self.endpoint(r);
        let scheme = if plain { "http" } else { "https" };
        let url = format!(
            "{scheme}://{}/v2/{}/manifests/{}",
            host,
            r.repository(),
            r.manifest_key()
        );
        let mut request = self
            .http
            .get(&url)
            .header(http::header::ACCEPT, media::MANIFEST_ACCEPT.join(", "));
        if let Some(auth) = auth {
            request = request.header(http::header::AUTHORIZATION, auth);
        }
        let response = request.send().await.map_err(|e| unavailable(&what, e))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            return Err(status_error(&what, status.as_u16(), &body));
        }
        let header_digest = response
            .headers()
            .get("docker-content-digest")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let content_type = response
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let limit = expected.map_or(self.options.limits.manifest_bytes, |e| {
            e.min(self.options.limits.manifest_bytes)
        });
        if response.content_length().is_some_and(|len| len > limit) {
            return Err(RegistryError::TooBig { what, limit });
        }
        let stream = response.bytes_stream().map_err(std::io::Error::other);
        let (bytes, digest) = read_capped(stream, limit, &what).await?;
        if let Some(size) = expected
            && bytes.len() as u64 != size
        {
            return Err(RegistryError::SizeMismatch {
                what,
                expected: size,
                actual: bytes.len() as u64,
            });
        }
        if let Some(wanted) = r.digest()
            && *wanted != digest
        {
            return Err(RegistryError::DigestMismatch {
                what,
                expected: wanted.to_string(),
                actual: digest.to_string(),
            });
        }
        if let Some(header) = header_digest.filter(|h| h.starts_with("sha256:"))
            && header != digest.to_string()
        {
            return Err(RegistryError::DigestMismatch {
                what,
                expected: header,
                actual: digest.to_string(),
            });
        }
        Ok(FetchedManifest {
            bytes,
            digest,
            content_type,
        })
    }

    /// Resolves a reference to its image manifest: an index's linux/amd64 child, pinned by
    /// the child's digest.
    pub async fn resolve(&self, r: &ImageRef) -> Result<Resolved, RegistryError> {
        let top = self.fetch_manifest(r, None).await?;
        let what = format!("manifest {r}");
        let parsed =
            manifest::parse(&top.bytes, top.content_type.as_deref()).map_err(|source| {
                RegistryError::Manifest {
                    what: what.clone(),
                    source,
                }
            })?;
        match parsed {
            Manifest::Image(m) => Ok(Resolved {
                manifest_digest: top.digest,
                index_digest: None,
                manifest: *m,
                manifest_bytes: top.bytes,
            }),
            Manifest::Index(index) => {
                let child =
                    manifest::select_platform(&index, &self.options.limits).map_err(|source| {
                        RegistryError::Manifest {
                            what: what.clone(),
                            source,
                        }
                    })?;
                let child_ref = r.by_digest(child.digest.clone());
                let fetched = self.fetch_manifest(&child_ref, Some(child.size)).await?;
                let child_what = format!("manifest {child_ref}");
                match manifest::parse(&fetched.bytes, fetched.content_type.as_deref()) {
                    Ok(Manifest::Image(m)) => Ok(Resolved {
                        manifest_digest: fetched.digest,
                        index_digest: Some(top.digest),
                        manifest: *m,
                        manifest_bytes: fetched.bytes,
                    }),
                    Ok(Manifest::Index(_)) => Err(RegistryError::Manifest {
                        what: child_what,
                        source: ManifestError::NestedIndex(fetched.digest),
                    }),
                    Err(source) => Err(RegistryError::Manifest {
                        what: child_what,
                        source,
                    }),
                }
            }
        }
    }

    /// Fetches a whole blob into memory, refusing a descriptor over `cap` and checking size
    /// and digest.
    pub async fn fetch_blob(
        &self,
        r: &ImageRef,
        blob: &Blob,
        cap: u64,
    ) -> Result<Vec<u8>, RegistryError> {
        let what = format!("blob {} of {}", blob.digest, r.name());
        if blob.size > cap {
            return Err(RegistryError::TooBig { what, limit: cap });
        }
        let stream = self.blob_stream(r, blob).await?;
        let (bytes, digest) = read_capped(stream, blob.size, &what).await?;
        if bytes.len() as u64 != blob.size {
            return Err(RegistryError::SizeMismatch {
                what,
                expected: blob.size,
                actual: bytes.len() as u64,
            });
        }
        if digest != blob.digest {
            return Err(RegistryError::DigestMismatch {
                what,
                expected: blob.digest.to_string(),
                actual: digest.to_string(),
            });
        }
        Ok(bytes)
    }

    /// A blob's bytes as they arrive; oci-client checks the digest at the end of the stream
    /// (an `io::Error` wrapping its `DigestError`), and the reader should check it too.
    pub async fn blob_stream(
        &self,
        r: &ImageRef,
        blob: &Blob,
    ) -> Result<impl Stream<Item = std::io::Result<Bytes>> + Send + Unpin + 'static, RegistryError>
    {
        let what = format!("blob {} of {}", blob.digest, r.name());
        let (client, _) = self.authorized(r, RegistryOperation::Pull, &what).await?;
        let descriptor = oci_descriptor(blob);
        let sized = client
            .pull_blob_stream(&self.oci_ref(r), &descriptor)
            .await
            .map_err(|e| map_oci(&what, e))?;
        Ok(sized.stream)
    }

    /// Pushes a blob unless the registry has it already.
    pub async fn push_blob(
        &self,
        r: &ImageRef,
        blob: &Blob,
        bytes: impl Into<Bytes>,
    ) -> Result<(), RegistryError> {
        let what = format!("push of blob {} to {}", blob.digest, r.name());
        let (client, _) = self.authorized(r, RegistryOperation::Push, &what).await?;
        let oci = self.oci_ref(r);
        if client
            .blob_exists(&oci, &blob.digest.to_string())
            .await
            .map_err(|e| map_oci(&what, e))?
        {
            return Ok(());
        }
        client
            .push_blob(&oci, bytes.into(), &blob.digest.to_string())
            .await
            .map_err(|e| map_oci(&what, e))?;
        Ok(())
    }

    /// Pushes a manifest (or index) under `r`'s tag, or its digest when it has no tag.
    pub async fn push_manifest(
        &self,
        r: &ImageRef,
        bytes: Vec<u8>,
        media_type: &str,
    ) -> Result<Digest, RegistryError> {
        let what = format!("push of manifest {r}");
        let (client, _) = self.authorized(r, RegistryOperation::Push, &what).await?;
        let digest = Digest::of(&bytes);
        let target = match r.tag() {
            Some(tag) => r.with_tag(tag).expect("a parsed reference's tag is valid"),
            None => r.by_digest(digest.clone()),
        };
        let content_type =
            http::HeaderValue::from_str(media_type).map_err(|_| RegistryError::Protocol {
                what: what.clone(),
                message: format!("media type {media_type:?} is not a header value"),
            })?;
        client
            .push_manifest_raw(&self.oci_ref(&target), bytes, content_type)
            .await
            .map_err(|e| map_oci(&what, e))?;
        Ok(digest)
    }

    /// Pushes an image's layers, config and manifest; returns the manifest digest.
    pub async fn push_image(
        &self,
        r: &ImageRef,
        image: &BuiltImage,
    ) -> Result<Digest, RegistryError> {
        for layer in &image.layers {
            self.push_blob(r, &layer.blob, layer.bytes.clone()).await?;
        }
        self.push_blob(r, &image.config_blob, image.config.clone())
            .await?;
        self.push_manifest(r, image.manifest.clone(), media::OCI_MANIFEST)
            .await
    }

    /// Pushes images by digest and an index over them under `r`'s tag; returns the index digest.
    pub async fn push_index(
        &self,
        r: &ImageRef,
        images: &[(&BuiltImage, &str, &str)],
    ) -> Result<Digest, RegistryError> {
        for (image, _, _) in images {
            let untagged = r.by_digest(image.manifest_digest.clone());
            self.push_image(&untagged, image).await?;
        }
        let (index, _) = crate::build::build_index(images);
        self.push_manifest(r, index, media::OCI_INDEX).await
    }
}

fn oci_descriptor(blob: &Blob) -> oci_client::manifest::OciDescriptor {
    oci_client::manifest::OciDescriptor {
        media_type: blob.media_type.clone(),
        digest: blob.digest.to_string(),
        size: blob.size as i64,
        ..Default::default()
    }
}

/// Reads a stream into memory, refusing more than `limit` bytes.
async fn read_capped(
    mut stream: impl Stream<Item = std::io::Result<Bytes>> + Unpin,
    limit: u64,
    what: &str,
) -> Result<(Vec<u8>, Digest), RegistryError> {
    let mut bytes = Vec::new();
    let mut hasher = Hasher::default();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| io_error(what, e))?;
        if bytes.len() as u64 + chunk.len() as u64 > limit {
            return Err(RegistryError::TooBig {
                what: what.to_string(),
                limit,
            });
        }
        hasher.update(&chunk);
        bytes.extend_from_slice(&chunk);
    }
    Ok((bytes, hasher.finish()))
}

/// An error from a blob stream: oci-client's digest check, or the transfer failing.
pub(crate) fn io_error(what: &str, e: std::io::Error) -> RegistryError {
    if let Some(oci_client::errors::DigestError::VerificationError { expected, actual }) = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<oci_client::errors::DigestError>())
    {
        return RegistryError::DigestMismatch {
            what: what.to_string(),
            expected: expected.clone(),
            actual: actual.clone(),
        };
    }
    RegistryError::Unavailable {
        what: what.to_string(),
        message: e.to_string(),
    }
}

fn unavailable(what: &str, e: reqwest::Error) -> RegistryError {
    RegistryError::Unavailable {
        what: what.to_string(),
        message: error_chain(&e),
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut message = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

fn status_error(what: &str, status: u16, body: &str) -> RegistryError {
    let what = what.to_string();
    let message = format!(
        "HTTP {status} {}",
        body.chars().take(300).collect::<String>().trim()
    );
    match status {
        401 | 403 => RegistryError::Unauthorized { what, message },
        404 => RegistryError::NotFound { what },
        408 | 429 | 500..=599 => RegistryError::Unavailable { what, message },
        _ => RegistryError::Protocol { what, message },
    }
}

fn map_oci(what: &str, e: OciDistributionError) -> RegistryError {
    let w = what.to_string();
    match e {
        OciDistributionError::RequestError(e) => match e.status() {
            Some(status) => status_error(what, status.as_u16(), &e.to_string()),
            None => unavailable(what, e),
        },
        OciDistributionError::IoError(e) => io_error(what, e),
        OciDistributionError::ServerError { code, message, .. } => {
            status_error(what, code, &message)
        }
        OciDistributionError::UnauthorizedError { url } => RegistryError::Unauthorized {
            what: w,
            message: format!("HTTP 401 at {url}"),
        },
        OciDistributionError::AuthenticationFailure(message) => {
            RegistryError::Unauthorized { what: w, message }
        }
        OciDistributionError::DigestError(oci_client::errors::DigestError::VerificationError {
            expected,
            actual,
        }) => RegistryError::DigestMismatch {
            what: w,
            expected,
            actual,
        },
        OciDistributionError::RegistryError { envelope, .. } => {
            let message = envelope.to_string();
            let code = envelope.errors.first().map(|e| &e.code);
            match code {
                Some(
                    OciErrorCode::BlobUnknown
                    | OciErrorCode::ManifestUnknown
                    | OciErrorCode::NameUnknown
                    | OciErrorCode::NotFound,
                ) => RegistryError::NotFound { what: w },
                Some(OciErrorCode::Unauthorized | OciErrorCode::Denied) => {
                    RegistryError::Unauthorized { what: w, message }
                }
                Some(OciErrorCode::Toomanyrequests) => {
                    RegistryError::Unavailable { what: w, message }
                }
                _ => RegistryError::Protocol { what: w, message },
            }
        }
        other => RegistryError::Protocol {
            what: w,
            message: other.to_string(),
        },
    }
}
