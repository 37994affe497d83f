//! Generated hostile settings values (crates/hostile): what a project editor (a Project's
//! `plugins.<id>.settings`) and an operator (HostConfig's) write, layered over a manifest's
//! defaults with every type of setting the reference allows. A value its schema refuses is
//! left out with a reason, never a panic; what is kept satisfies the setting's schema; in
//! bounded time and memory.

use std::collections::BTreeMap;

use hostile::Target;
use hostile::inputs::{json_leaves_mutated, json_mutated};
use hostile::proptest::prelude::*;
use loop_plugins_model::config::PluginConfig;
use loop_plugins_model::manifest::{Manifest, json_schema, parse_str};
use loop_plugins_model::resolve::settings::resolve_settings;
use serde_json::{Value, json};

#[global_allocator]
static ALLOC: hostile::Counting = hostile::Counting;

fn manifest() -> Manifest {
    parse_str(include_str!("../../../examples/manifests/full.json")).expect("full.json parses")
}

fn configs() -> BoxedStrategy<Vec<u8>> {
    let seed = json!({
        "global": {"question_count": 8, "language": "de", "topics": ["a"], "weights": {"easy": 2, "hard": 3}},
        "project": {"question_count": 3, "pass_mark": 0.5, "sync_all": true, "unknown": 1},
    });
    prop_oneof![
        3 => json_leaves_mutated(vec![seed.clone()]),
        3 => json_mutated(vec![seed], 120),
    ]
    .prop_map(|v| v.to_string().into_bytes())
    .boxed()
}

fn config(v: &Value) -> Option<PluginConfig> {
    let settings: BTreeMap<String, Value> = v
        .as_object()?
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    Some(PluginConfig {
        settings,
        ..PluginConfig::default()
    })
}

#[test]
fn settings_values() {
    Target::new("settings_values", env!("CARGO_MANIFEST_DIR")).run(configs, |bytes| {
        let Ok(doc) = serde_json::from_slice::<Value>(bytes) else {
            return Ok(());
        };
        let m = manifest();
        let (global, project) = (config(&doc["global"]), config(&doc["project"]));
        let resolved = resolve_settings(&m, global.as_ref(), project.as_ref());
        for (name, value) in &resolved.values {
            let Some(Ok(validator)) = m.setting_validator(name) else {
                return Err(format!("a value kept for {name}, which has no schema"));
            };
            json_schema::check(validator, value).map_err(|why| {
                format!("{name} = {value} kept, though its schema refuses it: {why}")
            })?;
        }
        for left in &resolved.left_out {
            if left.why().is_empty() {
                return Err(format!("{} left out without a reason", left.setting));
            }
        }
        Ok(())
    });
}

/// A task's options as the annotation on its CronJob holds them (`plugins.loop.dev/task-options`):
/// written by the API server, but readable and writable by anyone who may patch CronJobs. Any
/// text gives options or a refusal, never a panic; options read are options `check` accepts,
/// and written back they read the same.
fn task_option_texts() -> BoxedStrategy<Vec<u8>> {
    let seed = json!({ "worktree": true, "updateBeforeRun": true, "autoDeleteSeconds": 3600 });
    prop_oneof![
        3 => json_leaves_mutated(vec![seed.clone()]).prop_map(|v| v.to_string().into_bytes()),
        3 => json_mutated(vec![seed.clone()], 40).prop_map(|v| v.to_string().into_bytes()),
        2 => hostile::inputs::mutated(vec![seed.to_string().into_bytes()]),
        1 => hostile::inputs::deep_text(),
    ]
    .boxed()
}

#[test]
fn task_options() {
    use loop_plugins_model::task::TaskOptions;
    Target::new("task_options", env!("CARGO_MANIFEST_DIR")).run(task_option_texts, |bytes| {
        let text = String::from_utf8_lossy(bytes);
        let _ = TaskOptions::of_annotation(Some(&text));
        let Ok(options) = TaskOptions::from_json(&text) else {
            return Ok(());
        };
        options
            .check()
            .map_err(|why| format!("{text:?} read as {options:?}, which check refuses: {why}"))?;
        let again = TaskOptions::from_json(&options.to_json())
            .map_err(|why| format!("{options:?} written back does not read: {why}"))?;
        if again != options {
            return Err(format!("{options:?} written back reads as {again:?}"));
        }
        Ok(())
    });
}
