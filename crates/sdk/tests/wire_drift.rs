//! The hand-written wire types against `openapi/plugin-contract-v1.yaml`: for each schema, a
//! value with every field set serializes to exactly the schema's properties, and one with
//! only what is required to at least its required ones. Adding, renaming or removing a
//! property on either side fails here.

use std::collections::BTreeSet;

use loop_plugin_sdk::wire::{
    ActionRequest, ContentBlock, ErrorBody, Event, Health, RunDone, RunStatus, SwitchRequest,
    SwitchState, ToolRequest, ToolResult, Trigger,
};
use serde::Serialize;
use serde_json::{Value, json};

const SPEC: &str = include_str!("../../../openapi/plugin-contract-v1.yaml");

fn keys<T: Serialize>(value: &T) -> BTreeSet<String> {
    serde_json::to_value(value)
        .unwrap()
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect()
}

fn names(v: Option<&Value>, object: bool) -> BTreeSet<String> {
    match v {
        Some(Value::Object(o)) if object => o.keys().cloned().collect(),
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|s| s.as_str().map(String::from))
            .collect(),
        _ => BTreeSet::new(),
    }
}

fn held_to<T: Serialize>(spec: &Value, schema: &str, full: T, minimal: T) {
    let s = &spec["components"]["schemas"][schema];
    assert!(s.is_object(), "the spec has no schema {schema}");
    let properties = names(s.get("properties"), true);
    let required = names(s.get("required"), false);
    assert_eq!(
        keys(&full),
        properties,
        "{schema}: the type's fields and the spec's properties"
    );
    let minimal = keys(&minimal);
    assert!(
        required.is_subset(&minimal),
        "{schema}: the spec requires {required:?}, the type may leave out some of them: {minimal:?}"
    );
}

#[test]
fn every_wire_type_matches_its_schema() {
    let spec: Value = serde_saphyr::from_str(SPEC).unwrap();
    let text = "x".to_string();
    held_to(
        &spec,
        "ActionRequest",
        ActionRequest {
            trigger: Trigger::Workflow,
            task_id: Some(text.clone()),
            run_id: Some(text.clone()),
            input: Some(json!({})),
            thread_id: Some(text.clone()),
        },
        ActionRequest {
            trigger: Trigger::Manual,
            task_id: None,
            run_id: None,
            input: None,
            thread_id: None,
        },
    );
    let tool_request = ToolRequest {
        input: Default::default(),
        agent: text.clone(),
        thread_id: text.clone(),
        run_id: text.clone(),
    };
    held_to(&spec, "ToolRequest", tool_request.clone(), tool_request);
    let mut full = ToolResult::json(&json!({"a": 1})).unwrap();
    full.is_error = false;
    held_to(&spec, "ToolResult", full, ToolResult::text("x"));
    held_to(
        &spec,
        "ContentBlock",
        ContentBlock::text("x"),
        ContentBlock::text("x"),
    );
    held_to(
        &spec,
        "RunDone",
        RunDone {
            status: RunStatus::Failed,
            result: Some(text.clone()),
            error: Some(text.clone()),
        },
        RunDone {
            status: RunStatus::Done,
            result: None,
            error: None,
        },
    );
    held_to(
        &spec,
        "Event",
        Event {
            kind: text.clone(),
            thread_id: Some(text.clone()),
            data: json!({}),
        },
        Event {
            kind: text.clone(),
            thread_id: None,
            data: json!({}),
        },
    );
    held_to(
        &spec,
        "SwitchRequest",
        SwitchRequest {
            on: true,
            thread_id: Some(text.clone()),
        },
        SwitchRequest {
            on: false,
            thread_id: None,
        },
    );
    held_to(
        &spec,
        "SwitchState",
        SwitchState {
            on: true,
            title: Some(text.clone()),
            error: Some(text.clone()),
            busy: true,
        },
        SwitchState::default(),
    );
    let health = Health {
        status: "ok".into(),
        id: text.clone(),
        version: text.clone(),
    };
    held_to(&spec, "Health", health.clone(), health);
    let error = ErrorBody { error: text };
    held_to(&spec, "Error", error.clone(), error);
}

#[test]
fn the_trigger_names_are_the_specs() {
    let spec: Value = serde_saphyr::from_str(SPEC).unwrap();
    let listed = &spec["components"]["schemas"]["ActionRequest"]["properties"]["trigger"]["enum"];
    let ours: Vec<Value> = [Trigger::Manual, Trigger::Schedule, Trigger::Workflow]
        .iter()
        .map(|t| serde_json::to_value(t).unwrap())
        .collect();
    assert_eq!(listed, &Value::Array(ours));
}
