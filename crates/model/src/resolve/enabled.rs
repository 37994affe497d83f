//! Whether a plugin runs in a project: nothing runs while `plugins.enabled` is off; then the
//! global `plugins.<id>.enabled` is the default, and the project's own value, from its approved
//! config only, overrides it. A plugin neither sets is off.

use std::fmt;

use super::trust::approved_plugins;
use crate::resources::{HostPlugins, ProjectSpec};

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
pub fn plugin_enabled(host: &HostPlugins, plugin_id: &str, project: &ProjectSpec) -> Enabled {
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
    use crate::resolve::fixtures::{config, host, project, trusted};

    fn on(v: bool) -> PluginsConfig {
        config(&[("p", json!({ "enabled": v }))])
    }

    fn trusted_project(plugins: PluginsConfig) -> ProjectSpec {
        let t = trusted(&plugins);
        project(plugins, Some(t))
    }

    #[test]
    fn nothing_runs_while_plugins_are_off() {
        let e = plugin_enabled(&host(false, on(true)), "p", &trusted_project(on(true)));
        assert!(!e.enabled);
        assert_eq!(e.reason, EnabledReason::PluginsOff);
    }

    #[test]
    fn the_global_value_is_the_default() {
        let e = plugin_enabled(&host(true, on(true)), "p", &trusted_project(config(&[])));
        assert!(e.enabled);
        assert_eq!(e.reason, EnabledReason::GlobalDefault);
        let e = plugin_enabled(&host(true, on(false)), "p", &trusted_project(config(&[])));
        assert!(!e.enabled);
        assert_eq!(e.reason, EnabledReason::GlobalDefault);
    }

    #[test]
    fn a_trusted_project_value_overrides_the_default() {
        let e = plugin_enabled(&host(true, on(true)), "p", &trusted_project(on(false)));
        assert!(!e.enabled);
        assert_eq!(e.reason, EnabledReason::Project);
        let e = plugin_enabled(&host(true, config(&[])), "p", &trusted_project(on(true)));
        assert!(e.enabled);
        assert_eq!(e.reason, EnabledReason::Project);
        assert!(!e.awaiting_trust);
    }

    #[test]
    fn an_untrusted_project_value_does_not_count() {
        // Never trusted: the global default applies.
        let e = plugin_enabled(&host(true, config(&[])), "p", &project(on(true), None));
        assert!(!e.enabled);
        assert_eq!(e.reason, EnabledReason::NotEnabled);
        assert!(e.awaiting_trust);
        // Changed since the last approval: the approved value applies.
        let e = plugin_enabled(
            &host(true, config(&[])),
            "p",
            &project(on(false), Some(trusted(&on(true)))),
        );
        assert!(e.enabled);
        assert_eq!(e.reason, EnabledReason::Project);
        assert!(e.awaiting_trust);
    }

    #[test]
    fn a_plugin_nobody_enables_is_off() {
        let e = plugin_enabled(&host(true, on(true)), "other", &trusted_project(on(true)));
        assert!(!e.enabled);
        assert_eq!(e.reason, EnabledReason::NotEnabled);
        assert!(!e.awaiting_trust);
    }
}
