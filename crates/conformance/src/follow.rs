//! What the plugin did to the Plugin API while it was checked, with the SDK's fake host
//! playing the host ([`sdk::testing::FakeHost`]):
//!
//! - each run it started is ended as the host ends it, and the plugin gets
//!   `POST /runs/{run_id}/done`, which it must take (any 2xx within the route's limit): the
//!   reference's "the end of each run it started";
//! - each call the fake host refused for a reason that is the plugin's own is a problem: a
//!   failure where the reference states the rule the call broke (no token, a capability its
//!   manifest does not declare, an agent, card, switch or live subtype it does not list), a
//!   warning where the rule is this host's Plugin API's (`openapi/plugin-api-v1.yaml`: a body
//!   that breaks its schema, a route or method it does not have, a secret setting not
//!   listed); refusals that are answers a plugin must expect (a memory key never written, a
//!   chat that is not live, a full memory, a secret setting the config references no Secret
//!   for, a chat not scanned yet) are not;
//! - each UI command the host took is listed, with its steps (its refusals are problems like
//!   any other call's: one without `ui.command` fails, a step the manifest does not back, such
//!   as a panel it does not declare, warns).

use std::time::{Duration, Instant};

use sdk::api::ErrorCode;
use sdk::testing::{FakeHost, Recorded, Refusal};
use serde_json::json;

use crate::contract::{Contract, Route};
use crate::judge;
use crate::plan::{Body, Expect, Method, SecretUse, Step, Taking};
use crate::probe::Probe;
use crate::reference::{self, Rule};
use crate::report::{Area, Finding, Outcome};

/// What the host answers `POST /runs/{run_id}/done` with, for a run the plugin started.
pub const RUN_RESULT: &str = "ended by loop-plugins conformance";

/// Whether a refusal is the plugin's fault: a call it should not have made as it made it.
pub fn is_the_plugins_fault(code: ErrorCode) -> bool {
    use ErrorCode::*;
    match code {
        InvalidBody
        | InvalidPath
        | InvalidKey
        | InvalidQuery
        | MissingToken
        | MalformedToken
        | InvalidToken
        | CapabilityNotApproved
        | NotFound
        | MethodNotAllowed
        | BodyTooLarge
        | UnknownAgent
        | UnknownCard
        | InvalidStep
        | SubtypeNotDeclared
        | SwitchNotFound
        | SettingNotFound => true,
        OutsideWorkingTree | RunNotFound | CardNotFound | FileNotFound | MemoryNotFound
        | NoWorkingTree | SecretNotSet | ScanNotFound | PluginNotEnabled | NotLive
        | SecretUnavailable | FileTooLarge | MemoryFull | NotARegularFile | DailyRunsExceeded
        | Unavailable | Timeout | Internal => false,
    }
}

/// The sentence of the reference a call refused with `code` broke, when the reference states
/// the rule; None when the rule is this host's Plugin API's.
pub fn broken_rule(code: ErrorCode) -> Option<Rule> {
    use ErrorCode::*;
    match code {
        MissingToken | MalformedToken | InvalidToken => Some(reference::TOKEN),
        CapabilityNotApproved => Some(reference::CAPABILITY),
        UnknownAgent => Some(reference::AGENTS),
        UnknownCard => Some(reference::CARDS),
        SubtypeNotDeclared => Some(reference::LIVE_CONTROL),
        SwitchNotFound => Some(reference::SWITCHES),
        _ => None,
    }
}

/// A refusal that is the plugin's fault, as a finding: failed when it broke a sentence of the
/// reference, else a warning.
pub fn refusal_finding(refusal: &Refusal) -> Option<Finding> {
    if !is_the_plugins_fault(refusal.code) {
        return None;
    }
    let why = format!(
        "the host refused it {} {}: {}",
        refusal.code.status(),
        refusal.code,
        refusal.message
    );
    let outcome = match broken_rule(refusal.code) {
        Some(rule) => Outcome::fail(why, rule),
        None => Outcome::Warn(format!(
            "{why}; within the reference, not this host's Plugin API (openapi/plugin-api-v1.yaml)"
        )),
    };
    Some(Finding {
        area: Area::Api,
        what: "a call the plugin made".into(),
        at: refusal.route.clone(),
        outcome,
    })
}

/// The call that ends a run the plugin started.
pub fn run_end_step(run_id: &str) -> Step {
    Step {
        area: Area::Runs,
        what: "a run it started".into(),
        method: Method::Post,
        path: format!("/runs/{run_id}/done"),
        secret: SecretUse::Right,
        body: Some(Body::Json(json!({"status": "done", "result": RUN_RESULT}))),
        route: Route::RunDone,
        expect: Expect::Taken(Taking::OwnRun),
    }
}

/// Waits until the plugin has stopped calling the fake host for `quiet` (its actions run in
/// the background after their 202), at most `max`.
pub async fn settle(host: &FakeHost, quiet: Duration, max: Duration) {
    let start = Instant::now();
    let mut last: Recorded = host.recorded();
    let mut since = Instant::now();
    while start.elapsed() < max && since.elapsed() < quiet {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = host.recorded();
        if now != last {
            last = now;
            since = Instant::now();
        }
    }
}

/// Ends every run the plugin started, waits for the plugin to go quiet again, then reads its
/// refusals.
pub async fn follow(
    contract: &Contract,
    probe: &Probe,
    host: &FakeHost,
    manifest: &manifest::Manifest,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let runs = host.recorded().runs;
    for started in &runs {
        host.end_run(&started.run.id, true, RUN_RESULT);
        let step = run_end_step(&started.run.id);
        let got = probe.call(&step, contract.time_limit(step.route)).await;
        let outcome = judge::judge(contract, &step.expect, step.route, got.as_ref());
        if outcome == Outcome::Pass {
            host.mark_done_delivered(&started.run.id);
        }
        findings.push(Finding {
            area: step.area,
            what: format!("a run of agent {} it started", started.run.agent),
            at: step.at(),
            outcome,
        });
    }
    if runs.is_empty() && !manifest.agents.is_empty() {
        findings.push(Finding {
            area: Area::Runs,
            what: "runs it started".into(),
            at: "POST /runs".into(),
            outcome: Outcome::Skip(
                "the plugin started no run while it was checked, so none was ended".into(),
            ),
        });
    }
    // What the plugin does about its runs' ends (often in the background) comes after them.
    if !runs.is_empty() {
        settle(host, crate::SETTLE_QUIET, crate::SETTLE_MAX).await;
    }
    let recorded = host.recorded();
    findings.extend(recorded.ui_commands.iter().map(ui_command_finding));
    findings.extend(recorded.refusals.iter().filter_map(refusal_finding));
    findings
}

/// A UI command the host took (its steps checked against the manifest and the approved
/// capabilities as the host checks them; one it refused is a refusal's finding).
pub fn ui_command_finding(command: &sdk::api::ui_command::UiCommandRequest) -> Finding {
    let steps: Vec<&str> = command.steps.iter().map(|s| s.kind()).collect();
    Finding {
        area: Area::Api,
        what: format!("a UI command the plugin ran: {}", steps.join(", ")),
        at: "POST /api/plugin/v1/ui/commands".into(),
        outcome: Outcome::Pass,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_a_plugin_must_expect_are_not_its_fault() {
        for code in ErrorCode::ALL {
            let fault = is_the_plugins_fault(*code);
            // 401, 403 (but a symlink out of the tree), 405, 422 are always the plugin's.
            match code.status() {
                401 | 405 | 422 => assert!(fault || *code == ErrorCode::NotARegularFile, "{code}"),
                409 | 429 | 500 | 503 | 504 => assert!(!fault, "{code}"),
                _ => {}
            }
        }
        let refusal = Refusal {
            route: "PUT /api/plugin/v1/memory/k".into(),
            code: ErrorCode::CapabilityNotApproved,
            message: "this route needs the capability memory.write".into(),
        };
        assert_eq!(
            refusal_finding(&refusal).unwrap().line(),
            "FAIL api PUT /api/plugin/v1/memory/k (a call the plugin made): the host refused it 403 capability_not_approved: this route needs the capability memory.write; the reference: \"A route needing a capability the owner didn’t approve answers 403.\""
        );
        let schema = Refusal {
            code: ErrorCode::InvalidBody,
            message: "value: missing".into(),
            ..refusal.clone()
        };
        assert_eq!(
            refusal_finding(&schema).unwrap().line(),
            "WARN api PUT /api/plugin/v1/memory/k (a call the plugin made): the host refused it 400 invalid_body: value: missing; within the reference, not this host's Plugin API (openapi/plugin-api-v1.yaml)"
        );
        let expected = Refusal {
            code: ErrorCode::MemoryNotFound,
            ..refusal
        };
        assert_eq!(refusal_finding(&expected), None);
        // A rule of the reference is only ever named for a refusal that is the plugin's fault.
        for code in ErrorCode::ALL {
            if broken_rule(*code).is_some() {
                assert!(is_the_plugins_fault(*code), "{code}");
            }
        }
    }
}
