//! A project's trust: its config counts for `enabled` and `schedules` once the owner trusted it;
//! until then the last approved version does. Versions are named by
//! [`config_hash`](crate::config::config_hash).
//!
//! The config lives in the `Project`, the trust in the same-named `ProjectTrust` (two objects,
//! so editing and trusting are two RBAC permissions); [`approved_plugins`] decides from both.

use crate::config::{PluginConfig, PluginsConfig, config_hash};
use crate::resources::{GROUP, Project, ProjectTrust};

/// A project as trust sees it: its current config, its uid, and the `ProjectTrust` of its
/// name, if there is one.
#[derive(Clone, Copy, Debug)]
pub struct ProjectView<'a> {
    /// The project's current config (`spec.plugins`).
    pub plugins: &'a PluginsConfig,
    /// The Project's uid, when known: a trust owned by another Project of the same name (an
    /// earlier one, deleted and made again) does not count.
    pub uid: Option<&'a str>,
    /// The same-named `ProjectTrust`.
    pub trust: Option<&'a ProjectTrust>,
    /// `plugins`' hash when the caller keeps it (the index does, per Project version); else
    /// it is computed.
    pub known_hash: Option<&'a str>,
}

impl<'a> ProjectView<'a> {
    /// The view of a Project and the `ProjectTrust` found under its name.
    pub fn new(project: &'a Project, trust: Option<&'a ProjectTrust>) -> Self {
        Self {
            plugins: &project.spec.plugins,
            uid: project.metadata.uid.as_deref(),
            trust,
            known_hash: None,
        }
    }

    /// The view, its config's hash already known.
    pub fn with_hash(self, hash: &'a str) -> Self {
        Self {
            known_hash: Some(hash),
            ..self
        }
    }
}

/// Where a project stands with its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TrustState {
    /// The owner trusted the current config.
    Trusted,
    /// The current config changed since; the last approved version applies.
    LastApproved,
    /// No version was ever approved (or the trust is being deleted); the project's values
    /// don't apply.
    NeverTrusted,
    /// The recorded approved config does not match its own hash, so it is not used.
    ApprovedHashMismatch { stated: String, actual: String },
    /// The `ProjectTrust` was made for another Project of this name (its owner reference
    /// names that one's uid), so it is not used.
    OtherProject { owner_uid: String },
}

impl TrustState {
    /// Its name, as the Project's `Trusted` condition gives it as the reason and the host
    /// API's Settings → Plugins view as `project.trust`.
    pub fn reason(&self) -> &'static str {
        match self {
            TrustState::Trusted => "Trusted",
            TrustState::LastApproved => "LastApproved",
            TrustState::NeverTrusted => "NeverTrusted",
            TrustState::ApprovedHashMismatch { .. } => "ApprovedHashMismatch",
            TrustState::OtherProject { .. } => "TrustOfAnotherProject",
        }
    }
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
pub fn approved_plugins(project: ProjectView<'_>) -> ApprovedConfig<'_> {
    let current_hash = project
        .known_hash
        .map_or_else(|| config_hash(project.plugins), str::to_string);
    let trust = project
        .trust
        .filter(|t| t.metadata.deletion_timestamp.is_none());
    let (state, approved) = match trust {
        None => (TrustState::NeverTrusted, None),
        Some(t) => match other_owner(t, project.uid) {
            Some(owner_uid) => (TrustState::OtherProject { owner_uid }, None),
            None if t.spec.hash == current_hash => (TrustState::Trusted, Some(project.plugins)),
            None => {
                let actual = config_hash(&t.spec.plugins);
                if actual == t.spec.hash {
                    (TrustState::LastApproved, Some(&t.spec.plugins))
                } else {
                    (
                        TrustState::ApprovedHashMismatch {
                            stated: t.spec.hash.clone(),
                            actual,
                        },
                        None,
                    )
                }
            }
        },
    };
    ApprovedConfig {
        current_hash,
        state,
        approved,
    }
}

/// The uid of the Project a trust belongs to, when its owner reference names one other than
/// `uid` (a trust without an owner reference, or a project whose uid is unknown, passes).
fn other_owner(trust: &ProjectTrust, uid: Option<&str>) -> Option<String> {
    let uid = uid?;
    let api_version = format!("{GROUP}/");
    trust
        .metadata
        .owner_references
        .iter()
        .flatten()
        .find(|o| o.kind == "Project" && o.api_version.starts_with(&api_version) && o.uid != uid)
        .map(|o| o.uid.clone())
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
    use serde_json::json;

    use super::*;
    use crate::resolve::fixtures::config;

    /// The trust of one row: none, of a config, or of a config and then tampered with.
    #[derive(Clone, Copy)]
    enum Trust {
        Absent,
        Of(bool),
        /// The hash of one config, with the other config's values.
        Tampered,
        /// Of this config, owned by another Project of the same name.
        OwnedByOther(bool),
        /// Of this config, owned by this Project.
        OwnedByThis(bool),
        /// Of this config, being deleted.
        Deleting(bool),
    }

    fn plugins(enabled: bool) -> PluginsConfig {
        config(&[("p", json!({ "enabled": enabled }))])
    }

    fn owned(uid: &str, enabled: bool) -> ProjectTrust {
        let mut t = ProjectTrust::of("proj", &plugins(enabled));
        t.metadata.owner_references = Some(vec![OwnerReference {
            api_version: format!("{GROUP}/v1alpha1"),
            kind: "Project".into(),
            name: "proj".into(),
            uid: uid.into(),
            ..Default::default()
        }]);
        t
    }

    fn trust(row: Trust) -> Option<ProjectTrust> {
        match row {
            Trust::Absent => None,
            Trust::Of(e) => Some(ProjectTrust::of("proj", &plugins(e))),
            Trust::Tampered => {
                let mut t = ProjectTrust::of("proj", &plugins(false));
                t.spec.plugins = plugins(true);
                Some(t)
            }
            Trust::OwnedByOther(e) => Some(owned("uid-earlier", e)),
            Trust::OwnedByThis(e) => Some(owned("uid-proj", e)),
            Trust::Deleting(e) => {
                let mut t = ProjectTrust::of("proj", &plugins(e));
                t.metadata.deletion_timestamp =
                    Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
                Some(t)
            }
        }
    }

    #[derive(Debug, PartialEq)]
    enum Want {
        Trusted,
        LastApproved,
        NeverTrusted,
        Mismatch,
        OtherProject,
    }

    #[test]
    fn which_config_counts() {
        use Trust::*;
        // (current config enables p, the trust, the state, the `enabled` that counts)
        let rows = [
            (true, Absent, Want::NeverTrusted, None),
            (true, Of(true), Want::Trusted, Some(true)),
            (false, Of(false), Want::Trusted, Some(false)),
            // An edit since the trust: the trusted version applies until trusted again.
            (true, Of(false), Want::LastApproved, Some(false)),
            (false, Of(true), Want::LastApproved, Some(true)),
            (true, Tampered, Want::Mismatch, None),
            (true, OwnedByThis(true), Want::Trusted, Some(true)),
            (true, OwnedByThis(false), Want::LastApproved, Some(false)),
            (true, OwnedByOther(true), Want::OtherProject, None),
            (true, OwnedByOther(false), Want::OtherProject, None),
            (true, Deleting(true), Want::NeverTrusted, None),
        ];
        for (current, row, want, enabled) in rows {
            let current = plugins(current);
            let trust = trust(row);
            let view = ProjectView {
                plugins: &current,
                uid: Some("uid-proj"),
                trust: trust.as_ref(),
                known_hash: None,
            };
            let a = approved_plugins(view);
            let state = match a.state {
                TrustState::Trusted => Want::Trusted,
                TrustState::LastApproved => Want::LastApproved,
                TrustState::NeverTrusted => Want::NeverTrusted,
                TrustState::ApprovedHashMismatch { .. } => Want::Mismatch,
                TrustState::OtherProject { .. } => Want::OtherProject,
            };
            let context = format!(
                "current {current:?}, trust {:?}",
                trust.as_ref().map(|t| &t.spec)
            );
            assert_eq!(state, want, "{context}");
            assert_eq!(a.plugin("p").and_then(|c| c.enabled), enabled, "{context}");
            assert_eq!(a.is_trusted(), want == Want::Trusted, "{context}");
            assert_eq!(a.current_hash, config_hash(&current), "{context}");
            if a.approved.is_none() {
                assert!(a.plugins().is_empty(), "{context}");
            }
        }
    }

    #[test]
    fn a_project_of_unknown_uid_takes_any_trust_of_its_name() {
        let current = plugins(true);
        let trust = owned("uid-earlier", true);
        let view = ProjectView {
            plugins: &current,
            uid: None,
            trust: Some(&trust),
            known_hash: None,
        };
        assert!(approved_plugins(view).is_trusted());
    }

    #[test]
    fn a_known_hash_stands_for_the_config() {
        let current = plugins(true);
        let trust = owned("uid-earlier", true);
        let view = ProjectView {
            plugins: &current,
            uid: None,
            trust: Some(&trust),
            known_hash: None,
        };
        let hash = config_hash(&current);
        assert!(approved_plugins(view.with_hash(&hash)).is_trusted());
        // The hash given is the one compared (the caller keeps it right, per version).
        let other = approved_plugins(view.with_hash("sha256:other"));
        assert!(!other.is_trusted());
        assert_eq!(other.current_hash, "sha256:other");
    }

    #[test]
    fn the_view_of_a_project_reads_its_config_and_uid() {
        let mut project = Project::new("proj", Default::default());
        project.spec.plugins = plugins(true);
        project.metadata.uid = Some("uid-proj".into());
        let trust = owned("uid-earlier", true);
        let view = ProjectView::new(&project, Some(&trust));
        assert_eq!(view.uid, Some("uid-proj"));
        assert_eq!(
            approved_plugins(view).state,
            TrustState::OtherProject {
                owner_uid: "uid-earlier".into()
            }
        );
    }
}
