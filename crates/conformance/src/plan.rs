//! Which calls the check makes, from what the manifest declares: pure, so what is checked can
//! be read and tested without a plugin. Each [`Step`] is one call and what its answer must be;
//! a call the check cannot make (a tool whose input it cannot build) is a skipped finding.
//!
//! An answer fails only where it breaks a sentence of the reference, which the line quotes
//! ([`crate::reference`]); where it meets the reference but not this host's stricter contract
//! (`openapi/plugin-contract-v1.yaml`: the exact status, the `{"error"}` body, the answer to a
//! call the reference says nothing about) it warns. Any call not answered within its route's
//! time limit fails ([`crate::reference::TIME_LIMITS`]), as does one not answered at all
//! ([`crate::reference::UNANSWERED`]).
//!
//! | area | calls | fails (the reference) | warns (this host) |
//! |---|---|---|---|
//! | health | `GET /healthz` | not a 2xx ([`CHECK`]: "its health and version"); no version, or not the manifest's ([`HEALTH_VERSION`]) | not 200; not a `Health`; another id |
//! | secret | every route (each declared action, tool and switch, `/runs`, `/events`, `/x`, `/healthz`, an unknown route) without a secret and with a wrong one | served: a 2xx or 3xx ([`SECRET`]) | refused with another 4xx than 401, or without `{"error"}`; a 5xx |
//! | actions | each action with each trigger (manual, schedule, workflow) | not a 2xx ([`CHECK`]: "every action with each trigger") | not 202 `{"accepted": true}` |
//! | tools | each tool as each agent's call that lists it, and as a workflow's call | not a 2xx, or no `content` list ([`CHECK`]); over the cap ([`CAPS`]); `structured_content` not an object ([`STRUCTURED_CONTENT`]), or missing or off its `output_schema` ([`OUTPUT_SCHEMA`]) | not 200; not a `ToolResult` in this host's detail |
//! | runs | the end (`done`, `failed`) of a run id the plugin never saw, when it has agents | | not a 2xx |
//! | events | each event it subscribes to | | not a 2xx (the reference drops an event a plugin doesn't take) |
//! | switches | each composer switch on, then off | not a 2xx ([`CHECK`]); no `on` to show ([`SWITCH_ANSWER`]) | not 200; not a `SwitchState` |
//! | errors | a body that does not parse, a schedule call without `task_id`, an unknown action, tool and switch, an event it does not take | | not 400, 400, 404, 404, 404, 422 with `{"error"}` |
//!
//! [`CHECK`]: crate::reference::CHECK
//! [`HEALTH_VERSION`]: crate::reference::HEALTH_VERSION
//! [`SECRET`]: crate::reference::SECRET
//! [`CAPS`]: crate::reference::CAPS
//! [`STRUCTURED_CONTENT`]: crate::reference::STRUCTURED_CONTENT
//! [`OUTPUT_SCHEMA`]: crate::reference::OUTPUT_SCHEMA
//! [`SWITCH_ANSWER`]: crate::reference::SWITCH_ANSWER

use serde_json::{Value, json};

use crate::contract::Route;
use crate::report::{Area, Finding, Outcome};
use crate::sample::sample;

/// One call to make.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    pub area: Area,
    /// What this call tries, e.g. `trigger schedule`.
    pub what: String,
    pub method: Method,
    pub path: String,
    pub secret: SecretUse,
    pub body: Option<Body>,
    /// Whose time limit the call has.
    pub route: Route,
    pub expect: Expect,
}

impl Step {
    /// Where it was found, as a report line says it: `POST /actions/ping`.
    pub fn at(&self) -> String {
        format!("{} {}", self.method.as_str(), self.path)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Get,
    Post,
}

impl Method {
    pub fn as_str(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Post => "POST",
        }
    }
}

/// Which `Authorization` the call carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SecretUse {
    Right,
    Missing,
    Wrong,
}

#[derive(Clone, Debug, PartialEq)]
pub enum Body {
    Json(Value),
    /// Sent as `application/json` though it is not JSON.
    Garbled(&'static str),
}

/// What the answer must be (what fails and what only warns: the module's table).
#[derive(Clone, Debug, PartialEq)]
pub enum Expect {
    /// 200, a `Health` with the manifest's version (and id, when it says one).
    Health { id: String, version: String },
    /// 401 with an `Error`.
    Refused,
    /// 202 with `{"accepted": true}`: the contract's answer to an action.
    Accepted,
    /// 200 with a `ToolResult` within the size cap; `structured_content` valid against the
    /// tool's output schema unless it is an error result.
    ToolResult { output_schema: Option<Value> },
    /// Any 2xx (the spec documents 204; the host takes any 2xx the same way).
    Taken(Taking),
    /// 200 with a `SwitchState`.
    SwitchState,
    /// An error answer: this status with an `Error`.
    Error { status: u16 },
}

/// What a call whose answer must be taken brings, which says whether not taking it breaks the
/// reference.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Taking {
    /// An event the plugin subscribes to: the reference drops one a plugin doesn't take.
    Event,
    /// The end of a run the plugin never started: the reference says nothing of one.
    UnknownRun,
    /// The end of a run the plugin started: the reference's `Check` drives it.
    OwnRun,
}

/// Names the check uses where the contract wants an id the plugin never saw.
pub const UNKNOWN: &str = "conformance-no-such";
pub const THREAD_ID: &str = "conformance-thread";
pub const RUN_ID: &str = "conformance-run";
pub const WORKFLOW_RUN_ID: &str = "workflow:conformance-run:node-1";
pub const TASK_ID: &str = "conformance-task";

/// The calls for `manifest`, in the order they are made, and the findings of calls it could
/// not plan.
pub fn plan(m: &manifest::Manifest) -> (Vec<Step>, Vec<Finding>) {
    let mut steps = vec![Step {
        area: Area::Health,
        what: "health and version".into(),
        method: Method::Get,
        path: "/healthz".into(),
        secret: SecretUse::Right,
        body: None,
        route: Route::Health,
        expect: Expect::Health {
            id: m.id.clone(),
            version: m.version.clone(),
        },
    }];
    let mut skipped = Vec::new();
    steps.extend(secret_steps(m));
    for action in &m.actions {
        let path = format!("/actions/{}", action.id);
        for (trigger, body) in [
            ("manual", json!({"trigger": "manual"})),
            (
                "schedule",
                json!({"trigger": "schedule", "task_id": TASK_ID}),
            ),
            (
                "workflow",
                json!({"trigger": "workflow", "run_id": WORKFLOW_RUN_ID, "input": {}}),
            ),
        ] {
            steps.push(post(
                Area::Actions,
                format!("trigger {trigger}"),
                &path,
                body,
                Route::Action,
                Expect::Accepted,
            ));
        }
    }
    for tool in &m.tools {
        let path = format!("/tools/{}", tool.name);
        let Some(input) = tool_input(&tool.input_schema) else {
            skipped.push(Finding {
                area: Area::Tools,
                what: "a call".into(),
                at: format!("POST {path}"),
                outcome: Outcome::Skip(
                    "no input could be built from its input_schema: give the schema `examples`"
                        .into(),
                ),
            });
            continue;
        };
        let expect = Expect::ToolResult {
            output_schema: tool.output_schema.clone(),
        };
        for agent in m.agents.iter().filter(|a| a.tools.contains(&tool.name)) {
            let body = json!({"input": input, "agent": agent.id, "thread_id": THREAD_ID,
                "run_id": RUN_ID});
            let what = format!("agent {}'s call", agent.id);
            steps.push(post(
                Area::Tools,
                what,
                &path,
                body,
                Route::Tool,
                expect.clone(),
            ));
        }
        let body = json!({"input": input, "agent": "", "thread_id": "", "run_id": WORKFLOW_RUN_ID});
        steps.push(post(
            Area::Tools,
            "a workflow's call".into(),
            &path,
            body,
            Route::Tool,
            expect,
        ));
    }
    if !m.agents.is_empty() {
        let path = format!("/runs/{RUN_ID}/done");
        for body in [
            json!({"status": "done", "result": "conformance"}),
            json!({"status": "failed", "error": "conformance"}),
        ] {
            let what = format!(
                "a run {} it never saw",
                body["status"].as_str().unwrap_or("")
            );
            steps.push(post(
                Area::Runs,
                what,
                &path,
                body,
                Route::RunDone,
                Expect::Taken(Taking::UnknownRun),
            ));
        }
    }
    for event in &m.events {
        let data = if event == "settings.changed" {
            json!({"settings": {}})
        } else {
            json!({})
        };
        let body = json!({"type": event, "data": data});
        steps.push(post(
            Area::Events,
            event.clone(),
            "/events",
            body,
            Route::Event,
            Expect::Taken(Taking::Event),
        ));
    }
    for switch in &m.ui.composer_switches {
        let path = format!("/switches/{}", switch.id);
        for on in [true, false] {
            let what = if on { "on" } else { "off" };
            let body = json!({"on": on, "thread_id": THREAD_ID});
            steps.push(post(
                Area::Switches,
                what.into(),
                &path,
                body,
                Route::Switch,
                Expect::SwitchState,
            ));
        }
    }
    steps.extend(error_steps(m));
    (steps, skipped)
}

/// A tool's input: built from its schema, kept only when the schema takes it.
fn tool_input(schema: &Value) -> Option<Value> {
    let input = sample(schema)?;
    let validator = manifest::json_schema::compile(schema).ok()?;
    validator.is_valid(&input).then_some(input)
}

fn post(area: Area, what: String, path: &str, body: Value, route: Route, expect: Expect) -> Step {
    Step {
        area,
        what,
        method: Method::Post,
        path: path.into(),
        secret: SecretUse::Right,
        body: Some(Body::Json(body)),
        route,
        expect,
    }
}

/// Every route the plugin serves, each without a secret and with a wrong one.
fn secret_steps(m: &manifest::Manifest) -> Vec<Step> {
    let mut routes: Vec<(Method, String, Route)> =
        vec![(Method::Get, "/healthz".into(), Route::Health)];
    routes.extend(
        m.actions
            .iter()
            .map(|a| (Method::Post, format!("/actions/{}", a.id), Route::Action)),
    );
    routes.extend(
        m.tools
            .iter()
            .map(|t| (Method::Post, format!("/tools/{}", t.name), Route::Tool)),
    );
    routes.push((Method::Post, format!("/runs/{RUN_ID}/done"), Route::RunDone));
    routes.push((Method::Post, "/events".into(), Route::Event));
    routes.extend(
        m.ui.composer_switches
            .iter()
            .map(|s| (Method::Post, format!("/switches/{}", s.id), Route::Switch)),
    );
    routes.push((Method::Get, "/x/conformance".into(), Route::X));
    routes.push((Method::Get, format!("/{UNKNOWN}"), Route::X));
    let mut steps = Vec::new();
    for (method, path, route) in routes {
        for (secret, what) in [
            (SecretUse::Missing, "no secret"),
            (SecretUse::Wrong, "a wrong secret"),
        ] {
            steps.push(Step {
                area: Area::Secret,
                what: what.into(),
                method,
                path: path.clone(),
                secret,
                body: (method == Method::Post).then(|| Body::Json(json!({}))),
                route,
                expect: Expect::Refused,
            });
        }
    }
    steps
}

/// The error answers the contract names.
fn error_steps(m: &manifest::Manifest) -> Vec<Step> {
    let error = |what: &str, path: String, body: Body, route, status| Step {
        area: Area::Errors,
        what: what.into(),
        method: Method::Post,
        path,
        secret: SecretUse::Right,
        body: Some(body),
        route,
        expect: Expect::Error { status },
    };
    let mut steps = Vec::new();
    if let Some(action) = m.actions.first() {
        let path = format!("/actions/{}", action.id);
        steps.push(error(
            "a body that is not JSON",
            path.clone(),
            Body::Garbled("{trigger"),
            Route::Action,
            400,
        ));
        let body = Body::Json(json!({"trigger": "schedule"}));
        steps.push(error(
            "a schedule call without task_id",
            path,
            body,
            Route::Action,
            400,
        ));
    }
    let manual = || Body::Json(json!({"trigger": "manual"}));
    steps.push(error(
        "an unknown action",
        format!("/actions/{UNKNOWN}"),
        manual(),
        Route::Action,
        404,
    ));
    let input =
        Body::Json(json!({"input": {}, "agent": "", "thread_id": "", "run_id": WORKFLOW_RUN_ID}));
    steps.push(error(
        "an unknown tool",
        format!("/tools/{UNKNOWN}"),
        input,
        Route::Tool,
        404,
    ));
    let on = Body::Json(json!({"on": true}));
    steps.push(error(
        "an unknown switch",
        format!("/switches/{UNKNOWN}"),
        on,
        Route::Switch,
        404,
    ));
    let event = Body::Json(json!({"type": format!("{UNKNOWN}.event"), "data": {}}));
    steps.push(error(
        "an event it does not take",
        "/events".into(),
        event,
        Route::Event,
        422,
    ));
    steps
}

#[cfg(test)]
mod tests {
    use super::*;

    const ECHO: &str = include_str!("../../../examples/echo-plugin/plugin.json");

    fn echo() -> manifest::Manifest {
        manifest::parse_str(ECHO).unwrap()
    }

    fn calls(steps: &[Step], area: Area) -> Vec<String> {
        steps
            .iter()
            .filter(|s| s.area == area)
            .map(|s| format!("{} ({})", s.at(), s.what))
            .collect()
    }

    #[test]
    fn every_declared_thing_is_called() {
        let (steps, skipped) = plan(&echo());
        assert!(skipped.is_empty(), "{skipped:?}");
        assert_eq!(
            calls(&steps, Area::Actions),
            [
                "POST /actions/ping (trigger manual)",
                "POST /actions/ping (trigger schedule)",
                "POST /actions/ping (trigger workflow)",
                "POST /actions/tick (trigger manual)",
                "POST /actions/tick (trigger schedule)",
                "POST /actions/tick (trigger workflow)",
            ]
        );
        assert_eq!(
            calls(&steps, Area::Tools),
            [
                "POST /tools/echo (agent say's call)",
                "POST /tools/echo (a workflow's call)"
            ]
        );
        assert_eq!(
            calls(&steps, Area::Switches),
            ["POST /switches/mode (on)", "POST /switches/mode (off)"]
        );
        assert_eq!(calls(&steps, Area::Events).len(), 4);
        assert_eq!(calls(&steps, Area::Runs).len(), 2);
        let tool = steps.iter().find(|s| s.area == Area::Tools).unwrap();
        assert_eq!(
            tool.body,
            Some(Body::Json(
                json!({"input": {"text": "conformance"}, "agent": "say",
                "thread_id": THREAD_ID, "run_id": RUN_ID})
            ))
        );
    }

    #[test]
    fn every_route_is_tried_without_the_secret() {
        let (steps, _) = plan(&echo());
        let refused = calls(&steps, Area::Secret);
        // healthz, 2 actions, 1 tool, runs, events, 1 switch, /x, an unknown route: twice each.
        assert_eq!(refused.len(), 9 * 2, "{refused:#?}");
        for path in [
            "/healthz",
            "/actions/tick",
            "/tools/echo",
            "/switches/mode",
            "/x/conformance",
        ] {
            assert!(
                refused.iter().any(|c| c.contains(path)),
                "{path}: {refused:#?}"
            );
        }
        assert!(
            steps
                .iter()
                .filter(|s| s.area == Area::Secret)
                .all(|s| s.expect == Expect::Refused)
        );
    }

    #[test]
    fn a_plugin_without_agents_gets_no_run_ends_and_an_unbuildable_input_is_skipped() {
        let mut m = echo();
        m.agents.clear();
        m.tools[0].input_schema = json!({"type": "object", "properties": {"f": {"not": {}}},
            "required": ["f"]});
        let (steps, skipped) = plan(&m);
        assert!(calls(&steps, Area::Runs).is_empty());
        assert!(calls(&steps, Area::Tools).is_empty());
        assert_eq!(skipped.len(), 1);
        assert!(matches!(&skipped[0].outcome, Outcome::Skip(why) if why.contains("examples")));
    }
}
