//! The card drawer through the router: a chat's cards from the inbox ConfigMaps in the index,
//! newest first with their links, marking them read (the marks written, the count answered),
//! the namespace's unread counts, and a note in place of a card its plugin can't show.

use axum::http::StatusCode;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::runtime::watcher;
use serde_json::{Value, json};

use super::fixtures::*;
use crate::cards::read_marks::READ_PREFIX;
use crate::ui::link::{self, Page};

fn two_cards() -> ConfigMap {
    inbox(
        "general",
        &[
            ("card-1", "2026-12-05T09:00:00.100Z"),
            ("card-2", "2026-12-05T09:00:00.200Z"),
        ],
    )
}

fn listed(answer: &Answer) -> Vec<(String, bool)> {
    answer.json["cards"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| (c["id"].as_str().unwrap().to_string(), c["unread"] == true))
        .collect()
}

fn owned(list: &[(&str, bool)]) -> Vec<(String, bool)> {
    list.iter().map(|(id, u)| (id.to_string(), *u)).collect()
}

#[tokio::test]
async fn a_chats_cards_list_newest_first_with_links_and_marking_one_read_leaves_one_unread() {
    let mut w = World::new().await;
    apply(&mut w.writers.config_maps, two_cards());
    // Another chat's card is not this chat's.
    apply(
        &mut w.writers.config_maps,
        inbox("general-t1", &[("card-9", "2026-12-05T10:00:00Z")]),
    );

    let a = w
        .send("GET", "/channels/general/cards", Some(TOKEN), "")
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(listed(&a), owned(&[("card-2", true), ("card-1", true)]));
    assert_eq!(a.json["unread"], 2);
    let newest = &a.json["cards"][0];
    assert_eq!(
        (
            &newest["plugin"],
            &newest["card"],
            &newest["title"],
            &newest["height"],
            &newest["data"],
        ),
        (
            &json!("echo"),
            &json!("score"),
            &json!("Score card-2"),
            &json!(160),
            &json!({ "score": 3 })
        )
    );
    let (token, page) = newest["url"]
        .as_str()
        .and_then(|u| u.strip_prefix("/ui/v1/"))
        .and_then(|rest| rest.split_once('/'))
        .unwrap();
    assert_eq!(page, "score.html");
    let keys = w.state.links.borrow().clone().unwrap();
    let signed = link::verify(&keys, token, jiff::Timestamp::now().as_second()).unwrap();
    assert_eq!(
        (signed.plugin.as_str(), signed.chat, signed.page),
        ("echo", format!("{NS}/general"), Page::Card("card-2".into()))
    );

    // Marking one read writes its mark alone and answers the count left.
    let a = w
        .send(
            "POST",
            "/channels/general/cards/read",
            Some(TOKEN),
            r#"{"ids": ["card-1", "card-elsewhere"]}"#,
        )
        .await;
    assert_eq!(
        (a.status, &a.json),
        (StatusCode::OK, &json!({ "unread": 1 }))
    );
    let written = w.marks.written.lock().unwrap().clone();
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].0, "echo-general-inbox");
    let keys: Vec<(&String, bool)> = written[0].1.iter().map(|(k, v)| (k, v.is_some())).collect();
    assert_eq!(keys, [(&format!("{READ_PREFIX}card-1"), true)]);

    // Once the watch brings the mark back, the drawer and the counts show it.
    let mut marked = two_cards();
    marked.metadata.annotations = Some(
        [(
            format!("{READ_PREFIX}card-1"),
            "2026-12-05T09:01:00Z".into(),
        )]
        .into(),
    );
    apply(&mut w.writers.config_maps, marked);
    let a = w
        .send("GET", "/channels/general/cards", Some(TOKEN), "")
        .await;
    assert_eq!(listed(&a), owned(&[("card-2", true), ("card-1", false)]));
    assert_eq!(a.json["unread"], 1);
    let a = w.send("GET", "/cards/unread", Some(TOKEN), "").await;
    assert_eq!(
        (a.status, &a.json),
        (
            StatusCode::OK,
            &json!({ "chats": { "general": 1, "general-t1": 1 } })
        )
    );

    // Marking it again writes nothing; all: true marks the rest.
    let a = w
        .send(
            "POST",
            "/channels/general/cards/read",
            Some(TOKEN),
            r#"{"ids": ["card-1"]}"#,
        )
        .await;
    assert_eq!(a.json, json!({ "unread": 1 }));
    assert_eq!(w.marks.written.lock().unwrap().len(), 1);
    let a = w
        .send(
            "POST",
            "/channels/general/cards/read",
            Some(TOKEN),
            r#"{"all": true}"#,
        )
        .await;
    assert_eq!(a.json, json!({ "unread": 0 }));
}

/// The drawer's one card's note and reason.
async fn note(w: &World) -> (Value, Value) {
    let a = w
        .send("GET", "/channels/general/cards", Some(TOKEN), "")
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    let card = &a.json["cards"][0];
    (card["note"].clone(), card["reason"].clone())
}

#[tokio::test]
async fn a_card_its_plugin_can_no_longer_show_lists_as_a_note() {
    let mut w = World::new().await;
    apply(
        &mut w.writers.config_maps,
        inbox("general", &[("card-1", "2026-12-05T09:00:00Z")]),
    );
    assert_eq!(note(&w).await, (Value::Null, Value::Null));

    let plugin = w.state.index().plugin("echo").unwrap();
    let mut unapproved = (*plugin).clone();
    unapproved
        .spec
        .approved_capabilities
        .retain(|c| c != "ui.notification.card");
    apply(&mut w.writers.plugins, unapproved);
    assert_eq!(
        note(&w).await,
        (
            json!("plugin echo is no longer approved for ui.notification.card"),
            json!("not_approved")
        )
    );

    w.writers
        .plugins
        .apply_watcher_event(&watcher::Event::Delete((*plugin).clone()));
    assert_eq!(
        note(&w).await,
        (json!("plugin echo was removed"), json!("removed"))
    );
}

#[tokio::test]
async fn refusals_of_the_drawers_routes() {
    let w = World::new().await;
    let a = w
        .send("GET", "/channels/nosuch/cards", Some(TOKEN), "")
        .await;
    assert_eq!(
        (a.status, a.code()),
        (StatusCode::NOT_FOUND, "channel_not_found")
    );
    for body in [
        r#"{}"#,
        r#"{"ids": [], "all": true}"#,
        r#"{"ids": "card-1"}"#,
        "[",
    ] {
        let a = w
            .send("POST", "/channels/general/cards/read", Some(TOKEN), body)
            .await;
        assert_eq!(
            (a.status, a.code()),
            (StatusCode::BAD_REQUEST, "invalid_body"),
            "{body}"
        );
    }
    // A chat with no cards has an empty drawer; a namespace with none, no counts.
    let a = w
        .send("GET", "/channels/general/cards", Some(TOKEN), "")
        .await;
    assert_eq!(a.json, json!({ "cards": [], "unread": 0 }));
    let a = w.send("GET", "/cards/unread", Some(TOKEN), "").await;
    assert_eq!(a.json, json!({ "chats": {} }));
}

/// A card and a notification in one inbox: the notification lists under
/// `/notifications` (not among the cards), is marked read apart from the card, and both count
/// in the sidebar's unread.
#[tokio::test]
async fn notifications_list_and_mark_read_apart_from_the_cards() {
    let mut w = World::new().await;
    let mut map = two_cards();
    let note = crate::cards::inbox::Entry {
        id: "note-1".into(),
        kind: crate::cards::inbox::Kind::Notification,
        card: None,
        title: "Sync failed".into(),
        data: None,
        body: Some("github.com answered 503".into()),
        level: Some(crate::cards::inbox::Level::Error),
        created: "2026-12-05T09:00:00.300Z".into(),
    };
    map.data
        .get_or_insert_default()
        .insert("note-1".into(), serde_json::to_string(&note).unwrap());
    apply(&mut w.writers.config_maps, map.clone());

    let a = w
        .send("GET", "/channels/general/notifications", Some(TOKEN), "")
        .await;
    assert_eq!(a.status, StatusCode::OK, "{}", a.json);
    assert_eq!(
        a.json,
        json!({
            "notifications": [{
                "id": "note-1", "from": "plugin", "plugin": "echo", "title": "Sync failed",
                "body": "github.com answered 503", "level": "error",
                "created": "2026-12-05T09:00:00.300Z", "unread": true,
            }],
            "unread": 1,
        })
    );
    let cards = w
        .send("GET", "/channels/general/cards", Some(TOKEN), "")
        .await;
    assert_eq!(listed(&cards), owned(&[("card-2", true), ("card-1", true)]));
    let a = w.send("GET", "/cards/unread", Some(TOKEN), "").await;
    assert_eq!(a.json, json!({ "chats": { "general": 3 } }));

    // Marking every notification read marks no card.
    let a = w
        .send(
            "POST",
            "/channels/general/notifications/read",
            Some(TOKEN),
            r#"{"all": true}"#,
        )
        .await;
    assert_eq!(
        (a.status, &a.json),
        (StatusCode::OK, &json!({ "unread": 0 }))
    );
    let written = w.marks.written.lock().unwrap().clone();
    let keys: Vec<&String> = written[0].1.keys().collect();
    assert_eq!(keys, [&format!("{READ_PREFIX}note-1")]);

    // A caller without channels/notifications reads nothing.
    let a = w
        .send("GET", "/channels/general/notifications", Some(LIMITED), "")
        .await;
    assert_eq!(a.status, StatusCode::FORBIDDEN, "{}", a.json);
}
