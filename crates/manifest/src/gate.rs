//! The manifest's `gate` rules, as one vocabulary for the manifest's check, admission and the
//! gate that enforces them (crates/gate): the operations a file rule may name
//! ([`Operation`]), what a rule decides ([`Decision`]), the rules themselves ([`GateRules`],
//! [`FileRule`], [`CommandRule`]), this host's limits on them ([`rule_limits`]), how a rule's
//! path compiles as a glob ([`glob`]) and the checks serde cannot make
//! ([`GateRules::validate`]). Pure: no file system, no supervisor, so a plugin author's build
//! (the SDK reads manifests with this crate) never compiles the gate.
//!
//! Read two ways: the gate's policy file (and `--manifest-gate`) refuses a key a rule does
//! not know, so a misspelt rule never silently weakens the gate ([`GateRules`]' own
//! `Deserialize`); `plugin.json` passes such keys over, as it does below its top level
//! everywhere (the manifest's `gate` field is read with [`read_manifest_gate`]).

use std::fmt;

use globset::{GlobBuilder, GlobMatcher};
use serde::{Deserialize, Deserializer, Serialize};

/// What a rule decides. The manifest may only allow or deny.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Allow,
    Deny,
}

impl Decision {
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Allow => "allow",
            Decision::Deny => "deny",
        }
    }
}

impl<'de> Deserialize<'de> for Decision {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        match s.as_str() {
            "allow" => Ok(Decision::Allow),
            "deny" => Ok(Decision::Deny),
            "approve" => Err(serde::de::Error::custom(
                "decision approve is refused: nobody is there to answer a prompt, so a plugin's gate rules may only allow or deny",
            )),
            other => Err(serde::de::Error::custom(format!(
                "decision must be allow or deny, not {other:?}"
            ))),
        }
    }
}

/// A file operation a rule names. A rule with no operations covers all of them.
///
/// | operation | the calls it covers |
/// |---|---|
/// | `read`    | opening for reading (files and directories) |
/// | `write`   | opening for writing, `O_TRUNC`, `truncate` |
/// | `create`  | a new name: `O_CREAT` of a new file, `mkdir`, `mknod`, the target of `rename`, `link`, `symlink` |
/// | `delete`  | `unlink`, `rmdir`, the source of `rename` (and a target it replaces) |
/// | `rename`  | both sides of `rename` |
/// | `link`    | the new name of a hard link; its source is checked as `write` |
/// | `symlink` | the new name of a symbolic link |
/// | `chmod`   | the `chmod` family |
/// | `chown`   | the `chown` family |
/// | `setattr` | timestamps (`utimensat`, `utimes`) and extended attributes |
/// | `exec`    | running the file (`execve`, `execveat`) |
///
/// Stats, `access`, `readlink` and listings of an already open directory are never trapped:
/// the baseline allows them everywhere, and no rule can deny them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    Read,
    Write,
    Create,
    Delete,
    Rename,
    Link,
    Symlink,
    Chmod,
    Chown,
    Setattr,
    Exec,
}

impl Operation {
    pub const ALL: [Operation; 11] = [
        Operation::Read,
        Operation::Write,
        Operation::Create,
        Operation::Delete,
        Operation::Rename,
        Operation::Link,
        Operation::Symlink,
        Operation::Chmod,
        Operation::Chown,
        Operation::Setattr,
        Operation::Exec,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Read => "read",
            Operation::Write => "write",
            Operation::Create => "create",
            Operation::Delete => "delete",
            Operation::Rename => "rename",
            Operation::Link => "link",
            Operation::Symlink => "symlink",
            Operation::Chmod => "chmod",
            Operation::Chown => "chown",
            Operation::Setattr => "setattr",
            Operation::Exec => "exec",
        }
    }
}

impl std::str::FromStr for Operation {
    type Err = String;

    /// An operation by its manifest name; the error lists the names there are (for the
    /// manifest check at admission, which must refuse what the gate would).
    fn from_str(s: &str) -> Result<Operation, String> {
        Operation::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Operation::ALL.iter().map(|o| o.as_str()).collect();
                format!("unknown operation {s:?}: one of {}", names.join(", "))
            })
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// How many rules, and how much glob, a manifest's `gate` may hold: this host's limits (the
/// reference sets none), far past what a plugin needs, so that compiling the rules (in the
/// controller at admission, and in the gate at each Pod's start) and deciding each trapped
/// syscall against them stay cheap. Every glob is a compiled pattern, and every syscall is
/// matched against each rule.
pub mod rule_limits {
    /// `gate.files` and `gate.commands` each hold at most this many rules.
    pub const RULES: usize = 64;
    /// The rules of `gate.files` name at most this many paths in all, and those of
    /// `gate.commands` this many commands.
    pub const ENTRIES: usize = 256;
    /// A path or command is at most this many bytes (Linux's PATH_MAX).
    pub const ENTRY_BYTES: usize = 4096;
    /// A path glob holds at most this many wildcards (`*`, `?`, `[`, `{`).
    pub const WILDCARDS: usize = 32;
}

/// The manifest's `gate` object: what plugin.json says, what admission compiles into the
/// gate's policy and what the policy file holds.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateRules {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<FileRule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub commands: Vec<CommandRule>,
}

/// A rule on file operations: absolute path globs (`*` within one component, `**` across
/// them), the operations it covers (all when empty), and what it decides.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileRule {
    pub paths: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub operations: Vec<Operation>,
    pub decision: Decision,
}

/// A rule on running commands: names (matched against the file name of what is run, before
/// and after symbolic links are followed) or absolute paths.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CommandRule {
    pub commands: Vec<String>,
    pub decision: Decision,
}

/// A rule field the checks refuse, named by its path (`gate.files[0].paths[1]`).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {reason}")]
pub struct RuleError {
    pub field: String,
    pub reason: String,
}

fn rule_error(field: impl Into<String>, reason: impl Into<String>) -> RuleError {
    RuleError {
        field: field.into(),
        reason: reason.into(),
    }
}

/// Compiles one rule path as a glob: `*` and `?` stay within a component, `**` spans them.
/// The one dialect: the checks parse each path with it, and the gate matches with it.
pub fn glob(pattern: &str) -> Result<GlobMatcher, globset::Error> {
    Ok(parsed(pattern)?.compile_matcher())
}

/// Checks one rule path's glob syntax without compiling its matcher: what the rules' checks
/// need (the controller checks every Pod's policy; only the gate in the Pod compiles and
/// matches, and a compiled matcher of a hostile glob is costly).
pub fn check(pattern: &str) -> Result<(), globset::Error> {
    parsed(pattern).map(|_| ())
}

fn parsed(pattern: &str) -> Result<globset::Glob, globset::Error> {
    GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
}

/// A rule path's components as the gate matches them one by one below a dir (`**` among
/// them); `None` when an alternation spans components (`{a/b,c}`), which the gate then judges
/// by the literal prefix alone.
pub fn components(pattern: &str) -> Option<Vec<&str>> {
    let spans = pattern
        .split('{')
        .skip(1)
        .any(|alt| alt.split('}').next().is_some_and(|a| a.contains('/')));
    (!spans).then(|| pattern.split('/').filter(|c| !c.is_empty()).collect())
}

/// The leading components of a glob that hold no glob syntax: the dir everything it can
/// match lies under.
pub fn literal_prefix(pattern: &str) -> std::path::PathBuf {
    let mut out = std::path::PathBuf::from("/");
    for part in pattern.split('/').filter(|p| !p.is_empty()) {
        if part.contains(['*', '?', '[', '{', '\\']) {
            break;
        }
        out.push(part);
    }
    out
}

/// Operations that change what is on disk outside `exec` and `read`.
pub const CHANGING: &[Operation] = &[
    Operation::Write,
    Operation::Create,
    Operation::Delete,
    Operation::Rename,
    Operation::Link,
    Operation::Symlink,
    Operation::Chmod,
    Operation::Chown,
    Operation::Setattr,
];

impl GateRules {
    /// Checks what serde cannot: non-empty lists within [`rule_limits`], absolute paths that
    /// compile as globs, command names that are names. `at` names the rules (`gate`).
    pub fn validate(&self, at: &str) -> Result<(), RuleError> {
        use rule_limits::{ENTRIES, ENTRY_BYTES, RULES, WILDCARDS};
        for (list, len) in [
            ("files", self.files.len()),
            ("commands", self.commands.len()),
        ] {
            if len > RULES {
                return Err(rule_error(
                    format!("{at}.{list}"),
                    format!("holds {len} rules; this host takes at most {RULES}"),
                ));
            }
        }
        for (i, rule) in self.files.iter().enumerate() {
            let here = format!("{at}.files[{i}]");
            if rule.paths.is_empty() {
                return Err(rule_error(
                    format!("{here}.paths"),
                    "must list at least one path",
                ));
            }
            if rule.paths.len() > ENTRIES {
                return Err(rule_error(
                    format!("{here}.paths"),
                    format!(
                        "lists {} paths; this host takes at most {ENTRIES}",
                        rule.paths.len()
                    ),
                ));
            }
            for (j, p) in rule.paths.iter().enumerate() {
                let f = format!("{here}.paths[{j}]");
                if p.len() > ENTRY_BYTES {
                    return Err(rule_error(
                        f,
                        format!("is {} bytes; a path is at most {ENTRY_BYTES}", p.len()),
                    ));
                }
                let wildcards = p
                    .chars()
                    .filter(|c| matches!(c, '*' | '?' | '[' | '{'))
                    .count();
                if wildcards > WILDCARDS {
                    return Err(rule_error(
                        f,
                        format!("holds {wildcards} wildcards; this host takes at most {WILDCARDS}"),
                    ));
                }
                if !p.starts_with('/') {
                    return Err(rule_error(f, format!("{p:?} must be an absolute path")));
                }
                if p.contains('\0') {
                    return Err(rule_error(f, "must not contain NUL"));
                }
                check(p).map_err(|e| rule_error(f.clone(), e.to_string()))?;
                // Each component as the gate compiles it (`/\/` parses whole, but its
                // component `\` is a dangling escape the gate would refuse at start).
                for c in components(p).unwrap_or_default() {
                    check(c)
                        .map_err(|e| rule_error(f.clone(), format!("its component {c:?}: {e}")))?;
                }
                // What the gate refuses at a Pod's start is refused here too, so admission
                // never admits a rule the Pods could not run with (the compiled policy checks
                // the canonical prefix again).
                let changes = rule.operations.is_empty()
                    || rule.operations.iter().any(|o| CHANGING.contains(o));
                if rule.decision == Decision::Allow
                    && changes
                    && literal_prefix(p) == std::path::Path::new("/")
                {
                    return Err(rule_error(
                        f,
                        format!(
                            "{p:?} allows changing files anywhere: an allow rule that changes files must name a dir below /, which then becomes a no-exec dir"
                        ),
                    ));
                }
            }
        }
        for (i, rule) in self.commands.iter().enumerate() {
            let here = format!("{at}.commands[{i}]");
            if rule.commands.is_empty() {
                return Err(rule_error(
                    format!("{here}.commands"),
                    "must list at least one command",
                ));
            }
            for (j, c) in rule.commands.iter().enumerate() {
                let f = format!("{here}.commands[{j}]");
                if c.len() > ENTRY_BYTES {
                    return Err(rule_error(
                        f,
                        format!("is {} bytes; a command is at most {ENTRY_BYTES}", c.len()),
                    ));
                }
                if c.is_empty() || c.contains('\0') {
                    return Err(rule_error(f, "must be a command name or an absolute path"));
                }
                if c.contains('/') && !c.starts_with('/') {
                    return Err(rule_error(f, format!("{c:?}: a path must be absolute")));
                }
            }
        }
        Ok(())
    }
}

/// plugin.json's `gate`, into the one [`GateRules`]: keys a rule does not know are passed
/// over, as below plugin.json's top level everywhere (the manifest's rules check, which runs
/// first, reads every key these name). The policy file's reading refuses them.
pub(crate) fn read_manifest_gate<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<GateRules>, D::Error> {
    #[derive(Deserialize)]
    struct Rules {
        #[serde(default)]
        files: Vec<File>,
        #[serde(default)]
        commands: Vec<Command>,
    }
    #[derive(Deserialize)]
    struct File {
        paths: Vec<String>,
        #[serde(default)]
        operations: Vec<Operation>,
        decision: Decision,
    }
    #[derive(Deserialize)]
    struct Command {
        commands: Vec<String>,
        decision: Decision,
    }
    Ok(Option::<Rules>::deserialize(d)?.map(|rules| GateRules {
        files: rules
            .files
            .into_iter()
            .map(|f| FileRule {
                paths: f.paths,
                operations: f.operations,
                decision: f.decision,
            })
            .collect(),
        commands: rules
            .commands
            .into_iter()
            .map(|c| CommandRule {
                commands: c.commands,
                decision: c.decision,
            })
            .collect(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the hostile inputs (admission's `gate_policies`): `/\/` parsed as one glob and
    /// was admitted, and every Pod's gate refused it at start, compiling it component by
    /// component.
    #[test]
    fn a_path_is_checked_component_by_component_as_the_gate_compiles_it() {
        let rules = |path: &str| GateRules {
            files: vec![FileRule {
                paths: vec![path.into()],
                operations: vec![],
                decision: Decision::Deny,
            }],
            commands: vec![],
        };
        assert!(check("/\\/").is_ok(), "whole, it parses");
        let err = rules("/\\/").validate("gate").unwrap_err();
        assert_eq!(err.field, "gate.files[0].paths[0]");
        assert!(err.reason.contains("component"), "{err}");
        assert!(rules("/data/\\*x/**").validate("gate").is_ok());
        assert_eq!(components("/data/{a/b,c}/x"), None);
        assert_eq!(components("/data//x/**"), Some(vec!["data", "x", "**"]));
    }

    #[test]
    fn globs_keep_stars_within_a_component() {
        let g = glob("/data/*/x").unwrap();
        assert!(g.is_match("/data/a/x"));
        assert!(!g.is_match("/data/a/b/x"));
        let g = glob("/data/cache/**").unwrap();
        assert!(g.is_match("/data/cache/a"));
        assert!(g.is_match("/data/cache/a/b/c"));
        assert!(!g.is_match("/data/cachex/a"));
        assert!(!g.is_match("/data/cache"));
    }

    #[test]
    fn operations_parse_by_their_manifest_names() {
        for op in Operation::ALL {
            assert_eq!(op.as_str().parse::<Operation>(), Ok(op));
            let json = serde_json::to_string(&op).unwrap();
            assert_eq!(json, format!("\"{op}\""));
        }
        let err = "remove".parse::<Operation>().unwrap_err();
        assert!(err.contains("delete") && err.contains("remove"), "{err}");
    }

    #[test]
    fn bad_rules_are_named_by_their_field() {
        let rules = |text: &str| serde_json::from_str::<GateRules>(text).unwrap();
        let cases = [
            (
                r#"{"files":[{"paths":[],"decision":"deny"}]}"#,
                "gate.files[0].paths",
            ),
            (
                r#"{"files":[{"paths":["cache/**"],"decision":"deny"}]}"#,
                "gate.files[0].paths[0]",
            ),
            (
                r#"{"files":[{"paths":["/a/[b"],"decision":"deny"}]}"#,
                "gate.files[0].paths[0]",
            ),
            (
                r#"{"commands":[{"commands":[""],"decision":"deny"}]}"#,
                "gate.commands[0].commands[0]",
            ),
            (
                r#"{"commands":[{"commands":["bin/x"],"decision":"deny"}]}"#,
                "gate.commands[0].commands[0]",
            ),
        ];
        for (text, field) in cases {
            let err = rules(text).validate("gate").unwrap_err();
            assert_eq!(err.field, field, "{text}: {err}");
        }
        let good =
            r#"{"files":[{"paths":["/data/cache/**"],"operations":["delete"],"decision":"deny"}]}"#;
        assert_eq!(rules(good).validate("gate"), Ok(()));
    }

    #[test]
    fn the_policy_refuses_unknown_keys_and_approve_and_the_manifest_passes_keys_over() {
        let misspelt =
            r#"{"files":[{"paths":["/data/**"],"operation":["read"],"decision":"allow"}]}"#;
        assert!(serde_json::from_str::<GateRules>(misspelt).is_err());
        let approve = r#"{"commands":[{"commands":["curl"],"decision":"approve"}]}"#;
        let err = serde_json::from_str::<GateRules>(approve).unwrap_err();
        assert!(err.to_string().contains("approve is refused"), "{err}");
        let mut de = serde_json::Deserializer::from_str(misspelt);
        let read = read_manifest_gate(&mut de).unwrap().unwrap();
        assert_eq!(
            read.files,
            [FileRule {
                paths: vec!["/data/**".into()],
                operations: vec![],
                decision: Decision::Allow,
            }]
        );
    }
}
