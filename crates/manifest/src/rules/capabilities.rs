//! capabilities: only known ones, each once.

use std::collections::BTreeSet;

use super::Ctx;
use super::read::string_list;
use crate::capability::Capability;

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
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
