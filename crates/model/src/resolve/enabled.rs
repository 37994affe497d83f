//! Whether a plugin runs in a project: nothing runs while `plugins.enabled` is off; then the
//! global `plugins.<id>.enabled` is the default, and the project's own value, from its approved
//! config only, overrides it. A plugin neither sets is off.

use std::fmt;

use super::trust::{ProjectView, approved_plugins};
use crate::resources::HostPlugins;

/// Whether the plugin runs in the project, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Enabled {
    pub enabled: bool,
    pub reason: EnabledReason,
    /// The current project config would decide otherwise, but its owner hasn't trusted it yet.
    pub awaiting_trust: bool,
}

impl Enabled {
    /// Whether the plugin runs.
    pub fn is_enabled(&self) -> bool {
        self.enabled
    }
}

/// What decided it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EnabledReason {
    /// `plugins.enabled` is off in the global config: no plugin runs.
    PluginsOff,
    /// The project's approved config sets `plugins.<id>.enabled`.
    Project,
    /// The global config's `plugins.<id>.enabled`, which the project doesn't override.
    GlobalDefault,
    /// Neither config enables it.
    NotEnabled,
}

impl fmt::Display for EnabledReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            EnabledReason::PluginsOff => "plugins.enabled is off in the global config",
            EnabledReason::Project => "set by the project's trusted config",
            EnabledReason::GlobalDefault => "the global config's default for every project",
            EnabledReason::NotEnabled => "neither the global nor the project config enables it",
        })
    }
}

/// Whether `plugin_id` runs in the project.
pub fn plugin_enabled(host: &HostPlugins, plugin_id: &str, project: ProjectView<'_>) -> Enabled {
    if !host.enabled {
        return Enabled {
            enabled: false,
            reason: EnabledReason::PluginsOff,
            awaiting_trust: false,
        };
    }
    let global = host.defaults.get(plugin_id).and_then(|c| c.enabled);
    let approved = approved_plugins(project);
    let decide = |project_value: Option<bool>| match (project_value, global) {
        (Some(v), _) => (v, EnabledReason::Project),
        (None, Some(v)) => (v, EnabledReason::GlobalDefault),
        (None, None) => (false, EnabledReason::NotEnabled),
    };
    let (enabled, reason) = decide(approved.plugin(plugin_id).and_then(|c| c.enabled));
    let awaiting_trust = !approved.is_trusted() && {
        let current = project.plugins.get(plugin_id).and_then(|c| c.enabled);
        decide(current).0 != enabled
    };
    Enabled {
        enabled,
        reason,
        awaiting_trust,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::config::PluginsConfig;
    use crate::resolve::fixtures::{config, host};
    use crate::resources::ProjectTrust;

    fn on(v: bool) -> PluginsConfig {
        config(&[("p", json!({ "enabled": v }))])
    }

    fn none() -> PluginsConfig {
        config(&[])
    }

    /// One row: plugins.enabled, the global entries, the project's current config and the
    /// config its trust names (None: never trusted); then whether p runs, why, and whether
    /// the current config would decide otherwise.
    struct Row {
        plugins_on: bool,
        global: PluginsConfig,
        current: PluginsConfig,
        trusted: Option<PluginsConfig>,
        want: (bool, EnabledReason, bool),
    }

    fn row(
        plugins_on: bool,
        global: PluginsConfig,
        current: PluginsConfig,
        trusted: Option<PluginsConfig>,
        want: (bool, EnabledReason, bool),
    ) -> Row {
        Row {
            plugins_on,
            global,
            current,
            trusted,
            want,
        }
    }

    #[test]
    fn whether_p_runs() {
        use EnabledReason::*;
        let rows = [
            row(
                false,
                on(true),
                on(true),
                Some(on(true)),
                (false, PluginsOff, false),
            ),
            // The global value is the default.
            row(
                true,
                on(true),
                none(),
                Some(none()),
                (true, GlobalDefault, false),
            ),
            row(
                true,
                on(false),
                none(),
                Some(none()),
                (false, GlobalDefault, false),
            ),
            // A trusted project value overrides it.
            row(
                true,
                on(true),
                on(false),
                Some(on(false)),
                (false, Project, false),
            ),
            row(
                true,
                none(),
                on(true),
                Some(on(true)),
                (true, Project, false),
            ),
            // Never trusted: the project's value does not count.
            row(true, none(), on(true), None, (false, NotEnabled, true)),
            row(
                true,
                on(false),
                on(true),
                None,
                (false, GlobalDefault, true),
            ),
            // Edited since the trust: the trusted value applies until trusted again.
            row(
                true,
                none(),
                on(false),
                Some(on(true)),
                (true, Project, true),
            ),
            row(
                true,
                none(),
                on(true),
                Some(on(false)),
                (false, Project, true),
            ),
            // An edit that changes nothing about p awaits nothing.
            row(
                true,
                on(true),
                none(),
                Some(on(true)),
                (true, Project, false),
            ),
            // A plugin nobody enables is off.
            row(
                true,
                none(),
                none(),
                Some(none()),
                (false, NotEnabled, false),
            ),
        ];
        for r in rows {
            let trust = r.trusted.as_ref().map(|t| ProjectTrust::of("proj", t));
            let view = ProjectView {
                plugins: &r.current,
                uid: None,
                trust: trust.as_ref(),
                known_hash: None,
            };
            let e = plugin_enabled(&host(r.plugins_on, r.global.clone()), "p", view);
            let context = format!(
                "on {}, global {:?}, current {:?}, trusted {:?}",
                r.plugins_on, r.global, r.current, r.trusted
            );
            assert_eq!((e.enabled, e.reason, e.awaiting_trust), r.want, "{context}");
        }
    }

    #[test]
    fn another_plugin_is_not_enabled_by_ps_entry() {
        let current = on(true);
        let trust = ProjectTrust::of("proj", &current);
        let view = ProjectView {
            plugins: &current,
            uid: None,
            trust: Some(&trust),
            known_hash: None,
        };
        let e = plugin_enabled(&host(true, on(true)), "other", view);
        assert!(!e.enabled);
        assert_eq!(e.reason, EnabledReason::NotEnabled);
        assert!(!e.awaiting_trust);
    }
}
