//! The gate's policy for a plugin, compiled from its manifest's `gate` rules and HostConfig's
//! `gates.audit`: checked at admission (a rule the gate would refuse refuses the manifest,
//! naming the field) and written for each Pod by the gate's init container. Pure.

use std::path::PathBuf;

use gate::{
    AuditDestination, AuditSettings, CommandRule, Decision, FileRule, GateRules, Operation, Policy,
    PolicyError, Retention,
};
use model::manifest::{Gate, GateDecision};
use model::resources::GateAudit;

/// The manifest's rules as the gate reads them, checked as the gate checks them; an operation
/// the gate does not know is an error naming its field (`gate.files[0].operations[1]`).
pub fn rules(gate: Option<&Gate>) -> Result<GateRules, PolicyError> {
    let rules = convert(gate)?;
    rules.validate("gate")?;
    Ok(rules)
}

/// The manifest's rules as the gate reads them, not yet checked: each glob compiles when they
/// are, so the one check is left to the caller.
fn convert(gate: Option<&Gate>) -> Result<GateRules, PolicyError> {
    let Some(gate) = gate else {
        return Ok(GateRules::default());
    };
    let decision = |d: GateDecision| match d {
        GateDecision::Allow => Decision::Allow,
        GateDecision::Deny => Decision::Deny,
    };
    let mut files = Vec::with_capacity(gate.files.len());
    for (i, rule) in gate.files.iter().enumerate() {
        let mut operations = Vec::with_capacity(rule.operations.len());
        for (j, op) in rule.operations.iter().enumerate() {
            let op: Operation = op.parse().map_err(|reason| PolicyError::Field {
                field: format!("gate.files[{i}].operations[{j}]"),
                reason,
            })?;
            operations.push(op);
        }
        files.push(FileRule {
            paths: rule.paths.clone(),
            operations,
            decision: decision(rule.decision),
        });
    }
    let commands = gate
        .commands
        .iter()
        .map(|rule| CommandRule {
            commands: rule.commands.clone(),
            decision: decision(rule.decision),
        })
        .collect();
    Ok(GateRules { files, commands })
}

/// The audit settings HostConfig asks for.
pub fn audit(audit: &GateAudit) -> AuditSettings {
    AuditSettings {
        destination: if audit.to_stdout() {
            AuditDestination::Stdout
        } else {
            AuditDestination::Dir(PathBuf::from(&audit.destination))
        },
        retention: Retention {
            max_age_days: audit.max_age_days,
            max_bytes: audit.max_bytes,
        },
        protect: true,
    }
}

/// The policy of one Pod: the manifest's rules, a pod's writable and no-exec dirs, the
/// audit, and the labels every audit line carries; checked once (each glob compiled once).
pub fn policy(
    gate: Option<&Gate>,
    host_audit: &GateAudit,
    plugin: &str,
    chat: &str,
) -> Result<Policy, PolicyError> {
    let policy = Policy {
        gate: convert(gate)?,
        plugin: Some(plugin.into()),
        chat: Some(chat.into()),
        audit: audit(host_audit),
        ..Policy::default()
    };
    policy.validate()?;
    Ok(policy)
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::manifest::{GateCommandRule, GateFileRule};

    fn gate(ops: &[&str], paths: &[&str]) -> Gate {
        Gate {
            files: vec![GateFileRule {
                paths: paths.iter().map(|p| p.to_string()).collect(),
                operations: ops.iter().map(|o| o.to_string()).collect(),
                decision: GateDecision::Deny,
            }],
            commands: vec![GateCommandRule {
                commands: vec!["curl".into(), "wget".into()],
                decision: GateDecision::Deny,
            }],
        }
    }

    #[test]
    fn rules_compile_into_the_pods_policy() {
        let g = gate(&["delete"], &["/data/cache/**"]);
        let p = policy(Some(&g), &GateAudit::default(), "echo", "team/general").unwrap();
        assert_eq!(p.gate.files[0].operations, vec![Operation::Delete]);
        assert_eq!(p.gate.commands[0].decision, Decision::Deny);
        assert_eq!(p.plugin.as_deref(), Some("echo"));
        assert_eq!(p.chat.as_deref(), Some("team/general"));
        assert_eq!(
            p.audit.destination,
            AuditDestination::Dir("/data/.loop-audit".into())
        );
        // What the init container writes, the gate reads back as it was.
        assert_eq!(Policy::from_json(&p.to_json(), "policy.json").unwrap(), p);
        let none = policy(None, &GateAudit::default(), "echo", "c").unwrap();
        assert_eq!(none.gate, GateRules::default());
    }

    #[test]
    fn what_the_gate_refuses_is_named() {
        let err = rules(Some(&gate(&["delete", "remove"], &["/data/**"])))
            .unwrap_err()
            .to_string();
        assert!(err.contains("gate.files[0].operations[1]"), "{err}");
        let err = rules(Some(&gate(&[], &["/data/[x"])))
            .unwrap_err()
            .to_string();
        assert!(err.contains("gate.files[0].paths[0]"), "{err}");
    }

    #[test]
    fn the_audit_follows_host_config() {
        let stdout = GateAudit {
            destination: "stdout".into(),
            max_age_days: 7,
            max_bytes: 1 << 20,
        };
        let a = audit(&stdout);
        assert_eq!(a.destination, AuditDestination::Stdout);
        assert_eq!(a.retention.max_age_days, 7);
        assert_eq!(a.retention.max_bytes, 1 << 20);
    }
}
