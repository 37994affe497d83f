//! Which of an agent's plugin tool calls wait for a person: zeroclaw's third operator decision
//! ("A plugin tool call needs operator approval like any other tool that is not pre-approved
//! ... Without an approver the call is denied and does not run"), in this host's terms.
//!
//! - **Whose calls**: an agent's. An agent run's MCP `tools/call`, and a host API tool call
//!   with an `agent` (the app's agents), ask; a workflow's call (`run_id`
//!   `workflow:<run>:<node>`, no agent) does not: a person built the workflow and chose the
//!   tool, as a person choosing a tool in the app does.
//! - **Which profile** ([`profile_of`]): the chat's project's `plugins.<id>.riskProfile` once
//!   the owner trusts the config, else HostConfig's `plugins.defaults.<id>.riskProfile`, else
//!   `default`. A name HostConfig does not define asks for every tool.
//! - **The profiles** ([`profiles`]): HostConfig's `riskProfiles`, with the built-in defaults
//!   ([`built_in_default`]) merged into `default` when the config is read (its lists joined
//!   with the built-in ones, its unset fields the built-in's); a profile of another name keeps
//!   only what it lists.
//! - **The decision** ([`need`]), in this order: a tool in `alwaysAsk` asks every time,
//!   whatever else pre-approves it; an Always answer earlier in the run (or the agent's turn)
//!   pre-approves the tool; `level: full` and `autoApprove` (`*` for every tool) pre-approve;
//!   anything else asks. An unattended profile denies what would ask.
//!
//! Tools are named as the agent sees them: `plugin_<tool>`.

use std::collections::BTreeMap;

use crate::resolve::trust::{ProjectView, approved_plugins};
use crate::resources::{HostConfigSpec, RiskLevel, RiskProfile};

/// The profile every plugin's agents get unless a config names another.
pub const DEFAULT_PROFILE: &str = "default";
/// What `autoApprove` and `alwaysAsk` use for every tool.
pub const EVERY_TOOL: &str = "*";

/// The built-in defaults merged into `default`: supervised (ask for every tool not
/// pre-approved), attended (a pending call waits for a person). They pre-approve no plugin
/// tool: every tool of a plugin is the plugin's code, which only its profile may trust.
pub fn built_in_default() -> RiskProfile {
    RiskProfile {
        auto_approve: Vec::new(),
        always_ask: Vec::new(),
        level: Some(RiskLevel::Supervised),
        unattended: Some(false),
    }
}

/// The profiles as the config is read: `default` merged with `built_in` (lists joined,
/// unset fields taken from it; the built-in one when the config has none), the others as
/// written.
pub fn profiles_with(
    configured: &BTreeMap<String, RiskProfile>,
    built_in: &RiskProfile,
) -> BTreeMap<String, RiskProfile> {
    let mut out = configured.clone();
    let merged = match configured.get(DEFAULT_PROFILE) {
        None => built_in.clone(),
        Some(own) => RiskProfile {
            auto_approve: joined(&built_in.auto_approve, &own.auto_approve),
            always_ask: joined(&built_in.always_ask, &own.always_ask),
            level: own.level.or(built_in.level),
            unattended: own.unattended.or(built_in.unattended),
        },
    };
    out.insert(DEFAULT_PROFILE.to_string(), merged);
    out
}

/// [`profiles_with`] the [`built_in_default`].
pub fn profiles(configured: &BTreeMap<String, RiskProfile>) -> BTreeMap<String, RiskProfile> {
    profiles_with(configured, &built_in_default())
}

fn joined(a: &[String], b: &[String]) -> Vec<String> {
    let mut out = a.to_vec();
    out.extend(b.iter().filter(|t| !a.contains(t)).cloned());
    out
}

/// Where the profile a plugin's agents get was chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfileSource {
    /// The project's trusted `plugins.<id>.riskProfile`.
    Project,
    /// HostConfig's `plugins.defaults.<id>.riskProfile`.
    Global,
    /// Neither names one: `default`.
    Default,
}

impl ProfileSource {
    pub fn describe(self) -> &'static str {
        match self {
            ProfileSource::Project => "the project's trusted plugins.<id>.riskProfile",
            ProfileSource::Global => "HostConfig's plugins.defaults.<id>.riskProfile",
            ProfileSource::Default => "neither config names one",
        }
    }
}

/// The profile a plugin's agents get in a project, with why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChosenProfile {
    pub name: String,
    pub source: ProfileSource,
    /// The profile as the config is read; `None` when HostConfig defines no profile of that
    /// name (then every tool asks: [`ChosenProfile::effective`]).
    pub profile: Option<RiskProfile>,
    /// The project's current config names another profile than the trusted one: it counts
    /// once the owner trusts it.
    pub awaiting_trust: bool,
}

impl ChosenProfile {
    /// The rules that apply: the profile, or for an undefined name one that asks for every
    /// tool.
    pub fn effective(&self) -> RiskProfile {
        self.profile.clone().unwrap_or_default()
    }
}

/// The profile the agents of `plugin` get in a project.
pub fn profile_of(host: &HostConfigSpec, project: ProjectView<'_>, plugin: &str) -> ChosenProfile {
    let approved = approved_plugins(project);
    let trusted = approved.plugin(plugin).and_then(|c| c.risk_profile.clone());
    let global = host
        .plugins
        .defaults
        .get(plugin)
        .and_then(|c| c.risk_profile.clone());
    let pick = |project_value: Option<String>| match (project_value, global.clone()) {
        (Some(n), _) => (n, ProfileSource::Project),
        (None, Some(n)) => (n, ProfileSource::Global),
        (None, None) => (DEFAULT_PROFILE.to_string(), ProfileSource::Default),
    };
    let (name, source) = pick(trusted);
    let awaiting_trust = !approved.is_trusted() && {
        let current = project
            .plugins
            .get(plugin)
            .and_then(|c| c.risk_profile.clone());
        pick(current).0 != name
    };
    let profile = profiles(&host.risk_profiles).get(&name).cloned();
    ChosenProfile {
        name,
        source,
        profile,
        awaiting_trust,
    }
}

/// What a call needs before it runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Nothing: it runs at once.
    Nothing(PreApproved),
    /// A person's decision.
    Person(AskReason),
    /// It is denied at once: it needs a person, and the profile says none attends.
    Denied,
}

/// Why a call runs without asking.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PreApproved {
    /// `autoApprove` names the tool.
    Listed,
    /// `autoApprove` has `*`.
    EveryTool,
    /// `level: full`.
    Full,
    /// An Always answer earlier in the run (or the agent's turn).
    AlwaysEarlier,
}

/// Why a call asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AskReason {
    /// `alwaysAsk` names the tool (or has `*`).
    AlwaysAsk,
    /// Nothing pre-approves it.
    NotPreApproved,
}

impl Need {
    /// What the call needs, as a person reads it (`explain`, the Events).
    pub fn describe(self) -> &'static str {
        match self {
            Need::Nothing(PreApproved::Listed) => "runs at once: autoApprove names it",
            Need::Nothing(PreApproved::EveryTool) => "runs at once: autoApprove has *",
            Need::Nothing(PreApproved::Full) => "runs at once: level full",
            Need::Nothing(PreApproved::AlwaysEarlier) => {
                "runs at once: a person answered Always earlier in the run"
            }
            Need::Person(AskReason::AlwaysAsk) => "waits for a person: alwaysAsk names it",
            Need::Person(AskReason::NotPreApproved) => {
                "waits for a person: nothing pre-approves it"
            }
            Need::Denied => "denied: it would wait for a person, and the profile is unattended",
        }
    }
}

/// What a call of `tool` (as the agent sees it) needs under `profile`; `always_earlier` when
/// a person answered Always for this tool earlier in the run.
pub fn need(profile: &RiskProfile, tool: &str, always_earlier: bool) -> Need {
    let names = |list: &[String]| list.iter().any(|t| t == tool || t == EVERY_TOOL);
    let ask = |reason| {
        if profile.unattended == Some(true) {
            Need::Denied
        } else {
            Need::Person(reason)
        }
    };
    if names(&profile.always_ask) {
        return ask(AskReason::AlwaysAsk);
    }
    if always_earlier {
        return Need::Nothing(PreApproved::AlwaysEarlier);
    }
    if profile.level == Some(RiskLevel::Full) {
        return Need::Nothing(PreApproved::Full);
    }
    if profile.auto_approve.iter().any(|t| t == tool) {
        return Need::Nothing(PreApproved::Listed);
    }
    if profile.auto_approve.iter().any(|t| t == EVERY_TOOL) {
        return Need::Nothing(PreApproved::EveryTool);
    }
    ask(AskReason::NotPreApproved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::PluginConfig;
    use crate::resources::{HostPlugins, Project, ProjectSpec, ProjectTrust};

    fn p(
        auto: &[&str],
        ask: &[&str],
        level: Option<RiskLevel>,
        unattended: Option<bool>,
    ) -> RiskProfile {
        RiskProfile {
            auto_approve: auto.iter().map(|s| s.to_string()).collect(),
            always_ask: ask.iter().map(|s| s.to_string()).collect(),
            level,
            unattended,
        }
    }

    #[test]
    fn the_decision_as_a_table() {
        use AskReason::*;
        use Need::*;
        use PreApproved::*;
        let full = Some(RiskLevel::Full);
        let rows: Vec<(RiskProfile, &str, bool, Need)> = vec![
            (
                p(&[], &[], None, None),
                "plugin_a",
                false,
                Person(NotPreApproved),
            ),
            (
                p(&["plugin_a"], &[], None, None),
                "plugin_a",
                false,
                Nothing(Listed),
            ),
            (
                p(&["plugin_a"], &[], None, None),
                "plugin_b",
                false,
                Person(NotPreApproved),
            ),
            (
                p(&["*"], &[], None, None),
                "plugin_b",
                false,
                Nothing(EveryTool),
            ),
            (p(&[], &[], full, None), "plugin_b", false, Nothing(Full)),
            // alwaysAsk beats *, full, a listed name and an Always answer.
            (
                p(&["*"], &["plugin_a"], None, None),
                "plugin_a",
                false,
                Person(AlwaysAsk),
            ),
            (
                p(&[], &["plugin_a"], full, None),
                "plugin_a",
                false,
                Person(AlwaysAsk),
            ),
            (
                p(&["plugin_a"], &["plugin_a"], None, None),
                "plugin_a",
                false,
                Person(AlwaysAsk),
            ),
            (
                p(&[], &["plugin_a"], None, None),
                "plugin_a",
                true,
                Person(AlwaysAsk),
            ),
            (
                p(&["*"], &["*"], full, None),
                "plugin_z",
                false,
                Person(AlwaysAsk),
            ),
            // An Always answer earlier pre-approves what nothing else does.
            (
                p(&[], &[], None, None),
                "plugin_a",
                true,
                Nothing(AlwaysEarlier),
            ),
            // Unattended: what would ask is denied; what is pre-approved runs.
            (p(&[], &[], None, Some(true)), "plugin_a", false, Denied),
            (
                p(&[], &["plugin_a"], full, Some(true)),
                "plugin_a",
                false,
                Denied,
            ),
            (
                p(&["plugin_a"], &[], None, Some(true)),
                "plugin_a",
                false,
                Nothing(Listed),
            ),
        ];
        for (profile, tool, earlier, want) in rows {
            assert_eq!(
                need(&profile, tool, earlier),
                want,
                "{profile:?} {tool} {earlier}"
            );
        }
    }

    #[test]
    fn defaults_merge_into_default_and_other_profiles_keep_what_they_list() {
        let built_in = p(
            &["plugin_builtin"],
            &["plugin_danger"],
            Some(RiskLevel::Supervised),
            Some(false),
        );
        let configured = BTreeMap::from([
            ("default".to_string(), p(&["plugin_echo"], &[], None, None)),
            (
                "batch".to_string(),
                p(&["plugin_echo"], &[], None, Some(true)),
            ),
        ]);
        let read = profiles_with(&configured, &built_in);
        assert_eq!(
            read["default"],
            p(
                &["plugin_builtin", "plugin_echo"],
                &["plugin_danger"],
                Some(RiskLevel::Supervised),
                Some(false)
            )
        );
        assert_eq!(
            read["batch"], configured["batch"],
            "a named profile keeps only what it lists"
        );
        // No default configured: the built-in one.
        assert_eq!(
            profiles_with(&BTreeMap::new(), &built_in)["default"],
            built_in
        );
        // The operator's own value wins over the built-in's for a field it sets.
        let lenient = BTreeMap::from([(
            "default".to_string(),
            p(&[], &[], Some(RiskLevel::Full), None),
        )]);
        assert_eq!(
            profiles_with(&lenient, &built_in)["default"].level,
            Some(RiskLevel::Full)
        );
        // The production defaults pre-approve nothing and wait for a person.
        let prod = profiles(&BTreeMap::new());
        assert_eq!(
            need(&prod["default"], "plugin_echo", false),
            Need::Person(AskReason::NotPreApproved)
        );
    }

    fn host(default_profile: Option<&str>) -> HostConfigSpec {
        let mut defaults = crate::config::PluginsConfig::new();
        if let Some(n) = default_profile {
            defaults.insert(
                "quiz".into(),
                PluginConfig {
                    risk_profile: Some(n.into()),
                    ..Default::default()
                },
            );
        }
        HostConfigSpec {
            plugins: HostPlugins {
                enabled: true,
                defaults,
                ..Default::default()
            },
            risk_profiles: BTreeMap::from([("lenient".to_string(), p(&["*"], &[], None, None))]),
            ..Default::default()
        }
    }

    fn project(profile: Option<&str>) -> Project {
        let mut plugins = crate::config::PluginsConfig::new();
        plugins.insert(
            "quiz".into(),
            PluginConfig {
                risk_profile: profile.map(String::from),
                enabled: Some(true),
                ..Default::default()
            },
        );
        Project::new("proj", ProjectSpec { plugins })
    }

    #[test]
    fn a_projects_profile_counts_once_the_owner_trusts_it() {
        let h = host(None);
        let current = project(Some("lenient"));
        // Never trusted: the project's choice does not count yet.
        let chosen = profile_of(&h, ProjectView::new(&current, None), "quiz");
        assert_eq!(
            (chosen.name.as_str(), chosen.source),
            ("default", ProfileSource::Default)
        );
        assert!(chosen.awaiting_trust);
        // Trusted: it does.
        let trust = ProjectTrust::of("proj", &current.spec.plugins);
        let chosen = profile_of(&h, ProjectView::new(&current, Some(&trust)), "quiz");
        assert_eq!(
            (chosen.name.as_str(), chosen.source),
            ("lenient", ProfileSource::Project)
        );
        assert!(!chosen.awaiting_trust);
        assert_eq!(
            need(&chosen.effective(), "plugin_grade", false),
            Need::Nothing(PreApproved::EveryTool)
        );
        // A trusted earlier version counts while the current one waits.
        let earlier = project(None);
        let old_trust = ProjectTrust::of("proj", &earlier.spec.plugins);
        let chosen = profile_of(
            &host(Some("lenient")),
            ProjectView::new(&project(Some("nope")), Some(&old_trust)),
            "quiz",
        );
        assert_eq!(
            (chosen.name.as_str(), chosen.source),
            ("lenient", ProfileSource::Global)
        );
        assert!(chosen.awaiting_trust);
    }

    #[test]
    fn an_undefined_profile_asks_for_every_tool() {
        let current = project(Some("missing"));
        let trust = ProjectTrust::of("proj", &current.spec.plugins);
        let chosen = profile_of(
            &host(None),
            ProjectView::new(&current, Some(&trust)),
            "quiz",
        );
        assert_eq!(chosen.name, "missing");
        assert!(chosen.profile.is_none());
        assert_eq!(
            need(&chosen.effective(), "plugin_grade", false),
            Need::Person(AskReason::NotPreApproved)
        );
    }
}
