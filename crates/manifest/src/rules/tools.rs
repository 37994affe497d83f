//! tools: unique names agents can call, with object schemas for input and output.

use serde_json::Value;

use super::Ctx;
use super::read::{Unique, field, optional_objects, optional_str, required_str};
use crate::error::{JsonPath, Problems};
use crate::json_schema;
use crate::model::MCP_TOOL_PREFIX;

/// MCP tool names are at most 64 characters, and agents see `plugin_<name>`.
const MAX_TOOL_NAME: usize = 64 - MCP_TOOL_PREFIX.len();

pub(super) fn check(ctx: &mut Ctx) {
    let root = ctx.root();
    let p = &mut ctx.problems;
    let mut names = Unique::new("name");
    for (at, tool) in optional_objects(ctx.doc, "tools", &root, p) {
        if let Some(name) = required_str(tool, "name", &at, p) {
            let name_at = at.key("name");
            if !valid_tool_name(name) {
                p.add(
                    &name_at,
                    format!(
                        "\"{name}\" must be 1 to {MAX_TOOL_NAME} letters, digits, _ or -: agents call it as the MCP tool {MCP_TOOL_PREFIX}{name}"
                    ),
                );
            }
            names.check(name, &at, p);
        }
        optional_str(tool, "description", &at, p);
        match field(tool, "input_schema") {
            Some(schema) => check_object_schema(schema, &at.key("input_schema"), p),
            None => p.add(
                &at.key("input_schema"),
                "is required: a JSON schema of type object, such as {\"type\": \"object\"}",
            ),
        }
        if let Some(schema) = field(tool, "output_schema") {
            check_object_schema(schema, &at.key("output_schema"), p);
        }
    }
}

fn valid_tool_name(name: &str) -> bool {
    name.len() <= MAX_TOOL_NAME
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A JSON schema of type object that compiles.
fn check_object_schema(schema: &Value, at: &JsonPath, p: &mut Problems) {
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        p.add(
            at,
            "must be a JSON schema of type object: an object with \"type\": \"object\"",
        );
        return;
    }
    if let Err(e) = json_schema::compile(schema) {
        p.add(at, e.problem());
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use crate::fixtures::M;

    fn tool(name: &str) -> Value {
        json!({ "name": name, "description": "d", "input_schema": { "type": "object" } })
    }

    #[test]
    fn tools_with_object_schemas_pass() {
        M::new()
            .set(
                "tools",
                json!([
                    tool("echo"),
                    {
                        "name": "score",
                        "input_schema": { "type": "object", "properties": { "answer": { "type": "string" } } },
                        "output_schema": {
                            "type": "object",
                            "properties": { "score": { "type": "integer" } },
                            "required": ["score"]
                        }
                    }
                ]),
            )
            .assert_valid();
    }

    #[test]
    fn tool_names_are_unique_and_mcp_safe() {
        M::new()
            .set("tools", json!([tool("echo"), tool("echo")]))
            .assert_problem("tools[1].name", "\"echo\" is already the name of tools[0]");
        M::new()
            .set("tools", json!([tool("say hi")]))
            .assert_problem("tools[0].name", "letters, digits");
        M::new()
            .set("tools", json!([tool(&"x".repeat(58))]))
            .assert_problem("tools[0].name", "1 to 57");
        M::new()
            .set("tools", json!([{ "input_schema": { "type": "object" } }]))
            .assert_problem("tools[0].name", "is required");
    }

    #[test]
    fn input_schema_is_an_object_schema_that_compiles() {
        M::new()
            .set("tools", json!([{ "name": "t" }]))
            .assert_problem("tools[0].input_schema", "is required");
        M::new()
            .set(
                "tools",
                json!([{ "name": "t", "input_schema": { "type": "string" } }]),
            )
            .assert_problem("tools[0].input_schema", "of type object");
        M::new()
            .set(
                "tools",
                json!([{ "name": "t", "input_schema": { "type": "object", "properties": 3 } }]),
            )
            .assert_problem("tools[0].input_schema", "does not compile");
        M::new()
            .set("tools", json!([tool("a"), { "name": "t", "input_schema": { "type": "object" }, "description": 1 }]))
            .assert_problem("tools[1].description", "must be a string");
    }

    #[test]
    fn output_schema_is_an_object_schema_that_compiles() {
        let mut t = tool("t");
        t["output_schema"] = json!({ "type": "array" });
        M::new()
            .set("tools", json!([t]))
            .assert_problem("tools[0].output_schema", "of type object");
        t["output_schema"] = json!({ "type": "object", "required": "score" });
        M::new()
            .set("tools", json!([t]))
            .assert_problem("tools[0].output_schema", "does not compile");
    }

    #[test]
    fn a_schema_whose_checking_could_loop_or_multiply_is_refused() {
        // Each level refers twice to the next: 2^30 applications to one place of the input.
        let mut defs = serde_json::Map::new();
        for i in 0..30 {
            let next = format!("#/$defs/a{}", i + 1);
            defs.insert(
                format!("a{i}"),
                json!({"anyOf": [{"$ref": next}, {"$ref": next, "type": "object"}]}),
            );
        }
        defs.insert("a30".into(), json!({"type": "string"}));
        let chain =
            json!({"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/a0"}}});
        M::new()
            .set("tools", json!([{ "name": "t", "input_schema": chain }]))
            .assert_problem(
                "tools[0].input_schema",
                "is refused: it can apply more than 1000 subschemas",
            );
        let looping = json!({"type": "object", "$defs": {"a": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}});
        M::new()
            .set("tools", json!([{ "name": "t", "input_schema": looping }]))
            .assert_problem("tools[0].input_schema", "applies itself to the same place");
    }
}
