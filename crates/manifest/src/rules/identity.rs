//! id, name, version and api.

use super::Ctx;
use super::read::{field, kind, required_str};

/// The API version this host speaks.
pub(crate) const API_VERSION: &str = "1";

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
    let p = &mut ctx.problems;
    if let Some(id) = required_str(ctx.doc, "id", &root, p)
        && !valid_id(id)
    {
        p.add(
            &root.key("id"),
            format!(
                "\"{id}\" must match [a-z][a-z0-9-]{{1,31}}: a lowercase letter, then 1 to 31 lowercase letters, digits or dashes"
            ),
        );
    }
    required_str(ctx.doc, "name", &root, p);
    required_str(ctx.doc, "version", &root, p);
    match field(ctx.doc, "api") {
        None => p.add(&root.key("api"), "is required; it is \"1\""),
        Some(v) if v.as_str() == Some(API_VERSION) => {}
        Some(v) if v.is_string() => p.add(
            &root.key("api"),
            format!("{v} is not an API this host speaks; it must be \"1\""),
        ),
        Some(v) => p.add(
            &root.key("api"),
            format!("must be the string \"1\", not {}", kind(v)),
        ),
    }
}

/// Whether `id` matches `[a-z][a-z0-9-]{1,31}` as a whole.
pub(crate) fn valid_id(id: &str) -> bool {
    let bytes = id.as_bytes();
    (2..=32).contains(&bytes.len())
        && bytes[0].is_ascii_lowercase()
        && bytes[1..]
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::fixtures::M;

    #[test]
    fn ids_match_the_pattern() {
        for id in [
            "ab",
            "echo",
            "cog-test2",
            "a-",
            &format!("a{}", "b".repeat(31)),
        ] {
            assert!(valid_id(id), "{id}");
        }
        for id in [
            "a",
            "Echo",
            "2echo",
            "-echo",
            "echo_x",
            "ec ho",
            "",
            &format!("a{}", "b".repeat(32)),
        ] {
            assert!(!valid_id(id), "{id}");
        }
        M::new().assert_valid();
        M::new()
            .set("id", json!("Echo"))
            .assert_problem("id", "[a-z][a-z0-9-]{1,31}");
        M::new().remove("id").assert_problem("id", "is required");
        M::new()
            .set("id", json!(7))
            .assert_problem("id", "must be a string");
    }

    #[test]
    fn name_and_version_are_strings() {
        M::new()
            .remove("name")
            .assert_problem("name", "is required");
        M::new()
            .set("name", json!(""))
            .assert_problem("name", "must not be empty");
        M::new()
            .set("version", json!(1.0))
            .assert_problem("version", "must be a string");
    }

    #[test]
    fn api_is_one() {
        M::new()
            .set("api", json!("2"))
            .assert_problem("api", "must be \"1\"");
        M::new()
            .set("api", json!(1))
            .assert_problem("api", "must be the string \"1\"");
        M::new().remove("api").assert_problem("api", "is required");
    }

    #[test]
    fn the_document_is_an_object() {
        let p = crate::rules::check(&json!([1]));
        assert_eq!(p.len(), 1);
        assert_eq!(p[0].path, "");
    }
}
