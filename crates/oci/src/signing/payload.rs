//! The signed payload: canonical JSON (keys sorted, no whitespace, UTF-8) naming what a
//! signature vouches for, and nothing else:
//!
//! ```json
//! {"image":{"digest":"sha256:<image manifest digest>","repository":"<registry>/<repository>"},
//!  "plugin":{"name":"<plugin name>","plugin_json_sha256":"<hex>","version":"<version>"},
//!  "type":"dev.loop.plugin.signature.v1"}
//! ```
//!
//! (shown wrapped; the bytes are one line). `plugin.name` and `plugin.version` are the
//! manifest's `id` and `version`; `plugin_json_sha256` is the sha256 of /loop-plugin/plugin.json
//! as shipped; `image.digest` is the image manifest's digest (the linux/amd64 child of an
//! index), `image.repository` the repository it was signed in. A payload parses only if it is
//! exactly the canonical encoding of its own fields, so one claim has one byte form.

use serde::{Deserialize, Serialize};

use crate::digest::Digest;
use crate::quote::shown;

/// The payload's `type`.
pub const PAYLOAD_TYPE: &str = "dev.loop.plugin.signature.v1";
/// Payloads are small; anything bigger is refused before parsing.
pub const MAX_PAYLOAD_BYTES: usize = 16 * 1024;

/// What a signature vouches for. Field order is key order: serde writes them sorted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Payload {
    pub image: PayloadImage,
    pub plugin: PayloadPlugin,
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayloadImage {
    pub digest: String,
    pub repository: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PayloadPlugin {
    pub name: String,
    pub plugin_json_sha256: String,
    pub version: String,
}

/// Why bytes are not a payload.
#[derive(Debug, thiserror::Error)]
pub enum PayloadError {
    #[error("payload is {0} bytes, over the {MAX_PAYLOAD_BYTES}-byte cap")]
    TooBig(usize),
    #[error(
        "payload is not the JSON of a plugin signature payload: {}",
        shown(&.0.to_string())
    )]
    Json(#[source] serde_json::Error),
    #[error("payload type is {0:?}, not {PAYLOAD_TYPE:?}")]
    Type(String),
    #[error("payload image.digest {0:?} is not sha256:<64 hex>")]
    Digest(String),
    #[error("payload plugin.plugin_json_sha256 {0:?} is not 64 lowercase hex digits")]
    PluginJsonSha(String),
    #[error("payload is not in canonical form (keys sorted, no whitespace)")]
    NotCanonical,
}

impl Payload {
    pub fn new(
        name: &str,
        version: &str,
        plugin_json_sha256: &str,
        repository: &str,
        manifest_digest: &Digest,
    ) -> Self {
        Self {
            image: PayloadImage {
                digest: manifest_digest.to_string(),
                repository: repository.to_string(),
            },
            plugin: PayloadPlugin {
                name: name.to_string(),
                plugin_json_sha256: plugin_json_sha256.to_string(),
                version: version.to_string(),
            },
            kind: PAYLOAD_TYPE.to_string(),
        }
    }

    /// The canonical bytes: what is signed.
    pub fn to_bytes(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a struct of strings serializes")
    }

    /// Parses canonical payload bytes.
    pub fn parse(bytes: &[u8]) -> Result<Self, PayloadError> {
        if bytes.len() > MAX_PAYLOAD_BYTES {
            return Err(PayloadError::TooBig(bytes.len()));
        }
        let payload: Payload = serde_json::from_slice(bytes).map_err(PayloadError::Json)?;
        if payload.kind != PAYLOAD_TYPE {
            return Err(PayloadError::Type(shown(&payload.kind)));
        }
        if Digest::parse(&payload.image.digest).is_err() {
            return Err(PayloadError::Digest(shown(&payload.image.digest)));
        }
        if Digest::from_hex(&payload.plugin.plugin_json_sha256).is_none() {
            return Err(PayloadError::PluginJsonSha(shown(
                &payload.plugin.plugin_json_sha256,
            )));
        }
        if payload.to_bytes() != bytes {
            return Err(PayloadError::NotCanonical);
        }
        Ok(payload)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Payload {
        Payload::new(
            "echo",
            "0.1.0",
            Digest::of(b"{}").hex(),
            "127.0.0.1:5000/plugins/echo",
            &Digest::of(b"m"),
        )
    }

    #[test]
    fn canonical_bytes_are_sorted_one_line_json() {
        let bytes = String::from_utf8(sample().to_bytes()).unwrap();
        let expected = format!(
            r#"{{"image":{{"digest":"{}","repository":"127.0.0.1:5000/plugins/echo"}},"plugin":{{"name":"echo","plugin_json_sha256":"{}","version":"0.1.0"}},"type":"dev.loop.plugin.signature.v1"}}"#,
            Digest::of(b"m"),
            Digest::of(b"{}").hex()
        );
        assert_eq!(bytes, expected);
        assert_eq!(Payload::parse(bytes.as_bytes()).unwrap(), sample());
    }

    #[test]
    fn refuses_other_forms() {
        let pretty = serde_json::to_vec_pretty(&sample()).unwrap();
        assert!(matches!(
            Payload::parse(&pretty),
            Err(PayloadError::NotCanonical)
        ));
        let mut v = serde_json::to_value(sample()).unwrap();
        v["extra"] = serde_json::json!(1);
        assert!(matches!(
            Payload::parse(&serde_json::to_vec(&v).unwrap()),
            Err(PayloadError::Json(_))
        ));
        let mut other = sample();
        other.kind = "cosign".into();
        assert!(matches!(
            Payload::parse(&other.to_bytes()),
            Err(PayloadError::Type(_))
        ));
        let mut bad = sample();
        bad.image.digest = "sha256:xyz".into();
        assert!(matches!(
            Payload::parse(&bad.to_bytes()),
            Err(PayloadError::Digest(_))
        ));
        assert!(matches!(
            Payload::parse(&vec![b' '; MAX_PAYLOAD_BYTES + 1]),
            Err(PayloadError::TooBig(_))
        ));
    }
}
