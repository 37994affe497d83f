//! Image references, `[registry/]repository[:tag][@sha256:...]`, parsed with Docker's defaults
//! (no registry means `docker.io`, a one-part Docker Hub name means `library/<name>`) and errors
//! that say which part is wrong. Pure: no I/O.

use std::fmt;
use std::str::FromStr;

use crate::digest::{Digest, DigestError};

/// The registry a reference names when it names none.
pub const DOCKER_HUB: &str = "docker.io";
/// The longest `registry/repository` Docker accepts.
const MAX_NAME_LEN: usize = 255;
/// The longest tag the distribution spec accepts.
const MAX_TAG_LEN: usize = 128;

/// A parsed image reference.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct ImageRef {
    registry: String,
    repository: String,
    tag: Option<String>,
    digest: Option<Digest>,
}

/// Why a string is not an image reference; each names the part and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReferenceError {
    #[error("image reference is empty")]
    Empty,
    #[error("image reference {reference:?}: digest: {source}")]
    Digest {
        reference: String,
        source: DigestError,
    },
    #[error(
        "image reference {reference:?}: tag {tag:?} is not [A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}"
    )]
    Tag { reference: String, tag: String },
    #[error("image reference {reference:?}: registry {registry:?}: {reason}")]
    Registry {
        reference: String,
        registry: String,
        reason: &'static str,
    },
    #[error("image reference {reference:?}: repository {repository:?}: {reason}")]
    Repository {
        reference: String,
        repository: String,
        reason: &'static str,
    },
    #[error("image reference {reference:?}: name is {len} characters, longer than {MAX_NAME_LEN}")]
    TooLong { reference: String, len: usize },
}

impl ImageRef {
    /// Parses a reference; see the module docs for the defaults.
    pub fn parse(s: &str) -> Result<Self, ReferenceError> {
        if s.trim().is_empty() {
            return Err(ReferenceError::Empty);
        }
        let reference = s.to_string();
        let (rest, digest) = match s.rsplit_once('@') {
            Some((rest, digest)) => {
                let digest = Digest::parse(digest).map_err(|source| ReferenceError::Digest {
                    reference: reference.clone(),
                    source,
                })?;
                (rest, Some(digest))
            }
            None => (s, None),
        };
        let last_slash = rest.rfind('/').map_or(0, |i| i + 1);
        let (name, tag) = match rest[last_slash..].rfind(':') {
            Some(i) => (&rest[..last_slash + i], Some(&rest[last_slash + i + 1..])),
            None => (rest, None),
        };
        if let Some(tag) = tag
            && !valid_tag(tag)
        {
            return Err(ReferenceError::Tag {
                reference,
                tag: tag.to_string(),
            });
        }
        let (registry, path) = match name.split_once('/') {
            Some((first, path)) if looks_like_registry(first) => {
                (first.to_string(), path.to_string())
            }
            _ => (DOCKER_HUB.to_string(), name.to_string()),
        };
        if let Err(reason) = check_registry(&registry) {
            return Err(ReferenceError::Registry {
                reference,
                registry,
                reason,
            });
        }
        let registry = if registry == "index.docker.io" {
            DOCKER_HUB.to_string()
        } else {
            registry
        };
        if let Err(reason) = check_repository(&path) {
            return Err(ReferenceError::Repository {
                reference,
                repository: path,
                reason,
            });
        }
        let repository = if registry == DOCKER_HUB && !path.contains('/') {
            format!("library/{path}")
        } else {
            path
        };
        let len = registry.len() + 1 + repository.len();
        if len > MAX_NAME_LEN {
            return Err(ReferenceError::TooLong { reference, len });
        }
        Ok(Self {
            registry,
            repository,
            tag: tag.map(str::to_string),
            digest,
        })
    }

    /// The registry as written (`docker.io` for Docker Hub), with its port if any.
    pub fn registry(&self) -> &str {
        &self.registry
    }

    /// The repository inside the registry, e.g. `plugins/echo` or `library/busybox`.
    pub fn repository(&self) -> &str {
        &self.repository
    }

    pub fn tag(&self) -> Option<&str> {
        self.tag.as_deref()
    }

    pub fn digest(&self) -> Option<&Digest> {
        self.digest.as_ref()
    }

    /// `registry/repository`: what a signature payload names as the repository.
    pub fn name(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    /// The registry's host without its port (`[::1]` keeps its brackets).
    pub fn host(&self) -> &str {
        if self.registry.starts_with('[') {
            return self
                .registry
                .split_once(']')
                .map_or(&self.registry, |(h, _)| &self.registry[..h.len() + 1]);
        }
        self.registry
            .split_once(':')
            .map_or(&self.registry, |(h, _)| h)
    }

    /// True for `localhost`, `127.0.0.0/8` and `[::1]` registries, which are reached over plain HTTP.
    pub fn is_loopback(&self) -> bool {
        let host = self.host();
        host == "localhost"
            || host == "[::1]"
            || host
                .parse::<std::net::Ipv4Addr>()
                .is_ok_and(|ip| ip.is_loopback())
    }

    /// The same reference pinned to `digest`, its tag kept (`repo:tag@sha256:...`, which
    /// Kubernetes pulls by the digest).
    pub fn pinned(&self, digest: Digest) -> Self {
        Self {
            digest: Some(digest),
            ..self.clone()
        }
    }

    /// `registry/repository@digest`, no tag: how content is fetched once resolved.
    pub fn by_digest(&self, digest: Digest) -> Self {
        Self {
            tag: None,
            digest: Some(digest),
            ..self.clone()
        }
    }

    /// `registry/repository:tag`, no digest.
    pub fn with_tag(&self, tag: &str) -> Result<Self, ReferenceError> {
        if !valid_tag(tag) {
            return Err(ReferenceError::Tag {
                reference: self.to_string(),
                tag: tag.to_string(),
            });
        }
        Ok(Self {
            tag: Some(tag.to_string()),
            digest: None,
            ..self.clone()
        })
    }

    /// What to ask the registry's manifest endpoint for: the digest when pinned, else the tag,
    /// else `latest`.
    pub fn manifest_key(&self) -> String {
        match (&self.digest, &self.tag) {
            (Some(d), _) => d.to_string(),
            (None, Some(t)) => t.clone(),
            (None, None) => "latest".to_string(),
        }
    }
}

impl fmt::Display for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.registry, self.repository)?;
        if let Some(tag) = &self.tag {
            write!(f, ":{tag}")?;
        }
        if let Some(digest) = &self.digest {
            write!(f, "@{digest}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for ImageRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ImageRef({self})")
    }
}

impl FromStr for ImageRef {
    type Err = ReferenceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// Docker's rule: the first path part is a registry when it has a dot or a port, or is localhost.
fn looks_like_registry(first: &str) -> bool {
    first.contains('.') || first.contains(':') || first == "localhost" || first.starts_with('[')
}

fn valid_tag(tag: &str) -> bool {
    let mut bytes = tag.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphanumeric() || b == b'_' => {}
        _ => return false,
    }
    tag.len() <= MAX_TAG_LEN
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.' || b == b'-')
}

fn check_registry(registry: &str) -> Result<(), &'static str> {
    let (host, port) = if let Some(rest) = registry.strip_prefix('[') {
        let (ip, after) = rest
            .split_once(']')
            .ok_or("IPv6 address has no closing ]")?;
        ip.parse::<std::net::Ipv6Addr>()
            .map_err(|_| "not an IPv6 address in brackets")?;
        match after {
            "" => ("", None),
            p => (
                "",
                Some(p.strip_prefix(':').ok_or("text after ] is not :port")?),
            ),
        }
    } else {
        match registry.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (registry, None),
        }
    };
    if !registry.starts_with('[') {
        if host.is_empty() {
            return Err("host is empty");
        }
        let label_ok = |l: &str| {
            !l.is_empty()
                && !l.starts_with('-')
                && !l.ends_with('-')
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        };
        if !host.split('.').all(label_ok) {
            return Err("host is not a DNS name or IPv4 address");
        }
    }
    if let Some(port) = port {
        match port.parse::<u16>() {
            Ok(p) if p > 0 && port.bytes().all(|b| b.is_ascii_digit()) => {}
            _ => return Err("port is not a number from 1 to 65535"),
        }
    }
    Ok(())
}

fn check_repository(path: &str) -> Result<(), &'static str> {
    if path.is_empty() {
        return Err("is empty");
    }
    if path.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err("has uppercase letters (repositories are lowercase)");
    }
    for component in path.split('/') {
        if component.is_empty() {
            return Err("has an empty path component");
        }
        if !valid_component(component) {
            return Err("has a component that is not [a-z0-9]+ joined by '.', '_', '__' or dashes");
        }
    }
    Ok(())
}

/// `[a-z0-9]+((\.|_|__|-+)[a-z0-9]+)*`
fn valid_component(c: &str) -> bool {
    let b = c.as_bytes();
    let alnum = |x: u8| x.is_ascii_lowercase() || x.is_ascii_digit();
    if !alnum(b[0]) || !alnum(b[b.len() - 1]) {
        return false;
    }
    let mut i = 0;
    while i < b.len() {
        if alnum(b[i]) {
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !alnum(b[i]) {
            i += 1;
        }
        let sep = &c[start..i];
        let ok = sep == "." || sep == "_" || sep == "__" || sep.bytes().all(|x| x == b'-');
        if !ok {
            return false;
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEX: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn parts(s: &str) -> (String, String, Option<String>, Option<String>) {
        let r = ImageRef::parse(s).unwrap();
        (
            r.registry().into(),
            r.repository().into(),
            r.tag().map(Into::into),
            r.digest().map(|d| d.to_string()),
        )
    }

    #[test]
    fn docker_hub_defaults() {
        assert_eq!(
            parts("busybox"),
            ("docker.io".into(), "library/busybox".into(), None, None)
        );
        assert_eq!(
            parts("busybox:1.36"),
            (
                "docker.io".into(),
                "library/busybox".into(),
                Some("1.36".into()),
                None
            )
        );
        assert_eq!(
            parts("acme/echo:v1"),
            (
                "docker.io".into(),
                "acme/echo".into(),
                Some("v1".into()),
                None
            )
        );
        assert_eq!(parts("index.docker.io/acme/echo").0, "docker.io");
        assert_eq!(parts("docker.io/busybox").1, "library/busybox");
    }

    #[test]
    fn local_registries_and_ports() {
        let r = ImageRef::parse("localhost:5000/plugins/echo:dev").unwrap();
        assert_eq!(
            (r.registry(), r.repository(), r.tag()),
            ("localhost:5000", "plugins/echo", Some("dev"))
        );
        assert!(r.is_loopback());
        assert_eq!(r.host(), "localhost");
        let r = ImageRef::parse("127.0.0.1:41234/echo").unwrap();
        assert_eq!(
            (r.registry(), r.repository(), r.tag()),
            ("127.0.0.1:41234", "echo", None)
        );
        assert!(r.is_loopback());
        assert!(ImageRef::parse("localhost/echo").unwrap().is_loopback());
        let r = ImageRef::parse("[::1]:5000/echo").unwrap();
        assert_eq!((r.registry(), r.host()), ("[::1]:5000", "[::1]"));
        assert!(r.is_loopback());
        assert!(
            !ImageRef::parse("registry.example.com:5000/echo")
                .unwrap()
                .is_loopback()
        );
        assert!(!ImageRef::parse("10.0.0.1:5000/echo").unwrap().is_loopback());
    }

    #[test]
    fn digests_and_tags_together() {
        let s = format!("ghcr.io/acme/echo:1.0@sha256:{HEX}");
        let (reg, repo, tag, digest) = parts(&s);
        assert_eq!(
            (reg.as_str(), repo.as_str(), tag.as_deref()),
            ("ghcr.io", "acme/echo", Some("1.0"))
        );
        assert_eq!(digest.unwrap(), format!("sha256:{HEX}"));
        assert_eq!(ImageRef::parse(&s).unwrap().to_string(), s);
        let (_, _, tag, digest) = parts(&format!("127.0.0.1:5000/echo@sha256:{HEX}"));
        assert_eq!((tag, digest.is_some()), (None, true));
    }

    #[test]
    fn pinning_keeps_the_tag_and_fetching_drops_it() {
        let r = ImageRef::parse("127.0.0.1:5000/plugins/echo:dev").unwrap();
        let d = Digest::parse(&format!("sha256:{HEX}")).unwrap();
        assert_eq!(
            r.pinned(d.clone()).to_string(),
            format!("127.0.0.1:5000/plugins/echo:dev@sha256:{HEX}")
        );
        assert_eq!(
            r.by_digest(d.clone()).to_string(),
            format!("127.0.0.1:5000/plugins/echo@sha256:{HEX}")
        );
        assert_eq!(r.by_digest(d).manifest_key(), format!("sha256:{HEX}"));
        assert_eq!(r.manifest_key(), "dev");
        assert_eq!(ImageRef::parse("echo").unwrap().manifest_key(), "latest");
        assert_eq!(r.name(), "127.0.0.1:5000/plugins/echo");
    }

    #[test]
    fn errors_name_the_part() {
        let cases: &[(&str, &str)] = &[
            ("", "empty"),
            ("echo@sha256:abc", "digest"),
            (&format!("echo@sha512:{HEX}"), "sha256"),
            ("echo:-bad", "tag \"-bad\""),
            ("Echo/Plugin", "uppercase"),
            ("localhost:5000/Echo", "uppercase"),
            ("localhost:99999/echo", "port"),
            ("localhost:5000//echo", "empty path component"),
            ("bad_host.com/echo", "host"),
            ("localhost:5000/echo..x", "component"),
            ("localhost:5000/-echo", "component"),
        ];
        for (input, needle) in cases {
            let err = ImageRef::parse(input).unwrap_err().to_string();
            assert!(
                err.contains(needle),
                "{input:?}: {err:?} should mention {needle:?}"
            );
        }
        let long = format!("localhost:5000/{}", "a".repeat(300));
        assert!(matches!(
            ImageRef::parse(&long),
            Err(ReferenceError::TooLong { .. })
        ));
        let long_tag = format!("echo:{}", "a".repeat(129));
        assert!(matches!(
            ImageRef::parse(&long_tag),
            Err(ReferenceError::Tag { .. })
        ));
    }

    #[test]
    fn separators_inside_components() {
        for ok in ["a.b", "a_b", "a__b", "a-b", "a---b", "a0/b-c/d.e_f"] {
            assert!(ImageRef::parse(&format!("localhost/{ok}")).is_ok(), "{ok}");
        }
        for bad in ["a___b", "a._b", "a.", "_a"] {
            assert!(
                ImageRef::parse(&format!("localhost/{bad}")).is_err(),
                "{bad}"
            );
        }
    }
}
