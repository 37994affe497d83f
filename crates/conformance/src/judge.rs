//! Whether an answer is the one the contract asks for: pure, over the answer the probe got
//! (or why it got none) and the step's [`Expect`].

use std::time::Duration;

use serde_json::Value;

use crate::contract::{Contract, Shape};
use crate::plan::Expect;
use crate::report::Outcome;

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

pub fn judge(contract: &Contract, expect: &Expect, got: Result<&Answer, &NoAnswer>) -> Outcome {
    match verdict(contract, expect, got) {
        Ok(()) => Outcome::Pass,
        Err(why) => Outcome::Fail(why),
    }
}

fn verdict(
    contract: &Contract,
    expect: &Expect,
    got: Result<&Answer, &NoAnswer>,
) -> Result<(), String> {
    let answer = match got {
        Ok(a) => a,
        Err(NoAnswer::TimedOut(limit)) => {
            return Err(format!(
                "no answer within {} s, the route's time limit",
                limit.as_secs_f32()
            ));
        }
        Err(NoAnswer::Failed(why)) => return Err(format!("no answer: {why}")),
    };
    match expect {
        Expect::Health { id, version } => {
            status_is(answer, 200)?;
            let body = conforming(contract, Shape::Health, answer)?;
            if body["version"] != version.as_str() {
                return Err(format!(
                    "version {}, the manifest's is {version:?}",
                    body["version"]
                ));
            }
            match body.get("id") {
                Some(got) if got != id.as_str() => {
                    Err(format!("id {got}, the manifest's is {id:?}"))
                }
                _ => Ok(()),
            }
        }
        Expect::Refused => {
            if answer.status != 401 {
                return Err(format!(
                    "answered {}: every route must refuse a call without the secret with 401",
                    answer.status
                ));
            }
            conforming(contract, Shape::Error, answer).map(drop)
        }
        Expect::Accepted => {
            if answer.status != 202 {
                return Err(format!(
                    "answered {}{}: an action answers 202 and does its work in the background",
                    answer.status,
                    error_text(answer)
                ));
            }
            conforming(contract, Shape::ActionAccepted, answer).map(drop)
        }
        Expect::ToolResult { output_schema } => {
            if answer.status >= 500 {
                return Err(format!(
                    "answered {}: a tool's failure is a 200 answer with is_error, never a 5xx",
                    answer.status
                ));
            }
            status_is(answer, 200)?;
            if answer.body.len() > contract.max_tool_answer() {
                return Err(format!(
                    "answered {} bytes; the host refuses answers over {}",
                    answer.body.len(),
                    contract.max_tool_answer()
                ));
            }
            let result = conforming(contract, Shape::ToolResult, answer)?;
            if result["is_error"] == true {
                return Ok(());
            }
            let Some(schema) = output_schema else {
                return Ok(());
            };
            let structured = result
                .get("structured_content")
                .ok_or("no structured_content, though the tool declares an output_schema")?;
            let validator = manifest::json_schema::compile(schema)
                .map_err(|e| format!("its output_schema does not compile: {e}"))?;
            manifest::json_schema::check(&validator, structured)
                .map_err(|e| format!("structured_content breaks the output_schema: {e}"))
        }
        Expect::Taken => {
            if (200..300).contains(&answer.status) {
                Ok(())
            } else {
                Err(format!(
                    "answered {}{}; the contract answers 204",
                    answer.status,
                    error_text(answer)
                ))
            }
        }
        Expect::SwitchState => {
            status_is(answer, 200)?;
            conforming(contract, Shape::SwitchState, answer).map(drop)
        }
        Expect::Error { status } => {
            if answer.status != *status {
                return Err(format!(
                    "answered {}, the contract says {status}",
                    answer.status
                ));
            }
            conforming(contract, Shape::Error, answer).map(drop)
        }
    }
}

fn status_is(answer: &Answer, status: u16) -> Result<(), String> {
    if answer.status == status {
        Ok(())
    } else {
        Err(format!(
            "answered {}{}, the contract says {status}",
            answer.status,
            error_text(answer)
        ))
    }
}

/// ` ("the error")` when the body is an `Error`.
fn error_text(answer: &Answer) -> String {
    serde_json::from_slice::<Value>(&answer.body)
        .ok()
        .and_then(|v| v.get("error")?.as_str().map(|e| format!(" ({e:?})")))
        .unwrap_or_default()
}

fn conforming(contract: &Contract, shape: Shape, answer: &Answer) -> Result<Value, String> {
    let body: Value = serde_json::from_slice(&answer.body).map_err(|e| {
        format!(
            "the body is not JSON ({e}); the contract answers a {}",
            shape.schema_name()
        )
    })?;
    contract.conforms(shape, &body)?;
    Ok(body)
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

    fn fails(expect: Expect, a: Answer, says: &str) {
        let c = Contract::load().unwrap();
        match judge(&c, &expect, Ok(&a)) {
            Outcome::Fail(why) => assert!(why.contains(says), "{why:?} should say {says:?}"),
            other => panic!("{expect:?} on {a:?}: {other:?}"),
        }
    }

    fn passes(expect: Expect, a: Answer) {
        let c = Contract::load().unwrap();
        assert_eq!(
            judge(&c, &expect, Ok(&a)),
            Outcome::Pass,
            "{expect:?} on {a:?}"
        );
    }

    fn health() -> Expect {
        Expect::Health {
            id: "echo".into(),
            version: "0.1.0".into(),
        }
    }

    #[test]
    fn health_carries_the_manifests_version() {
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
        fails(
            health(),
            answer(200, json!({"status": "ok", "version": "0.2.0"})),
            "version",
        );
        fails(
            health(),
            answer(
                200,
                json!({"status": "ok", "id": "other", "version": "0.1.0"}),
            ),
            "id",
        );
        fails(health(), answer(200, json!({"ok": true})), "Health");
        fails(
            health(),
            answer(503, json!({"error": "starting"})),
            "answered 503 (\"starting\")",
        );
    }

    #[test]
    fn a_refusal_is_401_with_an_error() {
        passes(Expect::Refused, answer(401, json!({"error": "no"})));
        fails(Expect::Refused, answer(200, json!({"status": "ok"})), "401");
        fails(
            Expect::Refused,
            Answer {
                status: 401,
                body: b"no".to_vec(),
            },
            "not JSON",
        );
    }

    #[test]
    fn an_action_answers_202_not_any_2xx() {
        passes(Expect::Accepted, answer(202, json!({"accepted": true})));
        fails(
            Expect::Accepted,
            answer(200, json!({"accepted": true})),
            "answered 200",
        );
        fails(Expect::Accepted, answer(202, json!({})), "ActionAccepted");
    }

    #[test]
    fn a_tool_result_is_held_to_its_output_schema() {
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
        fails(
            expect.clone(),
            answer(200, json!({"content": text})),
            "no structured_content",
        );
        fails(
            expect.clone(),
            answer(
                200,
                json!({"content": text, "structured_content": {"x": 1}}),
            ),
            "breaks the output_schema",
        );
        fails(
            expect.clone(),
            answer(500, json!({"error": "boom"})),
            "never a 5xx",
        );
        fails(expect, answer(200, json!({"content": "hi"})), "ToolResult");
        let big = Answer {
            status: 200,
            body: vec![b' '; 1024 * 1024 + 1],
        };
        fails(
            Expect::ToolResult {
                output_schema: None,
            },
            big,
            "over 1048576",
        );
    }

    #[test]
    fn taken_is_any_2xx_and_errors_name_their_status() {
        passes(
            Expect::Taken,
            Answer {
                status: 204,
                body: vec![],
            },
        );
        passes(Expect::Taken, answer(200, json!({})));
        fails(
            Expect::Taken,
            answer(422, json!({"error": "no"})),
            "answered 422",
        );
        passes(
            Expect::Error { status: 404 },
            answer(404, json!({"error": "no such tool"})),
        );
        fails(
            Expect::Error { status: 404 },
            answer(200, json!({})),
            "the contract says 404",
        );
        fails(
            Expect::Error { status: 400 },
            Answer {
                status: 400,
                body: vec![],
            },
            "not JSON",
        );
    }

    #[test]
    fn no_answer_in_time_is_a_failure() {
        let c = Contract::load().unwrap();
        let outcome = judge(
            &c,
            &Expect::SwitchState,
            Err(&NoAnswer::TimedOut(Duration::from_secs(10))),
        );
        assert_eq!(
            outcome,
            Outcome::Fail("no answer within 10 s, the route's time limit".into())
        );
        let outcome = judge(
            &c,
            &Expect::Taken,
            Err(&NoAnswer::Failed("connection refused".into())),
        );
        assert!(matches!(outcome, Outcome::Fail(w) if w.contains("refused")));
    }
}
