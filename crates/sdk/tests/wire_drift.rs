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

pub(crate) fn held_to<T: Serialize>(spec: &Value, schema: &str, full: T, minimal: T) {
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

mod plugin_api {
    //! The Plugin API's types (`loop_plugin_sdk::api::wire`), its error codes with their
    //! statuses, and the fake host's route table, against `openapi/plugin-api-v1.yaml`.

    use std::collections::BTreeSet;

    use loop_plugin_sdk::api::wire::*;
    use loop_plugin_sdk::testing::{Needs, ROUTES};
    use serde_json::{Value, json};

    use super::held_to;

    const SPEC: &str = include_str!("../../../openapi/plugin-api-v1.yaml");

    fn spec() -> Value {
        serde_saphyr::from_str(SPEC).unwrap()
    }

    #[test]
    fn every_body_matches_its_schema() {
        let spec = spec();
        let s = "x".to_string();
        let channel = Channel {
            id: s.clone(),
            kind: ChatKind::Thread,
            parent: Some(s.clone()),
            project: s.clone(),
            app: App::Desktop,
            settings: Default::default(),
        };
        held_to(
            &spec,
            "Channel",
            channel.clone(),
            Channel {
                parent: None,
                ..channel
            },
        );
        let run_request = RunRequest {
            agent: s.clone(),
            prompt: s.clone(),
        };
        held_to(&spec, "RunRequest", run_request.clone(), run_request);
        let run = Run {
            id: s.clone(),
            agent: s.clone(),
            thread: s.clone(),
            read_only: true,
            tools: vec![],
            status: RunState::Succeeded,
            result: Some(s.clone()),
            done_delivered: true,
            created: Some(s.clone()),
        };
        held_to(
            &spec,
            "Run",
            run.clone(),
            Run {
                result: None,
                created: None,
                ..run
            },
        );
        held_to(
            &spec,
            "SwitchRequest",
            SwitchRequest {
                on: true,
                title: Some(s.clone()),
                error: true,
                busy: true,
            },
            SwitchRequest::default(),
        );
        let switch = Switch {
            id: s.clone(),
            on: true,
            title: None,
            error: false,
            busy: false,
        };
        held_to(&spec, "Switch", switch.clone(), switch);
        held_to(
            &spec,
            "CardRequest",
            CardRequest {
                card: s.clone(),
                title: s.clone(),
                data: Some(json!({})),
            },
            CardRequest {
                card: s.clone(),
                title: s.clone(),
                data: None,
            },
        );
        held_to(
            &spec,
            "NotificationRequest",
            NotificationRequest {
                title: s.clone(),
                body: Some(s.clone()),
                level: Some(Level::Warning),
            },
            NotificationRequest {
                title: s.clone(),
                body: None,
                level: None,
            },
        );
        let entry = InboxEntry {
            id: s.clone(),
            kind: InboxKind::Card,
            card: Some(s.clone()),
            title: s.clone(),
            data: Some(json!({})),
            body: Some(s.clone()),
            level: Some(Level::Info),
            created: s.clone(),
        };
        held_to(
            &spec,
            "InboxEntry",
            entry.clone(),
            InboxEntry {
                card: None,
                data: None,
                body: None,
                level: None,
                ..entry
            },
        );
        held_to(
            &spec,
            "LiveControlRequest",
            LiveControlRequest {
                subtype: s.clone(),
                request: Some(Default::default()),
            },
            LiveControlRequest {
                subtype: s.clone(),
                request: None,
            },
        );
        let answer = LiveControlAnswer {
            subtype: s.clone(),
            response: json!({}),
        };
        held_to(&spec, "LiveControlAnswer", answer.clone(), answer);
        held_to(&spec, "Hold", Hold { hold: true }, Hold { hold: false });
        {
            use loop_plugin_sdk::api::ui_command::{
                Step, StepOutcome, StepStatus, UiCommandAnswer, UiCommandRequest,
            };
            let steps = vec![Step::SelectChat {}];
            held_to(
                &spec,
                "UiCommandRequest",
                UiCommandRequest {
                    steps: steps.clone(),
                    timeout_seconds: Some(30),
                },
                UiCommandRequest {
                    steps,
                    timeout_seconds: None,
                },
            );
            let outcome = |error: Option<String>| StepOutcome {
                kind: s.clone(),
                status: StepStatus::Failed,
                error,
            };
            let answer = |error| UiCommandAnswer {
                id: s.clone(),
                steps: vec![outcome(error)],
                ran: false,
            };
            held_to(
                &spec,
                "UiCommandAnswer",
                answer(Some(s.clone())),
                answer(None),
            );
            let item =
                &spec["components"]["schemas"]["UiCommandAnswer"]["properties"]["steps"]["items"];
            let fields: std::collections::BTreeSet<String> = item["properties"]
                .as_object()
                .unwrap()
                .keys()
                .cloned()
                .collect();
            assert_eq!(
                fields,
                serde_json::to_value(outcome(Some(s.clone())))
                    .unwrap()
                    .as_object()
                    .unwrap()
                    .keys()
                    .cloned()
                    .collect(),
                "UiCommandAnswer.steps[]"
            );
        }
        let write = MemoryWrite { value: json!(1) };
        held_to(&spec, "MemoryWrite", write.clone(), write);
        let entry = MemoryEntry {
            key: s.clone(),
            value: json!(1),
        };
        held_to(&spec, "MemoryEntry", entry.clone(), entry);
        let secret = SecretSetting {
            name: s.clone(),
            value: s.clone(),
            revision: s.clone(),
        };
        held_to(&spec, "SecretSetting", secret.clone(), secret);
        let hotspot = Hotspot {
            file: s.clone(),
            name: s.clone(),
            line: 1,
            complexity: 2,
            lines: 3,
            score: 4.5,
        };
        held_to(&spec, "Hotspot", hotspot.clone(), hotspot.clone());
        let totals = ScanTotals {
            files: 1,
            functions: 2,
            other: Default::default(),
        };
        held_to(&spec, "ScanTotals", totals.clone(), totals.clone());
        let hotspots = Hotspots {
            functions: vec![hotspot.clone()],
            commit: Some(s.clone()),
            scanned_at: s.clone(),
        };
        held_to(
            &spec,
            "Hotspots",
            hotspots.clone(),
            Hotspots {
                commit: None,
                ..hotspots
            },
        );
        let page = HotspotsPage {
            functions: vec![hotspot],
            offset: 0,
            limit: 10,
            total: 1,
            totals,
            commit: Some(s.clone()),
            scanned_at: s.clone(),
        };
        held_to(
            &spec,
            "HotspotsPage",
            page.clone(),
            HotspotsPage {
                commit: None,
                ..page
            },
        );
        let error = ErrorBody::new(ErrorCode::Timeout, s);
        held_to(&spec, "Error", error.clone(), error);
    }

    #[test]
    fn the_enums_are_the_specs() {
        let spec = spec();
        let schemas = &spec["components"]["schemas"];
        let names = |v: &Value| -> Vec<String> {
            v.as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap().to_string())
                .collect()
        };
        let ours = |values: Vec<Value>| -> Vec<String> {
            values
                .into_iter()
                .map(|v| v.as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            names(&schemas["Level"]["enum"]),
            ours(
                [Level::Info, Level::Success, Level::Warning, Level::Error]
                    .iter()
                    .map(|l| serde_json::to_value(l).unwrap())
                    .collect()
            )
        );
        assert_eq!(
            names(&schemas["Run"]["properties"]["status"]["enum"]),
            ours(
                [
                    RunState::Queued,
                    RunState::Running,
                    RunState::Succeeded,
                    RunState::Failed
                ]
                .iter()
                .map(|l| serde_json::to_value(l).unwrap())
                .collect()
            )
        );
        assert_eq!(
            names(&schemas["Channel"]["properties"]["kind"]["enum"]),
            ours(
                [ChatKind::Channel, ChatKind::Thread, ChatKind::Worktree]
                    .iter()
                    .map(|l| serde_json::to_value(l).unwrap())
                    .collect()
            )
        );
        assert_eq!(
            names(&schemas["Channel"]["properties"]["app"]["enum"]),
            ours(
                [App::Desktop, App::Slack, App::Discord]
                    .iter()
                    .map(|l| serde_json::to_value(l).unwrap())
                    .collect()
            )
        );
    }

    /// The spec writes each code's status as a comment on its line (`- invalid_body # 400`).
    #[test]
    fn every_error_code_and_its_status_are_the_specs() {
        let at = SPEC.find("    ErrorCode:").unwrap();
        let listed: Vec<(String, u16)> = SPEC[at..]
            .lines()
            .skip_while(|l| !l.trim_start().starts_with("enum:"))
            .skip(1)
            .take_while(|l| l.trim_start().starts_with("- "))
            .map(|l| {
                let l = l.trim_start().trim_start_matches("- ");
                let (name, status) = l.split_once('#').unwrap();
                let status = status.trim()[..3].parse().unwrap();
                (name.trim().to_string(), status)
            })
            .collect();
        let ours: Vec<(String, u16)> = ErrorCode::ALL
            .iter()
            .map(|c| (c.as_str().to_string(), c.status()))
            .collect();
        assert_eq!(ours, listed);
        for code in ErrorCode::ALL {
            assert_eq!(serde_json::to_value(code).unwrap(), json!(code.as_str()));
        }
    }

    /// Each operation's method, path and `x-loop-capability`, and the fake host's table.
    #[test]
    fn the_fake_hosts_routes_need_what_the_spec_says() {
        let spec = spec();
        let mut listed = BTreeSet::new();
        for (path, item) in spec["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let needs: Vec<String> = match &op["x-loop-capability"] {
                    Value::Null => vec![],
                    Value::String(c) => vec![c.clone()],
                    Value::Array(cs) => {
                        cs.iter().map(|c| c.as_str().unwrap().to_string()).collect()
                    }
                    other => panic!("{method} {path}: x-loop-capability {other}"),
                };
                listed.insert((method.to_uppercase(), path.clone(), needs));
            }
        }
        let ours: BTreeSet<(String, String, Vec<String>)> = ROUTES
            .iter()
            .map(|r| {
                let needs = match r.needs {
                    Needs::Nothing => vec![],
                    Needs::One(c) => vec![c.as_str().to_string()],
                    Needs::Either(a, b) => vec![a.as_str().to_string(), b.as_str().to_string()],
                };
                (r.method.to_string(), r.path.to_string(), needs)
            })
            .collect();
        assert_eq!(ours, listed);
    }
}
