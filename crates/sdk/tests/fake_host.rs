//! The fake host through the SDK's own client: each route answers what the spec and the
//! manifest say, refuses in the spec's order, and records what the plugin did.

use std::collections::BTreeMap;

use loop_plugin_sdk::api::ui_command::{Step, StepStatus, UiCommandRequest};
use loop_plugin_sdk::api::wire::{
    CardRequest, ChatKind, Hotspot, InboxKind, Level, LiveControlRequest, NotificationRequest,
    RunState, ScanTotals, SwitchRequest,
};
use loop_plugin_sdk::api::{Client, ErrorCode, limits};
use loop_plugin_sdk::manifest::{self, Capability};
use loop_plugin_sdk::testing::{Config, FakeHost, Scan};
use serde_json::{Value, json};

/// A manifest that uses every route of the Plugin API.
const MANIFEST: &str = r#"{
  "id": "quiz", "name": "Quiz", "version": "1.2.3", "api": "1",
  "capabilities": ["agent.readonly", "agent.write", "files.read", "memory.read", "memory.write",
                   "notifications.send", "ui.notification.card", "ui.composer_switch", "live.control",
                   "secrets.read", "ui.command", "ui.panel"],
  "agents": [
    { "id": "ask", "read_only": true, "tools": ["grade"] },
    { "id": "fix", "read_only": false, "tools": [] }
  ],
  "tools": [{ "name": "grade", "input_schema": { "type": "object" } }],
  "settings": {
    "level": { "type": "string", "default": "easy" },
    "token": { "type": "string" },
    "api_key": { "type": "string", "secret": true },
    "backup_key": { "type": "string", "secret": true }
  },
  "ui": {
    "panels": [{ "id": "main", "label": "Quiz", "entry": "ui/main/index.html" }],
    "cards": [{ "id": "score", "entry": "ui/score.html" }],
    "composer_switches": [{ "id": "sync", "label": "Sync", "icon": "ui/sync.svg", "title": "Sync is off" }]
  },
  "live": { "control": ["set_permission_mode", "interrupt"], "messages": [] }
}"#;

fn quiz() -> manifest::Manifest {
    manifest::parse_str(MANIFEST).unwrap()
}

async fn host(config: Config) -> (FakeHost, Client) {
    let host = FakeHost::start(config).await.unwrap();
    let client = host.client();
    (host, client)
}

fn code<T: std::fmt::Debug>(r: loop_plugin_sdk::api::Result<T>) -> ErrorCode {
    r.unwrap_err()
        .code()
        .expect("an answer in the API's error shape")
}

#[tokio::test]
async fn the_channel_is_the_configs_with_the_manifests_defaults() {
    let (_host, client) = host(Config::new(quiz())).await;
    let channel = client.channel().await.unwrap();
    assert_eq!(channel.kind, ChatKind::Channel);
    assert_eq!(channel.project, "project");
    assert_eq!(Value::Object(channel.settings), json!({"level": "easy"}));
}

#[tokio::test]
async fn a_token_is_checked_before_anything_else() {
    let mut config = Config::new(quiz());
    config.enabled = false;
    let (host, _) = host(config).await;
    let wrong = Client::with_token(host.url(), "someone-else").unwrap();
    let err = wrong.channel().await.unwrap_err();
    assert!(err.has_status(401), "{err}");
    assert_eq!(err.code(), Some(ErrorCode::InvalidToken));

    let raw = reqwest::Client::new();
    let url = format!("{}/api/plugin/v1/channel", host.url());
    let res = raw.get(&url).send().await.unwrap();
    assert_eq!(res.status(), 401);
    assert_eq!(res.headers()["www-authenticate"], "Bearer");
    let res = raw
        .get(&url)
        .header("authorization", "Basic abc")
        .send()
        .await
        .unwrap();
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"]["code"], "malformed_token");

    // Then 409 for a project that does not enable the plugin, even on a route it may not use.
    let client = host.client();
    assert_eq!(code(client.channel().await), ErrorCode::PluginNotEnabled);
    assert_eq!(code(client.memory("k").await), ErrorCode::PluginNotEnabled);
}

#[tokio::test]
async fn a_route_needs_its_capability_approved_and_declared() {
    let mut config = Config::new(quiz());
    config.approved = Some(vec![Capability::AgentReadonly, Capability::MemoryRead]);
    let (host, client) = host(config).await;

    let err = client.remember("k", json!(1)).await.unwrap_err();
    assert!(err.has_status(403), "{err}");
    assert!(err.to_string().contains("memory.write"), "{err}");
    // Either agent capability opens POST /runs; then the agent decides.
    client.start_run("ask", "What is 2+2?").await.unwrap();
    assert_eq!(
        code(client.start_run("fix", "Fix it").await),
        ErrorCode::CapabilityNotApproved
    );
    // Approved but not declared counts for nothing.
    let mut config = Config::new(quiz());
    config.approved = Some(vec![Capability::UiCommand]);
    config
        .manifest
        .capabilities
        .retain(|c| *c != Capability::FilesRead);
    let (_other, other) = self::host(config).await;
    let err = other.read_file("README.md").await.unwrap_err();
    assert!(err.to_string().contains("does not declare"), "{err}");

    let refusals = host.recorded().refusals;
    assert_eq!(refusals.len(), 2);
    assert_eq!(refusals[0].route, "PUT /api/plugin/v1/memory/k");
    assert_eq!(refusals[0].code, ErrorCode::CapabilityNotApproved);
}

#[tokio::test]
async fn runs_are_of_the_manifests_agents_and_end_when_the_host_says() {
    let (host, client) = host(Config::new(quiz())).await;
    assert_eq!(
        code(client.start_run("nobody", "hi").await),
        ErrorCode::UnknownAgent
    );
    let err = client.start_run("ask", "").await.unwrap_err();
    assert_eq!(err.code(), Some(ErrorCode::InvalidBody));
    assert!(
        err.to_string().contains("prompt must not be empty"),
        "{err}"
    );
    let long = "x".repeat(limits::MAX_PROMPT + 1);
    assert_eq!(
        code(client.start_run("ask", &long).await),
        ErrorCode::InvalidBody
    );

    let run = client.start_run("ask", "What is 2+2?").await.unwrap();
    assert!(run.id.starts_with("quiz-"), "{}", run.id);
    assert_eq!(
        (run.thread.as_str(), run.read_only, run.status),
        ("plugin:quiz", true, RunState::Queued)
    );
    assert_eq!(run.tools, ["plugin_grade"]);
    assert_eq!(host.recorded().runs[0].prompt, "What is 2+2?");

    host.end_run(&run.id, true, "4").unwrap();
    let ended = client.run(&run.id).await.unwrap();
    assert_eq!(
        (ended.status, ended.result.as_deref()),
        (RunState::Succeeded, Some("4"))
    );
    assert_eq!(code(client.run("quiz-0").await), ErrorCode::RunNotFound);
}

#[tokio::test]
async fn switches_cards_and_notifications_are_recorded() {
    let (host, client) = host(Config::new(quiz())).await;
    let on = SwitchRequest {
        on: true,
        busy: true,
        ..Default::default()
    };
    let pill = client.set_switch("sync", &on).await.unwrap();
    assert_eq!(
        (pill.on, pill.busy, pill.title.as_deref()),
        (true, true, Some("Sync is off"))
    );
    assert_eq!(
        code(client.set_switch("nope", &on).await),
        ErrorCode::SwitchNotFound
    );
    let reset = client.reset_switch("sync").await.unwrap();
    assert!(!reset.on);

    let card = CardRequest {
        card: "score".into(),
        title: "Your score".into(),
        data: Some(json!({"score": 3})),
    };
    let posted = client.post_card(&card).await.unwrap();
    assert_eq!(posted.kind, InboxKind::Card);
    assert!(
        posted.id.starts_with("card-") && posted.id.len() == 21,
        "{}",
        posted.id
    );
    assert_eq!(client.card(&posted.id).await.unwrap(), posted);
    let unknown = CardRequest {
        card: "other".into(),
        ..card.clone()
    };
    assert_eq!(
        code(client.post_card(&unknown).await),
        ErrorCode::UnknownCard
    );
    let long = CardRequest {
        title: "t".repeat(limits::MAX_TITLE + 1),
        ..card
    };
    let err = client.post_card(&long).await.unwrap_err();
    assert!(
        err.to_string()
            .contains("title has 201 characters; at most 200"),
        "{err}"
    );

    let note = client
        .notify(&NotificationRequest {
            title: "Quiz ready".into(),
            body: None,
            level: None,
        })
        .await
        .unwrap();
    assert_eq!(note.level, Some(Level::Info));

    let recorded = host.recorded();
    assert_eq!(recorded.switch_changes.len(), 2);
    assert!(recorded.switches.is_empty(), "reset forgets the state");
    assert_eq!(recorded.cards.len(), 1);
    assert_eq!(recorded.notifications[0].title, "Quiz ready");
}

#[tokio::test]
async fn memory_keeps_the_references_limits() {
    let (host, client) = host(Config::new(quiz())).await;
    assert_eq!(client.memory("last-quiz").await.unwrap(), None);
    client
        .remember("last-quiz", json!({"on": "Monday"}))
        .await
        .unwrap();
    assert_eq!(
        client.memory("last-quiz").await.unwrap(),
        Some(json!({"on": "Monday"}))
    );
    assert_eq!(code(client.memory("..x").await), ErrorCode::InvalidKey);
    let big = json!("x".repeat(limits::MAX_MEMORY_VALUE_BYTES));
    assert_eq!(
        code(client.remember("big", big).await),
        ErrorCode::BodyTooLarge
    );
    for i in 1..limits::MAX_MEMORY_KEYS {
        client.remember(&format!("k{i}"), json!(i)).await.unwrap();
    }
    assert_eq!(
        code(client.remember("one-more", json!(0)).await),
        ErrorCode::MemoryFull
    );
    // Overwriting a key always works.
    client.remember("k1", Value::Null).await.unwrap();
    assert_eq!(host.recorded().memory.len(), limits::MAX_MEMORY_KEYS);
}

#[tokio::test]
async fn files_come_from_the_configs_working_tree() {
    let (_none, client) = host(Config::new(quiz())).await;
    assert_eq!(
        code(client.read_file("README.md").await),
        ErrorCode::NoWorkingTree
    );

    let mut config = Config::new(quiz());
    config.files = Some(BTreeMap::from([(
        "src/lib.rs".to_string(),
        b"fn main() {}".to_vec(),
    )]));
    let (host, client) = host(config).await;
    assert_eq!(
        client.read_file("src/lib.rs").await.unwrap(),
        b"fn main() {}"
    );
    assert_eq!(
        code(client.read_file("src/main.rs").await),
        ErrorCode::FileNotFound
    );
    assert_eq!(
        code(client.read_file("src/../x").await),
        ErrorCode::InvalidPath
    );
    assert_eq!(host.recorded().files_read, ["src/lib.rs", "src/main.rs"]);
}

#[tokio::test]
async fn a_ui_command_is_checked_recorded_and_answered_that_every_step_ran() {
    let (host, client) = host(Config::new(quiz())).await;
    let command = UiCommandRequest {
        steps: vec![
            Step::SelectChat {},
            Step::OpenPanel {
                panel: "main".into(),
            },
            Step::Compose {
                text: "/quiz".into(),
            },
        ],
        timeout_seconds: Some(60),
    };
    let answer = client.run_ui(&command).await.unwrap();
    assert!(answer.ran);
    assert_eq!(
        answer
            .steps
            .iter()
            .map(|s| (s.kind.as_str(), s.status))
            .collect::<Vec<_>>(),
        [
            ("select_chat", StepStatus::Ran),
            ("open_panel", StepStatus::Ran),
            ("compose", StepStatus::Ran),
        ]
    );
    let undeclared = UiCommandRequest {
        steps: vec![Step::OpenPanel {
            panel: "history".into(),
        }],
        timeout_seconds: None,
    };
    assert_eq!(
        code(client.run_ui(&undeclared).await),
        ErrorCode::InvalidStep
    );
    assert_eq!(host.recorded().ui_commands, [command]);

    let mut config = Config::new(quiz());
    config.approved = Some(vec![Capability::NotificationsSend]);
    let (_other, other) = self::host(config).await;
    let err = other
        .run_ui(&UiCommandRequest {
            steps: vec![Step::OpenDrawer {}],
            timeout_seconds: None,
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("ui.command"), "{err}");
}

#[tokio::test]
async fn live_control_answers_the_configs_response_or_not_live() {
    let mut config = Config::new(quiz());
    config
        .live_responses
        .insert("set_permission_mode".into(), json!({"mode": "plan"}));
    let (host, client) = host(config).await;
    let ask = |subtype: &str| LiveControlRequest {
        subtype: subtype.into(),
        request: None,
    };
    let answer = client
        .live_control(&ask("set_permission_mode"))
        .await
        .unwrap();
    assert_eq!(answer.response, json!({"mode": "plan"}));
    assert_eq!(
        code(client.live_control(&ask("interrupt")).await),
        ErrorCode::NotLive
    );
    assert_eq!(
        code(client.live_control(&ask("rm_rf")).await),
        ErrorCode::SubtypeNotDeclared
    );
    assert!(client.hold(true).await.unwrap());
    assert!(!client.hold(false).await.unwrap());
    let recorded = host.recorded();
    assert_eq!(recorded.live_controls.len(), 2);
    assert_eq!(recorded.holds, [true, false]);
}

#[tokio::test]
async fn the_environments_client_reads_a_rotated_token() {
    let (host, _) = host(Config::new(quiz())).await;
    let dir = tempfile::tempdir().unwrap();
    let token = dir.path().join("token");
    std::fs::write(&token, "stale\n").unwrap();
    std::fs::write(dir.path().join("secret"), "s").unwrap();
    let vars = BTreeMap::from([
        (
            "LOOP_PLUGIN_SECRET_FILE",
            dir.path().join("secret").display().to_string(),
        ),
        ("LOOP_PLUGIN_TOKEN_FILE", token.display().to_string()),
        ("LOOP_API_URL", host.url().to_string()),
    ]);
    let env = loop_plugin_sdk::Env::from_vars(|n| vars.get(n).cloned()).unwrap();
    let client = Client::from_env(&env).unwrap();
    assert!(client.channel().await.unwrap_err().has_status(401));
    std::fs::write(&token, format!("{}\n", host.token())).unwrap();
    client.channel().await.unwrap();
}

#[tokio::test]
async fn a_secret_setting_is_read_at_its_revision_and_never_in_the_channel() {
    let mut config = Config::new(quiz());
    config
        .secret_settings
        .insert("api_key".into(), "first-key".into());
    let (fake, client) = host(config).await;
    let channel = client.channel().await.unwrap();
    assert!(!channel.settings.contains_key("api_key"), "{channel:?}");

    let read = client.secret_setting("api_key").await.unwrap().unwrap();
    assert_eq!(
        (
            read.name.as_str(),
            read.value.as_str(),
            read.revision.as_str()
        ),
        ("api_key", "first-key", "1")
    );
    assert!(!format!("{read:?}").contains("first-key"));
    // Rotated: the next read answers the new value at the next revision.
    fake.rotate_secret("api_key", "second-key");
    let read = client.secret_setting("api_key").await.unwrap().unwrap();
    assert_eq!(
        (read.value.as_str(), read.revision.as_str()),
        ("second-key", "2")
    );
    // A secret setting without a Secret reference is None; a plain or unknown one is no
    // secret setting.
    assert!(client.secret_setting("backup_key").await.unwrap().is_none());
    assert_eq!(
        code(client.secret_setting("token").await),
        ErrorCode::SettingNotFound
    );
    assert_eq!(
        code(client.secret_setting("nothing").await),
        ErrorCode::SettingNotFound
    );
    assert_eq!(fake.recorded().secrets_read, ["api_key", "api_key"]);

    // Held to secrets.read, as the host holds it.
    let mut config = Config::new(quiz());
    config.approved = Some(vec![Capability::MemoryRead]);
    config.secret_settings.insert("api_key".into(), "k".into());
    let (_host, client) = host(config).await;
    assert_eq!(
        code(client.secret_setting("api_key").await),
        ErrorCode::CapabilityNotApproved
    );
}

fn hotspot(name: &str, score: f64) -> Hotspot {
    Hotspot {
        file: format!("src/{name}.rs"),
        name: name.into(),
        line: 1,
        complexity: 3,
        lines: 10,
        score,
    }
}

#[tokio::test]
async fn hotspots_come_from_the_scan_the_test_sets_worst_first() {
    let (host, client) = host(Config::new(quiz())).await;
    // No scan yet: None, from 404 scan_not_found.
    assert_eq!(client.hotspots(10).await.unwrap(), None);
    assert_eq!(client.hotspots_page(0, 10).await.unwrap(), None);

    let totals = ScanTotals {
        files: 3,
        functions: 40,
        other: BTreeMap::from([("lines".to_string(), 1234.into())]),
    };
    host.set_scan(Some(Scan {
        commit: Some("3f2c1a9e".into()),
        totals: totals.clone(),
        functions: (0..25)
            .map(|i| hotspot(&format!("f{i:02}"), f64::from(i)))
            .collect(),
    }));
    let worst = client.hotspots(3).await.unwrap().unwrap();
    let names: Vec<&str> = worst.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["f24", "f23", "f22"]);
    assert_eq!(worst.commit.as_deref(), Some("3f2c1a9e"));
    assert!(worst.scanned_at.parse::<jiff::Timestamp>().is_ok());

    let page = client.hotspots_page(20, 10).await.unwrap().unwrap();
    let names: Vec<&str> = page.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["f04", "f03", "f02", "f01", "f00"]);
    assert_eq!((page.offset, page.limit, page.total), (20, 10, 25));
    assert_eq!(page.totals, totals);
    assert!(
        client
            .hotspots_page(25, 10)
            .await
            .unwrap()
            .unwrap()
            .functions
            .is_empty()
    );

    // A bad query parameter is 400 invalid_query, naming it.
    for bad in [0, limits::MAX_HOTSPOTS + 1] {
        let err = client.hotspots(bad).await.unwrap_err();
        assert_eq!(err.code(), Some(ErrorCode::InvalidQuery), "{err}");
        assert!(err.to_string().contains("limit"), "{err}");
    }
    let raw = reqwest::Client::new();
    let res = raw
        .get(format!("{}/api/plugin/v1/hotspots?offset=1", host.url()))
        .bearer_auth(host.token())
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("offset"),
        "{body}"
    );
    let queries = host.recorded().hotspots_read;
    assert_eq!(queries.len(), 3, "{queries:?}");

    // A new scan replaces the old one; none again is 404.
    host.set_scan(Some(Scan {
        commit: None,
        totals,
        functions: vec![hotspot("only", 1.0)],
    }));
    let worst = client.hotspots(10).await.unwrap().unwrap();
    assert_eq!((worst.functions.len(), worst.commit), (1, None));
    host.set_scan(None);
    assert_eq!(client.hotspots_page(0, 1).await.unwrap(), None);
    let refused = host.recorded().refusals.pop().unwrap();
    assert_eq!(refused.code, ErrorCode::ScanNotFound);
}

#[tokio::test]
async fn hotspots_need_files_read() {
    let mut config = Config::new(quiz());
    config.approved = Some(vec![Capability::MemoryRead]);
    config.scan = Some(Scan {
        commit: None,
        totals: ScanTotals {
            files: 1,
            functions: 1,
            other: BTreeMap::new(),
        },
        functions: vec![hotspot("a", 1.0)],
    });
    let (host, client) = host(config).await;
    for err in [
        client.hotspots(10).await.map(|_| ()).unwrap_err(),
        client.hotspots_page(0, 10).await.map(|_| ()).unwrap_err(),
    ] {
        assert!(err.has_status(403), "{err}");
        assert!(err.to_string().contains("files.read"), "{err}");
    }
    assert!(host.recorded().hotspots_read.is_empty());
}
