//! A signature as carried around: the payload's canonical text, the Ed25519 signature over
//! those bytes (standard base64) and the signer's public key (hex). This is what the Plugin's
//! `spec.signature` holds and what the `.sig` artifact stores. Signing and checking the
//! cryptography are here; whether the signature is good enough is `policy`'s decision.

use base64::Engine as _;
use ed25519_dalek::Signer;
use serde::{Deserialize, Serialize};

use super::keys::{self, PublisherKey};
use super::payload::{Payload, PayloadError};
use crate::quote::shown;

/// A detached signature with its payload and key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SignatureRecord {
    /// The canonical payload JSON, as signed.
    pub payload: String,
    /// Ed25519 signature over the payload's bytes, standard base64 (88 characters).
    pub signature: String,
    /// The signer's public key, 64 lowercase hex digits.
    pub public_key: String,
}

/// Why a signature does not verify.
#[derive(Debug, thiserror::Error)]
pub enum VerifyError {
    #[error("public key {0:?} is not 64 hex digits of an Ed25519 public key")]
    PublicKey(String),
    #[error("signature is not base64 of 64 bytes")]
    Encoding,
    #[error("signature does not verify against the payload with key {0}")]
    Mismatch(String),
    #[error(transparent)]
    Payload(#[from] PayloadError),
}

impl SignatureRecord {
    /// Signs a payload.
    pub fn sign(key: &PublisherKey, payload: &Payload) -> Self {
        let bytes = payload.to_bytes();
        let signature = key.signing_key().sign(&bytes);
        Self {
            payload: String::from_utf8(bytes).expect("serde_json writes UTF-8"),
            signature: base64::engine::general_purpose::STANDARD.encode(signature.to_bytes()),
            public_key: key.public_hex(),
        }
    }

    /// The payload, parsed without checking the signature (policy compares it with the image
    /// first: a payload for another image is refused whatever the mode).
    pub fn claimed_payload(&self) -> Result<Payload, PayloadError> {
        Payload::parse(self.payload.as_bytes())
    }

    /// Checks the signature over the payload bytes (strict Ed25519: no malleable forms) and
    /// returns the payload it vouches for.
    pub fn verify(&self) -> Result<Payload, VerifyError> {
        let key = keys::parse_public_hex(&self.public_key)
            .map_err(|_| VerifyError::PublicKey(shown(&self.public_key)))?;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(self.signature.trim())
            .map_err(|_| VerifyError::Encoding)?;
        let bytes: [u8; 64] = bytes.try_into().map_err(|_| VerifyError::Encoding)?;
        let signature = ed25519_dalek::Signature::from_bytes(&bytes);
        key.verify_strict(self.payload.as_bytes(), &signature)
            .map_err(|_| VerifyError::Mismatch(shown(&self.public_key)))?;
        Ok(self.claimed_payload()?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::digest::Digest;

    fn payload() -> Payload {
        Payload::new(
            "echo",
            "0.1.0",
            Digest::of(b"{}").hex(),
            "127.0.0.1:5000/echo",
            &Digest::of(b"m"),
        )
    }

    #[test]
    fn sign_verify_round_trip() {
        let key = PublisherKey::generate().unwrap();
        let record = SignatureRecord::sign(&key, &payload());
        assert_eq!(record.verify().unwrap(), payload());
        assert_eq!(record.public_key, key.public_hex());
        let json = serde_json::to_string(&record).unwrap();
        assert!(json.contains("\"publicKey\""), "{json}");
    }

    #[test]
    fn tampering_is_caught() {
        let key = PublisherKey::generate().unwrap();
        let record = SignatureRecord::sign(&key, &payload());
        let mut tampered = record.clone();
        tampered.payload = tampered.payload.replace("0.1.0", "0.1.1");
        assert!(
            matches!(tampered.verify(), Err(VerifyError::Mismatch(k)) if k == key.public_hex())
        );
        let mut other_key = record.clone();
        other_key.public_key = PublisherKey::generate().unwrap().public_hex();
        assert!(matches!(other_key.verify(), Err(VerifyError::Mismatch(_))));
        let mut garbled = record.clone();
        garbled.signature = "abc".into();
        assert!(matches!(garbled.verify(), Err(VerifyError::Encoding)));
        let mut bad_key = record;
        bad_key.public_key = "zz".into();
        assert!(matches!(bad_key.verify(), Err(VerifyError::PublicKey(_))));
    }
}
