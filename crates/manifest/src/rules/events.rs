//! events, events_start and thread_events.

use serde_json::Value;

use super::Ctx;
use super::read::{field, ids_of, optional_object, string_list};
use crate::capability::Capability;
use crate::model::LIVE_SYSTEM_EVENT;
use crate::settings_schema::setting_type;

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
    let events = string_list(ctx.doc, "events", &root, &mut ctx.problems);
    if !events.is_empty() {
        ctx.require(
            Capability::EventsSubscribe,
            &root.key("events"),
            "events need",
        );
    }
    for (at, event) in &events {
        if *event == LIVE_SYSTEM_EVENT {
            ctx.require(Capability::LiveControl, at, "the live.system event needs");
        }
    }
    events_start(ctx);
    match field(ctx.doc, "thread_events") {
        None => {}
        Some(Value::String(s)) if matches!(s.as_str(), "thread" | "channel" | "both") => {}
        Some(other) => ctx.problems.add(
            &root.key("thread_events"),
            format!("must be thread, channel or both, not {other}"),
        ),
    }
}

fn events_start(ctx: &mut Ctx) {
    let root = ctx.root();
    let doc = ctx.doc;
    let p = &mut ctx.problems;
    let Some((at, start)) = optional_object(doc, "events_start", &root, p) else {
        return;
    };
    let settings = doc.get("settings").and_then(Value::as_object);
    for (s_at, name) in string_list(start, "settings", &at, p) {
        match settings.and_then(|s| s.get(name)).map(setting_type) {
            None => p.add(
                &s_at,
                format!("\"{name}\" is not one of the manifest's settings"),
            ),
            Some(Some("boolean")) => {}
            Some(t) => p.add(
                &s_at,
                format!(
                    "\"{name}\" is a setting of type {}; events_start names boolean settings",
                    t.unwrap_or("unknown")
                ),
            ),
        }
    }
    let ui = doc.get("ui").and_then(Value::as_object);
    let switches = ui
        .map(|ui| ids_of(ui, "composer_switches", "id"))
        .unwrap_or_default();
    for (s_at, id) in string_list(start, "switches", &at, p) {
        if !switches.contains(&id) {
            p.add(
                &s_at,
                format!("\"{id}\" is not one of the manifest's ui.composer_switches"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::fixtures::M;

    #[test]
    fn events_need_events_subscribe() {
        let m = M::new().set("events", json!(["message.created", "agent.status"]));
        m.assert_problem("events", "\"events.subscribe\" in capabilities");
        m.caps(&["events.subscribe"]).assert_valid();
        M::new().set("events", json!([])).assert_valid();
        M::new()
            .caps(&["events.subscribe"])
            .set("events", json!(["message.created", 4]))
            .assert_problem("events[1]", "must be a string");
    }

    #[test]
    fn the_references_events_are_taken_quality_scanned_among_them() {
        // The reference's example subscribes to message.created, agent.status and
        // quality.scanned (the host sends the last when the app posts a chat's scan).
        let events = json!(["message.created", "agent.status", "quality.scanned"]);
        M::new()
            .caps(&["events.subscribe"])
            .set("events", events.clone())
            .assert_valid();
        M::new()
            .set("events", events)
            .assert_problem("events", "\"events.subscribe\" in capabilities");
    }

    #[test]
    fn live_system_needs_live_control() {
        let m = M::new().set("events", json!(["live.status", "live.system"]));
        m.clone()
            .caps(&["events.subscribe"])
            .assert_problem("events[1]", "needs \"live.control\"");
        m.clone()
            .caps(&["events.subscribe"])
            .assert_no_problem_at("events[0]");
        m.caps(&["events.subscribe", "live.control"]).assert_valid();
    }

    fn with_start(start: serde_json::Value) -> M {
        M::new()
            .caps(&["events.subscribe", "ui.composer_switch"])
            .set("events", json!(["message.created"]))
            .set(
                "settings",
                json!({ "sync_all": { "type": "boolean" }, "count": { "type": "integer" } }),
            )
            .set(
                "ui",
                json!({ "composer_switches": [{ "id": "sync", "label": "Sync", "icon": "ui/sync.svg" }] }),
            )
            .set("events_start", start)
    }

    #[test]
    fn events_start_names_boolean_settings_and_switches() {
        with_start(json!({ "settings": ["sync_all"], "switches": ["sync"] })).assert_valid();
        with_start(json!({})).assert_valid();
        with_start(json!({ "settings": ["count"] }))
            .assert_problem("events_start.settings[0]", "type integer");
        with_start(json!({ "settings": ["missing"] })).assert_problem(
            "events_start.settings[0]",
            "not one of the manifest's settings",
        );
        with_start(json!({ "switches": ["sync", "mode"] })).assert_problem(
            "events_start.switches[1]",
            "not one of the manifest's ui.composer_switches",
        );
        with_start(json!(["sync_all"])).assert_problem("events_start", "must be an object");
    }

    #[test]
    fn thread_events_is_thread_channel_or_both() {
        for ok in ["thread", "channel", "both"] {
            M::new().set("thread_events", json!(ok)).assert_valid();
        }
        M::new()
            .set("thread_events", json!("all"))
            .assert_problem("thread_events", "thread, channel or both");
        M::new()
            .set("thread_events", json!(true))
            .assert_problem("thread_events", "thread, channel or both");
    }
}
