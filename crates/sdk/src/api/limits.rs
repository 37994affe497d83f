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
