//! A burst of config changes, as owners and operators make them: a project stops or starts
//! enabling a plugin, turns a scheduled action off or on, removes or adds its entry, edits its
//! config without trusting it (so the last approved version still applies), and the
//! HostConfig's apiUrl changes (every CronJob carries it). Deciding the next change is pure
//! (a seeded generator over the state of each project); applying it is one write.

use std::collections::BTreeMap;

use kube::Client;
use rand::Rng;
use rand::rngs::StdRng;

use model::config::{PluginConfig, PluginsConfig};
use model::resources::Project;

use super::world::{self, ACTION};

/// A project's scheduled action, as its entry says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Entry {
    On,
    Off,
    Removed,
}

/// One plugin's part of a project's config.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PluginState {
    pub enabled: bool,
    pub entry: Entry,
}

/// A project's config: trusted, and a pending edit the owner has not trusted (if any).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProjectState {
    pub trusted: BTreeMap<String, PluginState>,
    pub untrusted: Option<BTreeMap<String, PluginState>>,
}

impl ProjectState {
    /// Every plugin enabled with its entry on, trusted: the world as declared.
    pub fn declared(plugins: &[String]) -> Self {
        Self {
            trusted: plugins
                .iter()
                .map(|p| {
                    (
                        p.clone(),
                        PluginState {
                            enabled: true,
                            entry: Entry::On,
                        },
                    )
                })
                .collect(),
            untrusted: None,
        }
    }
}

/// A change of the burst.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A project's trusted config changes one plugin's state.
    Project {
        namespace: String,
        plugin: String,
        to: PluginState,
    },
    /// A project's config is edited without the owner trusting it.
    Untrusted { namespace: String, plugin: String },
    /// The HostConfig's apiUrl becomes this.
    ApiUrl(String),
}

/// The next change among `namespaces`, with `api_urls` to pick from.
pub fn next(
    rng: &mut StdRng,
    states: &BTreeMap<String, ProjectState>,
    namespaces: &[String],
    plugins: &[String],
    api_urls: &[String],
) -> Change {
    let namespace = namespaces[rng.random_range(0..namespaces.len())].clone();
    let plugin = plugins[rng.random_range(0..plugins.len())].clone();
    let now = states
        .get(&namespace)
        .and_then(|s| s.trusted.get(&plugin).copied())
        .unwrap_or(PluginState {
            enabled: true,
            entry: Entry::On,
        });
    match rng.random_range(0..10) {
        0..=3 => Change::Project {
            namespace,
            plugin,
            to: PluginState {
                enabled: !now.enabled,
                ..now
            },
        },
        4..=6 => {
            let entry = match (now.entry, rng.random_bool(0.5)) {
                (Entry::On, true) => Entry::Off,
                (Entry::On, false) => Entry::Removed,
                (Entry::Off, true) => Entry::On,
                (Entry::Off, false) => Entry::Removed,
                (Entry::Removed, true) => Entry::On,
                (Entry::Removed, false) => Entry::Off,
            };
            Change::Project {
                namespace,
                plugin,
                to: PluginState { entry, ..now },
            }
        }
        7..=8 => Change::Untrusted { namespace, plugin },
        _ => Change::ApiUrl(api_urls[rng.random_range(0..api_urls.len())].clone()),
    }
}

/// `states` after `change`.
pub fn apply_to(states: &mut BTreeMap<String, ProjectState>, plugins: &[String], change: &Change) {
    match change {
        Change::Project {
            namespace,
            plugin,
            to,
        } => {
            let state = states
                .entry(namespace.clone())
                .or_insert_with(|| ProjectState::declared(plugins));
            state.trusted.insert(plugin.clone(), *to);
            state.untrusted = None;
        }
        Change::Untrusted { namespace, plugin } => {
            let state = states
                .entry(namespace.clone())
                .or_insert_with(|| ProjectState::declared(plugins));
            let mut edited = state.untrusted.clone().unwrap_or(state.trusted.clone());
            if let Some(p) = edited.get_mut(plugin) {
                p.enabled = !p.enabled;
            }
            state.untrusted = Some(edited);
        }
        Change::ApiUrl(_) => {}
    }
}

fn config(states: &BTreeMap<String, PluginState>) -> BTreeMap<String, PluginConfig> {
    states
        .iter()
        .map(|(plugin, state)| {
            let schedules = match state.entry {
                Entry::On => BTreeMap::from([(ACTION.to_string(), world::schedule_entry(true))]),
                Entry::Off => BTreeMap::from([(ACTION.to_string(), world::schedule_entry(false))]),
                Entry::Removed => BTreeMap::new(),
            };
            (
                plugin.clone(),
                PluginConfig {
                    enabled: Some(state.enabled),
                    settings: BTreeMap::new(),
                    schedules,
                    secret_settings: BTreeMap::new(),
                    risk_profile: None,
                },
            )
        })
        .collect()
}

/// The Project a state makes (its config the edited one when there is one) and the config
/// its owner trusts.
pub fn project(namespace: &str, state: &ProjectState) -> (Project, PluginsConfig) {
    let trusted = config(&state.trusted);
    let current = state
        .untrusted
        .as_ref()
        .map(config)
        .unwrap_or(trusted.clone());
    (world::project(namespace, current), trusted)
}

/// Writes `change` (after `apply_to`, so `states` holds the project's new state).
pub async fn write(
    client: &Client,
    states: &BTreeMap<String, ProjectState>,
    change: &Change,
) -> anyhow::Result<()> {
    match change {
        Change::Project { namespace, .. } | Change::Untrusted { namespace, .. } => {
            let (project, trusted) = project(namespace, &states[namespace]);
            world::project_trusted(client, &project, &trusted).await?;
        }
        Change::ApiUrl(url) => {
            super::ops::patch_host(client, serde_json::json!({ "spec": { "apiUrl": url } }))
                .await?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use rand::SeedableRng;

    use super::*;

    fn plugins() -> Vec<String> {
        vec!["a".into(), "b".into()]
    }

    #[test]
    fn a_declared_state_makes_the_declared_project() {
        let state = ProjectState::declared(&plugins());
        let (made, trusted) = project("ns", &state);
        let declared = world::project("ns", world::project_config(&plugins(), true));
        assert_eq!(made.spec, declared.spec);
        assert_eq!(trusted, declared.spec.plugins);
    }

    #[test]
    fn an_untrusted_edit_leaves_the_trusted_config() {
        let mut states = BTreeMap::new();
        let change = Change::Untrusted {
            namespace: "ns".into(),
            plugin: "a".into(),
        };
        apply_to(&mut states, &plugins(), &change);
        let (made, trusted) = project("ns", &states["ns"]);
        assert_eq!(trusted["a"].enabled, Some(true));
        assert_eq!(made.spec.plugins["a"].enabled, Some(false));
        assert_ne!(trusted, made.spec.plugins);
        // A trusted change then drops the pending edit.
        let change = Change::Project {
            namespace: "ns".into(),
            plugin: "b".into(),
            to: PluginState {
                enabled: true,
                entry: Entry::Off,
            },
        };
        apply_to(&mut states, &plugins(), &change);
        let (made, trusted) = project("ns", &states["ns"]);
        assert_eq!(made.spec.plugins, trusted);
        assert_eq!(
            made.spec.plugins["b"].schedules[ACTION].enabled,
            Some(false)
        );
    }

    #[test]
    fn the_generator_makes_every_kind_of_change() {
        let mut rng = StdRng::seed_from_u64(7);
        let states = BTreeMap::new();
        let namespaces = vec!["n1".to_string(), "n2".to_string()];
        let urls = vec!["http://a".to_string()];
        let changes: Vec<Change> = (0..200)
            .map(|_| next(&mut rng, &states, &namespaces, &plugins(), &urls))
            .collect();
        assert!(changes.iter().any(|c| matches!(c, Change::ApiUrl(_))));
        assert!(
            changes
                .iter()
                .any(|c| matches!(c, Change::Untrusted { .. }))
        );
        assert!(
            changes
                .iter()
                .any(|c| matches!(c, Change::Project { to, .. } if !to.enabled))
        );
        assert!(
            changes
                .iter()
                .any(|c| matches!(c, Change::Project { to, .. } if to.entry == Entry::Removed))
        );
    }
}
