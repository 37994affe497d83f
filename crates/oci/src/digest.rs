//! Content digests: `sha256:<64 lowercase hex>`, the only algorithm we accept, parsed once and
//! computed over bytes or streams. Everything that names content by digest uses this type.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest as _, Sha256};

use crate::quote::shown;

/// A `sha256:<hex>` content digest.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    hex: String,
}

/// Why a digest string is not one (quoted by its start when long).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DigestError {
    #[error("digest {0:?} has no algorithm (want sha256:<64 hex digits>)")]
    NoAlgorithm(String),
    #[error("digest {0:?} uses an algorithm other than sha256, the only one accepted")]
    Algorithm(String),
    #[error("digest {0:?} is not sha256: followed by 64 lowercase hex digits")]
    Encoding(String),
}

impl Digest {
    /// The sha256 digest of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        Self {
            hex: hex::encode(Sha256::digest(bytes)),
        }
    }

    /// A digest from 32 raw sha256 bytes.
    pub fn from_sha256(bytes: [u8; 32]) -> Self {
        Self {
            hex: hex::encode(bytes),
        }
    }

    /// Parses `sha256:<64 lowercase hex>`.
    pub fn parse(s: &str) -> Result<Self, DigestError> {
        let Some((algorithm, hex)) = s.split_once(':') else {
            return Err(DigestError::NoAlgorithm(shown(s)));
        };
        if algorithm != "sha256" {
            return Err(DigestError::Algorithm(shown(s)));
        }
        Self::from_hex(hex).ok_or_else(|| DigestError::Encoding(shown(s)))
    }

    /// A digest from its 64 lowercase hex digits (no `sha256:` prefix).
    pub fn from_hex(hex: &str) -> Option<Self> {
        let ok = hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        ok.then(|| Self {
            hex: hex.to_string(),
        })
    }

    /// The 64 hex digits without the algorithm.
    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// The tag cosign-style artifacts about this digest live under: `sha256-<hex>`.
    pub fn tag_form(&self) -> String {
        format!("sha256-{}", self.hex)
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl FromStr for Digest {
    type Err = DigestError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// A running sha256 over a stream, with a byte count.
#[derive(Default)]
pub struct Hasher {
    inner: Sha256,
    bytes: u64,
}

impl Hasher {
    pub fn update(&mut self, data: &[u8]) {
        self.inner.update(data);
        self.bytes += data.len() as u64;
    }

    /// Bytes hashed so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    pub fn finish(self) -> Digest {
        Digest::from_sha256(self.inner.finalize().into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        let d = Digest::of(b"");
        assert_eq!(
            d.to_string(),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(Digest::parse(&d.to_string()).unwrap(), d);
        assert_eq!(d.tag_form(), format!("sha256-{}", d.hex()));
    }

    #[test]
    fn refuses_what_is_not_sha256_hex() {
        let hex64 = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        assert!(matches!(
            Digest::parse(hex64),
            Err(DigestError::NoAlgorithm(_))
        ));
        assert!(matches!(
            Digest::parse(&format!("sha512:{hex64}")),
            Err(DigestError::Algorithm(_))
        ));
        assert!(matches!(
            Digest::parse(&format!("sha256:{}", hex64.to_uppercase())),
            Err(DigestError::Encoding(_))
        ));
        assert!(matches!(
            Digest::parse("sha256:abc"),
            Err(DigestError::Encoding(_))
        ));
    }

    #[test]
    fn hasher_matches_one_shot() {
        let mut h = Hasher::default();
        h.update(b"hello ");
        h.update(b"world");
        assert_eq!(h.bytes(), 11);
        assert_eq!(h.finish(), Digest::of(b"hello world"));
    }

    #[test]
    fn a_long_digest_is_quoted_by_its_start() {
        let long = format!("sha256:{}", "a".repeat(100_000));
        let err = Digest::parse(&long).unwrap_err().to_string();
        assert!(err.len() < 400, "{err}");
        assert!(err.contains("(100007 bytes)"), "{err}");
    }
}
