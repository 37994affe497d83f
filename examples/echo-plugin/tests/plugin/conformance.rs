//! The echo plugin against the SDK's fake host, driven by the conformance check a plugin's CI
//! runs: every check passes, its journal has every call the check made, and `ping` read the
//! channel through the fake host.

use std::time::Duration;

use loop_plugin_sdk::testing::{Config, FakeHost};
use serde_json::Value;

use crate::common::{SECRET, TempDir, manifest};

#[tokio::test]
async fn the_echo_plugin_passes_every_check() {
    let host = FakeHost::start(Config::new(manifest())).await.unwrap();
    let dir = TempDir::new("conformance");
    let server = echo_plugin::plugin(manifest(), Some(host.client()), dir.path())
        .unwrap()
        .build(SECRET)
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(server.serve(listener, std::future::pending()));
    let target = conformance::Target {
        url,
        secret: SECRET.into(),
        manifest: manifest(),
    };
    let contract = conformance::Contract::load()
        .unwrap()
        .with_time_limits_capped(Duration::from_secs(5));
    let report = conformance::check_with_host(&contract, &target, &host)
        .await
        .unwrap();
    assert!(report.passed(), "{}", report.text());
    // health 1, secret 18, actions 6, tools 2, runs 2, events 4, switches 2, errors 6, all
    // passed; and the runs it started, skipped: echo starts none.
    let skipped: Vec<String> = report
        .findings
        .iter()
        .filter(|f| f.outcome != conformance::Outcome::Pass)
        .map(|f| f.line())
        .collect();
    assert_eq!(report.findings.len(), 42, "{}", report.text());
    assert_eq!(skipped.len(), 1, "{}", report.text());
    assert!(
        skipped[0].starts_with("SKIP runs POST /runs (runs it started)"),
        "{skipped:?}"
    );
    assert!(
        host.recorded().refusals.is_empty(),
        "{:?}",
        host.recorded().refusals
    );

    // Every call that passed the secret is journaled; none that didn't. And each accepted
    // ping's call to the fake host, once it is made.
    let journal = || {
        let text = std::fs::read_to_string(dir.path().join("journal.jsonl")).unwrap();
        let entries: Vec<Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        entries
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let entries = loop {
        let entries = journal();
        if entries.iter().filter(|e| e["kind"] == "loop_api").count() == 3 {
            break entries;
        }
        assert!(std::time::Instant::now() < deadline, "{entries:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let requests = |route: &str| {
        entries
            .iter()
            .filter(|e| e["kind"] == "request" && e["route"] == route)
            .count()
    };
    assert_eq!(
        requests("/actions/ping"),
        3 + 2,
        "a trigger each, two malformed calls"
    );
    assert_eq!(requests("/healthz"), 1);
    assert_eq!(
        requests("/x/conformance"),
        0,
        "only tried without the secret"
    );
    assert!(
        entries
            .iter()
            .filter(|e| e["kind"] == "loop_api")
            .all(|e| e["status"] == 200 && e["route"] == "/api/plugin/v1/channel"),
        "{entries:#?}"
    );
}
