//! gate: file and command rules, which may only allow or deny, on operations the gate knows
//! and paths it can match.

use serde_json::Value;

use super::Ctx;
use super::read::{Object, field, optional_object, optional_objects, string_list};
use crate::error::{JsonPath, Problems};
use crate::gate::Operation;
use crate::gate::rule_limits::{ENTRIES, ENTRY_BYTES, RULES, WILDCARDS};

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
    let p = &mut ctx.problems;
    let Some((at, gate)) = optional_object(ctx.doc, "gate", &root, p) else {
        return;
    };
    // This host's limits (crate::gate::rule_limits): compiling and matching stay cheap.
    for (list, entries) in [("files", "paths"), ("commands", "commands")] {
        let Some(Value::Array(rules)) = field(gate, list) else {
            continue;
        };
        let named: usize = rules
            .iter()
            .filter_map(|r| r.get(entries).and_then(Value::as_array))
            .map(Vec::len)
            .sum();
        if rules.len() > RULES {
            p.add(
                &at.key(list),
                format!(
                    "holds {} rules; this host takes at most {RULES}",
                    rules.len()
                ),
            );
            return;
        }
        if named > ENTRIES {
            p.add(
                &at.key(list),
                format!("names {named} {entries} in all; this host takes at most {ENTRIES}"),
            );
            return;
        }
    }
    for (rule_at, rule) in optional_objects(gate, "files", &at, p) {
        if non_empty_list(rule, "paths", &rule_at, p) && within_limits(rule, "paths", &rule_at, p) {
            for (i, path) in strings(rule, "paths") {
                let wildcards = path
                    .chars()
                    .filter(|c| matches!(c, '*' | '?' | '[' | '{'))
                    .count();
                if wildcards > WILDCARDS {
                    p.add(
                        &rule_at.key("paths").index(i),
                        format!("holds {wildcards} wildcards; this host takes at most {WILDCARDS}"),
                    );
                }
                if !path.starts_with('/') {
                    p.add(
                        &rule_at.key("paths").index(i),
                        format!(
                            "\"{path}\" must be an absolute path (a glob such as /data/cache/**)"
                        ),
                    );
                }
            }
        }
        string_list(rule, "operations", &rule_at, p);
        // The operations a rule may name are the gate's own, so a rule the gate could not
        // enforce is refused with the manifest, naming its field.
        for (i, op) in strings(rule, "operations") {
            if op.parse::<Operation>().is_err() {
                let known: Vec<&str> = Operation::ALL.iter().map(|o| o.as_str()).collect();
                p.add(
                    &rule_at.key("operations").index(i),
                    format!(
                        "the gate knows no operation \"{op}\": one of {}",
                        known.join(", ")
                    ),
                );
            }
        }
        decision(rule, &rule_at, p);
    }
    for (rule_at, rule) in optional_objects(gate, "commands", &at, p) {
        if non_empty_list(rule, "commands", &rule_at, p)
            && within_limits(rule, "commands", &rule_at, p)
        {
            for (i, command) in strings(rule, "commands") {
                if command.contains('/') && !command.starts_with('/') {
                    p.add(
                        &rule_at.key("commands").index(i),
                        format!("\"{command}\": a command is a name or an absolute path"),
                    );
                }
            }
        }
        decision(rule, &rule_at, p);
    }
}

/// Whether a rule's list holds entries of at most [`ENTRY_BYTES`] bytes; what does not is
/// reported.
fn within_limits(rule: &Object, name: &str, at: &JsonPath, p: &mut Problems) -> bool {
    let before = p.len();
    for (i, entry) in strings(rule, name) {
        if entry.len() > ENTRY_BYTES {
            p.add(
                &at.key(name).index(i),
                format!(
                    "is {} bytes; this host takes at most {ENTRY_BYTES}",
                    entry.len()
                ),
            );
        }
    }
    p.len() == before
}

/// The strings of a list field, with their indexes (other items are reported elsewhere).
fn strings<'a>(rule: &'a Object, name: &str) -> Vec<(usize, &'a str)> {
    match field(rule, name) {
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_str().map(|s| (i, s)))
            .collect(),
        _ => Vec::new(),
    }
}

/// Whether the list is there and not empty (its items are checked as strings).
fn non_empty_list(rule: &Object, name: &str, at: &JsonPath, p: &mut Problems) -> bool {
    match field(rule, name) {
        None => p.add(&at.key(name), "is required: a list of at least one"),
        Some(Value::Array(a)) if a.is_empty() => p.add(&at.key(name), "must list at least one"),
        Some(_) => {
            string_list(rule, name, at, p);
            return true;
        }
    }
    false
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

    use crate::fixtures::M;

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
    fn rules_are_held_to_this_hosts_limits() {
        let rule = json!({ "paths": ["/data/**"], "decision": "deny" });
        M::new()
            .set("gate", json!({ "files": vec![rule.clone(); 64] }))
            .assert_valid();
        M::new()
            .set("gate", json!({ "files": vec![rule; 65] }))
            .assert_problem("gate.files", "holds 65 rules; this host takes at most 64");
        let paths: Vec<String> = (0..129).map(|i| format!("/data/{i}")).collect();
        let two = json!({ "paths": paths, "decision": "deny" });
        M::new()
            .set("gate", json!({ "files": [two, two] }))
            .assert_problem(
                "gate.files",
                "names 258 paths in all; this host takes at most 256",
            );
        let long = format!("/{}", "x".repeat(4096));
        M::new()
            .set(
                "gate",
                json!({ "commands": [{ "commands": [long], "decision": "deny" }] }),
            )
            .assert_problem("gate.commands[0].commands[0]", "is 4097 bytes");
        let starry = format!("/data/{}", "*/".repeat(33));
        M::new()
            .set(
                "gate",
                json!({ "files": [{ "paths": [starry], "decision": "deny" }] }),
            )
            .assert_problem("gate.files[0].paths[0]", "holds 33 wildcards");
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

    #[test]
    fn every_operation_the_gate_knows_may_be_named() {
        for op in crate::gate::Operation::ALL {
            M::new()
                .set(
                    "gate",
                    json!({ "files": [{ "paths": ["/data/**"], "operations": [op.as_str()], "decision": "deny" }] }),
                )
                .assert_valid();
        }
    }

    #[test]
    fn operations_the_gate_does_not_know_are_refused_by_name() {
        M::new()
            .set(
                "gate",
                json!({ "files": [{ "paths": ["/data/**"], "operations": ["read", "remove"], "decision": "deny" }] }),
            )
            .assert_problem("gate.files[0].operations[1]", "no operation \"remove\"");
        M::new()
            .set(
                "gate",
                json!({ "files": [{ "paths": ["data/**"], "decision": "deny" }] }),
            )
            .assert_problem("gate.files[0].paths[0]", "absolute path");
        M::new()
            .set(
                "gate",
                json!({ "commands": [{ "commands": ["bin/curl"], "decision": "deny" }] }),
            )
            .assert_problem("gate.commands[0].commands[0]", "name or an absolute path");
    }
}
