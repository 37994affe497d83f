//! The signature stage of admission, zeroclaw's policy bound to the image: a pure decision
//! from the mode, the trusted keys, the plugin's signature (if any) and what the image is.
//!
//! - A signature whose payload names another image manifest digest, or another plugin.json
//!   sha256, is refused in every mode, disabled included: what runs must be what was signed.
//! - `disabled` admits everything else.
//! - `permissive` admits, with a warning saying why, a plugin that is unsigned, signed by a
//!   key not in `trusted_publisher_keys`, or whose signature is invalid.
//! - `strict` refuses those.
//! - Any other mode acts as strict, and the message says so.
//!
//! Messages name the plugin and the key, as zeroclaw's do.

use super::keys::normalize_hex;
use super::record::SignatureRecord;
use crate::digest::Digest;
use crate::quote::shown;

/// HostConfig's `signatureMode`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SignatureMode {
    Disabled,
    Permissive,
    Strict,
    /// Anything else, kept to be named; acts as strict.
    Unknown(String),
}

impl SignatureMode {
    pub fn parse(mode: &str) -> Self {
        match mode.trim() {
            "disabled" => SignatureMode::Disabled,
            "permissive" => SignatureMode::Permissive,
            "strict" => SignatureMode::Strict,
            other => SignatureMode::Unknown(other.to_string()),
        }
    }
}

/// What the image is, as pulled and checked: what a signature must name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The Plugin's name (the manifest's `id`).
    pub plugin: String,
    /// The manifest's `version`.
    pub version: String,
    /// `registry/repository` the image is pulled from.
    pub repository: String,
    pub manifest_digest: Digest,
    /// sha256 of /loop-plugin/plugin.json as shipped, hex.
    pub plugin_json_sha256: String,
}

/// Admit, admit with a warning (permissive), or refuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Admit,
    Warn,
    Refuse,
}

/// Why: one per outcome, with a stable name for conditions and Events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finding {
    /// The mode is disabled; the signature (if any) was not judged beyond its binding.
    NotChecked,
    Verified,
    Unsigned,
    UntrustedKey,
    InvalidSignature,
    /// The payload names another image manifest digest.
    DigestMismatch,
    /// The payload names another plugin.json.
    ManifestMismatch,
}

impl Finding {
    pub fn reason(self) -> &'static str {
        match self {
            Finding::NotChecked => "SignatureNotChecked",
            Finding::Verified => "SignatureVerified",
            Finding::Unsigned => "Unsigned",
            Finding::UntrustedKey => "UntrustedKey",
            Finding::InvalidSignature => "InvalidSignature",
            Finding::DigestMismatch => "SignatureDigestMismatch",
            Finding::ManifestMismatch => "SignatureManifestMismatch",
        }
    }
}

/// The decision, with the key it is about and a message for status and Events.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admission {
    pub verdict: Verdict,
    pub finding: Finding,
    /// The signer's key (hex) when there is a signature.
    pub key: Option<String>,
    /// The mode as given, when it was not one we know (acted on as strict).
    pub unknown_mode: Option<String>,
    pub message: String,
}

impl Admission {
    pub fn admitted(&self) -> bool {
        self.verdict != Verdict::Refuse
    }

    pub fn reason(&self) -> &'static str {
        self.finding.reason()
    }
}

/// Decides the signature stage. `trusted_keys` are hex public keys (case and surrounding
/// space ignored).
pub fn decide(
    mode: &SignatureMode,
    trusted_keys: &[String],
    signature: Option<&SignatureRecord>,
    subject: &Subject,
) -> Admission {
    let unknown_mode = match mode {
        SignatureMode::Unknown(m) => Some(m.clone()),
        _ => None,
    };
    let prefix = match &unknown_mode {
        Some(m) => format!(
            "signature_mode {m:?} is not disabled, permissive or strict, so it acts as strict: "
        ),
        None => String::new(),
    };
    let plugin = &subject.plugin;
    let key = signature.map(|s| normalize_hex(&s.public_key));
    // What the signature says is quoted by its start: a message stays a few lines.
    let shown_key = key.as_deref().map(shown).unwrap_or_default();
    let done = |verdict, finding, message: String| Admission {
        verdict,
        finding,
        key: key.clone(),
        unknown_mode: unknown_mode.clone(),
        message: format!("{prefix}{message}"),
    };

    // The binding holds in every mode: a signature for other content is refused outright.
    let claimed = signature.map(SignatureRecord::claimed_payload);
    if let Some(Ok(payload)) = &claimed {
        if payload.image.digest != subject.manifest_digest.to_string() {
            let message = format!(
                "plugin {plugin:?}: its signature (key {shown_key}) is for image {}, but the image is {}; refused whatever the signature mode",
                payload.image.digest, subject.manifest_digest
            );
            return done(Verdict::Refuse, Finding::DigestMismatch, message);
        }
        if payload.plugin.plugin_json_sha256 != subject.plugin_json_sha256 {
            let message = format!(
                "plugin {plugin:?}: its signature (key {shown_key}) is for a plugin.json with sha256 {}, but the image ships {}; refused whatever the signature mode",
                payload.plugin.plugin_json_sha256, subject.plugin_json_sha256
            );
            return done(Verdict::Refuse, Finding::ManifestMismatch, message);
        }
    }

    let fail = match mode {
        SignatureMode::Disabled => {
            return done(
                Verdict::Admit,
                Finding::NotChecked,
                format!("plugin {plugin:?} admitted: signature_mode is disabled"),
            );
        }
        SignatureMode::Permissive => Verdict::Warn,
        SignatureMode::Strict | SignatureMode::Unknown(_) => Verdict::Refuse,
    };
    let outcome = |fail: Verdict| match fail {
        Verdict::Warn => "admitted because signature_mode is permissive",
        _ => "refused because signature_mode is strict",
    };

    let Some(record) = signature else {
        let message = format!("plugin {plugin:?} is unsigned; {}", outcome(fail));
        return done(fail, Finding::Unsigned, message);
    };
    let key_hex = key.clone().unwrap_or_default();
    let payload = match record.verify() {
        Ok(payload) => payload,
        Err(e) => {
            let message = format!(
                "plugin {plugin:?}: signature by key {shown_key} is invalid ({e}); {}",
                outcome(fail)
            );
            return done(fail, Finding::InvalidSignature, message);
        }
    };
    let mut differs = Vec::new();
    if payload.plugin.name != subject.plugin {
        differs.push(format!(
            "plugin name {:?} (image: {:?})",
            shown(&payload.plugin.name),
            subject.plugin
        ));
    }
    if payload.plugin.version != subject.version {
        differs.push(format!(
            "version {:?} (image: {:?})",
            shown(&payload.plugin.version),
            subject.version
        ));
    }
    if payload.image.repository != subject.repository {
        differs.push(format!(
            "repository {:?} (image: {:?})",
            shown(&payload.image.repository),
            subject.repository
        ));
    }
    if !differs.is_empty() {
        let message = format!(
            "plugin {plugin:?}: signature by key {shown_key} names {}; {}",
            differs.join(", "),
            outcome(fail)
        );
        return done(fail, Finding::InvalidSignature, message);
    }
    if !trusted_keys.iter().any(|k| normalize_hex(k) == key_hex) {
        let message = format!(
            "plugin {plugin:?} is signed by key {shown_key}, which is not in trusted_publisher_keys; {}",
            outcome(fail)
        );
        return done(fail, Finding::UntrustedKey, message);
    }
    done(
        Verdict::Admit,
        Finding::Verified,
        format!("plugin {plugin:?} is signed by trusted key {shown_key}"),
    )
}

/// Of several signatures (a `.sig` artifact may hold more than one), the one to judge: the
/// first whose key is trusted, else the first.
pub fn pick<'a>(
    signatures: &'a [SignatureRecord],
    trusted_keys: &[String],
) -> Option<&'a SignatureRecord> {
    signatures
        .iter()
        .find(|s| {
            trusted_keys
                .iter()
                .any(|k| normalize_hex(k) == normalize_hex(&s.public_key))
        })
        .or_else(|| signatures.first())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signing::keys::PublisherKey;
    use crate::signing::payload::Payload;

    fn subject() -> Subject {
        Subject {
            plugin: "echo".into(),
            version: "0.1.0".into(),
            repository: "127.0.0.1:5000/plugins/echo".into(),
            manifest_digest: Digest::of(b"manifest"),
            plugin_json_sha256: Digest::of(b"{}").hex().to_string(),
        }
    }

    fn signed(key: &PublisherKey, edit: impl FnOnce(&mut Payload)) -> SignatureRecord {
        let s = subject();
        let mut payload = Payload::new(
            &s.plugin,
            &s.version,
            &s.plugin_json_sha256,
            &s.repository,
            &s.manifest_digest,
        );
        edit(&mut payload);
        SignatureRecord::sign(key, &payload)
    }

    #[derive(Clone, Copy, Debug)]
    enum Sig {
        None,
        Good,
        Untrusted,
        Tampered,
        OtherDigest,
        OtherPluginJson,
        OtherVersion,
    }

    #[test]
    fn decisions_table() {
        use Finding as F;
        use Verdict::*;
        let trusted = PublisherKey::generate().unwrap();
        let stranger = PublisherKey::generate().unwrap();
        let keys = vec![trusted.public_hex().to_uppercase()];
        let make = |sig: Sig| -> Option<SignatureRecord> {
            match sig {
                Sig::None => None,
                Sig::Good => Some(signed(&trusted, |_| {})),
                Sig::Untrusted => Some(signed(&stranger, |_| {})),
                Sig::Tampered => {
                    let mut r = signed(&trusted, |_| {});
                    r.signature = signed(&trusted, |p| p.plugin.name = "other".into()).signature;
                    Some(r)
                }
                Sig::OtherDigest => Some(signed(&trusted, |p| {
                    p.image.digest = Digest::of(b"other").to_string()
                })),
                Sig::OtherPluginJson => Some(signed(&trusted, |p| {
                    p.plugin.plugin_json_sha256 = Digest::of(b"x").hex().to_string()
                })),
                Sig::OtherVersion => Some(signed(&trusted, |p| p.plugin.version = "9.9.9".into())),
            }
        };
        let table: &[(&str, Sig, Verdict, Finding)] = &[
            ("disabled", Sig::None, Admit, F::NotChecked),
            ("disabled", Sig::Untrusted, Admit, F::NotChecked),
            ("disabled", Sig::Tampered, Admit, F::NotChecked),
            ("disabled", Sig::OtherDigest, Refuse, F::DigestMismatch),
            (
                "disabled",
                Sig::OtherPluginJson,
                Refuse,
                F::ManifestMismatch,
            ),
            ("permissive", Sig::None, Warn, F::Unsigned),
            ("permissive", Sig::Good, Admit, F::Verified),
            ("permissive", Sig::Untrusted, Warn, F::UntrustedKey),
            ("permissive", Sig::Tampered, Warn, F::InvalidSignature),
            ("permissive", Sig::OtherVersion, Warn, F::InvalidSignature),
            ("permissive", Sig::OtherDigest, Refuse, F::DigestMismatch),
            (
                "permissive",
                Sig::OtherPluginJson,
                Refuse,
                F::ManifestMismatch,
            ),
            ("strict", Sig::None, Refuse, F::Unsigned),
            ("strict", Sig::Good, Admit, F::Verified),
            ("strict", Sig::Untrusted, Refuse, F::UntrustedKey),
            ("strict", Sig::Tampered, Refuse, F::InvalidSignature),
            ("strict", Sig::OtherVersion, Refuse, F::InvalidSignature),
            ("strict", Sig::OtherDigest, Refuse, F::DigestMismatch),
            ("strict", Sig::OtherPluginJson, Refuse, F::ManifestMismatch),
            ("Strict", Sig::None, Refuse, F::Unsigned),
            ("paranoid", Sig::Good, Admit, F::Verified),
            ("paranoid", Sig::Untrusted, Refuse, F::UntrustedKey),
            ("", Sig::None, Refuse, F::Unsigned),
        ];
        for (mode, sig, verdict, finding) in table {
            let record = make(*sig);
            let got = decide(
                &SignatureMode::parse(mode),
                &keys,
                record.as_ref(),
                &subject(),
            );
            assert_eq!(
                (got.verdict, got.finding),
                (*verdict, *finding),
                "{mode:?} {sig:?}: {}",
                got.message
            );
            assert!(
                got.message.contains("\"echo\""),
                "names the plugin: {}",
                got.message
            );
            if let Some(r) = &record
                && *finding != F::NotChecked
            {
                assert!(
                    got.message.contains(&r.public_key),
                    "names the key: {}",
                    got.message
                );
            }
            let unknown = !matches!(*mode, "disabled" | "permissive" | "strict");
            assert_eq!(got.unknown_mode.is_some(), unknown, "{mode:?}");
            assert_eq!(
                got.message.contains("acts as strict"),
                unknown,
                "{}",
                got.message
            );
        }
    }

    #[test]
    fn messages_read_well() {
        let key = PublisherKey::generate().unwrap();
        let record = signed(&key, |_| {});
        let got = decide(&SignatureMode::Strict, &[], Some(&record), &subject());
        assert_eq!(
            got.message,
            format!(
                "plugin \"echo\" is signed by key {}, which is not in trusted_publisher_keys; refused because signature_mode is strict",
                key.public_hex()
            )
        );
        let got = decide(&SignatureMode::Permissive, &[], None, &subject());
        assert_eq!(
            got.message,
            "plugin \"echo\" is unsigned; admitted because signature_mode is permissive"
        );
        assert_eq!(got.reason(), "Unsigned");
    }

    #[test]
    fn pick_prefers_a_trusted_key() {
        let a = PublisherKey::generate().unwrap();
        let b = PublisherKey::generate().unwrap();
        let records = vec![signed(&a, |_| {}), signed(&b, |_| {})];
        assert_eq!(
            pick(&records, &[b.public_hex()]).unwrap().public_key,
            b.public_hex()
        );
        assert_eq!(pick(&records, &[]).unwrap().public_key, a.public_hex());
        assert!(pick(&[], &[]).is_none());
    }

    #[test]
    fn what_a_signature_says_is_quoted_by_its_start() {
        let key = PublisherKey::generate().unwrap();
        let mut payload = Payload::new(
            &"n".repeat(10_000),
            "0.1.0",
            &subject().plugin_json_sha256,
            &subject().repository,
            &subject().manifest_digest,
        );
        payload.plugin.version = "v".repeat(5_000);
        let mut record = SignatureRecord::sign(&key, &payload);
        let mode = SignatureMode::Strict;
        let admission = decide(&mode, &[], Some(&record), &subject());
        assert!(admission.message.len() < 1200, "{}", admission.message);
        record.public_key = "k".repeat(100_000);
        let admission = decide(&mode, &[], Some(&record), &subject());
        assert!(admission.message.len() < 1200, "{}", admission.message);
        assert_eq!(admission.finding, Finding::InvalidSignature);
    }
}
