//! The gate's policy for a plugin, compiled from its manifest's `gate` rules and HostConfig's
//! `gates.audit`: checked at admission (a rule the gate would refuse refuses the manifest,
//! naming the field) and written for each Pod by the gate's init container. Pure.

use std::path::PathBuf;

use gate::{AuditDestination, AuditSettings, Policy, PolicyError, Retention};
use model::manifest::gate::GateRules;
use model::resources::GateAudit;

/// The manifest's rules (the gate reads the same type), checked as the gate checks them: a
/// rule the gate would refuse is an error naming its field (`gate.files[0].paths[1]`).
pub fn rules(gate: Option<&GateRules>) -> Result<GateRules, PolicyError> {
    let rules = gate.cloned().unwrap_or_default();
    rules.validate("gate")?;
    Ok(rules)
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
    gate: Option<&GateRules>,
    host_audit: &GateAudit,
    plugin: &str,
    chat: &str,
) -> Result<Policy, PolicyError> {
    let policy = Policy {
        gate: gate.cloned().unwrap_or_default(),
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
    use model::manifest::gate::{CommandRule, Decision, FileRule, Operation};

    fn gate(ops: &[Operation], paths: &[&str]) -> GateRules {
        GateRules {
            files: vec![FileRule {
                paths: paths.iter().map(|p| p.to_string()).collect(),
                operations: ops.to_vec(),
                decision: Decision::Deny,
            }],
            commands: vec![CommandRule {
                commands: vec!["curl".into(), "wget".into()],
                decision: Decision::Deny,
            }],
        }
    }

    #[test]
    fn rules_compile_into_the_pods_policy() {
        let g = gate(&[Operation::Delete], &["/data/cache/**"]);
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
        let err = rules(Some(&gate(&[], &["/data/**", "data/x"])))
            .unwrap_err()
            .to_string();
        assert!(err.contains("gate.files[0].paths[1]"), "{err}");
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
