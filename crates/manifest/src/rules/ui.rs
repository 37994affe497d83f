//! ui: panels, cards and composer switches, their bundle paths and their capabilities.

use super::Ctx;
use super::read::{
    Object, Unique, optional_bool, optional_object, optional_objects, optional_str, required_str,
};
use crate::capability::Capability;
use crate::error::{JsonPath, Problems};

/// At most this many composer switches.
pub(crate) const MAX_SWITCHES: usize = 4;
/// A switch's label, in characters.
pub(crate) const MAX_SWITCH_LABEL: usize = 24;
/// A switch's title (tooltip), in characters.
pub(crate) const MAX_SWITCH_TITLE: usize = 200;

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
    let Some((ui_at, ui)) = optional_object(ctx.doc, "ui", &root, &mut ctx.problems) else {
        return;
    };
    panels(ctx, ui, &ui_at);
    cards(ctx, ui, &ui_at);
    switches(ctx, ui, &ui_at);
}

fn panels(ctx: &mut Ctx, ui: &Object, ui_at: &JsonPath) {
    let items = optional_objects(ui, "panels", ui_at, &mut ctx.problems);
    if !items.is_empty() {
        ctx.require(Capability::UiPanel, &ui_at.key("panels"), "panels need");
    }
    let p = &mut ctx.problems;
    let mut ids = Unique::new("id");
    for (at, panel) in items {
        if let Some(id) = required_str(panel, "id", &at, p) {
            ids.check(id, &at, p);
        }
        required_str(panel, "label", &at, p);
        if let Some(entry) = required_str(panel, "entry", &at, p) {
            check_bundle_path(entry, &at.key("entry"), p);
        }
        optional_bool(panel, "singleton", &at, p);
    }
}

fn cards(ctx: &mut Ctx, ui: &Object, ui_at: &JsonPath) {
    let items = optional_objects(ui, "cards", ui_at, &mut ctx.problems);
    if !items.is_empty() {
        ctx.require(
            Capability::UiNotificationCard,
            &ui_at.key("cards"),
            "cards need",
        );
    }
    let p = &mut ctx.problems;
    let mut ids = Unique::new("id");
    for (at, card) in items {
        if let Some(id) = required_str(card, "id", &at, p) {
            ids.check(id, &at, p);
        }
        if let Some(entry) = required_str(card, "entry", &at, p) {
            check_bundle_path(entry, &at.key("entry"), p);
        }
    }
}

fn switches(ctx: &mut Ctx, ui: &Object, ui_at: &JsonPath) {
    let list_at = ui_at.key("composer_switches");
    let items = optional_objects(ui, "composer_switches", ui_at, &mut ctx.problems);
    if !items.is_empty() {
        ctx.require(
            Capability::UiComposerSwitch,
            &list_at,
            "composer switches need",
        );
    }
    let p = &mut ctx.problems;
    if items.len() > MAX_SWITCHES {
        p.add(
            &list_at,
            format!(
                "declares {} switches; a plugin may have at most {MAX_SWITCHES}",
                items.len()
            ),
        );
    }
    let mut ids = Unique::new("id");
    for (at, switch) in items {
        if let Some(id) = required_str(switch, "id", &at, p) {
            ids.check(id, &at, p);
        }
        if let Some(label) = required_str(switch, "label", &at, p) {
            let n = label.chars().count();
            if n > MAX_SWITCH_LABEL {
                p.add(
                    &at.key("label"),
                    format!("is {n} characters; a switch's label is at most {MAX_SWITCH_LABEL}"),
                );
            }
        }
        if let Some(title) = optional_str(switch, "title", &at, p) {
            let n = title.chars().count();
            if n > MAX_SWITCH_TITLE {
                p.add(
                    &at.key("title"),
                    format!("is {n} characters; a switch's title is at most {MAX_SWITCH_TITLE}"),
                );
            }
        }
        if let Some(icon) = required_str(switch, "icon", &at, p) {
            let icon_at = at.key("icon");
            check_bundle_path(icon, &icon_at, p);
            if !icon.to_ascii_lowercase().ends_with(".svg") {
                p.add(&icon_at, format!("\"{icon}\" must be an .svg file"));
            }
        }
    }
}

/// A file of the plugin's UI bundle: a relative path under `ui/`, without `.` or `..`.
fn check_bundle_path(path: &str, at: &JsonPath, p: &mut Problems) {
    if let Err(why) = bundle_path(path) {
        p.add(
            at,
            format!(
                "\"{path}\" must be a relative path under ui/, such as ui/main/index.html: {why}"
            ),
        );
    }
}

fn bundle_path(path: &str) -> Result<(), &'static str> {
    if path.starts_with('/') {
        return Err("it starts with /");
    }
    if path.contains('\\') {
        return Err("it has a backslash; use /");
    }
    let segments: Vec<&str> = path.split('/').collect();
    if segments.contains(&"..") {
        return Err("it has a .. segment");
    }
    if segments.iter().any(|s| s.is_empty() || *s == ".") {
        return Err("it has an empty or . segment");
    }
    if segments[0] != "ui" || segments.len() < 2 {
        return Err("it is not under ui/");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::bundle_path;
    use crate::fixtures::M;

    #[test]
    fn bundle_paths_stay_under_ui() {
        for ok in ["ui/main/index.html", "ui/score.html", "ui/a/b/c.svg"] {
            assert_eq!(bundle_path(ok), Ok(()), "{ok}");
        }
        for bad in [
            "/ui/main/index.html",
            "ui/../secret",
            "ui/./x.html",
            "ui//x.html",
            "ui/",
            "ui",
            "main/index.html",
            "ui\\x.html",
            "UI/x.html",
        ] {
            assert!(bundle_path(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn panels_pass() {
        M::new()
            .caps(&["ui.panel"])
            .set(
                "ui",
                json!({ "panels": [
                    { "id": "main", "label": "Echo", "entry": "ui/main/index.html", "singleton": true },
                    { "id": "side", "label": "Side", "entry": "ui/side/index.html" }
                ] }),
            )
            .assert_valid();
    }

    #[test]
    fn panels_are_checked() {
        let panel = json!({ "id": "main", "label": "Echo", "entry": "ui/main/index.html" });
        M::new()
            .set("ui", json!({ "panels": [panel] }))
            .assert_problem("ui.panels", "\"ui.panel\" in capabilities");
        M::new()
            .caps(&["ui.panel"])
            .set("ui", json!({ "panels": [panel, panel] }))
            .assert_problem("ui.panels[1].id", "already the id of ui.panels[0]");
        M::new()
            .caps(&["ui.panel"])
            .set(
                "ui",
                json!({ "panels": [{ "id": "m", "label": "M", "entry": "../etc/passwd" }] }),
            )
            .assert_problem("ui.panels[0].entry", "under ui/");
        M::new()
            .caps(&["ui.panel"])
            .set("ui", json!({ "panels": [{ "id": "m", "label": "M", "entry": "/ui/m.html", "singleton": 1 }] }))
            .assert_problem("ui.panels[0].singleton", "true or false");
        M::new()
            .caps(&["ui.panel"])
            .set(
                "ui",
                json!({ "panels": [{ "id": "m", "entry": "ui/m.html" }] }),
            )
            .assert_problem("ui.panels[0].label", "is required");
        M::new().set("ui", json!({ "panels": [] })).assert_valid();
    }

    #[test]
    fn cards_are_checked() {
        let card = json!({ "id": "score", "entry": "ui/score.html" });
        M::new()
            .caps(&["ui.notification.card"])
            .set("ui", json!({ "cards": [card] }))
            .assert_valid();
        M::new()
            .set("ui", json!({ "cards": [card] }))
            .assert_problem("ui.cards", "\"ui.notification.card\" in capabilities");
        M::new()
            .caps(&["ui.notification.card"])
            .set(
                "ui",
                json!({ "cards": [{ "id": "s", "entry": "ui/../x.html" }] }),
            )
            .assert_problem("ui.cards[0].entry", ".. segment");
        M::new()
            .caps(&["ui.notification.card"])
            .set("ui", json!({ "cards": [card, card] }))
            .assert_problem("ui.cards[1].id", "already");
    }

    fn switch(id: &str) -> serde_json::Value {
        json!({ "id": id, "label": "Mode", "icon": "ui/mode.svg", "title": "Mode is off" })
    }

    #[test]
    fn switches_pass() {
        M::new()
            .caps(&["ui.composer_switch"])
            .set("ui", json!({ "composer_switches": [switch("a"), switch("b"), switch("c"), switch("d")] }))
            .assert_valid();
    }

    #[test]
    fn switches_are_checked() {
        M::new()
            .set("ui", json!({ "composer_switches": [switch("a")] }))
            .assert_problem(
                "ui.composer_switches",
                "\"ui.composer_switch\" in capabilities",
            );
        M::new()
            .caps(&["ui.composer_switch"])
            .set(
                "ui",
                json!({ "composer_switches": [switch("a"), switch("b"), switch("c"), switch("d"), switch("e")] }),
            )
            .assert_problem("ui.composer_switches", "at most 4");
        let m = |field: &str, value: serde_json::Value| {
            let mut s = switch("a");
            s[field] = value;
            M::new()
                .caps(&["ui.composer_switch"])
                .set("ui", json!({ "composer_switches": [s] }))
        };
        m("label", json!("x".repeat(24))).assert_valid();
        m("label", json!("x".repeat(25)))
            .assert_problem("ui.composer_switches[0].label", "at most 24");
        m("label", json!("é".repeat(24))).assert_valid();
        m("title", json!("t".repeat(200))).assert_valid();
        m("title", json!("t".repeat(201)))
            .assert_problem("ui.composer_switches[0].title", "at most 200");
        m("icon", json!("ui/mode.png")).assert_problem("ui.composer_switches[0].icon", ".svg");
        m("icon", json!("mode.svg")).assert_problem("ui.composer_switches[0].icon", "under ui/");
        m("icon", json!(null)).assert_problem("ui.composer_switches[0].icon", "is required");
        M::new()
            .caps(&["ui.composer_switch"])
            .set(
                "ui",
                json!({ "composer_switches": [switch("a"), switch("a")] }),
            )
            .assert_problem("ui.composer_switches[1].id", "already");
    }
}
