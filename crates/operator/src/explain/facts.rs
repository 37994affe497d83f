//! The facts `explain` prints, as pure functions of the objects gathered. Each fact is a
//! topic, its value and why (where the value came from); a setting's source is the highest
//! level whose value the settings layering kept.

use serde_json::Value;

use model::config::ConfigLevel;
use model::manifest::Manifest;
use model::resolve::approval::{Need, need, profile_of};
use model::resolve::{
    ProjectView, TrustState, approved_capabilities, approved_plugins, gets_schedules,
    plugin_enabled, resolve_schedules, resolve_settings, runs_plugins, secret_sources,
};
use model::resources::{
    ADMITTED, Channel, HostConfigSpec, Plugin, PluginInstance, Project, ProjectTrust,
};

/// What the controller decides from, for one plugin in one chat.
#[derive(Clone, Copy, Debug)]
pub struct World<'a> {
    pub plugin_name: &'a str,
    pub host: &'a HostConfigSpec,
    pub plugin: Option<&'a Plugin>,
    /// The Plugin's manifest, when it passes the manifest rules.
    pub manifest: Option<&'a Manifest>,
    pub chat: Option<&'a Channel>,
    pub project: Option<&'a Project>,
    pub trust: Option<&'a ProjectTrust>,
    pub instance: Option<&'a PluginInstance>,
}

/// One line of the explanation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fact {
    pub topic: String,
    pub value: String,
    pub why: String,
}

fn fact(topic: impl Into<String>, value: impl Into<String>, why: impl Into<String>) -> Fact {
    Fact {
        topic: topic.into(),
        value: value.into(),
        why: why.into(),
    }
}

/// Every fact, in the order the controller meets them.
pub fn explain(world: &World) -> Vec<Fact> {
    let mut out = vec![fact(
        "host switch",
        world.host.plugins.enabled.to_string(),
        "HostConfig default: plugins.enabled",
    )];
    let Some(plugin) = world.plugin else {
        out.push(fact("plugin", "not installed", "no Plugin of that name"));
        return out;
    };
    let status = plugin.status.clone().unwrap_or_default();
    let admitted = status.conditions.iter().find(|c| c.r#type == ADMITTED);
    out.push(fact(
        "admission",
        status.stage.unwrap_or_else(|| "not judged yet".into()),
        admitted
            .map(|c| format!("{}: {}", c.reason, c.message))
            .unwrap_or_default(),
    ));
    let Some(chat) = world.chat else {
        out.push(fact("chat", "not found", "no Channel of that name"));
        return out;
    };
    out.push(fact(
        "chat",
        if runs_plugins(&chat.spec) {
            "runs plugins"
        } else {
            "runs no plugins"
        },
        format!(
            "app {:?}, kind {:?}{}{}",
            chat.spec.app,
            chat.spec.kind,
            chat.spec
                .parent
                .as_deref()
                .map(|p| format!(", thread of {p}"))
                .unwrap_or_default(),
            if chat.spec.hidden { ", hidden" } else { "" }
        ),
    ));
    let Some(project) = world.project else {
        out.push(fact(
            "project",
            "not found",
            format!("the chat's project {} does not exist", chat.spec.project),
        ));
        return out;
    };
    let view = ProjectView::new(project, world.trust);
    let approved = approved_plugins(view);
    out.push(fact(
        "trust",
        match &approved.state {
            TrustState::Trusted => "trusted".to_string(),
            TrustState::LastApproved => "last approved version".into(),
            TrustState::NeverTrusted => "never trusted".into(),
            TrustState::ApprovedHashMismatch { .. } => "trust record broken".into(),
            TrustState::OtherProject { .. } => "trust of another project".into(),
        },
        format!("current config {}", approved.current_hash),
    ));
    let enabled = plugin_enabled(&world.host.plugins, world.plugin_name, view);
    out.push(fact(
        "enabled",
        enabled.is_enabled().to_string(),
        format!(
            "{}{}",
            enabled.reason,
            if enabled.awaiting_trust {
                "; the current config says otherwise, awaiting trust"
            } else {
                ""
            }
        ),
    ));
    let Some(manifest) = world.manifest else {
        out.push(fact(
            "manifest",
            "invalid",
            "the stored manifest fails its rules",
        ));
        return out;
    };
    let mut capabilities: Vec<String> = approved_capabilities(plugin, manifest)
        .iter()
        .map(|c| c.to_string())
        .collect();
    capabilities.sort();
    out.push(fact(
        "capabilities",
        capabilities.join(", "),
        "approved at install and declared",
    ));
    // Which of the agents' calls of its tools wait for a person: the profile the approval
    // desk asks, and what it decides for each tool.
    let chosen = profile_of(world.host, view, world.plugin_name);
    out.push(fact(
        "risk profile",
        &chosen.name,
        format!(
            "{}{}{}",
            chosen.source.describe(),
            if chosen.profile.is_none() {
                "; HostConfig defines no such profile: every tool asks"
            } else {
                ""
            },
            if chosen.awaiting_trust {
                "; the current config names another, awaiting trust"
            } else {
                ""
            }
        ),
    ));
    let profile = chosen.effective();
    for tool in &manifest.tools {
        let seen_as = format!("plugin_{}", tool.name);
        let needs = need(&profile, &seen_as, false);
        out.push(fact(
            format!("tool {seen_as}"),
            match needs {
                Need::Nothing(_) => "runs",
                Need::Person(_) => "asks",
                Need::Denied => "denied",
            },
            format!("an agent's call {}", needs.describe()),
        ));
    }
    let global = world.host.plugins.defaults.get(world.plugin_name);
    let own = project.spec.plugins.get(world.plugin_name);
    let settings = resolve_settings(manifest, global, own);
    for (name, value) in &settings.values {
        let source = settings
            .sources
            .get(name)
            .map(ToString::to_string)
            .unwrap_or_default();
        out.push(fact(format!("setting {name}"), value.to_string(), source));
    }
    for left in &settings.left_out {
        out.push(fact(
            format!("setting {} (refused)", left.setting),
            left.value
                .as_ref()
                .map_or_else(|| "(secret, not shown)".to_string(), Value::to_string),
            left.to_string(),
        ));
    }
    // Where each secret setting's value is: the Secret reference that applies (the project's
    // counts once trusted), never the value.
    let sources = secret_sources(manifest, global, approved.plugin(world.plugin_name));
    for name in manifest.secret_settings() {
        let (value, source) = match sources.get(name) {
            Some(s) => (
                format!("Secret {} key {}", s.secret.name, s.secret.key),
                match s.level {
                    ConfigLevel::Project => "the project's trusted config (its namespace)",
                    ConfigLevel::Global => "the global config (the release namespace)",
                },
            ),
            None => (
                "-".to_string(),
                "no Secret reference: the plugin reads none",
            ),
        };
        out.push(fact(format!("setting {name} (secret)"), value, source));
    }
    let schedules = resolve_schedules(manifest, global, approved.plugin(world.plugin_name));
    let gets = gets_schedules(&chat.spec);
    for task in &schedules.schedules {
        out.push(fact(
            format!("schedule {}", task.action),
            format!(
                "{} {}",
                task.schedule,
                if task.enabled && gets { "on" } else { "off" }
            ),
            format!(
                "the {} config's entry{}",
                task.source,
                if gets {
                    ""
                } else {
                    "; this chat gets no scheduled tasks (threads run their channel's)"
                }
            ),
        ));
    }
    for problem in &schedules.problems {
        out.push(fact(
            format!("schedule {} (no task)", problem.action),
            "-",
            problem.to_string(),
        ));
    }
    match world.instance.map(|i| i.status.clone().unwrap_or_default()) {
        None => out.push(fact("instance", "none", "the controller made no instance")),
        Some(s) => {
            let dash = || "-".to_string();
            out.push(fact(
                "container",
                s.phase.map(|p| format!("{p:?}")).unwrap_or_else(dash),
                s.pod.map(|p| format!("pod {p}")).unwrap_or_default(),
            ));
            out.push(fact(
                "last activity",
                s.last_activity.unwrap_or_else(dash),
                s.stopped_at
                    .map(|t| format!("stopped at {t}"))
                    .unwrap_or_default(),
            ));
            for switch in &s.switches {
                out.push(fact(
                    format!("switch {}", switch.id),
                    if switch.on { "on" } else { "off" },
                    switch.title.clone().unwrap_or_default(),
                ));
            }
            if let Some(b) = &s.breaker {
                out.push(fact(
                    "breaker",
                    b.state.clone(),
                    format!("{} failures in a row", b.failures),
                ));
            }
        }
    }
    out
}

/// The facts as a table.
pub fn text(facts: &[Fact]) -> String {
    let rows: Vec<Vec<String>> = facts
        .iter()
        .map(|f| vec![f.topic.clone(), f.value.clone(), f.why.clone()])
        .collect();
    crate::plugins::text::table(&["FACT", "VALUE", "WHY"], &rows)
}

#[cfg(test)]
mod tests {
    use model::config::PluginsConfig;
    use model::resources::{App, ChannelKind, ChannelSpec, ProjectSpec};
    use serde_json::json;

    use super::*;

    fn plugins(v: serde_json::Value) -> PluginsConfig {
        serde_json::from_value(v).unwrap()
    }

    fn get<'a>(facts: &'a [Fact], topic: &str) -> &'a Fact {
        facts
            .iter()
            .find(|f| f.topic == topic)
            .unwrap_or_else(|| panic!("no {topic}: {facts:#?}"))
    }

    #[test]
    fn each_setting_says_where_its_value_came_from_and_refused_ones_why() {
        let manifest_text = include_str!("../../../../examples/echo-plugin/plugin.json");
        let plugin =
            Plugin::from_manifest(manifest_text, "r/echo@sha256:00", vec![], true).unwrap();
        let manifest = model::manifest::parse_str(manifest_text).unwrap();
        let mut host = HostConfigSpec::default();
        host.plugins.enabled = true;
        host.plugins.defaults =
            plugins(json!({ "echo": { "enabled": true, "settings": { "verbose": true } } }));
        let project = Project::new(
            "proj",
            ProjectSpec {
                plugins: plugins(
                    json!({ "echo": { "settings": { "loud": 1 }, "schedules": { "tick": {} } } }),
                ),
            },
        );
        let chat = Channel::new(
            "general",
            ChannelSpec {
                project: "proj".into(),
                kind: ChannelKind::Channel,
                parent: None,
                app: App::Desktop,
                hidden: false,
                working_tree: None,
            },
        );
        let world = World {
            plugin_name: "echo",
            host: &host,
            plugin: Some(&plugin),
            manifest: Some(&manifest),
            chat: Some(&chat),
            project: Some(&project),
            trust: None,
            instance: None,
        };
        let facts = explain(&world);
        assert_eq!(get(&facts, "chat").value, "runs plugins");
        assert_eq!(get(&facts, "trust").value, "never trusted");
        let enabled = get(&facts, "enabled");
        assert_eq!(
            (enabled.value.as_str(), enabled.why.as_str()),
            ("true", "the global config's default for every project")
        );
        let verbose = get(&facts, "setting verbose");
        assert_eq!(
            (verbose.value.as_str(), verbose.why.as_str()),
            ("true", "the global config")
        );
        assert!(
            get(&facts, "setting loud (refused)")
                .why
                .contains("declares no such setting")
        );
        // The project's schedule entry waits for trust: no task from it.
        assert!(
            !facts.iter().any(|f| f.topic.starts_with("schedule")),
            "{facts:#?}"
        );
        assert_eq!(get(&facts, "instance").value, "none");
        assert!(text(&facts).starts_with("FACT"));
        // No profile named anywhere: the built-in default, which asks for every tool.
        assert_eq!(get(&facts, "risk profile").value, "default");
        let tool = get(&facts, "tool plugin_echo");
        assert_eq!(
            (tool.value.as_str(), tool.why.as_str()),
            (
                "asks",
                "an agent's call waits for a person: nothing pre-approves it"
            )
        );

        // HostConfig's profile for echo pre-approves its tool; one it does not define asks.
        let mut named = host.clone();
        named.risk_profiles = serde_json::from_value(json!({
            "demo": { "autoApprove": ["plugin_echo"] },
        }))
        .unwrap();
        named.plugins.defaults =
            plugins(json!({ "echo": { "enabled": true, "riskProfile": "demo" } }));
        let facts = explain(&World {
            host: &named,
            ..world
        });
        let profile = get(&facts, "risk profile");
        assert_eq!(
            (profile.value.as_str(), profile.why.as_str()),
            ("demo", "HostConfig's plugins.defaults.<id>.riskProfile")
        );
        assert_eq!(get(&facts, "tool plugin_echo").value, "runs");
        named.plugins.defaults =
            plugins(json!({ "echo": { "enabled": true, "riskProfile": "nobody-defined" } }));
        let facts = explain(&World {
            host: &named,
            ..world
        });
        assert!(get(&facts, "risk profile").why.contains("every tool asks"));
        assert_eq!(get(&facts, "tool plugin_echo").value, "asks");
    }

    #[test]
    fn a_secret_setting_shows_its_secret_reference_never_a_value() {
        let manifest_json = json!({
            "id": "vault", "name": "Vault", "version": "1", "api": "1",
            "capabilities": ["secrets.read"],
            "settings": { "token": { "type": "string", "secret": true } },
        });
        let plugin = Plugin::from_manifest(
            &manifest_json.to_string(),
            "r/vault@sha256:00",
            vec![],
            true,
        )
        .unwrap();
        let manifest = model::manifest::from_value(&manifest_json).unwrap();
        let mut host = HostConfigSpec::default();
        host.plugins.enabled = true;
        let key_of = |name: &str| json!({ "secretKeyRef": { "name": name, "key": "token" } });
        host.plugins.defaults = plugins(json!({ "vault": {
            "enabled": true, "secretSettings": { "token": key_of("host-creds") },
        } }));
        let config = plugins(json!({ "vault": {
            "settings": { "token": "inline-leak" },
            "secretSettings": { "token": key_of("team-creds") },
        } }));
        let project = Project::new(
            "proj",
            ProjectSpec {
                plugins: config.clone(),
            },
        );
        let chat = Channel::new(
            "general",
            ChannelSpec {
                project: "proj".into(),
                kind: ChannelKind::Channel,
                parent: None,
                app: App::Desktop,
                hidden: false,
                working_tree: None,
            },
        );
        let trust = ProjectTrust::of("proj", &config);
        let world = |trust| World {
            plugin_name: "vault",
            host: &host,
            plugin: Some(&plugin),
            manifest: Some(&manifest),
            chat: Some(&chat),
            project: Some(&project),
            trust,
            instance: None,
        };

        // Untrusted: the project's reference waits; the global one applies.
        let facts = explain(&world(None));
        let token = get(&facts, "setting token (secret)");
        assert_eq!(
            (token.value.as_str(), token.why.as_str()),
            (
                "Secret host-creds key token",
                "the global config (the release namespace)"
            )
        );
        let refused = get(&facts, "setting token (refused)");
        assert_eq!(refused.value, "(secret, not shown)");
        assert!(!text(&facts).contains("inline-leak"), "{}", text(&facts));

        let facts = explain(&world(Some(&trust)));
        assert_eq!(
            get(&facts, "setting token (secret)").value,
            "Secret team-creds key token"
        );
        assert!(!text(&facts).contains("inline-leak"));
    }
}
