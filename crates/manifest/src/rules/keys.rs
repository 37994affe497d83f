//! The manifest's own keys: one it does not know is reported, with the known key it is
//! closest to (a typo such as `gates` would otherwise leave the gate rules silently unread).

use super::Ctx;

/// Every top-level key of plugin.json: the reference's, and `egress` (ours: the destinations a
/// plugin reaches, which the owner approves).
pub(crate) const KNOWN: [&str; 17] = [
    "id",
    "name",
    "version",
    "api",
    "capabilities",
    "agents",
    "tools",
    "actions",
    "settings",
    "ui",
    "live",
    "events",
    "thread_events",
    "events_start",
    "gate",
    "resources",
    "egress",
];

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
    for key in ctx.doc.keys() {
        if KNOWN.contains(&key.as_str()) {
            continue;
        }
        let hint = closest(key)
            .map(|k| format!("; did you mean \"{k}\"?"))
            .unwrap_or_default();
        ctx.problems.add(
            &root.key(key),
            format!(
                "is not a plugin.json key{hint} (the keys are {})",
                KNOWN.join(", ")
            ),
        );
    }
}

/// The known key within two edits of `key`, if one is.
fn closest(key: &str) -> Option<&'static str> {
    KNOWN
        .iter()
        .map(|k| (edits(key, k), *k))
        .filter(|(d, _)| *d <= 2)
        .min()
        .map(|(_, k)| k)
}

/// Levenshtein distance.
fn edits(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let here = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb))
                .min(row[j] + 1)
                .min(here + 1);
            prev = here;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::fixtures::M;

    #[test]
    fn a_typo_of_a_key_is_reported_with_the_key_it_resembles() {
        M::new()
            .set("gates", json!({ "commands": [] }))
            .assert_problem("gates", "did you mean \"gate\"");
        M::new()
            .set("homepage", json!("https://example.com"))
            .assert_problem("homepage", "is not a plugin.json key");
        assert_eq!(closest("capabilites"), Some("capabilities"));
        assert_eq!(closest("zzz"), None);
        M::new().assert_valid();
    }
}
