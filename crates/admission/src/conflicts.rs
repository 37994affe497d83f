//! The names stage of admission, zeroclaw's "Tool name conflicts" for plugins that run as
//! pods: a plugin's package name (its id, the Plugin's name) and each of its tool names must
//! be its own among the admitted plugins that come before it in package-name order, as
//! zeroclaw's "Tool plugins register in package-name order", and a tool name holding `__` is
//! refused outright (MCP names tools `<server>__<tool>`). The order is the names', not when
//! each plugin was created or admitted: the same plugins hold the same names whatever the
//! timing, and a plugin that comes first takes a name over from the one that held it (which
//! is then refused, naming it). Pure.

use std::collections::BTreeMap;

use model::resources::RegisteredTool;

/// The error keys zeroclaw logs, used here as the condition's reason.
pub const PACKAGE_NAME_CONFLICT: &str = "plugin_package_name_conflict";
pub const TOOL_NAME_CONFLICT: &str = "plugin_tool_name_conflict";
pub const TOOL_NAME_RESERVED: &str = "plugin_tool_name_reserved";

/// What an admitted plugin registered: its package name and its tools.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Holder {
    pub plugin: String,
    pub tools: Vec<String>,
}

/// Why a plugin's names were refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NameRefusal {
    /// One of the error keys above.
    pub key: &'static str,
    pub message: String,
}

/// Registers `plugin`'s names after those of `earlier` (the admitted plugins before it in
/// package-name order, in that order). The names already registered are every earlier
/// plugin's tools and package name; a refusal names the plugin holding the name and why it
/// wins.
pub fn register(
    plugin: &str,
    tools: &[String],
    earlier: &[Holder],
) -> Result<Vec<RegisteredTool>, NameRefusal> {
    if let Some(tool) = tools.iter().find(|t| t.contains("__")) {
        return Err(NameRefusal {
            key: TOOL_NAME_RESERVED,
            message: format!(
                "plugin {plugin:?}: tool name {tool:?} contains \"__\", which is reserved for MCP tools (<server>__<tool>)"
            ),
        });
    }
    // Who holds each name, first one first.
    let mut held: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for holder in earlier {
        held.entry(holder.plugin.as_str())
            .or_insert((holder.plugin.as_str(), "plugin"));
        for tool in &holder.tools {
            held.entry(tool.as_str())
                .or_insert((holder.plugin.as_str(), "tool"));
        }
    }
    let wins = |owner: &str| {
        format!(
            "which holds it: {owner:?} comes before {plugin:?} in package-name order, and plugins \
             register in that order (zeroclaw: \"Tool plugins register in package-name order\")"
        )
    };
    if let Some((owner, kind)) = held.get(plugin) {
        return Err(NameRefusal {
            key: PACKAGE_NAME_CONFLICT,
            message: format!(
                "plugin {plugin:?}: its package name is already registered as a {kind} of plugin {owner:?}, {}",
                wins(owner)
            ),
        });
    }
    for tool in tools {
        if tool == plugin {
            continue;
        }
        if let Some((owner, kind)) = held.get(tool.as_str()) {
            return Err(NameRefusal {
                key: TOOL_NAME_CONFLICT,
                message: format!(
                    "plugin {plugin:?}: tool {tool:?} is already registered as a {kind} of plugin {owner:?}, {}",
                    wins(owner)
                ),
            });
        }
    }
    Ok(tools
        .iter()
        .map(|t| RegisteredTool {
            name: t.clone(),
            mcp_name: format!("{}{t}", model::manifest::MCP_TOOL_PREFIX),
        })
        .collect())
}

/// The names a Plugin's spec declares: its own and its tools' (read loosely, before any
/// check: for deciding whom a change concerns, not for admitting).
pub fn declared_names(plugin: &model::resources::Plugin) -> Vec<String> {
    let mut names: Vec<String> = plugin.metadata.name.clone().into_iter().collect();
    if let Some(tools) = plugin
        .spec
        .manifest
        .rest
        .get("tools")
        .and_then(|t| t.as_array())
    {
        names.extend(
            tools
                .iter()
                .filter_map(|t| t.get("name").and_then(|n| n.as_str()).map(str::to_string)),
        );
    }
    names
}

/// Whether plugin `first` registers before plugin `then`: package-name order (the Plugins'
/// names, their manifest ids), as zeroclaw registers tool plugins.
pub fn registers_before(first: &str, then: &str) -> bool {
    first < then
}

#[cfg(test)]
mod tests {
    use super::*;

    fn holder(plugin: &str, tools: &[&str]) -> Holder {
        Holder {
            plugin: plugin.into(),
            tools: tools.iter().map(|t| t.to_string()).collect(),
        }
    }

    fn tools(names: &[&str]) -> Vec<String> {
        names.iter().map(|t| t.to_string()).collect()
    }

    #[test]
    fn table() {
        let earlier = [
            holder("echo", &["echo", "shout"]),
            holder("search", &["find"]),
        ];
        let cases: [(&str, &[&str], Result<(), &str>); 7] = [
            ("notes", &["note", "list"], Ok(())),
            ("notes", &[], Ok(())),
            // Its own name as a tool is fine.
            ("notes", &["notes"], Ok(())),
            ("find", &["x"], Err(PACKAGE_NAME_CONFLICT)),
            ("notes", &["note", "shout"], Err(TOOL_NAME_CONFLICT)),
            ("notes", &["search"], Err(TOOL_NAME_CONFLICT)),
            ("notes", &["a__b"], Err(TOOL_NAME_RESERVED)),
        ];
        for (plugin, names, want) in cases {
            let got = register(plugin, &tools(names), &earlier);
            match (want, &got) {
                (Ok(()), Ok(registered)) => {
                    assert_eq!(registered.len(), names.len());
                    for r in registered {
                        assert_eq!(r.mcp_name, format!("plugin_{}", r.name));
                    }
                }
                (Err(key), Err(refusal)) => {
                    assert_eq!(refusal.key, key, "{plugin} {names:?}: {}", refusal.message);
                    assert!(refusal.message.contains(plugin), "{}", refusal.message);
                }
                _ => panic!("{plugin} {names:?}: want {want:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn the_reserved_check_needs_no_holder() {
        let refusal = register("a", &tools(&["x__y"]), &[]).unwrap_err();
        assert_eq!(refusal.key, TOOL_NAME_RESERVED);
        assert!(refusal.message.contains("x__y"));
    }

    #[test]
    fn messages_name_who_holds_the_name_and_why_it_wins() {
        let refusal = register("b", &tools(&["echo"]), &[holder("echo-2", &["echo"])]).unwrap_err();
        assert!(
            refusal.message.contains("\"echo-2\""),
            "{}",
            refusal.message
        );
        assert!(refusal.message.contains("tool"), "{}", refusal.message);
        assert!(
            refusal
                .message
                .contains("\"echo-2\" comes before \"b\" in package-name order"),
            "{}",
            refusal.message
        );
        let refusal = register("find", &tools(&["x"]), &[holder("a", &["find"])]).unwrap_err();
        assert_eq!(
            refusal.message,
            "plugin \"find\": its package name is already registered as a tool of plugin \"a\", \
             which holds it: \"a\" comes before \"find\" in package-name order, and plugins \
             register in that order (zeroclaw: \"Tool plugins register in package-name order\")"
        );
    }

    /// The order is the names', whoever was created or admitted first.
    #[test]
    fn plugins_register_in_package_name_order() {
        let cases: [(&str, &str, bool); 6] = [
            ("a", "b", true),
            ("b", "a", false),
            ("echo", "echo-2", true),
            ("echo-2", "echo2", true),
            ("quiz", "quiz", false),
            ("z9", "za", true),
        ];
        for (first, then, before) in cases {
            assert_eq!(registers_before(first, then), before, "{first} {then}");
        }
    }
}
