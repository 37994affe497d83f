//! A project's trust: its config counts for `enabled` and `schedules` once the owner trusted it;
//! until then the last approved version does. Versions are named by
//! [`config_hash`](crate::config::config_hash).

use crate::config::{PluginConfig, PluginsConfig, config_hash};
use crate::resources::ProjectSpec;

/// Where a project stands with its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrustState {
    /// The owner trusted the current config.
    Trusted,
    /// The current config changed since; the last approved version applies.
    LastApproved,
    /// No version was ever approved; the project's values don't apply.
    NeverTrusted,
    /// The recorded approved config does not match its own hash, so it is not used.
    ApprovedHashMismatch { stated: String, actual: String },
}

/// Which of a project's configs counts for `enabled` and `schedules`.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovedConfig<'a> {
    /// The hash of the current config (for `status.configHash`).
    pub current_hash: String,
    pub state: TrustState,
    /// The config that counts: the current one when trusted, the last approved one otherwise,
    /// none when there is none to trust.
    pub approved: Option<&'a PluginsConfig>,
}

/// The config of a project that has none approved.
static NO_PLUGINS: PluginsConfig = PluginsConfig::new();

impl<'a> ApprovedConfig<'a> {
    /// Whether the owner trusted the current config.
    pub fn is_trusted(&self) -> bool {
        self.state == TrustState::Trusted
    }

    /// The config that counts; empty when none was approved.
    pub fn plugins(&self) -> &'a PluginsConfig {
        self.approved.unwrap_or(&NO_PLUGINS)
    }

    /// The approved entry of one plugin.
    pub fn plugin(&self, id: &str) -> Option<&'a PluginConfig> {
        self.plugins().get(id)
    }
}

/// Whether the project's current config is trusted, and which config counts.
pub fn approved_plugins(project: &ProjectSpec) -> ApprovedConfig<'_> {
    let current_hash = config_hash(&project.plugins);
    let (state, approved) = match &project.trusted {
        None => (TrustState::NeverTrusted, None),
        Some(t) if t.hash == current_hash => (TrustState::Trusted, Some(&project.plugins)),
        Some(t) => {
            let actual = config_hash(&t.plugins);
            if actual == t.hash {
                (TrustState::LastApproved, Some(&t.plugins))
            } else {
                (
                    TrustState::ApprovedHashMismatch {
                        stated: t.hash.clone(),
                        actual,
                    },
                    None,
                )
            }
        }
    };
    ApprovedConfig {
        current_hash,
        state,
        approved,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::resolve::fixtures::{config, project, trusted};

    #[test]
    fn a_trusted_config_counts() {
        let current = config(&[("p", json!({ "enabled": true }))]);
        let spec = project(current.clone(), Some(trusted(&current)));
        let a = approved_plugins(&spec);
        assert!(a.is_trusted());
        assert_eq!(a.approved, Some(&current));
        assert_eq!(a.current_hash, config_hash(&current));
        assert_eq!(a.plugin("p").unwrap().enabled, Some(true));
    }

    #[test]
    fn an_untrusted_config_falls_back_to_the_last_approved() {
        let old = config(&[("p", json!({ "enabled": false }))]);
        let current = config(&[("p", json!({ "enabled": true }))]);
        let spec = project(current, Some(trusted(&old)));
        let a = approved_plugins(&spec);
        assert_eq!(a.state, TrustState::LastApproved);
        assert!(!a.is_trusted());
        assert_eq!(a.approved, Some(&old));
    }

    #[test]
    fn a_never_trusted_config_has_none() {
        let spec = project(config(&[("p", json!({ "enabled": true }))]), None);
        let a = approved_plugins(&spec);
        assert_eq!(a.state, TrustState::NeverTrusted);
        assert_eq!(a.approved, None);
        assert!(a.plugins().is_empty());
        assert!(a.plugin("p").is_none());
    }

    #[test]
    fn an_approved_config_that_fails_its_hash_is_not_used() {
        let old = config(&[("p", json!({ "enabled": false }))]);
        let mut t = trusted(&old);
        t.plugins = config(&[("p", json!({ "enabled": true }))]);
        let spec = project(config(&[]), Some(t));
        let a = approved_plugins(&spec);
        assert!(matches!(a.state, TrustState::ApprovedHashMismatch { .. }));
        assert_eq!(a.approved, None);
    }
}
