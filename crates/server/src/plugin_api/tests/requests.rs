//! Request-level tests: the router over stores filled by hand, each request through
//! `tower::ServiceExt::oneshot`, every write recorded.
//!
//! Most are tables of [`Row`]s, one request each in a world of its own with what it must
//! answer (see [`super::rows`]). What needs a sequence (a store or the clock changing between
//! requests, a write seen afterwards) stays a test of its own, after the tables.

use std::time::Duration;

use axum::http::StatusCode;
use kube::ResourceExt;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::fixtures::*;
use super::rows::{Auth, Row, Setup, check};
use crate::cards::inbox;
use model::manifest::Capability;
use model::resources::SwitchState;

/// A capability-gated call: what it needs, and what it answers with every capability approved.
struct Gated {
    method: &'static str,
    path: &'static str,
    body: Option<Value>,
    needs: Capability,
    status: StatusCode,
    code: &'static str,
}

impl Gated {
    fn row(&self) -> Row {
        let row = Row::new(self.method, self.path);
        match &self.body {
            Some(body) => row.json(body.clone()),
            None => row,
        }
    }
}

/// Every capability-gated call.
fn gated() -> Vec<Gated> {
    use StatusCode as S;
    let gated = |method, path, body, needs, (status, code)| Gated {
        method,
        path,
        body,
        needs,
        status,
        code,
    };
    vec![
        gated(
            "POST",
            "/runs",
            Some(json!({ "agent": "quiz", "prompt": "ask" })),
            Capability::AgentReadonly,
            (S::ACCEPTED, ""),
        ),
        gated(
            "POST",
            "/runs",
            Some(json!({ "agent": "fixer", "prompt": "fix" })),
            Capability::AgentWrite,
            (S::ACCEPTED, ""),
        ),
        gated(
            "PUT",
            "/composer/switches/sync",
            Some(json!({ "on": true })),
            Capability::UiComposerSwitch,
            (S::OK, ""),
        ),
        gated(
            "DELETE",
            "/composer/switches/sync",
            None,
            Capability::UiComposerSwitch,
            (S::OK, ""),
        ),
        gated(
            "POST",
            "/cards",
            Some(json!({ "card": "score", "title": "Score" })),
            Capability::UiNotificationCard,
            (S::CREATED, ""),
        ),
        gated(
            "GET",
            "/cards/card-0000000000000000",
            None,
            Capability::UiNotificationCard,
            (S::NOT_FOUND, "card_not_found"),
        ),
        gated(
            "POST",
            "/notifications",
            Some(json!({ "title": "Hi" })),
            Capability::NotificationsSend,
            (S::CREATED, ""),
        ),
        gated(
            "POST",
            "/channel/live/control",
            Some(json!({ "subtype": "set_permission_mode" })),
            Capability::LiveControl,
            (S::CONFLICT, "not_live"),
        ),
        gated(
            "PUT",
            "/channel/live/hold",
            Some(json!({ "hold": true })),
            Capability::LiveControl,
            (S::OK, ""),
        ),
        gated(
            "GET",
            "/files/README.md",
            None,
            Capability::FilesRead,
            (S::NOT_FOUND, "no_working_tree"),
        ),
        gated(
            "GET",
            "/hotspots",
            None,
            Capability::FilesRead,
            (S::NOT_FOUND, "scan_not_found"),
        ),
        gated(
            "GET",
            "/hotspots/page?offset=0&limit=5",
            None,
            Capability::FilesRead,
            (S::NOT_FOUND, "scan_not_found"),
        ),
        gated(
            "GET",
            "/memory/last",
            None,
            Capability::MemoryRead,
            (S::NOT_FOUND, "memory_not_found"),
        ),
        gated(
            "PUT",
            "/memory/last",
            Some(json!({ "value": 1 })),
            Capability::MemoryWrite,
            (S::OK, ""),
        ),
        gated(
            "GET",
            "/settings/secrets/api_token",
            None,
            Capability::SecretsRead,
            (S::OK, ""),
        ),
    ]
}

#[tokio::test]
async fn each_gated_route_answers_403_without_its_capability_and_goes_through_with_it() {
    use StatusCode as S;
    let mut rows = vec![];
    for g in gated() {
        rows.push(g.row().on(Setup::AllBut(g.needs)).fails(
            S::FORBIDDEN,
            "capability_not_approved",
            g.needs.as_str(),
        ));
        let with = g.row();
        rows.push(match g.code {
            "" => with.answers(g.status),
            code => with.fails(g.status, code, ""),
        });
    }
    // Reading a run needs either agent capability.
    rows.extend([
        Row::new("GET", "/runs/cogtest-0000000000000000")
            .on(Setup::Only(&[Capability::FilesRead]))
            .fails(S::FORBIDDEN, "capability_not_approved", "agent."),
        Row::new("GET", "/runs/cogtest-0000000000000000")
            .on(Setup::Only(&[Capability::AgentWrite]))
            .fails(S::NOT_FOUND, "run_not_found", ""),
    ]);
    check(rows).await;
}

#[tokio::test]
async fn a_capability_the_manifest_does_not_declare_does_not_count() {
    use StatusCode as S;
    check(vec![
        Row::new("GET", "/memory/last")
            .on(Setup::FewDeclared)
            .fails(S::FORBIDDEN, "capability_not_approved", "does not declare"),
        Row::new("POST", "/runs")
            .on(Setup::FewDeclared)
            .json(json!({ "agent": "quiz", "prompt": "p" }))
            .answers(S::ACCEPTED),
    ])
    .await;
}

#[tokio::test]
async fn ids_of_another_chat_are_not_found() {
    use StatusCode as S;
    let others = Setup::OthersThings;
    check(vec![
        Row::new("GET", "/runs/run-of-b")
            .on(others)
            .fails(S::NOT_FOUND, "run_not_found", ""),
        Row::new("GET", "/runs/run-of-other")
            .on(others)
            .fails(S::NOT_FOUND, "run_not_found", ""),
        Row::new("GET", "/cards/card-b")
            .on(others)
            .fails(S::NOT_FOUND, "card_not_found", ""),
        // Chat B's own token finds them.
        Row::new("GET", "/runs/run-of-b")
            .on(others)
            .token(TOKEN_B)
            .shape(json!({ "agent": "quiz" })),
        Row::new("GET", "/cards/card-b")
            .on(others)
            .token(TOKEN_B)
            .shape(json!({ "title": "B's" })),
        // A switch is only one the manifest declares.
        Row::new("PUT", "/composer/switches/nope")
            .on(others)
            .json(json!({ "on": true }))
            .fails(S::NOT_FOUND, "switch_not_found", ""),
    ])
    .await;
}

#[tokio::test]
async fn missing_malformed_and_unknown_tokens_answer_401() {
    use StatusCode as S;
    let row = |auth, code| {
        Row::new("GET", "/channel")
            .authorization(auth)
            .fails(S::UNAUTHORIZED, code, "")
            .header("www-authenticate", "Bearer")
    };
    check(vec![
        row(Auth::None, "missing_token"),
        row(Auth::Header("Basic abc"), "malformed_token"),
        row(Auth::Header("Bearer"), "malformed_token"),
        row(Auth::Header("Bearer not-a-token-we-made"), "invalid_token"),
    ])
    .await;
}

#[tokio::test]
async fn a_project_that_does_not_enable_the_plugin_answers_409() {
    use StatusCode as S;
    let mut rows: Vec<Row> = gated()
        .iter()
        .map(|g| {
            g.row()
                .on(Setup::NotEnabled)
                .fails(S::CONFLICT, "plugin_not_enabled", "")
        })
        .collect();
    rows.extend([
        Row::new("GET", "/channel").on(Setup::NotEnabled).fails(
            S::CONFLICT,
            "plugin_not_enabled",
            "does not enable",
        ),
        // An untrusted change that would enable it does not count, nor does a config never
        // trusted.
        Row::new("GET", "/channel").on(Setup::Untrusted).fails(
            S::CONFLICT,
            "plugin_not_enabled",
            "does not enable",
        ),
        Row::new("GET", "/channel").on(Setup::NeverTrusted).fails(
            S::CONFLICT,
            "plugin_not_enabled",
            "does not enable",
        ),
        // Plugins off in the global config.
        Row::new("GET", "/channel").on(Setup::PluginsOff).fails(
            S::CONFLICT,
            "plugin_not_enabled",
            "plugins.enabled",
        ),
        // 401 comes first: a bad token in a disabled project is still a bad token.
        Row::new("GET", "/channel")
            .on(Setup::NotEnabled)
            .token("nope")
            .fails(S::UNAUTHORIZED, "invalid_token", ""),
    ]);
    check(rows).await;
}

#[tokio::test]
async fn each_route_refuses_what_breaks_its_rules() {
    use StatusCode as S;
    let long_title = "x".repeat(201);
    let big_card = json!({ "card": "score", "title": "x", "data": { "blob": "y".repeat(70_000) } });
    check(vec![
        Row::new("POST", "/runs")
            .json(json!({ "agent": "nobody", "prompt": "x" }))
            .fails(S::UNPROCESSABLE_ENTITY, "unknown_agent", ""),
        Row::new("POST", "/runs")
            .json(json!({ "agent": "quiz", "prompt": "" }))
            .fails(S::BAD_REQUEST, "invalid_body", ""),
        Row::new("POST", "/runs")
            .json(json!({ "agent": "quiz" }))
            .fails(S::BAD_REQUEST, "invalid_body", ""),
        Row::new("POST", "/runs")
            .json(json!(["quiz"]))
            .fails(S::BAD_REQUEST, "invalid_body", ""),
        // A switch's title is at most 200 characters.
        Row::new("PUT", "/composer/switches/sync")
            .json(json!({ "on": true, "title": long_title }))
            .fails(S::BAD_REQUEST, "invalid_body", ""),
        Row::new("POST", "/cards")
            .json(json!({ "card": "nope", "title": "x" }))
            .fails(S::UNPROCESSABLE_ENTITY, "unknown_card", ""),
        Row::new("POST", "/cards")
            .json(json!({ "card": "score", "title": "" }))
            .fails(S::BAD_REQUEST, "invalid_body", ""),
        Row::new("POST", "/cards")
            .json(big_card)
            .fails(S::PAYLOAD_TOO_LARGE, "body_too_large", ""),
        Row::new("POST", "/notifications")
            .json(json!({ "title": "x", "level": "loud" }))
            .fails(S::BAD_REQUEST, "invalid_body", ""),
        Row::new("GET", "/memory/last-quiz").fails(S::NOT_FOUND, "memory_not_found", ""),
        Row::new("PUT", "/memory/x").json(json!({ "v": 1 })).fails(
            S::BAD_REQUEST,
            "invalid_body",
            "",
        ),
        Row::new("GET", "/memory/..x").fails(S::BAD_REQUEST, "invalid_key", ""),
        Row::new("PUT", "/memory/big")
            .json(json!({ "value": "z".repeat(70_000) }))
            .fails(S::PAYLOAD_TOO_LARGE, "body_too_large", ""),
        // Live control takes only the subtypes the manifest lists, and needs a live session.
        Row::new("POST", "/channel/live/control")
            .json(json!({ "subtype": "interrupt" }))
            .fails(S::FORBIDDEN, "subtype_not_declared", ""),
        Row::new("POST", "/channel/live/control")
            .json(json!({ "subtype": "set_permission_mode", "request": { "mode": "plan" } }))
            .fails(S::CONFLICT, "not_live", ""),
    ])
    .await;
}

#[tokio::test]
async fn a_body_must_be_an_object_not_its_fields_in_an_array() {
    // serde reads a struct from an array of its fields by position; the API documents only
    // objects (schemathesis sent `[true]` for `{"hold": true}` and got 200).
    use StatusCode as S;
    let row = |method, path, body| {
        Row::new(method, path)
            .json(body)
            .fails(S::BAD_REQUEST, "invalid_body", "a JSON object")
    };
    check(vec![
        row("PUT", "/channel/live/hold", json!([true])),
        row("POST", "/runs", json!(["quiz", "p"])),
        row("PUT", "/memory/k", json!([1])),
    ])
    .await;
}

#[tokio::test]
async fn files_are_read_only_within_the_chats_working_tree() {
    use StatusCode as S;
    let tree = Setup::WorkingTree;
    let refused = |path, status, code| Row::new("GET", path).on(tree).fails(status, code, "");
    check(vec![
        Row::new("GET", "/files/src/lib.rs")
            .on(tree)
            .bytes(b"pub fn f() {}")
            .header("content-type", "application/octet-stream"),
        // Chat b, a thread of a without a tree of its own, reads a's.
        Row::new("GET", "/files/src/lib.rs")
            .on(tree)
            .token(TOKEN_B)
            .bytes(b"pub fn f() {}"),
        refused("/files/../secret", S::BAD_REQUEST, "invalid_path"),
        refused("/files/src/../../secret", S::BAD_REQUEST, "invalid_path"),
        refused("/files/..%2F..%2Fsecret", S::BAD_REQUEST, "invalid_path"),
        refused("/files//etc/passwd", S::BAD_REQUEST, "invalid_path"),
        refused("/files/%2Fetc%2Fpasswd", S::BAD_REQUEST, "invalid_path"),
        refused("/files/out", S::FORBIDDEN, "outside_working_tree"),
        refused("/files/abs", S::FORBIDDEN, "outside_working_tree"),
        refused("/files/pipe", S::UNPROCESSABLE_ENTITY, "not_a_regular_file"),
        refused("/files/src", S::UNPROCESSABLE_ENTITY, "not_a_regular_file"),
        refused("/files/big", S::PAYLOAD_TOO_LARGE, "file_too_large"),
        refused("/files/missing", S::NOT_FOUND, "file_not_found"),
        // Without a root, no tree is served.
        Row::new("GET", "/files/src/lib.rs").fails(S::NOT_FOUND, "no_working_tree", ""),
    ])
    .await;
}

#[tokio::test]
async fn hotspots_are_the_chats_scan_held_to_files_read_and_their_query() {
    use StatusCode as S;
    let scanned = Setup::Scanned;
    let query = |path| {
        Row::new("GET", path)
            .on(scanned)
            .fails(S::BAD_REQUEST, "invalid_query", "")
    };
    check(vec![
        Row::new("GET", "/hotspots")
            .on(scanned)
            .shape(json!({ "commit": "3f2c1a9e", "scanned_at": T0 })),
        Row::new("GET", "/hotspots/page?limit=1")
            .on(scanned)
            .shape(json!({
                "functions": [{ "file": "src/f24.rs", "name": "f24", "line": 25, "complexity": 3,
                                "lines": 34, "score": 24.0 }],
                "offset": 0, "limit": 1, "total": 25,
                "totals": { "files": 3, "functions": 35, "lines": 1234 },
            })),
        // Past the functions kept: an empty page.
        Row::new("GET", "/hotspots/page?offset=1000")
            .on(scanned)
            .shape(json!({ "functions": [], "offset": 1000, "limit": 10, "total": 25 })),
        // Chat b, a thread of a on a's tree, without a scan of its own, reads a's.
        Row::new("GET", "/hotspots")
            .on(scanned)
            .token(TOKEN_B)
            .shape(json!({ "commit": "3f2c1a9e" })),
        // A chat never scanned.
        Row::new("GET", "/hotspots").fails(
            S::NOT_FOUND,
            "scan_not_found",
            "chat a has no quality scan",
        ),
        Row::new("GET", "/hotspots/page").fails(S::NOT_FOUND, "scan_not_found", ""),
        // The capability is checked before the query.
        Row::new("GET", "/hotspots?limit=0")
            .on(Setup::AllBut(Capability::FilesRead))
            .fails(S::FORBIDDEN, "capability_not_approved", "files.read"),
        query("/hotspots?limit=0").fails(
            S::BAD_REQUEST,
            "invalid_query",
            "limit must be a whole number from 1 to 100",
        ),
        query("/hotspots?limit=101"),
        query("/hotspots?limit=ten"),
        query("/hotspots?offset=5").fails(S::BAD_REQUEST, "invalid_query", "\"offset\" is not one"),
        query("/hotspots/page?offset=-1").fails(S::BAD_REQUEST, "invalid_query", "offset must"),
        query("/hotspots/page?limit=5&limit=6"),
        query("/hotspots/page?sort=score"),
    ])
    .await;

    // The worst first, and pages that follow on from each other.
    let h = World {
        maps: vec![scan_map("a", 25)],
        ..World::new()
    }
    .build();
    let names = |a: &Answer| -> Vec<String> {
        a.json()["functions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect()
    };
    let worst = h.call("GET", "/hotspots", Some(TOKEN_A), None).await;
    let want: Vec<String> = (15..25).rev().map(|i| format!("f{i}")).collect();
    assert_eq!(names(&worst), want);
    let three = h
        .call("GET", "/hotspots?limit=3", Some(TOKEN_A), None)
        .await;
    assert_eq!(names(&three), ["f24", "f23", "f22"]);
    let mut paged = vec![];
    for offset in [0, 10, 20] {
        let page = h
            .call(
                "GET",
                &format!("/hotspots/page?offset={offset}&limit=10"),
                Some(TOKEN_A),
                None,
            )
            .await;
        assert_eq!(page.status, S::OK);
        paged.extend(names(&page));
    }
    let all: Vec<String> = (0..25).rev().map(|i| format!("f{i}")).collect();
    assert_eq!(paged, all);
}

#[tokio::test]
async fn get_channel_answers_the_chat_and_its_resolved_settings() {
    // Settings: default, global, project; a refused project value leaves the default.
    check(vec![
        Row::new("GET", "/channel")
            .shape(json!({
                "id": "a",
                "kind": "channel",
                "project": PROJECT,
                "app": "desktop",
                "settings": {
                    "question_count": 8,
                    "pass_mark": 0.5,
                    "language": "en",
                    "sync_all": false,
                },
            }))
            .absent("parent"),
    ])
    .await;
}

#[tokio::test]
async fn every_error_has_the_one_shape() {
    use StatusCode as S;
    let huge = json!({ "agent": "quiz", "prompt": "p".repeat(2 * 1024 * 1024) });
    check(vec![
        Row::new("GET", "/nope").fails(S::NOT_FOUND, "not_found", ""),
        Row::new("GET", "//somewhere/else")
            .authorization(Auth::None)
            .fails(S::NOT_FOUND, "not_found", ""),
        Row::new("PATCH", "/channel").fails(S::METHOD_NOT_ALLOWED, "method_not_allowed", ""),
        Row::new("POST", "/runs")
            .json(huge)
            .fails(S::PAYLOAD_TOO_LARGE, "body_too_large", ""),
        Row::new("POST", "/runs")
            .raw("{not json")
            .fails(S::BAD_REQUEST, "invalid_body", "line 1"),
        // Health answers without a token.
        Row::new("GET", "//healthz").authorization(Auth::None),
    ])
    .await;
}

// The tests below are sequences: what one request does shows in the next, or in the writes.

#[tokio::test]
async fn a_switch_is_written_for_the_tokens_own_chat_only() {
    let h = World::new().build();
    let a = h
        .call(
            "PUT",
            "/composer/switches/sync",
            Some(TOKEN_A),
            Some(json!({ "on": true })),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    let written: Vec<String> = h
        .status
        .of("switches")
        .into_iter()
        .map(|(k, _)| k.name)
        .collect();
    assert_eq!(written, ["cogtest-a"]);
}

#[tokio::test]
async fn a_token_goes_with_its_instance_chat_secret_or_plugin() {
    // The instance is removed; its Secret lingers until garbage collection.
    let mut h = World::new().build();
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_A), None).await.status,
        StatusCode::OK
    );
    h.writers
        .instances
        .apply_watcher_event(&watcher::Event::Delete(instance("a")));
    h.changed();
    let a = h.call("GET", "/channel", Some(TOKEN_A), None).await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::UNAUTHORIZED, "invalid_token")
    );
    // A new instance of the same name does not revive the old token.
    let mut again = instance("a");
    again.metadata.uid = Some("uid-instance-a-2".into());
    h.writers
        .instances
        .apply_watcher_event(&watcher::Event::Apply(again));
    h.changed();
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_A), None).await.status,
        StatusCode::UNAUTHORIZED
    );
    // Chat B is untouched.
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_B), None).await.status,
        StatusCode::OK
    );

    // A chat that is deleted takes its token with it.
    h.writers
        .channels
        .apply_watcher_event(&watcher::Event::Delete(channel("b")));
    h.changed();
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_B), None).await.status,
        StatusCode::UNAUTHORIZED
    );
    h.writers
        .channels
        .apply_watcher_event(&watcher::Event::Apply(channel("b")));
    h.changed();
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_B), None).await.status,
        StatusCode::OK
    );

    // So does a token Secret that is deleted (or rotated).
    let secret = token_secret(NS, "cogtest-b", "uid-instance-b", PLUGIN, "b", TOKEN_B);
    h.tokens
        .apply_watcher_event(&watcher::Event::Delete(secret));
    h.changed();
    let a = h.call("GET", "/channel", Some(TOKEN_B), None).await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::UNAUTHORIZED, "invalid_token")
    );
    let rotated = token_secret(
        NS,
        "cogtest-b",
        "uid-instance-b",
        PLUGIN,
        "b",
        "rotated-token-b",
    );
    h.tokens
        .apply_watcher_event(&watcher::Event::Apply(rotated));
    h.changed();
    assert_eq!(
        h.call("GET", "/channel", Some("rotated-token-b"), None)
            .await
            .status,
        StatusCode::OK
    );

    // A plugin being removed takes its tokens with it.
    let mut going = plugin(&Capability::ALL);
    going.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    h.writers
        .plugins
        .apply_watcher_event(&watcher::Event::Apply(going));
    h.changed();
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_B), None).await.status,
        StatusCode::UNAUTHORIZED
    );
}

/// A token's caller is decided once and kept while no store it is decided from changes; any
/// change decides it again, and a refusal is never kept.
#[tokio::test]
async fn a_caller_is_decided_once_per_change_of_what_decides_it() {
    let h = World::new().build();
    let (state, index) = (&h.state, &h.state.index);
    let first = state.callers.of(index, TOKEN_A).unwrap();
    assert!(state.callers.of(index, TOKEN_A).unwrap().is(&first));
    let b = state.callers.of(index, TOKEN_B).unwrap();
    assert!(!b.is(&first));
    assert_eq!(state.callers.len(), 2);

    h.changed();
    let again = state.callers.of(index, TOKEN_A).unwrap();
    assert!(!again.is(&first), "decided again after a change");
    assert_eq!(again.instance_uid(), first.instance_uid());
    assert_eq!(state.callers.len(), 1, "the older decisions are dropped");

    assert!(state.callers.of(index, "not-a-token").is_err());
    assert_eq!(state.callers.len(), 1, "a refusal is not kept");
}

#[tokio::test]
async fn enabling_trusting_and_turning_plugins_off_count_at_once() {
    // The store's view counts at once: an edit that enables it counts once trusted, then
    // plugins are turned off globally.
    let mut h = World::new().trusting(false).build();
    h.writers
        .projects
        .apply_watcher_event(&watcher::Event::Apply(project(true)));
    h.changed();
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_A), None).await.status,
        StatusCode::CONFLICT
    );
    h.writers
        .project_trusts
        .apply_watcher_event(&watcher::Event::Apply(trust(true)));
    h.changed();
    assert_eq!(
        h.call("GET", "/channel", Some(TOKEN_A), None).await.status,
        StatusCode::OK
    );
    h.writers
        .host
        .apply_watcher_event(&watcher::Event::Apply(host(false)));
    h.changed();
    let a = h.call("GET", "/channel", Some(TOKEN_A), None).await;
    assert_eq!(a.status, StatusCode::CONFLICT);
    assert!(
        a.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("plugins.enabled"),
        "{:?}",
        a.json()
    );
}

#[tokio::test]
async fn the_51st_run_in_24_hours_answers_429() {
    let h = World::new().build();
    let body = || Some(json!({ "agent": "quiz", "prompt": "next question" }));
    for i in 0..50 {
        // Across both chats: the quota is the plugin's.
        let token = if i % 2 == 0 { TOKEN_A } else { TOKEN_B };
        let a = h.call("POST", "/runs", Some(token), body()).await;
        assert_eq!(
            a.status,
            StatusCode::ACCEPTED,
            "run {}: {:?}",
            i + 1,
            a.json()
        );
        h.clock.advance(Duration::from_secs(60));
    }
    let a = h.call("POST", "/runs", Some(TOKEN_A), body()).await;
    assert_eq!(a.status, StatusCode::TOO_MANY_REQUESTS, "{:?}", a.json());
    assert_eq!(a.code(), "daily_runs_exceeded");
    // The first run leaves the window 24 h after it started, 50 minutes ago.
    assert_eq!(a.headers["retry-after"], (24 * 3600 - 50 * 60).to_string());
    assert_eq!(h.writer.runs().len(), 50);

    // Once the first run leaves the window (after Retry-After), one more fits, and only one.
    h.clock
        .advance(Duration::from_secs(24 * 3600 - 50 * 60 - 1));
    assert_eq!(
        h.call("POST", "/runs", Some(TOKEN_A), body()).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
    h.clock.advance(Duration::from_secs(1));
    assert_eq!(
        h.call("POST", "/runs", Some(TOKEN_A), body()).await.status,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        h.call("POST", "/runs", Some(TOKEN_A), body()).await.status,
        StatusCode::TOO_MANY_REQUESTS
    );
}

#[tokio::test]
async fn runs_the_store_holds_count_and_daily_runs_comes_from_the_host_config() {
    let mut w = World::new();
    w.host.spec.plugins.daily_runs = 3;
    let t0: jiff::Timestamp = T0.parse().unwrap();
    w.runs
        .push(run("old", "b", t0 - Duration::from_secs(25 * 3600)));
    w.runs
        .push(run("r1", "b", t0 - Duration::from_secs(23 * 3600)));
    let mut other = run("r-other", "b", t0);
    other.spec.plugin = "other".into();
    w.runs.push(other);
    let h = w.build();
    let body = || Some(json!({ "agent": "quiz", "prompt": "p" }));
    assert_eq!(
        h.call("POST", "/runs", Some(TOKEN_A), body()).await.status,
        StatusCode::ACCEPTED
    );
    assert_eq!(
        h.call("POST", "/runs", Some(TOKEN_A), body()).await.status,
        StatusCode::ACCEPTED
    );
    let a = h.call("POST", "/runs", Some(TOKEN_A), body()).await;
    assert_eq!(a.status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(a.headers["retry-after"], "3600");
}

#[tokio::test]
async fn a_run_is_an_agent_run_in_the_hidden_thread() {
    let h = World::new().build();
    let a = h
        .call(
            "POST",
            "/runs",
            Some(TOKEN_A),
            Some(json!({ "agent": "quiz", "prompt": "Ask me three things" })),
        )
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED);
    let body = a.json();
    let id = body["id"].as_str().unwrap().to_string();
    assert!(id.starts_with("cogtest-"));
    assert_eq!(body["status"], "queued");
    assert_eq!(a.headers["location"], format!("/api/plugin/v1/runs/{id}"));
    let runs = h.writer.runs();
    let run = &runs[0];
    assert_eq!(run.namespace().as_deref(), Some(NS));
    assert_eq!(run.spec.plugin, "cogtest");
    assert_eq!(run.spec.channel, "a");
    assert_eq!(run.spec.thread, "plugin:cogtest");
    assert_eq!(run.spec.agent, "quiz");
    assert!(run.spec.read_only);
    assert_eq!(run.spec.tools, ["plugin_ask", "plugin_score"]);
    assert_eq!(run.spec.prompt, "Ask me three things");
    assert_eq!(run.labels()["app.kubernetes.io/managed-by"], "loop-plugins");
    assert_eq!(run.labels()["plugins.loop.dev/instance"], "cogtest-a");
    assert_eq!(run.owner_references()[0].kind, "Channel");

    // Read back before the watch brings it.
    let a = h
        .call("GET", &format!("/runs/{id}"), Some(TOKEN_A), None)
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.json()["created"], T0);
    assert_eq!(
        h.call("GET", &format!("/runs/{id}"), Some(TOKEN_B), None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    let w = h
        .call(
            "POST",
            "/runs",
            Some(TOKEN_A),
            Some(json!({ "agent": "fixer", "prompt": "x" })),
        )
        .await;
    assert_eq!(h.writer.runs().len(), 2, "{:?}", w.json());
    assert!(!h.writer.runs()[1].spec.read_only);
}

#[tokio::test]
async fn switches_are_set_and_reset_per_chat() {
    let h = World::new().build();
    let ok_title = "é".repeat(200);
    let a = h
        .call(
            "PUT",
            "/composer/switches/sync",
            Some(TOKEN_A),
            Some(json!({ "on": true, "title": ok_title, "busy": true })),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK, "{:?}", a.json());
    assert_eq!(
        a.json(),
        json!({ "id": "sync", "on": true, "title": ok_title, "error": false, "busy": true })
    );
    let status = h.status.status(&key("a"));
    assert_eq!(
        status.switches,
        vec![SwitchState {
            id: "sync".into(),
            on: true,
            title: Some(ok_title.clone()),
            error: false,
            busy: true
        }]
    );

    // A second switch keeps the first.
    let a = h
        .call(
            "PUT",
            "/composer/switches/quiz",
            Some(TOKEN_A),
            Some(json!({ "on": false, "error": true })),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    let status = h.status.status(&key("a"));
    assert_eq!(
        status
            .switches
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>(),
        ["sync", "quiz"]
    );

    let a = h
        .call("DELETE", "/composer/switches/sync", Some(TOKEN_A), None)
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        a.json(),
        json!({ "id": "sync", "on": false, "title": "Sync is off", "error": false, "busy": false })
    );
    let status = h.status.status(&key("a"));
    assert_eq!(
        status
            .switches
            .iter()
            .map(|s| s.id.as_str())
            .collect::<Vec<_>>(),
        ["quiz"]
    );
}

#[tokio::test]
async fn live_control_reaches_the_session_and_hold_is_recorded() {
    let h = World::new().build();
    let body = json!({ "subtype": "set_permission_mode", "request": { "mode": "plan" } });
    h.live
        .responses
        .lock()
        .unwrap()
        .insert("set_permission_mode".into(), json!({ "ok": true }));
    let a = h
        .call("POST", "/channel/live/control", Some(TOKEN_A), Some(body))
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        a.json(),
        json!({ "subtype": "set_permission_mode", "response": { "ok": true } })
    );
    let (chat, _, request) = h.live.requests.lock().unwrap().last().cloned().unwrap();
    assert_eq!((chat.namespace.as_str(), chat.channel.as_str()), (NS, "a"));
    assert_eq!(request, json!({ "mode": "plan" }));

    let a = h
        .call(
            "PUT",
            "/channel/live/hold",
            Some(TOKEN_A),
            Some(json!({ "hold": true })),
        )
        .await;
    assert_eq!(a.json(), json!({ "hold": true }));
    assert!(h.status.status(&key("a")).live_hold);
    let a = h
        .call(
            "PUT",
            "/channel/live/hold",
            Some(TOKEN_A),
            Some(json!({ "hold": false })),
        )
        .await;
    assert_eq!(a.json(), json!({ "hold": false }));
    assert!(!h.status.status(&key("a")).live_hold);
}

#[tokio::test]
async fn cards_and_notifications_land_in_the_chats_inbox() {
    let h = World::new().build();
    let a = h
        .call(
            "POST",
            "/cards",
            Some(TOKEN_A),
            Some(json!({ "card": "score", "title": "Quiz done", "data": { "score": 3 } })),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED, "{:?}", a.json());
    let card = a.json();
    let id = card["id"].as_str().unwrap();
    assert!(id.starts_with("card-"));
    assert_eq!(card["created"], T0);
    assert_eq!(a.headers["location"], format!("/api/plugin/v1/cards/{id}"));
    let (name, data) = h.writer.maps().pop().unwrap();
    assert_eq!(name, "cogtest-a-inbox");
    let stored: Value = serde_json::from_str(data[id].as_ref().unwrap()).unwrap();
    assert_eq!(stored, card);
    // Read back, only by chat A.
    let a = h
        .call("GET", &format!("/cards/{id}"), Some(TOKEN_A), None)
        .await;
    assert_eq!(a.json(), card);
    assert_eq!(
        h.call("GET", &format!("/cards/{id}"), Some(TOKEN_B), None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    let a = h
        .call(
            "POST",
            "/notifications",
            Some(TOKEN_A),
            Some(json!({ "title": "Synced", "level": "success" })),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED);
    assert_eq!(a.json()["kind"], "notification");
    assert_eq!(a.json()["level"], "success");
    // A notification is not a card.
    let nid = a.json()["id"].as_str().unwrap().to_string();
    assert_eq!(
        h.call("GET", &format!("/cards/{nid}"), Some(TOKEN_A), None)
            .await
            .status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn a_full_inbox_drops_its_oldest_entry() {
    let mut w = World::new();
    let mut map = inbox::template(NS, "cogtest-a", PLUGIN, PROJECT, "a", None);
    for i in 0..inbox::MAX_ENTRIES {
        let e = json!({ "id": format!("note-{i:03}"), "kind": "notification", "title": "t",
                        "created": format!("2026-01-01T00:{:02}:{:02}Z", i / 60, i % 60) });
        map.data
            .as_mut()
            .unwrap()
            .insert(format!("note-{i:03}"), e.to_string());
    }
    map.metadata.resource_version = Some("1".into());
    w.maps.push(map);
    let h = w.build();
    let a = h
        .call(
            "POST",
            "/notifications",
            Some(TOKEN_A),
            Some(json!({ "title": "new" })),
        )
        .await;
    assert_eq!(a.status, StatusCode::CREATED);
    let (_, data) = h.writer.maps().pop().unwrap();
    assert_eq!(data.len(), 2);
    assert_eq!(data["note-000"], None);
}

#[tokio::test]
async fn memory_is_kept_per_plugin_and_project() {
    let h = World::new().build();
    let value = json!({ "score": 3, "topics": ["rust"] });
    let a = h
        .call(
            "PUT",
            "/memory/last-quiz",
            Some(TOKEN_A),
            Some(json!({ "value": value })),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.json(), json!({ "key": "last-quiz", "value": value }));
    let (name, data) = h.writer.maps().pop().unwrap();
    assert_eq!(name, "memory-cogtest-proj");
    assert_eq!(
        data["last-quiz"].as_deref(),
        Some(value.to_string().as_str())
    );
    // The project's other chat reads it too.
    let a = h
        .call("GET", "/memory/last-quiz", Some(TOKEN_B), None)
        .await;
    assert_eq!(a.json(), json!({ "key": "last-quiz", "value": value }));
    // null is a value.
    let a = h
        .call(
            "PUT",
            "/memory/gone",
            Some(TOKEN_A),
            Some(json!({ "value": null })),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(
        h.call("GET", "/memory/gone", Some(TOKEN_A), None)
            .await
            .json()["value"],
        Value::Null
    );
}

/// Waits (a little) for the background activity write of accepted work.
async fn activity_of(h: &Harness, chat: &str) -> Option<String> {
    for _ in 0..50 {
        if let Some(at) = h.status.status(&key(chat)).last_activity {
            return Some(at);
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    None
}

#[tokio::test]
async fn only_accepted_work_keeps_the_container_up() {
    // Polling (reads) and refused calls record no activity: before, every call that got past
    // the token (a 403, a 404, GET /channel) refreshed lastActivity, so a plugin polling its
    // own API never went idle.
    let h = World::new()
        .approve(&[Capability::UiComposerSwitch])
        .build();
    let refused = [
        ("GET", "/channel", Some(TOKEN_A), None, StatusCode::OK),
        (
            "GET",
            "/runs/nope",
            Some(TOKEN_A),
            None,
            StatusCode::FORBIDDEN,
        ),
        (
            "GET",
            "/memory/k",
            Some(TOKEN_A),
            None,
            StatusCode::FORBIDDEN,
        ),
        (
            "PUT",
            "/composer/switches/nope",
            Some(TOKEN_A),
            Some(json!({ "on": true })),
            StatusCode::NOT_FOUND,
        ),
        (
            "PUT",
            "/composer/switches/sync",
            Some("wrong"),
            Some(json!({ "on": true })),
            StatusCode::UNAUTHORIZED,
        ),
        (
            "PUT",
            "/composer/switches/sync",
            Some(TOKEN_A),
            Some(json!({ "on": "yes" })),
            StatusCode::BAD_REQUEST,
        ),
    ];
    for (method, path, token, body, want) in refused {
        let a = h.call(method, path, token, body).await;
        assert_eq!(a.status, want, "{method} {path}: {:?}", a.bytes);
    }
    assert_eq!(
        activity_of(&h, "a").await,
        None,
        "{:?}",
        h.status.of("last_activity")
    );
    // Accepted work does.
    let a = h
        .call(
            "PUT",
            "/composer/switches/sync",
            Some(TOKEN_A),
            Some(json!({ "on": true })),
        )
        .await;
    assert_eq!(a.status, StatusCode::OK);
    assert!(activity_of(&h, "a").await.is_some());
    assert_eq!(activity_of(&h, "b").await, None);
}

#[tokio::test]
async fn a_write_that_fails_is_a_503_and_takes_nothing_from_the_quota() {
    let h = World::new().build();
    // A write that fails is a 503, never a panic.
    h.api_down(true);
    let a = h
        .call(
            "POST",
            "/runs",
            Some(TOKEN_A),
            Some(json!({ "agent": "quiz", "prompt": "p" })),
        )
        .await;
    assert_eq!(
        (a.status, a.code().as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, "unavailable")
    );
    // ...and a run that was not made does not count against the quota.
    h.api_down(false);
    let a = h
        .call(
            "POST",
            "/runs",
            Some(TOKEN_A),
            Some(json!({ "agent": "quiz", "prompt": "p" })),
        )
        .await;
    assert_eq!(a.status, StatusCode::ACCEPTED);
}

#[tokio::test]
async fn requests_are_counted_by_route_template_and_status() {
    let h = World::new().build();
    h.call("GET", "/runs/abc", Some(TOKEN_A), None).await;
    h.call("GET", "/runs/def", Some(TOKEN_A), None).await;
    h.call("GET", "/nope", Some(TOKEN_A), None).await;
    let mut registry = prometheus_client::registry::Registry::default();
    registry.register("requests", "", h.requests.requests.clone());
    let text = runtime::metrics::encode(&registry);
    assert!(
        text.contains(
            r#"requests_total{route="/api/plugin/v1/runs/{run_id}",method="GET",status="404"} 2"#
        ),
        "{text}"
    );
    assert!(text.contains(r#"route="unmatched""#), "{text}");
}

#[tokio::test]
async fn a_ui_command_reaches_the_app_and_answers_each_step() {
    let h = World::new().build();
    let body = json!({ "steps": [
        { "type": "select_chat" },
        { "type": "open_panel", "panel": "history" },
        { "type": "compose", "text": "/quiz rust" },
    ], "timeout_seconds": 5 });
    *h.app.answer.lock().unwrap() = Some(
        serde_json::from_value(json!({ "steps": [
            { "status": "ran" },
            { "status": "ran" },
            { "status": "unsupported", "error": "this app has no composer" },
        ]}))
        .unwrap(),
    );
    let a = h
        .call("POST", "/ui/commands", Some(TOKEN_A), Some(body))
        .await;
    assert_eq!(a.status, StatusCode::OK, "{:?}", a.json());
    let answer = a.json();
    assert_eq!(answer["ran"], json!(false));
    assert_eq!(
        answer["steps"],
        json!([
            { "type": "select_chat", "status": "ran" },
            { "type": "open_panel", "status": "ran" },
            { "type": "compose", "status": "unsupported", "error": "this app has no composer" },
        ])
    );
    let seen = h.app.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        (seen[0].chat.as_str(), seen[0].plugin.as_str()),
        ("a", PLUGIN)
    );
    assert_eq!(seen[0].id, answer["id"].as_str().unwrap());
}

#[tokio::test]
async fn a_ui_command_nobody_answers_times_out_and_a_bad_one_names_its_step() {
    let h = World::new().build();
    h.app
        .silent
        .store(true, std::sync::atomic::Ordering::SeqCst);
    let started = std::time::Instant::now();
    let a = h
        .call(
            "POST",
            "/ui/commands",
            Some(TOKEN_A),
            Some(json!({ "steps": [{ "type": "open_drawer" }], "timeout_seconds": 1 })),
        )
        .await;
    assert_eq!(a.status, StatusCode::GATEWAY_TIMEOUT, "{:?}", a.json());
    assert_eq!(a.json()["error"]["code"], "timeout");
    assert!(started.elapsed() >= Duration::from_secs(1));
    // The command lapsed and is gone: the app's stream would not send it again.
    let ui = h.state.ui_commands.as_ref().unwrap();
    assert!(ui.pending(NS, "a", jiff::Timestamp::now()).is_empty());

    for (step, field, status) in [
        (
            json!({ "type": "open_panel", "panel": "nope" }),
            "steps[0].panel",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({ "type": "open_file", "path": "../etc/passwd" }),
            "steps[0].path",
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            json!({ "type": "notify", "message": "" }),
            "steps[0].message",
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let a = h
            .call(
                "POST",
                "/ui/commands",
                Some(TOKEN_A),
                Some(json!({ "steps": [step] })),
            )
            .await;
        assert_eq!(a.status, status, "{field}");
        let message = a.json()["error"]["message"].as_str().unwrap().to_string();
        assert!(message.starts_with(field), "{message}");
    }
    let a = World::new()
        .approve(&[Capability::UiCommand])
        .build()
        .call(
            "POST",
            "/ui/commands",
            Some(TOKEN_A),
            Some(json!({ "steps": [{ "type": "open_panel", "panel": "main" }] })),
        )
        .await;
    assert_eq!(
        a.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "a panel needs ui.panel too"
    );
    assert!(
        a.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("ui.panel")
    );
}
