//! Whether an answer is the one the contract asks for: pure, over the answer the probe got
//! (or why it got none) and the step's [`Expect`]. A failure is an answer that breaks a
//! sentence of the reference, and names it; an answer within the reference that misses this
//! host's stricter conventions ([`CONVENTIONS`]) warns (`plan`'s module doc has the table).

use std::time::Duration;

use serde_json::Value;

use crate::contract::{Contract, Route, Shape};
use crate::plan::{Expect, Taking};
use crate::reference::{self, Rule};
use crate::report::{Breach, Outcome};

/// What came back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// Why nothing came back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NoAnswer {
    /// Not within the route's time limit.
    TimedOut(Duration),
    /// Refused, reset, or not HTTP.
    Failed(String),
}

/// Where this host's stricter conventions are written: a WARN line names it.
pub const CONVENTIONS: &str = "openapi/plugin-contract-v1.yaml";

/// The outcome of `expect` on what came back from a call on `route`: a failure names the
/// sentence of the reference the answer breaks; an answer within the reference that misses
/// this host's conventions warns, naming each miss.
pub fn judge(
    contract: &Contract,
    expect: &Expect,
    route: Route,
    got: Result<&Answer, &NoAnswer>,
) -> Outcome {
    let answer = match got {
        Ok(a) => a,
        Err(NoAnswer::TimedOut(limit)) => {
            let why = format!(
                "no answer within {} s, the route's time limit",
                limit.as_secs_f32()
            );
            // `/healthz` has no limit in the reference: the check's own wait stands for it.
            let rule = if route == Route::Health {
                reference::CHECK
            } else {
                reference::TIME_LIMITS
            };
            return Outcome::fail(why, rule);
        }
        Err(NoAnswer::Failed(why)) => {
            return Outcome::fail(format!("no answer: {why}"), reference::UNANSWERED);
        }
    };
    let mut misses = Misses::default();
    match verdict(contract, expect, answer, &mut misses) {
        Err(breach) => Outcome::Fail(breach),
        Ok(()) if misses.0.is_empty() => Outcome::Pass,
        Ok(()) => Outcome::Warn(format!(
            "{}; within the reference, not this host's contract ({CONVENTIONS})",
            misses.0.join("; ")
        )),
    }
}

/// What an answer within the reference missed of this host's conventions, each said as
/// `what came, what the host asks`.
#[derive(Default)]
struct Misses(Vec<String>);

impl Misses {
    fn add(&mut self, miss: String) {
        self.0.push(miss);
    }

    /// A miss unless the answer's status is `status`.
    fn status(&mut self, answer: &Answer, status: u16) {
        if answer.status != status {
            self.add(format!(
                "answered {}{}, not {status}",
                answer.status,
                error_text(answer)
            ));
        }
    }

    /// A miss unless the body is the shape's JSON.
    fn shape(&mut self, contract: &Contract, shape: Shape, body: Option<&Value>) {
        let problem = match body {
            None => format!("the body is not JSON, not a {}", shape.schema_name()),
            Some(body) => match contract.conforms(shape, body) {
                Ok(()) => return,
                Err(problem) => problem,
            },
        };
        self.add(problem);
    }
}

fn fail(why: String, rule: Rule) -> Result<(), Breach> {
    Err(Breach::new(why, rule))
}

fn success(answer: &Answer) -> bool {
    (200..300).contains(&answer.status)
}

fn verdict(
    contract: &Contract,
    expect: &Expect,
    answer: &Answer,
    misses: &mut Misses,
) -> Result<(), Breach> {
    let body: Option<Value> = serde_json::from_slice(&answer.body).ok();
    let answered = || format!("answered {}{}", answer.status, error_text(answer));
    match expect {
        Expect::Health { id, version } => {
            if !success(answer) {
                return fail(answered(), reference::CHECK);
            }
            match body.as_ref().and_then(|b| b.get("version")) {
                None => fail("no version in its answer".into(), reference::HEALTH_VERSION)?,
                Some(got) if got != version.as_str() => fail(
                    format!("version {got}, the manifest's is {version:?}"),
                    reference::HEALTH_VERSION,
                )?,
                Some(_) => {}
            }
            misses.status(answer, 200);
            misses.shape(contract, Shape::Health, body.as_ref());
            if let Some(got) = body.as_ref().and_then(|b| b.get("id"))
                && got != id.as_str()
            {
                misses.add(format!("id {got}, the manifest's is {id:?}"));
            }
            Ok(())
        }
        Expect::Refused => {
            match answer.status {
                200..=399 => fail(
                    format!("{}: served without the plugin's secret", answered()),
                    reference::SECRET,
                )?,
                401 => {}
                400..=499 => misses.add(format!("{}: a refusal, but not 401", answered())),
                _ => misses.add(format!("{}: an error, not a refusal with 401", answered())),
            }
            if body
                .as_ref()
                .is_none_or(|b| contract.conforms(Shape::Error, b).is_err())
            {
                misses.add("no {\"error\"} body with the refusal".into());
            }
            Ok(())
        }
        Expect::Accepted => {
            if !success(answer) {
                return fail(format!("{}: not accepted", answered()), reference::CHECK);
            }
            misses.status(answer, 202);
            misses.shape(contract, Shape::ActionAccepted, body.as_ref());
            Ok(())
        }
        Expect::ToolResult { output_schema } => {
            if !success(answer) {
                return fail(format!("{}: no tool result", answered()), reference::CHECK);
            }
            if answer.body.len() > contract.max_tool_answer() {
                return fail(
                    format!(
                        "answered {} bytes, over the cap of {}",
                        answer.body.len(),
                        contract.max_tool_answer()
                    ),
                    reference::CAPS,
                );
            }
            let Some(result) = body.as_ref().filter(|b| b["content"].is_array()) else {
                return fail(
                    "no tool result: not a JSON object with a content list".into(),
                    reference::CHECK,
                );
            };
            misses.status(answer, 200);
            misses.shape(contract, Shape::ToolResult, Some(result));
            let structured = result.get("structured_content").filter(|v| !v.is_null());
            if let Some(structured) = structured
                && !structured.is_object()
            {
                return fail(
                    format!("structured_content is {structured}, not a JSON object"),
                    reference::STRUCTURED_CONTENT,
                );
            }
            if result["is_error"] == true {
                return Ok(());
            }
            let Some(schema) = output_schema else {
                return Ok(());
            };
            let Some(structured) = structured else {
                return fail(
                    "no structured_content, though the tool declares an output_schema".into(),
                    reference::OUTPUT_SCHEMA,
                );
            };
            let checked = manifest::json_schema::compile(schema)
                .map_err(|e| format!("its output_schema does not compile: {e}"))
                .and_then(|validator| {
                    manifest::json_schema::check(&validator, structured)
                        .map_err(|e| format!("structured_content breaks the output_schema: {e}"))
                });
            match checked {
                Ok(()) => Ok(()),
                Err(why) => fail(why, reference::OUTPUT_SCHEMA),
            }
        }
        Expect::Taken(taking) => {
            if success(answer) {
                return Ok(());
            }
            match taking {
                Taking::OwnRun => fail(
                    format!("{}: the end of its own run not taken", answered()),
                    reference::CHECK,
                ),
                Taking::Event => {
                    misses.add(format!(
                        "{}, not a 2xx: the event is dropped (\"{}\")",
                        answered(),
                        reference::EVENTS_BEST_EFFORT.text
                    ));
                    Ok(())
                }
                Taking::UnknownRun => {
                    misses.add(format!("{}, not a 2xx", answered()));
                    Ok(())
                }
            }
        }
        Expect::SwitchState => {
            if !success(answer) {
                return fail(answered(), reference::CHECK);
            }
            if !body.as_ref().is_some_and(|b| b["on"].is_boolean()) {
                return fail(
                    "no state for the pill to show: not a JSON object with a boolean on".into(),
                    reference::SWITCH_ANSWER,
                );
            }
            misses.status(answer, 200);
            misses.shape(contract, Shape::SwitchState, body.as_ref());
            Ok(())
        }
        Expect::Error { status } => {
            misses.status(answer, *status);
            if answer.status == *status {
                misses.shape(contract, Shape::Error, body.as_ref());
            }
            Ok(())
        }
    }
}

/// ` ("the error")` when the body is an `Error`.
fn error_text(answer: &Answer) -> String {
    serde_json::from_slice::<Value>(&answer.body)
        .ok()
        .and_then(|v| v.get("error")?.as_str().map(|e| format!(" ({e:?})")))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn answer(status: u16, body: Value) -> Answer {
        Answer {
            status,
            body: serde_json::to_vec(&body).unwrap(),
        }
    }

    fn empty(status: u16) -> Answer {
        Answer {
            status,
            body: vec![],
        }
    }

    fn outcome(expect: &Expect, a: &Answer) -> Outcome {
        judge(&Contract::load().unwrap(), expect, Route::Action, Ok(a))
    }

    /// Fails, saying `says`, and naming `rule`.
    #[track_caller]
    fn fails(expect: Expect, a: Answer, says: &str, rule: Rule) {
        match outcome(&expect, &a) {
            Outcome::Fail(breach) => {
                assert!(breach.why().contains(says), "{breach} should say {says:?}");
                assert_eq!(breach.rule(), rule, "{breach}");
                assert!(breach.to_string().ends_with(&format!("\"{}\"", rule.text)));
            }
            other => panic!("{expect:?} on {a:?}: {other:?}"),
        }
    }

    /// Warns, saying `says`.
    #[track_caller]
    fn warns(expect: Expect, a: Answer, says: &str) {
        match outcome(&expect, &a) {
            Outcome::Warn(why) => {
                assert!(why.contains(says), "{why:?} should say {says:?}");
                assert!(why.ends_with(&format!("not this host's contract ({CONVENTIONS})")));
            }
            other => panic!("{expect:?} on {a:?}: {other:?}"),
        }
    }

    #[track_caller]
    fn passes(expect: Expect, a: Answer) {
        assert_eq!(outcome(&expect, &a), Outcome::Pass, "{expect:?} on {a:?}");
    }

    fn health() -> Expect {
        Expect::Health {
            id: "echo".into(),
            version: "0.1.0".into(),
        }
    }

    #[test]
    fn health_reports_the_manifests_version() {
        passes(
            health(),
            answer(
                200,
                json!({"status": "ok", "id": "echo", "version": "0.1.0"}),
            ),
        );
        passes(
            health(),
            answer(200, json!({"status": "ok", "version": "0.1.0"})),
        );
        let version = reference::HEALTH_VERSION;
        fails(
            health(),
            answer(200, json!({"status": "ok", "version": "0.2.0"})),
            "version \"0.2.0\", the manifest's is \"0.1.0\"",
            version,
        );
        fails(
            health(),
            answer(200, json!({"ok": true})),
            "no version",
            version,
        );
        fails(
            health(),
            answer(503, json!({"error": "starting"})),
            "answered 503 (\"starting\")",
            reference::CHECK,
        );
        // The reference asks a version; the rest is this host's.
        warns(
            health(),
            answer(
                200,
                json!({"status": "ok", "id": "other", "version": "0.1.0"}),
            ),
            "id \"other\"",
        );
        warns(
            health(),
            answer(200, json!({"version": "0.1.0"})),
            "not a Health",
        );
        warns(
            health(),
            answer(204, json!({"status": "ok", "version": "0.1.0"})),
            "answered 204, not 200",
        );
    }

    #[test]
    fn serving_without_the_secret_fails_and_any_refusal_is_within_the_reference() {
        passes(Expect::Refused, answer(401, json!({"error": "no"})));
        for status in [200, 204, 302] {
            fails(
                Expect::Refused,
                answer(status, json!({"status": "ok"})),
                &format!("answered {status}: served without the plugin's secret"),
                reference::SECRET,
            );
        }
        warns(
            Expect::Refused,
            answer(404, json!({"error": "no such route"})),
            "answered 404 (\"no such route\"): a refusal, but not 401",
        );
        warns(Expect::Refused, empty(403), "no {\"error\"} body");
        warns(Expect::Refused, empty(401), "no {\"error\"} body");
        warns(
            Expect::Refused,
            empty(500),
            "an error, not a refusal with 401",
        );
    }

    #[test]
    fn an_action_must_be_accepted_and_202_is_this_hosts() {
        passes(Expect::Accepted, answer(202, json!({"accepted": true})));
        warns(
            Expect::Accepted,
            answer(200, json!({"accepted": true})),
            "answered 200, not 202",
        );
        warns(Expect::Accepted, answer(202, json!({})), "ActionAccepted");
        fails(
            Expect::Accepted,
            answer(404, json!({"error": "no such action: pong"})),
            "answered 404 (\"no such action: pong\"): not accepted",
            reference::CHECK,
        );
    }

    #[test]
    fn a_tool_result_is_held_to_its_output_schema_and_cap() {
        let expect = Expect::ToolResult {
            output_schema: Some(json!({"type": "object", "required": ["echo"]})),
        };
        let text = json!([{"type": "text", "text": "hi"}]);
        passes(
            expect.clone(),
            answer(
                200,
                json!({"content": text, "structured_content": {"echo": "hi"}}),
            ),
        );
        passes(
            expect.clone(),
            answer(200, json!({"content": text, "is_error": true})),
        );
        let schema = reference::OUTPUT_SCHEMA;
        fails(
            expect.clone(),
            answer(200, json!({"content": text})),
            "no structured_content",
            schema,
        );
        fails(
            expect.clone(),
            answer(
                200,
                json!({"content": text, "structured_content": {"x": 1}}),
            ),
            "breaks the output_schema",
            schema,
        );
        fails(
            expect.clone(),
            answer(200, json!({"content": text, "structured_content": [1]})),
            "not a JSON object",
            reference::STRUCTURED_CONTENT,
        );
        fails(
            expect.clone(),
            answer(500, json!({"error": "boom"})),
            "answered 500 (\"boom\"): no tool result",
            reference::CHECK,
        );
        fails(
            expect,
            answer(200, json!({"content": "hi"})),
            "no tool result",
            reference::CHECK,
        );
        let plain = Expect::ToolResult {
            output_schema: None,
        };
        let mut big = serde_json::to_vec(&json!({"content": text})).unwrap();
        big.resize(1024 * 1024 + 1, b' ');
        fails(
            plain.clone(),
            Answer {
                status: 200,
                body: big,
            },
            "over the cap of 1048576",
            reference::CAPS,
        );
        // A block of a type this host's contract does not list: MCP has more.
        warns(
            plain.clone(),
            answer(
                200,
                json!({"content": [{"type": "image", "data": "", "mimeType": "image/png"}]}),
            ),
            "not a ToolResult",
        );
        warns(
            plain,
            answer(201, json!({"content": text})),
            "answered 201, not 200",
        );
    }

    #[test]
    fn what_must_be_taken_depends_on_what_it_brings() {
        for taking in [Taking::Event, Taking::UnknownRun, Taking::OwnRun] {
            passes(Expect::Taken(taking), empty(204));
            passes(Expect::Taken(taking), answer(200, json!({})));
        }
        warns(
            Expect::Taken(Taking::Event),
            answer(422, json!({"error": "not subscribed"})),
            "the event is dropped (\"Delivery is best effort",
        );
        warns(
            Expect::Taken(Taking::UnknownRun),
            answer(404, json!({"error": "no such run"})),
            "answered 404 (\"no such run\"), not a 2xx",
        );
        fails(
            Expect::Taken(Taking::OwnRun),
            answer(404, json!({"error": "no such run"})),
            "the end of its own run not taken",
            reference::CHECK,
        );
    }

    #[test]
    fn a_switch_answers_a_state_the_pill_can_show() {
        passes(Expect::SwitchState, answer(200, json!({"on": true})));
        fails(
            Expect::SwitchState,
            empty(404),
            "answered 404",
            reference::CHECK,
        );
        fails(
            Expect::SwitchState,
            empty(204),
            "no state for the pill to show",
            reference::SWITCH_ANSWER,
        );
        let long = "x".repeat(201);
        warns(
            Expect::SwitchState,
            answer(200, json!({"on": true, "title": long})),
            "not a SwitchState",
        );
    }

    #[test]
    fn error_answers_are_this_hosts_conventions() {
        passes(
            Expect::Error { status: 404 },
            answer(404, json!({"error": "no such tool"})),
        );
        warns(
            Expect::Error { status: 422 },
            empty(204),
            "answered 204, not 422",
        );
        warns(
            Expect::Error { status: 400 },
            empty(400),
            "the body is not JSON",
        );
    }

    #[test]
    fn no_answer_in_time_is_a_failure_of_the_routes_limit() {
        let c = Contract::load().unwrap();
        let late = NoAnswer::TimedOut(Duration::from_secs(10));
        for (route, rule) in [
            (Route::Switch, reference::TIME_LIMITS),
            (Route::Event, reference::TIME_LIMITS),
            (Route::Health, reference::CHECK),
        ] {
            // Even where the answer itself would only warn.
            let outcome = judge(&c, &Expect::Error { status: 422 }, route, Err(&late));
            match outcome {
                Outcome::Fail(breach) => {
                    assert_eq!(
                        breach.why(),
                        "no answer within 10 s, the route's time limit"
                    );
                    assert_eq!(breach.rule(), rule, "{route:?}");
                }
                other => panic!("{other:?}"),
            }
        }
        let refused = NoAnswer::Failed("connection refused".into());
        let outcome = judge(
            &c,
            &Expect::Taken(Taking::Event),
            Route::Event,
            Err(&refused),
        );
        assert!(
            matches!(&outcome, Outcome::Fail(b) if b.why().contains("refused") && b.rule() == reference::UNANSWERED),
            "{outcome:?}"
        );
    }
}
