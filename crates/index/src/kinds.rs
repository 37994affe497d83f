//! Which kinds a process watches, and which of their objects, for the roles it runs: the pure
//! half of starting the index ([`watches`]). A kind two roles read is watched once, with the
//! wider selection.
//!
//! | kind | controller | API server | stored as |
//! |---|---|---|---|
//! | HostConfig, Plugin, Project, ProjectTrust, Channel | all | all | typed |
//! | PluginInstance | ours | ours | typed |
//! | Pod | ours | plugin Pods | typed, with where each instance answers (`pods`) |
//! | Secret | ours | token Secrets | compact (controller); without the token (API server), its digest in `tokens` |
//! | PersistentVolumeClaim, CronJob | ours | | compact |
//! | Secret of the controller's namespace | all | | typed (HostConfig's registry credentials) |
//! | AgentRun | ours | ours | typed |
//! | Job | runners' | | typed |
//! | NetworkPolicy | all (ours, and those that close plugin Pods' egress) | | typed |
//! | ConfigMap | | inbox, memory, live sessions (with their control requests), quality scans | typed |
//! | ToolCallApproval | | ours | typed |
//!
//! "ours" is [`MANAGED_SELECTOR`]: what we made. Every stored object loses its managedFields
//! (`trim`). The two Secret watches stay apart when both roles share a process: the controller
//! keeps each Secret whole (compact), the API server never keeps a token.

use model::names::MANAGED_SELECTOR;

/// Every kind a process may watch, as the API server names it (the metrics of unreadable
/// objects have a series for each).
pub const KINDS: [&str; 15] = [
    "HostConfig",
    "Plugin",
    "Project",
    "ProjectTrust",
    "Channel",
    "PluginInstance",
    "AgentRun",
    "Pod",
    "Secret",
    "PersistentVolumeClaim",
    "CronJob",
    "Job",
    "NetworkPolicy",
    "ConfigMap",
    "ToolCallApproval",
];

/// The roles a process runs, each reading the index.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Roles {
    /// The controller, when it runs here.
    pub controller: Option<ControllerRole>,
    /// The API server (the Plugin API, the host API and the fan-out).
    pub api: bool,
}

/// What the controller's part of the index depends on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerRole {
    /// The controller's own namespace, where HostConfig's registry credentials Secret is.
    pub namespace: String,
}

impl Roles {
    /// The controller alone, in `namespace`.
    pub fn controller(namespace: &str) -> Self {
        Self {
            controller: Some(ControllerRole {
                namespace: namespace.into(),
            }),
            api: false,
        }
    }

    /// The API server alone.
    pub fn api() -> Self {
        Self {
            controller: None,
            api: true,
        }
    }

    /// These roles and the API server's.
    pub fn and_api(self) -> Self {
        Self { api: true, ..self }
    }
}

/// Which objects of a kind a watch lists: where, and with which labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selection {
    /// One namespace, or every one.
    pub namespace: Option<String>,
    /// A label selector, or every object.
    pub labels: Option<String>,
}

impl Selection {
    /// Every object of the kind.
    pub fn all() -> Self {
        Self {
            namespace: None,
            labels: None,
        }
    }

    /// The objects `labels` selects, in every namespace.
    pub fn labelled(labels: &str) -> Self {
        Self {
            namespace: None,
            labels: Some(labels.into()),
        }
    }

    /// Every object of the kind in `namespace`.
    pub fn within(namespace: &str) -> Self {
        Self {
            namespace: Some(namespace.into()),
            labels: None,
        }
    }
}

/// The label selector of the instances' token Secrets.
pub fn token_secrets_selector() -> String {
    format!("{MANAGED_SELECTOR},app.kubernetes.io/component=token")
}

/// The label selector of plugin Pods.
pub fn plugin_pods_selector() -> String {
    format!("{MANAGED_SELECTOR},app.kubernetes.io/component=plugin")
}

/// The label selector of the agent runs' Jobs.
pub fn runner_jobs_selector() -> String {
    format!("{MANAGED_SELECTOR},app.kubernetes.io/component=runner")
}

/// The label selector of the API server's inbox, memory, live session, UI command and quality
/// scan ConfigMaps.
pub fn config_maps_selector() -> String {
    format!(
        "{MANAGED_SELECTOR},app.kubernetes.io/component in (inbox,memory,live,ui-commands,quality)"
    )
}

/// The watches of a process, by the index's store each fills: `None` for a kind none of its
/// roles reads (its store stays empty, and never ready).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Watches {
    pub host: Option<Selection>,
    pub plugins: Option<Selection>,
    pub projects: Option<Selection>,
    pub project_trusts: Option<Selection>,
    pub channels: Option<Selection>,
    pub instances: Option<Selection>,
    pub pods: Option<Selection>,
    pub owned_secrets: Option<Selection>,
    pub claims: Option<Selection>,
    pub cronjobs: Option<Selection>,
    pub registry_secrets: Option<Selection>,
    pub jobs: Option<Selection>,
    pub network_policies: Option<Selection>,
    pub runs: Option<Selection>,
    pub config_maps: Option<Selection>,
    pub approvals: Option<Selection>,
    pub secrets: Option<Selection>,
    /// Whether the changes the API server's fan-out follows are told: config writes, and a
    /// count of changes to Plugins, instances and runs.
    pub tells_changes: bool,
}

/// What a process running `roles` watches.
pub fn watches(roles: &Roles) -> Watches {
    let controller = roles.controller.as_ref();
    let any = controller.is_some() || roles.api;
    let ours = || Selection::labelled(MANAGED_SELECTOR);
    let declared = || any.then(Selection::all);
    let for_controller = |selection: Selection| controller.map(|_| selection);
    let for_api = |selection: Selection| roles.api.then_some(selection);
    Watches {
        host: declared(),
        plugins: declared(),
        projects: declared(),
        project_trusts: declared(),
        channels: declared(),
        instances: any.then(ours),
        // Every Pod we made covers the plugin Pods.
        pods: for_controller(ours())
            .or_else(|| for_api(Selection::labelled(&plugin_pods_selector()))),
        owned_secrets: for_controller(ours()),
        claims: for_controller(ours()),
        cronjobs: for_controller(ours()),
        registry_secrets: controller.map(|c| Selection::within(&c.namespace)),
        jobs: for_controller(Selection::labelled(&runner_jobs_selector())),
        // Not only ours: the egress of a plugin opens where another policy closes it.
        network_policies: for_controller(Selection::all()),
        runs: any.then(ours),
        config_maps: for_api(Selection::labelled(&config_maps_selector())),
        approvals: for_api(ours()),
        secrets: for_api(Selection::labelled(&token_secrets_selector())),
        tells_changes: roles.api,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_controller_watches_the_declared_kinds_and_what_it_made() {
        let ours = Some(Selection::labelled(MANAGED_SELECTOR));
        assert_eq!(
            watches(&Roles::controller("loop-plugins-system")),
            Watches {
                host: Some(Selection::all()),
                plugins: Some(Selection::all()),
                projects: Some(Selection::all()),
                project_trusts: Some(Selection::all()),
                channels: Some(Selection::all()),
                instances: ours.clone(),
                pods: ours.clone(),
                owned_secrets: ours.clone(),
                claims: ours.clone(),
                cronjobs: ours.clone(),
                registry_secrets: Some(Selection::within("loop-plugins-system")),
                jobs: Some(Selection::labelled(&runner_jobs_selector())),
                network_policies: Some(Selection::all()),
                runs: ours,
                config_maps: None,
                approvals: None,
                secrets: None,
                tells_changes: false,
            }
        );
    }

    #[test]
    fn the_api_server_watches_the_declared_kinds_and_what_it_answers_from() {
        let ours = Some(Selection::labelled(MANAGED_SELECTOR));
        assert_eq!(
            watches(&Roles::api()),
            Watches {
                host: Some(Selection::all()),
                plugins: Some(Selection::all()),
                projects: Some(Selection::all()),
                project_trusts: Some(Selection::all()),
                channels: Some(Selection::all()),
                instances: ours.clone(),
                pods: Some(Selection::labelled(
                    "app.kubernetes.io/managed-by=loop-plugins,app.kubernetes.io/component=plugin"
                )),
                owned_secrets: None,
                claims: None,
                cronjobs: None,
                registry_secrets: None,
                jobs: None,
                network_policies: None,
                runs: ours.clone(),
                config_maps: Some(Selection::labelled(&config_maps_selector())),
                approvals: ours,
                secrets: Some(Selection::labelled(&token_secrets_selector())),
                tells_changes: true,
            }
        );
    }

    #[test]
    fn both_roles_watch_each_kind_once_with_the_wider_selection() {
        let both = watches(&Roles::controller("system").and_api());
        let controller = watches(&Roles::controller("system"));
        let api = watches(&Roles::api());
        assert_eq!(both.pods, controller.pods, "every Pod we made");
        assert_eq!(both.owned_secrets, controller.owned_secrets);
        assert_eq!(both.secrets, api.secrets, "the token Secrets, apart");
        assert_eq!(both.runs, api.runs);
        assert_eq!(both.runs, controller.runs, "both read the runs");
        assert_eq!(both.jobs, controller.jobs);
        assert_eq!(both.network_policies, controller.network_policies);
        assert_eq!(both.registry_secrets, controller.registry_secrets);
        assert!(both.tells_changes);
    }

    #[test]
    fn no_role_watches_nothing() {
        assert_eq!(watches(&Roles::default()), Watches::default());
    }
}
