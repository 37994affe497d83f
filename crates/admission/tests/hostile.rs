//! Generated hostile gate rules (crates/hostile): the `gate` section of a manifest, compiled
//! by admission into a Pod's policy (checked in the controller) and by the gate at the Pod's
//! start, then asked about paths. Glob syntax at its edges (nested and unclosed braces and
//! classes, `**` everywhere, very long patterns, many rules), operations the gate does not
//! know, command names with slashes and NULs. Never a panic, a refusal naming the field, and
//! bounded time and memory for compiling and deciding.

use std::path::{Path, PathBuf};

use gate::Operation;
use gate::compiled::CompiledPolicy;
use gate::decide::{Reach, decide, decide_exec};
use hostile::proptest::prelude::*;
use hostile::{Bounds, Target};
use model::resources::GateAudit;
use serde_json::{Value, json};

#[global_allocator]
static ALLOC: hostile::Counting = hostile::Counting;

/// Pieces of glob syntax.
const PIECES: &[&str] = &[
    "/",
    "/data",
    "/tmp",
    "/dev/shm",
    "/usr/bin",
    "**",
    "*",
    "?",
    "[a-z]",
    "[!x]",
    "[",
    "]",
    "{",
    "}",
    "{a,b}",
    "{a,{b,c}}",
    ",",
    "\\",
    "\\*",
    "..",
    ".",
    "~",
    "\u{0}",
    "é",
    "cache",
    "x",
];

fn pattern() -> BoxedStrategy<String> {
    prop_oneof![
        4 => prop::collection::vec(0..PIECES.len(), 1..12)
            .prop_map(|ix| ix.into_iter().map(|i| PIECES[i]).collect::<String>()),
        1 => (1usize..2_000).prop_map(|n| format!("/data/{}", "*/".repeat(n))),
        1 => (1usize..500).prop_map(|n| format!("/data/{}", "{a,".repeat(n))),
        1 => (1usize..4_000).prop_map(|n| format!("/{}", "x".repeat(n))),
        1 => any::<String>(),
    ]
    .boxed()
}

fn operation() -> BoxedStrategy<String> {
    prop_oneof![
        4 => (0..Operation::ALL.len()).prop_map(|i| Operation::ALL[i].as_str().to_string()),
        1 => any::<String>(),
    ]
    .boxed()
}

fn gate_section() -> BoxedStrategy<Value> {
    let file_rule = (
        prop::collection::vec(pattern(), 0..4),
        prop::collection::vec(operation(), 0..4),
        prop_oneof![Just("allow"), Just("deny"), Just("approve")],
    )
        .prop_map(|(paths, ops, d)| json!({"paths": paths, "operations": ops, "decision": d}));
    let command_rule = (
        prop::collection::vec(prop_oneof![pattern(), "[a-z]{1,8}"], 0..4),
        prop_oneof![Just("allow"), Just("deny")],
    )
        .prop_map(|(commands, d)| json!({"commands": commands, "decision": d}));
    prop_oneof![
        4 => (prop::collection::vec(file_rule.clone(), 0..6), prop::collection::vec(command_rule, 0..4))
            .prop_map(|(files, commands)| json!({"files": files, "commands": commands})),
        // Many rules at once.
        1 => (file_rule, 1usize..3_000).prop_map(|(rule, n)| json!({"files": vec![rule; n]})),
    ]
    .boxed()
}

fn manifests() -> BoxedStrategy<Vec<u8>> {
    gate_section()
        .prop_map(|gate| {
            json!({
                "id": "gated", "name": "G", "version": "1.0.0", "api": "1",
                "capabilities": ["agent.readonly"], "gate": gate,
            })
            .to_string()
            .into_bytes()
        })
        .boxed()
}

const PATHS: &[&str] = &[
    "/data/cache/x",
    "/data/a/b/c/d",
    "/tmp/x",
    "/dev/shm/x",
    "/dev/null",
    "/usr/bin/curl",
    "/etc/passwd",
    "/",
    "/data",
    "/data/../etc",
    "/proc/self/mem",
];

#[test]
fn gate_policies() {
    // Compiling thousands of globs is the slow part; a debug build gets 10 s for one manifest.
    let bounds = Bounds {
        time: std::time::Duration::from_secs(10),
        ..Bounds::default()
    };
    Target::new("gate_policies", env!("CARGO_MANIFEST_DIR"))
        .bounds(bounds)
        .run(manifests, |bytes| {
            let Ok(text) = std::str::from_utf8(bytes) else {
                return Ok(());
            };
            let manifest = match model::manifest::parse_str(text) {
                Ok(m) => m,
                // Refused for its rules, or for being longer than a Plugin can hold.
                Err(e)
                    if e.problems().iter().any(|p| {
                        p.path.starts_with("gate") || p.message.contains("bytes this host reads")
                    }) =>
                {
                    return Ok(());
                }
                Err(e) => return Err(format!("refused outside `gate`: {e}")),
            };
            let policy = match loop_plugins_admission::gate_policy::policy(
                manifest.gate.as_ref(),
                &GateAudit::default(),
                "gated",
                "team/general",
            ) {
                Ok(p) => p,
                Err(e) => {
                    let said = e.to_string();
                    return if said.contains("gate") {
                        Ok(())
                    } else {
                        Err(format!("a refusal that names no field: {said}"))
                    };
                }
            };
            // What the gate does at the Pod's start, then what it decides per syscall.
            let compiled = CompiledPolicy::compile(&policy, Path::to_path_buf)
                .map_err(|e| format!("admitted, but the gate refuses it at start: {e}"))?;
            for path in PATHS {
                for op in Operation::ALL {
                    let _ = decide(&compiled, op, Path::new(path), Reach::Subtree);
                }
                let _ = decide_exec(&compiled, Path::new(path), &PathBuf::from(path));
            }
            Ok(())
        });
}
