//! Publisher keys: Ed25519 key pairs (ed25519-dalek), the private key stored as a PKCS#8 PEM
//! file (`-----BEGIN PRIVATE KEY-----`, the format `openssl genpkey -algorithm ed25519`
//! writes and reads), the public key printed as 64 lowercase hex digits, the form
//! `trusted_publisher_keys` lists (as zeroclaw's do).

use ed25519_dalek::pkcs8::{DecodePrivateKey, EncodePrivateKey};
use ed25519_dalek::{SigningKey, VerifyingKey};

/// A publisher's signing key.
pub struct PublisherKey {
    key: SigningKey,
}

/// Why a key cannot be read or made.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    #[error("the OS random source failed: {0}")]
    Random(String),
    #[error("key file is not a PKCS#8 PEM Ed25519 private key (-----BEGIN PRIVATE KEY-----): {0}")]
    Pem(String),
    #[error("public key {key:?} is not 64 hex digits of an Ed25519 public key")]
    PublicHex { key: String },
    #[error("key file {path}: {source}")]
    File {
        path: std::path::PathBuf,
        source: std::io::Error,
    },
}

impl PublisherKey {
    /// A new key from the OS's random source.
    pub fn generate() -> Result<Self, KeyError> {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).map_err(|e| KeyError::Random(e.to_string()))?;
        let key = SigningKey::from_bytes(&seed);
        seed.fill(0);
        Ok(Self { key })
    }

    /// Reads a PKCS#8 PEM private key file's text.
    pub fn from_pem(pem: &str) -> Result<Self, KeyError> {
        let key = SigningKey::from_pkcs8_pem(pem).map_err(|e| KeyError::Pem(e.to_string()))?;
        Ok(Self { key })
    }

    /// The PKCS#8 PEM text to store (mode 0600: it is the secret).
    pub fn to_pem(&self) -> Result<String, KeyError> {
        let pem = self
            .key
            .to_pkcs8_pem(ed25519_dalek::pkcs8::spki::der::pem::LineEnding::LF)
            .map_err(|e| KeyError::Pem(e.to_string()))?;
        Ok(pem.to_string())
    }

    /// Writes a new key file: refuses to replace an existing file, mode 0600.
    pub fn save(&self, path: &std::path::Path) -> Result<(), KeyError> {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let io = |source| KeyError::File {
            path: path.to_path_buf(),
            source,
        };
        let pem = self.to_pem()?;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        file.write_all(pem.as_bytes()).map_err(io)?;
        file.sync_all().map_err(io)
    }

    /// Reads a key file written by [`PublisherKey::save`] (or `openssl genpkey -algorithm ed25519`).
    pub fn load(path: &std::path::Path) -> Result<Self, KeyError> {
        let pem = std::fs::read_to_string(path).map_err(|source| KeyError::File {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_pem(&pem).map_err(|e| match e {
            KeyError::Pem(message) => KeyError::Pem(format!("{}: {message}", path.display())),
            other => other,
        })
    }

    /// The public key as 64 lowercase hex digits.
    pub fn public_hex(&self) -> String {
        public_hex(&self.key.verifying_key())
    }

    pub(crate) fn signing_key(&self) -> &SigningKey {
        &self.key
    }
}

impl std::fmt::Debug for PublisherKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PublisherKey(public {})", self.public_hex())
    }
}

/// A public key as 64 lowercase hex digits.
pub fn public_hex(key: &VerifyingKey) -> String {
    hex::encode(key.as_bytes())
}

/// Parses a public key from hex (any case, surrounding space ignored).
pub fn parse_public_hex(key: &str) -> Result<VerifyingKey, KeyError> {
    let bad = || KeyError::PublicHex {
        key: crate::quote::shown(key),
    };
    let bytes: [u8; 32] = hex::decode(key.trim())
        .map_err(|_| bad())?
        .try_into()
        .map_err(|_| bad())?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| bad())
}

/// A key as compared with `trusted_publisher_keys`: trimmed, lowercase.
pub fn normalize_hex(key: &str) -> String {
    key.trim().to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pem_round_trip_keeps_the_key() {
        let key = PublisherKey::generate().unwrap();
        let pem = key.to_pem().unwrap();
        assert!(pem.starts_with("-----BEGIN PRIVATE KEY-----\n"), "{pem}");
        let back = PublisherKey::from_pem(&pem).unwrap();
        assert_eq!(back.public_hex(), key.public_hex());
        assert_eq!(key.public_hex().len(), 64);
        assert_ne!(
            PublisherKey::generate().unwrap().public_hex(),
            key.public_hex()
        );
    }

    #[test]
    fn key_files_are_private_and_not_overwritten() {
        use std::os::unix::fs::PermissionsExt as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("publisher.pem");
        let key = PublisherKey::generate().unwrap();
        key.save(&path).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(
            PublisherKey::load(&path).unwrap().public_hex(),
            key.public_hex()
        );
        let err = PublisherKey::generate().unwrap().save(&path).unwrap_err();
        assert!(
            matches!(err, KeyError::File { ref source, .. } if source.kind() == std::io::ErrorKind::AlreadyExists),
            "{err}"
        );
        assert!(
            PublisherKey::load(&dir.path().join("missing.pem"))
                .unwrap_err()
                .to_string()
                .contains("missing.pem")
        );
    }

    #[test]
    fn reads_an_openssl_key() {
        // `openssl genpkey -algorithm ed25519` output, and its public key (`openssl pkey -pubout`).
        let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEINHLkdKTCZ0pat+3PHghaYQMMiA4a8ww3yJrG6cNOmZr\n-----END PRIVATE KEY-----\n";
        let key = PublisherKey::from_pem(pem).unwrap();
        assert_eq!(
            key.public_hex(),
            "84a9ecf6ef55085d734ac5aaa0f5069ed9ace1e64bc9b3fae338dfd31503a3ff"
        );
    }

    #[test]
    fn bad_keys_are_named() {
        assert!(matches!(
            PublisherKey::from_pem("nope"),
            Err(KeyError::Pem(_))
        ));
        let err = parse_public_hex("abcd").unwrap_err().to_string();
        assert!(err.contains("\"abcd\""), "{err}");
        let key = PublisherKey::generate().unwrap();
        assert!(parse_public_hex(&format!("  {}  ", key.public_hex().to_uppercase())).is_ok());
    }
}
