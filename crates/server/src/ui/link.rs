//! Signed, expiring links to a plugin's bundle. A link carries its claims (the plugin, the
//! image digest, the chat, the panel or card, the expiry, the key's id) in the clear and an
//! HMAC-SHA256 over them, so the API server checks it without a lookup and without state:
//! `<base64url(claims)>.<base64url(mac)>`, one path segment.
//!
//! Keys rotate ([`super::keys`]): a link names the key it was signed with, and verifies under
//! the current key or the previous one, which the Secret keeps for a link's lifetime after a
//! rotation, so open links keep working. Pure: the time is an argument.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, KeyInit, Mac};
use sha2::Sha256;

/// How long a link opens its page.
pub const LINK_LIFETIME_SECONDS: i64 = 60 * 60;

/// The claims format this module writes and reads.
const VERSION: &str = "v1";

/// Which page of the bundle a link opens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Page {
    Panel(String),
    Card(String),
}

/// What a link grants: one plugin's bundle at one digest, for one chat's page, until `expires`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// The Plugin's name.
    pub plugin: String,
    /// The image manifest digest (`sha256:<hex>`) the files come from.
    pub digest: String,
    /// The chat (`<namespace>/<channel>`) the page is shown in.
    pub chat: String,
    pub page: Page,
    /// Unix seconds after which the link opens nothing.
    pub expires: i64,
}

/// One signing key and the id links name it by.
#[derive(Clone, PartialEq, Eq)]
pub struct LinkKey {
    pub id: String,
    pub secret: Vec<u8>,
}

impl std::fmt::Debug for LinkKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinkKey").field("id", &self.id).finish()
    }
}

/// The keys links verify under: the current one signs; the previous one still verifies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkKeys {
    pub current: LinkKey,
    pub previous: Option<LinkKey>,
}

/// Why a link opens nothing. Every variant answers 403; the variant is for the log.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LinkError {
    #[error("the link is not of the form <claims>.<mac>")]
    Malformed,
    #[error("the link's claims are not {VERSION} claims")]
    Claims,
    #[error("the link names key {0:?}, which is neither the current nor the previous key")]
    UnknownKey(String),
    #[error("the link's signature does not match its claims")]
    Signature,
    #[error("the link expired at {expires}, it is {now}")]
    Expired { expires: i64, now: i64 },
}

/// A claim that cannot be written into a link (it would read back as another claim).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("link claim {0:?} holds a newline")]
pub struct ClaimError(String);

/// The link for `link`, signed with the current key.
pub fn sign(keys: &LinkKeys, link: &Link) -> Result<String, ClaimError> {
    let claims = claims(&keys.current.id, link)?;
    let mac = mac(&keys.current, claims.as_bytes());
    Ok(format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(claims),
        URL_SAFE_NO_PAD.encode(mac)
    ))
}

/// What `token` grants at `now` (unix seconds), if it was signed by one of `keys`.
pub fn verify(keys: &LinkKeys, token: &str, now: i64) -> Result<Link, LinkError> {
    let (claims, tag) = token.split_once('.').ok_or(LinkError::Malformed)?;
    let claims = URL_SAFE_NO_PAD
        .decode(claims)
        .map_err(|_| LinkError::Malformed)?;
    let tag = URL_SAFE_NO_PAD
        .decode(tag)
        .map_err(|_| LinkError::Malformed)?;
    let text = String::from_utf8(claims).map_err(|_| LinkError::Claims)?;
    let (key_id, link) = parse(&text)?;
    let key = [Some(&keys.current), keys.previous.as_ref()]
        .into_iter()
        .flatten()
        .find(|k| k.id == key_id)
        .ok_or_else(|| LinkError::UnknownKey(key_id.to_string()))?;
    let mut check = Hmac::<Sha256>::new_from_slice(&key.secret).expect("HMAC takes any key");
    check.update(text.as_bytes());
    check.verify_slice(&tag).map_err(|_| LinkError::Signature)?;
    if now >= link.expires {
        return Err(LinkError::Expired {
            expires: link.expires,
            now,
        });
    }
    Ok(link)
}

fn mac(key: &LinkKey, claims: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(&key.secret).expect("HMAC takes any key");
    mac.update(claims);
    mac.finalize().into_bytes().to_vec()
}

fn claims(key_id: &str, link: &Link) -> Result<String, ClaimError> {
    let page = match &link.page {
        Page::Panel(id) => format!("panel:{id}"),
        Page::Card(id) => format!("card:{id}"),
    };
    let fields = [
        VERSION,
        key_id,
        &link.plugin,
        &link.digest,
        &link.chat,
        &page,
        &link.expires.to_string(),
    ];
    if let Some(bad) = fields.iter().find(|f| f.contains('\n')) {
        return Err(ClaimError(bad.to_string()));
    }
    Ok(fields.join("\n"))
}

fn parse(text: &str) -> Result<(&str, Link), LinkError> {
    let fields: Vec<&str> = text.split('\n').collect();
    let [version, key_id, plugin, digest, chat, page, expires] = fields[..] else {
        return Err(LinkError::Claims);
    };
    if version != VERSION {
        return Err(LinkError::Claims);
    }
    let page = match page.split_once(':') {
        Some(("panel", id)) => Page::Panel(id.into()),
        Some(("card", id)) => Page::Card(id.into()),
        _ => return Err(LinkError::Claims),
    };
    let expires = expires.parse().map_err(|_| LinkError::Claims)?;
    Ok((
        key_id,
        Link {
            plugin: plugin.into(),
            digest: digest.into(),
            chat: chat.into(),
            page,
            expires,
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str) -> LinkKey {
        LinkKey {
            id: id.into(),
            secret: format!("secret of {id}").into_bytes(),
        }
    }

    fn keys() -> LinkKeys {
        LinkKeys {
            current: key("k2"),
            previous: Some(key("k1")),
        }
    }

    fn link() -> Link {
        Link {
            plugin: "echo".into(),
            digest: "sha256:aa".into(),
            chat: "team/general".into(),
            page: Page::Panel("main".into()),
            expires: 1_000,
        }
    }

    #[test]
    fn a_signed_link_verifies_to_its_claims_until_it_expires() {
        let token = sign(&keys(), &link()).unwrap();
        assert_eq!(verify(&keys(), &token, 999), Ok(link()));
        assert_eq!(
            verify(&keys(), &token, 1_000),
            Err(LinkError::Expired {
                expires: 1_000,
                now: 1_000
            })
        );
    }

    #[test]
    fn a_card_link_keeps_its_page() {
        let card = Link {
            page: Page::Card("c-1".into()),
            ..link()
        };
        let token = sign(&keys(), &card).unwrap();
        assert_eq!(verify(&keys(), &token, 0), Ok(card));
    }

    #[test]
    fn a_link_is_one_path_segment_of_url_safe_characters() {
        let token = sign(&keys(), &link()).unwrap();
        assert!(
            token
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)),
            "{token}"
        );
    }

    #[test]
    fn every_changed_byte_is_refused() {
        let token = sign(&keys(), &link()).unwrap();
        for i in 0..token.len() {
            let mut bytes = token.clone().into_bytes();
            bytes[i] = if bytes[i] == b'A' { b'B' } else { b'A' };
            let changed = String::from_utf8(bytes).unwrap();
            if changed == token {
                continue;
            }
            assert!(verify(&keys(), &changed, 0).is_err(), "byte {i}");
        }
    }

    #[test]
    fn claims_changed_and_signed_by_another_key_are_refused() {
        let stranger = LinkKeys {
            current: LinkKey {
                id: "k2".into(),
                secret: b"not ours".to_vec(),
            },
            previous: None,
        };
        let other = Link {
            plugin: "other".into(),
            ..link()
        };
        let forged = sign(&stranger, &other).unwrap();
        assert_eq!(verify(&keys(), &forged, 0), Err(LinkError::Signature));
    }

    #[test]
    fn the_previous_key_still_verifies_and_an_older_one_does_not() {
        let old = LinkKeys {
            current: key("k1"),
            previous: Some(key("k0")),
        };
        let by_k1 = sign(&old, &link()).unwrap();
        assert_eq!(verify(&keys(), &by_k1, 0), Ok(link()));
        let older = LinkKeys {
            current: key("k0"),
            previous: None,
        };
        let by_k0 = sign(&older, &link()).unwrap();
        assert_eq!(
            verify(&keys(), &by_k0, 0),
            Err(LinkError::UnknownKey("k0".into()))
        );
    }

    #[test]
    fn garbage_is_malformed() {
        assert_eq!(verify(&keys(), "nodot", 0), Err(LinkError::Malformed));
        assert_eq!(verify(&keys(), "!!.!!", 0), Err(LinkError::Malformed));
        let claims = URL_SAFE_NO_PAD.encode("v0\nk2");
        assert_eq!(
            verify(&keys(), &format!("{claims}.AA"), 0),
            Err(LinkError::Claims)
        );
    }

    #[test]
    fn a_claim_with_a_newline_is_not_signed() {
        let bad = Link {
            chat: "team/general\nadmin".into(),
            ..link()
        };
        assert!(sign(&keys(), &bad).is_err());
    }
}
