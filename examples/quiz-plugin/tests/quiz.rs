//! The quiz plugin against the SDK's fake host, driven by the conformance check a plugin's CI
//! runs: every check passes, and the fake host's record shows what the plugin did with each
//! call (the runs it started with the chat's settings, the card and notification of each
//! run's end, the memory it kept), and its volume the events it counted.

use std::time::Duration;

use loop_plugin_sdk::api::wire::{InboxKind, Level};
use loop_plugin_sdk::manifest::{self, Manifest};
use loop_plugin_sdk::testing::{Config, FakeHost, Recorded};
use serde_json::{Map, Value, json};

const MANIFEST: &str = include_str!("../plugin.json");
const SECRET: &str = "s3cret";

fn manifest() -> Manifest {
    manifest::parse_str(MANIFEST).unwrap()
}

/// Serves the plugin with `config`'s fake host as its Plugin API, checks it, and answers the
/// report's text, the host's record and the messages counted.
async fn checked(config: Config) -> (conformance::Report, Recorded, String) {
    let host = FakeHost::start(config).await.unwrap();
    let data = tempfile::tempdir().unwrap();
    let server = quiz_plugin::plugin(manifest(), Some(host.client()), data.path().into())
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
    let messages = std::fs::read_to_string(data.path().join("messages")).unwrap_or_default();
    (report, host.recorded(), messages)
}

#[tokio::test]
async fn the_quiz_passes_every_check_and_does_what_its_table_says() {
    let (report, recorded, messages) = checked(Config::new(manifest())).await;
    assert!(
        report
            .findings
            .iter()
            .all(|f| f.outcome == conformance::Outcome::Pass),
        "{}",
        report.text()
    );

    // daily, once per trigger (manual, schedule, workflow): a run of ask with the defaults.
    assert_eq!(recorded.runs.len(), 3, "{recorded:?}");
    for started in &recorded.runs {
        assert_eq!(started.prompt, quiz_plugin::prompt("easy", 3));
        assert_eq!(started.run.tools, ["plugin_grade"]);
        assert!(started.run.done_delivered, "{started:?}");
    }
    let run_ids: Vec<Value> = recorded.runs.iter().map(|r| json!(r.run.id)).collect();
    assert!(run_ids.contains(&recorded.memory[quiz_plugin::LAST_RUN]));

    // Each run's end: a score card with the run, and a notification. Its own three runs, and
    // the run the check ends without the plugin having started it (once done, once failed):
    // an end may come for a run started before a restart.
    let cards: Vec<&Value> = recorded
        .cards
        .iter()
        .map(|c| c.data.as_ref().unwrap())
        .collect();
    assert_eq!(cards.len(), 5, "{cards:?}");
    assert!(
        recorded
            .cards
            .iter()
            .all(|c| c.kind == InboxKind::Card && c.card.as_deref() == Some("score"))
    );
    for run in &run_ids {
        let card = cards
            .iter()
            .find(|d| &d["run"] == run)
            .expect("a card per run");
        assert_eq!(card["text"], conformance::follow::RUN_RESULT);
    }
    let levels: Vec<(String, Option<Level>)> = recorded
        .notifications
        .iter()
        .map(|n| (n.title.clone(), n.level))
        .collect();
    assert_eq!(levels.len(), 5);
    assert_eq!(
        levels
            .iter()
            .filter(|l| **l == ("Quiz finished".into(), Some(Level::Success)))
            .count(),
        4,
        "{levels:?}"
    );
    assert!(levels.contains(&("Quiz failed".into(), Some(Level::Error))));

    // The switch went on, then off; the one event counted.
    assert_eq!(recorded.memory[quiz_plugin::HINTS], json!(false));
    assert_eq!(messages.trim(), "1");
    assert!(recorded.refusals.is_empty(), "{:?}", recorded.refusals);
}

#[tokio::test]
async fn the_quiz_asks_what_the_chats_settings_say() {
    let mut config = Config::new(manifest());
    config.channel.settings = Map::from_iter([
        ("level".to_string(), json!("hard")),
        ("questions".to_string(), json!(5)),
    ]);
    let (report, recorded, _) = checked(config).await;
    assert!(report.passed(), "{}", report.text());
    assert!(
        recorded
            .runs
            .iter()
            .all(|r| r.prompt == quiz_plugin::prompt("hard", 5)),
        "{:?}",
        recorded.runs
    );
    assert!(quiz_plugin::prompt("hard", 5).contains("5 sums a + b with a and b from 100 to 999"));
}

#[tokio::test]
async fn a_project_that_does_not_approve_agents_gets_no_run_and_a_failing_check() {
    // The owner approved everything but agent.readonly: daily's POST /runs is refused 403,
    // which the check reports as the plugin's call the host refused.
    let mut config = Config::new(manifest());
    let mut approved = manifest().capabilities;
    approved.retain(|c| *c != manifest::Capability::AgentReadonly);
    config.approved = Some(approved);
    let (report, recorded, _) = checked(config).await;
    assert!(recorded.runs.is_empty());
    let failures: Vec<String> = report.failures().map(|f| f.line()).collect();
    assert_eq!(failures.len(), 3, "{}", report.text());
    assert!(
        failures.iter().all(|l| l.starts_with(
            "FAIL api POST /api/plugin/v1/runs (a call the plugin made): the host refused it 403 capability_not_approved"
        )),
        "{}",
        report.text()
    );
}

#[test]
fn grade_grades_sums() {
    let input = |v: Value| v.as_object().unwrap().clone();
    let graded = quiz_plugin::grade(&input(json!({"a": 2, "b": 2, "answer": 4}))).unwrap();
    assert_eq!(
        graded.structured_content.unwrap(),
        input(json!({"correct": true, "expected": 4}))
    );
    let wrong = quiz_plugin::grade(&input(json!({"a": 2, "b": 2, "answer": 5}))).unwrap();
    assert_eq!(wrong.structured_content.unwrap()["correct"], false);
    assert!(quiz_plugin::grade(&input(json!({"a": i64::MAX, "b": 1, "answer": 0}))).is_err());
}
