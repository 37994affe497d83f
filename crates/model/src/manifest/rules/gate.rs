//! gate: file and command rules, which may only allow or deny.

use serde_json::Value;

use super::Ctx;
use super::read::{Object, field, optional_object, optional_objects, string_list};
use crate::manifest::error::{JsonPath, Problems};

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
    let p = &mut ctx.problems;
    let Some((at, gate)) = optional_object(ctx.doc, "gate", &root, p) else {
        return;
    };
    for (rule_at, rule) in optional_objects(gate, "files", &at, p) {
        non_empty_list(rule, "paths", &rule_at, p);
        string_list(rule, "operations", &rule_at, p);
        decision(rule, &rule_at, p);
    }
    for (rule_at, rule) in optional_objects(gate, "commands", &at, p) {
        non_empty_list(rule, "commands", &rule_at, p);
        decision(rule, &rule_at, p);
    }
}

fn non_empty_list(rule: &Object, name: &str, at: &JsonPath, p: &mut Problems) {
    match field(rule, name) {
        None => p.add(&at.key(name), "is required: a list of at least one"),
        Some(Value::Array(a)) if a.is_empty() => p.add(&at.key(name), "must list at least one"),
        Some(_) => {
            string_list(rule, name, at, p);
        }
    }
}

fn decision(rule: &Object, at: &JsonPath, p: &mut Problems) {
    let at = at.key("decision");
    match field(rule, "decision") {
        Some(Value::String(d)) if d == "allow" || d == "deny" => {}
        Some(Value::String(d)) if d == "approve" => p.add(
            &at,
            "approve is refused: nobody is there to answer a prompt, so a plugin's gate rules may only allow or deny",
        ),
        None => p.add(&at, "is required: allow or deny"),
        Some(other) => p.add(&at, format!("must be allow or deny, not {other}")),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::manifest::fixtures::M;

    #[test]
    fn allow_and_deny_rules_pass() {
        M::new()
            .set(
                "gate",
                json!({
                    "files": [{ "paths": ["/data/cache/**"], "operations": ["delete"], "decision": "deny" }],
                    "commands": [{ "commands": ["git"], "decision": "allow" }, { "commands": ["curl", "wget"], "decision": "deny" }],
                }),
            )
            .assert_valid();
    }

    #[test]
    fn approve_is_refused() {
        let m = M::new().set(
            "gate",
            json!({
                "files": [{ "paths": ["/data/**"], "decision": "approve" }],
                "commands": [{ "commands": ["curl"], "decision": "approve" }],
            }),
        );
        m.assert_problem("gate.files[0].decision", "approve is refused");
        m.assert_problem("gate.commands[0].decision", "approve is refused");
        M::new()
            .set(
                "gate",
                json!({ "commands": [{ "commands": ["curl"], "decision": "ask" }] }),
            )
            .assert_problem("gate.commands[0].decision", "allow or deny");
        M::new()
            .set("gate", json!({ "commands": [{ "commands": ["curl"] }] }))
            .assert_problem("gate.commands[0].decision", "is required");
    }

    #[test]
    fn rules_name_what_they_cover() {
        M::new()
            .set(
                "gate",
                json!({ "files": [{ "paths": [], "decision": "deny" }] }),
            )
            .assert_problem("gate.files[0].paths", "at least one");
        M::new()
            .set("gate", json!({ "commands": [{ "decision": "deny" }] }))
            .assert_problem("gate.commands[0].commands", "is required");
        M::new()
            .set(
                "gate",
                json!({ "files": [{ "paths": ["/data"], "operations": [1], "decision": "deny" }] }),
            )
            .assert_problem("gate.files[0].operations[0]", "must be a string");
    }
}
