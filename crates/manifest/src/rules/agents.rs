//! agents: unique ids, tools the manifest has, and the capability for how they run.

use super::Ctx;
use super::read::{Unique, ids_of, optional_bool, optional_objects, required_str, string_list};
use crate::capability::Capability;

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
    let tools = ids_of(ctx.doc, "tools", "name");
    let mut ids = Unique::new("id");
    for (at, agent) in optional_objects(ctx.doc, "agents", &root, &mut ctx.problems) {
        if let Some(id) = required_str(agent, "id", &at, &mut ctx.problems) {
            ids.check(id, &at, &mut ctx.problems);
        }
        let read_only = optional_bool(agent, "read_only", &at, &mut ctx.problems);
        for (tool_at, tool) in string_list(agent, "tools", &at, &mut ctx.problems) {
            if !tools.contains(&tool) {
                ctx.problems.add(
                    &tool_at,
                    format!("\"{tool}\" is not one of the manifest's tools"),
                );
            }
        }
        if read_only {
            ctx.require(Capability::AgentReadonly, &at, "a read-only agent needs");
        } else {
            ctx.require(
                Capability::AgentWrite,
                &at,
                "an agent without \"read_only\": true runs with writes and needs",
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::fixtures::M;

    fn with_tool() -> M {
        M::new().set(
            "tools",
            json!([{ "name": "echo", "input_schema": { "type": "object" } }]),
        )
    }

    #[test]
    fn agents_with_known_tools_pass() {
        with_tool()
            .caps(&["agent.readonly", "agent.write"])
            .set(
                "agents",
                json!([
                    { "id": "say", "read_only": true, "tools": ["echo"] },
                    { "id": "fix", "tools": ["echo"] }
                ]),
            )
            .assert_valid();
    }

    #[test]
    fn agent_tools_must_exist() {
        with_tool()
            .caps(&["agent.readonly"])
            .set(
                "agents",
                json!([{ "id": "say", "read_only": true, "tools": ["echo", "shout"] }]),
            )
            .assert_problem(
                "agents[0].tools[1]",
                "\"shout\" is not one of the manifest's tools",
            );
    }

    #[test]
    fn agent_ids_are_unique() {
        with_tool()
            .caps(&["agent.readonly"])
            .set(
                "agents",
                json!([{ "id": "say", "read_only": true }, { "id": "say", "read_only": true }]),
            )
            .assert_problem("agents[1].id", "already the id of agents[0]");
        M::new()
            .caps(&["agent.readonly"])
            .set("agents", json!([{ "read_only": true }]))
            .assert_problem("agents[0].id", "is required");
    }

    #[test]
    fn agents_need_their_capability() {
        let m = with_tool().set("agents", json!([{ "id": "say", "read_only": true }]));
        m.assert_problem("agents[0]", "needs \"agent.readonly\"");
        m.clone().caps(&["agent.readonly"]).assert_valid();
        let m = with_tool().set("agents", json!([{ "id": "fix", "read_only": false }]));
        m.clone()
            .caps(&["agent.readonly"])
            .assert_problem("agents[0]", "needs \"agent.write\"");
        m.caps(&["agent.write"]).assert_valid();
        M::new()
            .caps(&["agent.readonly"])
            .set("agents", json!([{ "id": "say", "read_only": "yes" }]))
            .assert_problem("agents[0].read_only", "must be true or false");
    }
}
