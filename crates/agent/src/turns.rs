//! Each step of a run, decided purely from the model's reply: a final answer, or tool calls,
//! each checked before anything runs. A call the run cannot make is answered to the model
//! as an error (so it can correct itself), never run:
//!
//! | the call | answer |
//! |---|---|
//! | a tool the run did not offer | `unknown tool`, with the tools it has |
//! | arguments that are not a JSON object | `bad arguments`, with why |
//! | a tool that writes, from a read-only agent | `read-only`: the agent may not change anything |

use serde_json::Value;

use super::chat::{Message, ToolSpec};
use super::run_env::RunEnv;

/// What the run does after a reply.
#[derive(Clone, Debug, PartialEq)]
pub enum Turn {
    /// The model answered: the run ends with this message.
    Final(String),
    /// The model called tools: run the ones it may, answer each.
    Calls(Vec<Checked>),
}

/// A tool call, checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Checked {
    pub id: String,
    pub name: String,
    pub arguments: Value,
    /// Why it is not run, as the model is told.
    pub refusal: Option<String>,
}

/// The system message a run starts with: who the agent is, and what it may do.
pub fn system_prompt(env: &RunEnv) -> String {
    let mut prompt = format!(
        "You are agent \"{}\" of plugin \"{}\", running in the chat thread {}.",
        env.agent, env.plugin, env.thread
    );
    if let Some(workspace) = &env.workspace {
        prompt.push_str(&format!(
            " The chat's working tree is at {}{}.",
            workspace.display(),
            if env.read_only {
                ", mounted read-only"
            } else {
                ""
            }
        ));
    }
    if env.read_only {
        prompt.push_str(
            " You are read-only: do not change anything; tools that change things are refused.",
        );
    }
    prompt
}

/// Decides after `reply`, with `offered` tools, for an agent read-only or not.
pub fn next(reply: &Message, offered: &[ToolSpec], read_only: bool) -> Turn {
    if reply.tool_calls.is_empty() {
        return Turn::Final(reply.content.clone().unwrap_or_default());
    }
    let names: Vec<&str> = offered.iter().map(|t| t.name.as_str()).collect();
    let calls = reply
        .tool_calls
        .iter()
        .map(|call| {
            let name = call.function.name.clone();
            let parsed = serde_json::from_str::<Value>(if call.function.arguments.is_empty() {
                "{}"
            } else {
                &call.function.arguments
            });
            let (arguments, refusal) = match (offered.iter().find(|t| t.name == name), parsed) {
                (None, _) => (
                    Value::Null,
                    Some(format!(
                        "unknown tool {name}; this run's tools are: [{}]",
                        names.join(", ")
                    )),
                ),
                (Some(_), Err(e)) => (Value::Null, Some(format!("bad arguments: {e}"))),
                (Some(_), Ok(v)) if !v.is_object() => (
                    Value::Null,
                    Some("bad arguments: not a JSON object".to_string()),
                ),
                (Some(tool), Ok(_)) if read_only && tool.writes => (
                    Value::Null,
                    Some(format!(
                        "read-only: this agent may not change anything, and {name} does"
                    )),
                ),
                (Some(_), Ok(v)) => (v, None),
            };
            Checked {
                id: call.id.clone(),
                name,
                arguments,
                refusal,
            }
        })
        .collect();
    Turn::Calls(calls)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::chat::{FunctionCall, ToolCall};

    fn tool(name: &str, writes: bool) -> ToolSpec {
        ToolSpec {
            name: name.into(),
            description: String::new(),
            input_schema: json!({ "type": "object" }),
            writes,
        }
    }

    fn calling(calls: &[(&str, &str)]) -> Message {
        Message {
            role: "assistant".into(),
            tool_calls: calls
                .iter()
                .enumerate()
                .map(|(i, (name, arguments))| ToolCall {
                    id: format!("call-{i}"),
                    kind: "function".into(),
                    function: FunctionCall {
                        name: (*name).into(),
                        arguments: (*arguments).into(),
                    },
                })
                .collect(),
            ..Default::default()
        }
    }

    #[test]
    fn the_agent_is_told_where_the_working_tree_is_and_that_it_is_read_only() {
        let mut env = RunEnv {
            run_id: "r".into(),
            agent: "say".into(),
            read_only: true,
            plugin: "echo".into(),
            thread: "plugin:echo".into(),
            tools: vec![],
            prompt: String::new(),
            time_limit: std::time::Duration::from_secs(1),
            mcp: None,
            workspace: Some("/workspace".into()),
        };
        let told = system_prompt(&env);
        assert!(
            told.contains("working tree is at /workspace, mounted read-only"),
            "{told}"
        );
        env.read_only = false;
        let told = system_prompt(&env);
        assert!(told.contains("working tree is at /workspace.") && !told.contains("read-only"));
        env.workspace = None;
        assert!(!system_prompt(&env).contains("working tree"));
    }

    #[test]
    fn a_reply_without_calls_ends_the_run() {
        let reply = Message {
            role: "assistant".into(),
            content: Some("done".into()),
            ..Default::default()
        };
        assert_eq!(next(&reply, &[], false), Turn::Final("done".into()));
    }

    #[test]
    fn each_call_the_run_cannot_make_is_refused_with_why() {
        let offered = [tool("plugin_read", false), tool("plugin_write", true)];
        let reply = calling(&[
            ("plugin_read", r#"{"q":1}"#),
            ("plugin_nope", "{}"),
            ("plugin_read", "not json"),
            ("plugin_read", "[1]"),
            ("plugin_write", "{}"),
            ("plugin_read", ""),
        ]);
        let Turn::Calls(calls) = next(&reply, &offered, true) else {
            panic!("calls expected");
        };
        let refusals: Vec<Option<&str>> = calls
            .iter()
            .map(|c| c.refusal.as_deref().map(|r| r.split(':').next().unwrap()))
            .collect();
        assert_eq!(
            refusals,
            [
                None,
                Some("unknown tool plugin_nope; this run's tools are"),
                Some("bad arguments"),
                Some("bad arguments"),
                Some("read-only"),
                None,
            ]
        );
        assert_eq!(calls[0].arguments, json!({ "q": 1 }));
        assert_eq!(calls[5].arguments, json!({}), "no arguments are none");
        let Turn::Calls(calls) = next(&calling(&[("plugin_write", "{}")]), &offered, false) else {
            panic!("calls expected");
        };
        assert_eq!(calls[0].refusal, None, "a write agent may write");
    }
}
