//! The Plugin API's limits and the rules of its path parameters, from the reference and
//! `openapi/plugin-api-v1.yaml`: the one place they are written. The host's API server and
//! the fake host ([`crate::testing`]) both check requests with these, so a plugin tested
//! against the fake host meets the same refusals in a cluster.
//!
//! Each check answers the reason a refusal names (the field and why), for the caller to put
//! in its `{"error": {"code", "message"}}`.

use std::time::Duration;

/// A request body: at most 1 MB (a MiB, as `manifest::sizes` counts; 413 `body_too_large`).
pub const MAX_BODY_BYTES: usize = manifest::sizes::MB as usize;
/// How long the host lets a request take (504 `timeout`).
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// `POST /runs`: an agent id.
pub const MAX_AGENT: usize = 64;
/// `POST /runs`: the whole prompt, in characters.
pub const MAX_PROMPT: usize = 256 * 1024;
/// A card's or notification's title, a switch's tooltip, in characters.
pub const MAX_TITLE: usize = 200;
/// A notification's text, in characters.
pub const MAX_NOTIFICATION_BODY: usize = 4000;
/// A live control request's subtype, in characters.
pub const MAX_SUBTYPE: usize = 128;
/// `GET /files/{path}`: the longest path taken, in bytes.
pub const MAX_PATH: usize = 4096;
/// `GET /files/{path}`: the largest file answered (413 `file_too_large`, never cut): the
/// reference's cap on an `/x` body.
pub const MAX_FILE_BYTES: u64 = manifest::sizes::X_BODY_MAX_BYTES;
/// A card or notification as stored, as JSON (413 `body_too_large`).
pub const MAX_INBOX_ENTRY_BYTES: usize = 64 * 1024;
/// A memory key, in characters.
pub const MAX_MEMORY_KEY: usize = 128;
/// A memory value as JSON.
pub const MAX_MEMORY_VALUE_BYTES: usize = 64 * 1024;
/// Keys of a plugin's memory in one project (a new key past it is 413 `memory_full`).
pub const MAX_MEMORY_KEYS: usize = 256;

/// `GET /hotspots`, `GET /hotspots/page`: the functions answered when the query names no
/// `limit`.
pub const DEFAULT_HOTSPOTS: u32 = 10;
/// `GET /hotspots`, `GET /hotspots/page`: the most functions one answer holds (`limit`).
pub const MAX_HOTSPOTS: u32 = 100;

/// The query of `GET /hotspots` (`limit`) or `GET /hotspots/page` (`offset` too).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HotspotsQuery {
    /// How many of the worst functions to pass over (0 without `offset`).
    pub offset: u64,
    /// How many to answer at most: 1 to [`MAX_HOTSPOTS`], [`DEFAULT_HOTSPOTS`] without `limit`.
    pub limit: u32,
}

/// Reads the query string of `GET /hotspots` (`paged: false`: `limit` alone) or `GET
/// /hotspots/page` (`offset` and `limit`). A parameter the route does not take, one given
/// twice or without a value, a `limit` outside 1 to [`MAX_HOTSPOTS`] and an `offset` that is
/// not a whole number are refused, the reason naming the parameter.
pub fn parse_hotspots_query(query: Option<&str>, paged: bool) -> Result<HotspotsQuery, String> {
    let takes: &[&str] = if paged {
        &["offset", "limit"]
    } else {
        &["limit"]
    };
    let mut parsed = HotspotsQuery {
        offset: 0,
        limit: DEFAULT_HOTSPOTS,
    };
    let mut seen: Vec<&str> = Vec::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let shown = |s: &str| {
            let short: String = s.chars().take(64).collect();
            format!("{:?}", short)
        };
        let Some(name) = takes.iter().copied().find(|t| *t == name) else {
            return Err(format!(
                "query parameter {} is not one this route takes ({})",
                shown(name),
                takes.join(", ")
            ));
        };
        if seen.contains(&name) {
            return Err(format!("query parameter {name} is given more than once"));
        }
        seen.push(name);
        let digits =
            !value.is_empty() && value.len() <= 20 && value.bytes().all(|b| b.is_ascii_digit());
        match name {
            "limit" => {
                parsed.limit = value
                    .parse::<u32>()
                    .ok()
                    .filter(|n| digits && (1..=MAX_HOTSPOTS).contains(n))
                    .ok_or_else(|| {
                        format!(
                            "query parameter limit must be a whole number from 1 to {MAX_HOTSPOTS}, not {}",
                            shown(value)
                        )
                    })?;
            }
            _ => {
                parsed.offset = value
                    .parse::<u64>()
                    .ok()
                    .filter(|_| digits)
                    .ok_or_else(|| {
                        format!(
                            "query parameter offset must be a whole number, 0 or more, not {}",
                            shown(value)
                        )
                    })?;
            }
        }
    }
    Ok(parsed)
}

/// A string field: not empty when `non_empty`, at most `max` characters.
pub fn check_length(field: &str, value: &str, max: usize, non_empty: bool) -> Result<(), String> {
    let n = value.chars().count();
    if non_empty && n == 0 {
        return Err(format!("{field} must not be empty"));
    }
    if n > max {
        return Err(format!(
            "{field} has {n} characters; at most {max} are allowed"
        ));
    }
    Ok(())
}

/// A live control subtype: one the manifest's `live.control` lists.
pub fn check_live_subtype(live: Option<&manifest::Live>, subtype: &str) -> Result<(), String> {
    let listed = live.map(|l| l.control.as_slice()).unwrap_or_default();
    if listed.iter().any(|s| s == subtype) {
        return Ok(());
    }
    Err(format!(
        "subtype \"{subtype}\" is not listed in the manifest's live.control ({})",
        listed.join(", ")
    ))
}

/// A memory key: `[A-Za-z0-9._-]{1,128}`, not `.`, not starting with `..` (what a ConfigMap
/// key may be).
pub fn check_memory_key(key: &str) -> Result<(), String> {
    let ok = !key.is_empty()
        && key.len() <= MAX_MEMORY_KEY
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
        && key != "."
        && !key.starts_with("..");
    if ok {
        Ok(())
    } else {
        Err(format!(
            "memory key \"{}\" must be 1 to {MAX_MEMORY_KEY} of A-Z a-z 0-9 . _ -, not \".\" and not starting with \"..\"",
            key.escape_debug()
        ))
    }
}

/// A path of the chat's working tree as a request names it: relative, with only normal
/// components, no NUL or backslash, at most [`MAX_PATH`] bytes.
pub fn check_file_path(path: &str) -> Result<(), String> {
    let bad = |why: &str| format!("path \"{}\" {why}", path.escape_debug());
    if path.is_empty() {
        return Err(bad("is empty"));
    }
    if path.len() > MAX_PATH {
        return Err(bad("is longer than 4096 bytes"));
    }
    if path.starts_with('/') {
        return Err(bad(
            "is absolute; paths are relative to the chat's working tree",
        ));
    }
    if path.contains('\0') || path.contains('\\') {
        return Err(bad("holds a NUL or a backslash"));
    }
    for part in path.split('/') {
        match part {
            "" => return Err(bad("has an empty component")),
            "." | ".." => return Err(bad("has a . or .. component")),
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_count_characters_and_name_the_field() {
        assert!(check_length("title", &"é".repeat(200), MAX_TITLE, true).is_ok());
        assert_eq!(
            check_length("title", &"x".repeat(201), MAX_TITLE, true).unwrap_err(),
            "title has 201 characters; at most 200 are allowed"
        );
        assert_eq!(
            check_length("prompt", "", MAX_PROMPT, true).unwrap_err(),
            "prompt must not be empty"
        );
        assert!(check_length("title", "", MAX_TITLE, false).is_ok());
    }

    #[test]
    fn hotspots_queries_name_the_parameter_they_refuse() {
        let q = |s: &str, paged| parse_hotspots_query(Some(s), paged);
        assert_eq!(
            parse_hotspots_query(None, false),
            Ok(HotspotsQuery {
                offset: 0,
                limit: DEFAULT_HOTSPOTS
            })
        );
        assert_eq!(q("", true).unwrap().limit, 10);
        assert_eq!(q("limit=100", false).unwrap().limit, 100);
        assert_eq!(
            q("offset=20&limit=5", true),
            Ok(HotspotsQuery {
                offset: 20,
                limit: 5
            })
        );
        assert_eq!(
            q("offset=18446744073709551615", true).unwrap().offset,
            u64::MAX
        );
        for (query, paged, names) in [
            (
                "limit=0",
                false,
                "limit must be a whole number from 1 to 100, not \"0\"",
            ),
            ("limit=101", false, "limit must"),
            ("limit=-1", false, "limit must"),
            ("limit=+5", false, "limit must"),
            ("limit=", false, "limit must"),
            ("limit", false, "limit must"),
            ("limit=1e2", false, "limit must"),
            (
                "offset=1",
                false,
                "\"offset\" is not one this route takes (limit)",
            ),
            (
                "offset=-1",
                true,
                "offset must be a whole number, 0 or more, not \"-1\"",
            ),
            ("offset=18446744073709551616", true, "offset must"),
            ("limit=5&limit=6", true, "limit is given more than once"),
            (
                "size=5",
                true,
                "\"size\" is not one this route takes (offset, limit)",
            ),
        ] {
            let why = q(query, paged).unwrap_err();
            assert!(why.contains(names), "{query}: {why}");
        }
        // A long value is cut in the message.
        let why = q(&format!("limit={}", "9".repeat(5000)), false).unwrap_err();
        assert!(why.len() < 200, "{why}");
    }

    #[test]
    fn memory_keys_are_what_a_configmap_key_may_be() {
        for good in ["a", "last-quiz", "x.y_z", &"k".repeat(128), ".hidden"] {
            assert!(check_memory_key(good).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", "..x", "a/b", "a b", &"k".repeat(129), "ключ"] {
            assert!(check_memory_key(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn file_paths_are_plain_and_relative() {
        for good in ["README.md", "src/lib.rs", "a/.hidden/b", "...", "a..b"] {
            assert!(check_file_path(good).is_ok(), "{good}");
        }
        for bad in [
            "",
            "/etc/passwd",
            "a//b",
            "a/",
            "./a",
            "a/../b",
            "..",
            "a\\b",
            "a\0b",
        ] {
            assert!(check_file_path(bad).is_err(), "{bad:?}");
        }
        assert!(check_file_path(&"a".repeat(4097)).is_err());
    }
}
