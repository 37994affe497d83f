//! What the plugin did to the Plugin API while it was checked, with the SDK's fake host
//! playing the host ([`sdk::testing::FakeHost`]):
//!
//! - each run it started is ended as the host ends it, and the plugin gets
//!   `POST /runs/{run_id}/done`, which it must take (any 2xx within the route's limit): the
//!   reference's "the end of each run it started";
//! - each call the fake host refused for a reason that is the plugin's own (a capability
//!   its manifest does not declare, an agent, card, switch, live subtype or secret setting it
//!   does not list, a body that breaks the API's schema, a route that does not exist, no
//!   token) is a problem; refusals that are answers a plugin must expect (a memory key never
//!   written, a chat that is not live, a full memory, a secret setting the config references
//!   no Secret for) are not.

use std::time::{Duration, Instant};

use sdk::api::ErrorCode;
use sdk::testing::{FakeHost, Recorded, Refusal};
use serde_json::json;

use crate::contract::{Contract, Route};
use crate::judge;
use crate::plan::{Body, Expect, Method, SecretUse, Step};
use crate::probe::Probe;
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
        | MissingToken
        | MalformedToken
        | InvalidToken
        | CapabilityNotApproved
        | NotFound
        | MethodNotAllowed
        | BodyTooLarge
        | UnknownAgent
        | UnknownCard
        | SubtypeNotDeclared
        | SwitchNotFound
        | SettingNotFound => true,
        OutsideWorkingTree | RunNotFound | CardNotFound | FileNotFound | MemoryNotFound
        | NoWorkingTree | SecretNotSet | PluginNotEnabled | NotLive | SecretUnavailable
        | FileTooLarge | MemoryFull | NotARegularFile | DailyRunsExceeded | Unavailable
        | Timeout | Internal => false,
    }
}

/// A refusal that is the plugin's fault, as a failed finding.
pub fn refusal_finding(refusal: &Refusal) -> Option<Finding> {
    is_the_plugins_fault(refusal.code).then(|| Finding {
        area: Area::Api,
        what: "a call the plugin made".into(),
        at: refusal.route.clone(),
        outcome: Outcome::Fail(format!(
            "the host refused it {} {}: {}",
            refusal.code.status(),
            refusal.code,
            refusal.message
        )),
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
        expect: Expect::Taken,
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
        let outcome = judge::judge(contract, &step.expect, got.as_ref());
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
    findings.extend(host.recorded().refusals.iter().filter_map(refusal_finding));
    findings
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
            "FAIL api PUT /api/plugin/v1/memory/k (a call the plugin made): the host refused it 403 capability_not_approved: this route needs the capability memory.write"
        );
        let expected = Refusal {
            code: ErrorCode::MemoryNotFound,
            ..refusal
        };
        assert_eq!(refusal_finding(&expected), None);
    }
}
