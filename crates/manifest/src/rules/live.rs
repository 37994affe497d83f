//! live: the control requests and system messages of the chat's live session.

use super::Ctx;
use super::read::{optional_object, string_list};
use crate::capability::Capability;

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
    let Some((at, live)) = optional_object(ctx.doc, "live", &root, &mut ctx.problems) else {
        return;
    };
    ctx.require(Capability::LiveControl, &at, "live needs");
    string_list(live, "control", &at, &mut ctx.problems);
    string_list(live, "messages", &at, &mut ctx.problems);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::fixtures::M;

    #[test]
    fn live_needs_live_control() {
        let m = M::new().set(
            "live",
            json!({ "control": ["some_request"], "messages": ["some_state"] }),
        );
        m.assert_problem("live", "needs \"live.control\"");
        m.caps(&["live.control"]).assert_valid();
    }

    #[test]
    fn live_lists_subtypes() {
        M::new()
            .caps(&["live.control"])
            .set("live", json!({ "control": "some_request" }))
            .assert_problem("live.control", "must be an array");
        M::new()
            .caps(&["live.control"])
            .set("live", json!({ "messages": [""] }))
            .assert_problem("live.messages[0]", "must not be empty");
    }
}
