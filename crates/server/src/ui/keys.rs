//! The link keys' Secret (`<release>-ui-links` in the release namespace): what it holds and
//! when it changes. The API server makes it when it is missing and rotates its key every
//! [`ROTATION_SECONDS`]; the key it replaces stays as `previous` for [`LINK_LIFETIME_SECONDS`]
//! after the rotation, so every link signed before it verifies until it expires, and goes
//! after. Pure: [`decide`] takes what the Secret holds, the time and a fresh key; the reads and
//! writes are [`super::key_store`]'s.
//!
//! | Secret holds                              | at `now`                           | decision              |
//! |-------------------------------------------|------------------------------------|-----------------------|
//! | nothing, or keys that do not parse        |                                    | write a fresh current |
//! | current rotated at `r`                    | `now - r >= ROTATION_SECONDS`      | rotate: current → previous, fresh current |
//! | a previous key, rotated at `r`            | `now - r >= LINK_LIFETIME_SECONDS` | drop the previous     |
//! | otherwise                                 |                                    | keep                  |
//!
//! [`ROTATION_SECONDS`] is longer than a link's lifetime, so at most two keys verify at once.

use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;

use super::link::{LINK_LIFETIME_SECONDS, LinkKey, LinkKeys};

/// How long a key signs links before the next replaces it.
pub const ROTATION_SECONDS: i64 = 24 * 60 * 60;

// A key outlives every link it signed by a whole lifetime at least, so at most two verify.
const _: () = assert!(ROTATION_SECONDS > LINK_LIFETIME_SECONDS);

const CURRENT: &str = "current";
const CURRENT_ID: &str = "current-id";
const PREVIOUS: &str = "previous";
const PREVIOUS_ID: &str = "previous-id";
const ROTATED_AT: &str = "rotated-at";

/// The keys as the Secret holds them, with when the current one began signing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredKeys {
    pub keys: LinkKeys,
    /// Unix seconds.
    pub rotated_at: i64,
}

/// What to do with the Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeysDecision {
    /// It is as it should be: sign and verify with these.
    Keep(StoredKeys),
    /// Write these (the Secret's whole data), then sign and verify with them.
    Write(StoredKeys),
}

/// What the Secret's data should be at `now`; `fresh` makes a new key when one is needed.
pub fn decide(
    data: &BTreeMap<String, Vec<u8>>,
    now: i64,
    fresh: impl FnOnce() -> LinkKey,
) -> KeysDecision {
    let Some(stored) = read(data) else {
        return KeysDecision::Write(StoredKeys {
            keys: LinkKeys {
                current: fresh(),
                previous: None,
            },
            rotated_at: now,
        });
    };
    if now - stored.rotated_at >= ROTATION_SECONDS {
        return KeysDecision::Write(StoredKeys {
            keys: LinkKeys {
                current: fresh(),
                previous: Some(stored.keys.current),
            },
            rotated_at: now,
        });
    }
    if stored.keys.previous.is_some() && now - stored.rotated_at >= LINK_LIFETIME_SECONDS {
        return KeysDecision::Write(StoredKeys {
            keys: LinkKeys {
                previous: None,
                ..stored.keys
            },
            ..stored
        });
    }
    KeysDecision::Keep(stored)
}

/// The keys a Secret's data holds, if it holds a current key.
pub fn read(data: &BTreeMap<String, Vec<u8>>) -> Option<StoredKeys> {
    let text = |k: &str| String::from_utf8(data.get(k)?.clone()).ok();
    let key = |secret: &str, id: &str| {
        let secret = STANDARD.decode(text(secret)?).ok()?;
        let id = text(id)?;
        (!secret.is_empty() && !id.is_empty()).then_some(LinkKey { id, secret })
    };
    Some(StoredKeys {
        keys: LinkKeys {
            current: key(CURRENT, CURRENT_ID)?,
            previous: key(PREVIOUS, PREVIOUS_ID),
        },
        rotated_at: text(ROTATED_AT)?.parse().ok()?,
    })
}

/// The Secret's data for `stored`.
pub fn data(stored: &StoredKeys) -> BTreeMap<String, Vec<u8>> {
    let mut data = BTreeMap::new();
    let mut put = |secret: &str, id: &str, key: &LinkKey| {
        data.insert(
            secret.to_string(),
            STANDARD.encode(&key.secret).into_bytes(),
        );
        data.insert(id.to_string(), key.id.clone().into_bytes());
    };
    put(CURRENT, CURRENT_ID, &stored.keys.current);
    if let Some(previous) = &stored.keys.previous {
        put(PREVIOUS, PREVIOUS_ID, previous);
    }
    data.insert(
        ROTATED_AT.to_string(),
        stored.rotated_at.to_string().into_bytes(),
    );
    data
}

/// A new key: 32 random bytes, named by a short hash of them.
pub fn fresh_key() -> LinkKey {
    let secret: [u8; 32] = rand::random();
    LinkKey {
        id: model::names::short_hash(&secret),
        secret: secret.to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(id: &str) -> LinkKey {
        LinkKey {
            id: id.into(),
            secret: id.as_bytes().to_vec(),
        }
    }

    fn stored(previous: Option<&str>, rotated_at: i64) -> StoredKeys {
        StoredKeys {
            keys: LinkKeys {
                current: key("now"),
                previous: previous.map(key),
            },
            rotated_at,
        }
    }

    #[test]
    fn a_missing_or_broken_secret_gets_a_fresh_key() {
        let want = KeysDecision::Write(StoredKeys {
            keys: LinkKeys {
                current: key("new"),
                previous: None,
            },
            rotated_at: 5,
        });
        assert_eq!(decide(&BTreeMap::new(), 5, || key("new")), want);
        let broken = BTreeMap::from([(CURRENT.to_string(), b"not base64!".to_vec())]);
        assert_eq!(decide(&broken, 5, || key("new")), want);
    }

    #[test]
    fn the_key_is_kept_until_its_rotation() {
        let data = data(&stored(None, 100));
        assert_eq!(
            decide(&data, 100 + ROTATION_SECONDS - 1, || key("new")),
            KeysDecision::Keep(stored(None, 100))
        );
    }

    #[test]
    fn a_rotation_keeps_the_replaced_key_as_previous() {
        let data = data(&stored(None, 100));
        let at = 100 + ROTATION_SECONDS;
        assert_eq!(
            decide(&data, at, || key("new")),
            KeysDecision::Write(StoredKeys {
                keys: LinkKeys {
                    current: key("new"),
                    previous: Some(key("now")),
                },
                rotated_at: at,
            })
        );
    }

    #[test]
    fn the_previous_key_verifies_for_a_link_lifetime_then_goes() {
        let data = data(&stored(Some("old"), 100));
        assert_eq!(
            decide(&data, 100 + LINK_LIFETIME_SECONDS - 1, || key("new")),
            KeysDecision::Keep(stored(Some("old"), 100))
        );
        assert_eq!(
            decide(&data, 100 + LINK_LIFETIME_SECONDS, || key("new")),
            KeysDecision::Write(stored(None, 100))
        );
    }

    #[test]
    fn data_reads_back_as_written() {
        let keys = stored(Some("old"), 42);
        assert_eq!(read(&data(&keys)), Some(keys));
    }

    #[test]
    fn fresh_keys_differ_and_are_named_by_their_bytes() {
        let (a, b) = (fresh_key(), fresh_key());
        assert_ne!(a.secret, b.secret);
        assert_ne!(a.id, b.id);
        assert_eq!(a.secret.len(), 32);
    }
}
