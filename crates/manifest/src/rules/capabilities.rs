//! capabilities: at least one (zeroclaw: "Each manifest must declare at least one
//! capability"), only known ones, each once.

use std::collections::BTreeSet;

use serde_json::Value;

use super::Ctx;
use super::read::{field, string_list};
use crate::capability::Capability;

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
    let none = match field(ctx.doc, "capabilities") {
        None => true,
        Some(Value::Array(items)) => items.is_empty(),
        // Not an array at all: string_list says so.
        Some(_) => false,
    };
    if none {
        ctx.problems.add(
            &root.key("capabilities"),
            format!(
                "must declare at least one capability: one of {}",
                Capability::names()
            ),
        );
    }
    let mut seen = BTreeSet::new();
    for (at, name) in string_list(ctx.doc, "capabilities", &root, &mut ctx.problems) {
        match Capability::parse(name) {
            Some(c) => {
                if !seen.insert(c) {
                    ctx.problems.add(&at, format!("\"{name}\" is listed twice"));
                }
                ctx.declared.insert(c);
            }
            None => ctx.problems.add(
                &at,
                format!(
                    "unknown capability \"{name}\"; the capabilities are {}",
                    Capability::names()
                ),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::fixtures::M;

    #[test]
    fn known_capabilities_pass() {
        M::new().caps(&["files.read", "ui.panel"]).assert_valid();
    }

    #[test]
    fn a_manifest_declares_at_least_one_capability() {
        // zeroclaw: "Each manifest must declare at least one capability".
        for m in [M::new().remove("capabilities"), M::new().caps(&[])] {
            m.assert_problem("capabilities", "at least one capability");
            m.assert_problem("capabilities", "files.read");
        }
        M::new().caps(&["files.read"]).assert_valid();
    }

    #[test]
    fn unknown_capabilities_are_refused() {
        let m = M::new().caps(&["files.read", "files.write"]);
        m.assert_problem("capabilities[1]", "unknown capability \"files.write\"");
        m.assert_no_problem_at("capabilities[0]");
        M::new()
            .caps(&["files.read", "files.read"])
            .assert_problem("capabilities[1]", "listed twice");
        M::new()
            .set("capabilities", json!("files.read"))
            .assert_problem("capabilities", "must be an array");
        M::new()
            .set("capabilities", json!([3]))
            .assert_problem("capabilities[0]", "must be a string");
    }
}
