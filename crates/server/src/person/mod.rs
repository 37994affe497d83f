//! What a person changes through the host API, made with their own token, so Kubernetes RBAC
//! decides and the API server's audit log names them: a plugin's entry in the global config
//! (HostConfig) or a project's (Project), trusting a project's config, and upgrading or
//! removing a plugin (its Plugin). The API server's own
//! ServiceAccount has none of these rights, and needs none.
//!
//! - [`trust`]: trusting a project (the CLI's `project trust` is the same write);
//! - [`Person`]: the calls, to the cluster ([`KubePerson`]) or recorded (tests).

pub mod trust;

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::Value;

use model::resources::{HOST_CONFIG_NAME, HostConfig, Plugin, PluginSpec, Project};

/// Why a person's write failed.
#[derive(Debug, thiserror::Error)]
pub enum PersonError {
    /// The cluster refused it (RBAC's 403 says which right is missing; 404, 409, 422).
    #[error("{message}")]
    Refused { status: u16, message: String },
    #[error(transparent)]
    Trust(#[from] trust::TrustError),
    #[error("{0}")]
    Failed(String),
}

impl PersonError {
    fn of(what: &str, e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) => PersonError::Refused {
                status: s.code,
                message: format!("{what}: {}", s.message),
            },
            e => PersonError::Failed(format!("{what}: {e}")),
        }
    }
}

/// What a person does through the host API, each call with their token.
pub trait Person: Send + Sync {
    /// Merge-patches Project `project` of `namespace`.
    fn patch_project<'a>(
        &'a self,
        token: &'a str,
        namespace: &'a str,
        project: &'a str,
        patch: Value,
    ) -> BoxFuture<'a, Result<(), PersonError>>;
    /// Merge-patches HostConfig `default`.
    fn patch_host_config<'a>(
        &'a self,
        token: &'a str,
        patch: Value,
    ) -> BoxFuture<'a, Result<(), PersonError>>;
    /// Trusts Project `project`'s config of hash `hash`; answers the hash trusted.
    fn trust<'a>(
        &'a self,
        token: &'a str,
        namespace: &'a str,
        project: &'a str,
        hash: &'a str,
    ) -> BoxFuture<'a, Result<String, PersonError>>;
    /// Replaces Plugin `name`'s spec, if it is still at `resource_version` (409 otherwise).
    fn replace_plugin_spec<'a>(
        &'a self,
        token: &'a str,
        name: &'a str,
        resource_version: &'a str,
        spec: &'a PluginSpec,
    ) -> BoxFuture<'a, Result<(), PersonError>>;
    /// Deletes Plugin `name`.
    fn delete_plugin<'a>(
        &'a self,
        token: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), PersonError>>;
}

/// The cluster, reached as the person: the API server's own connection (its address and CA)
/// with the person's bearer token instead of its own credentials.
pub struct KubePerson {
    config: kube::Config,
}

impl KubePerson {
    pub fn new(config: kube::Config) -> Self {
        Self { config }
    }

    fn client(&self, token: &str) -> Result<Client, PersonError> {
        let mut config = self.config.clone();
        config.auth_info = kube::config::AuthInfo {
            token: Some(token.to_string().into()),
            ..Default::default()
        };
        Client::try_from(config)
            .map_err(|e| PersonError::Failed(format!("a client with the person's token: {e}")))
    }
}

impl Person for KubePerson {
    fn patch_project<'a>(
        &'a self,
        token: &'a str,
        namespace: &'a str,
        project: &'a str,
        patch: Value,
    ) -> BoxFuture<'a, Result<(), PersonError>> {
        Box::pin(async move {
            let api: Api<Project> = Api::namespaced(self.client(token)?, namespace);
            api.patch(project, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
                .map_err(|e| PersonError::of(&format!("Project {namespace}/{project}"), e))
        })
    }

    fn patch_host_config<'a>(
        &'a self,
        token: &'a str,
        patch: Value,
    ) -> BoxFuture<'a, Result<(), PersonError>> {
        Box::pin(async move {
            let api: Api<HostConfig> = Api::all(self.client(token)?);
            api.patch(
                HOST_CONFIG_NAME,
                &PatchParams::default(),
                &Patch::Merge(&patch),
            )
            .await
            .map(|_| ())
            .map_err(|e| PersonError::of(&format!("HostConfig {HOST_CONFIG_NAME}"), e))
        })
    }

    fn trust<'a>(
        &'a self,
        token: &'a str,
        namespace: &'a str,
        project: &'a str,
        hash: &'a str,
    ) -> BoxFuture<'a, Result<String, PersonError>> {
        Box::pin(async move {
            let client = self.client(token)?;
            trust::trust_project(client, namespace, project, Some(hash))
                .await
                .map_err(|e| match e {
                    trust::TrustError::ReadProject { source, .. }
                    | trust::TrustError::Trust { source, .. }
                        if matches!(source, kube::Error::Api(_)) =>
                    {
                        let what = format!("trusting Project {namespace}/{project}");
                        PersonError::of(&what, source)
                    }
                    e => PersonError::Trust(e),
                })
        })
    }

    fn replace_plugin_spec<'a>(
        &'a self,
        token: &'a str,
        name: &'a str,
        resource_version: &'a str,
        spec: &'a PluginSpec,
    ) -> BoxFuture<'a, Result<(), PersonError>> {
        Box::pin(async move {
            let api: Api<Plugin> = Api::all(self.client(token)?);
            let spec = serde_json::to_value(spec)
                .map_err(|e| PersonError::Failed(format!("Plugin {name}'s spec: {e}")))?;
            // A JSON patch replacing the whole spec (fields the new version drops go too),
            // with the resourceVersion of the review: the API server answers 409 when
            // someone changed the Plugin since.
            let patch: json_patch::Patch = serde_json::from_value(serde_json::json!([
                { "op": "replace", "path": "/metadata/resourceVersion", "value": resource_version },
                { "op": "replace", "path": "/spec", "value": spec },
            ]))
            .map_err(|e| PersonError::Failed(format!("Plugin {name}'s patch: {e}")))?;
            api.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
                .await
                .map(|_| ())
                .map_err(|e| PersonError::of(&format!("upgrading Plugin {name}"), e))
        })
    }

    fn delete_plugin<'a>(
        &'a self,
        token: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), PersonError>> {
        Box::pin(async move {
            let api: Api<Plugin> = Api::all(self.client(token)?);
            api.delete(name, &Default::default())
                .await
                .map(|_| ())
                .map_err(|e| PersonError::of(&format!("Plugin {name}"), e))
        })
    }
}

/// One write a person made, as [`Recorded`] keeps it.
#[derive(Clone, Debug, PartialEq)]
pub enum Written {
    Project {
        token: String,
        namespace: String,
        project: String,
        patch: Value,
    },
    HostConfig {
        token: String,
        patch: Value,
    },
    Trust {
        token: String,
        namespace: String,
        project: String,
        hash: String,
    },
    PluginSpec {
        token: String,
        name: String,
        resource_version: String,
        spec: Box<PluginSpec>,
    },
    PluginDeleted {
        token: String,
        name: String,
    },
}

/// Writes recorded, for request-level tests; `refuse` answers every write with it instead.
#[derive(Default)]
pub struct Recorded {
    pub written: Mutex<Vec<Written>>,
    pub refuse: Mutex<Option<(u16, String)>>,
}

impl Recorded {
    fn record(&self, w: Written) -> Result<(), PersonError> {
        if let Some((status, message)) = self.refuse.lock().expect("lock").clone() {
            return Err(PersonError::Refused { status, message });
        }
        self.written.lock().expect("lock").push(w);
        Ok(())
    }
}

impl Person for Recorded {
    fn patch_project<'a>(
        &'a self,
        token: &'a str,
        namespace: &'a str,
        project: &'a str,
        patch: Value,
    ) -> BoxFuture<'a, Result<(), PersonError>> {
        let w = Written::Project {
            token: token.into(),
            namespace: namespace.into(),
            project: project.into(),
            patch,
        };
        Box::pin(async move { self.record(w) })
    }

    fn patch_host_config<'a>(
        &'a self,
        token: &'a str,
        patch: Value,
    ) -> BoxFuture<'a, Result<(), PersonError>> {
        let w = Written::HostConfig {
            token: token.into(),
            patch,
        };
        Box::pin(async move { self.record(w) })
    }

    fn trust<'a>(
        &'a self,
        token: &'a str,
        namespace: &'a str,
        project: &'a str,
        hash: &'a str,
    ) -> BoxFuture<'a, Result<String, PersonError>> {
        let w = Written::Trust {
            token: token.into(),
            namespace: namespace.into(),
            project: project.into(),
            hash: hash.into(),
        };
        Box::pin(async move { self.record(w).map(|()| hash.to_string()) })
    }

    fn replace_plugin_spec<'a>(
        &'a self,
        token: &'a str,
        name: &'a str,
        resource_version: &'a str,
        spec: &'a PluginSpec,
    ) -> BoxFuture<'a, Result<(), PersonError>> {
        let w = Written::PluginSpec {
            token: token.into(),
            name: name.into(),
            resource_version: resource_version.into(),
            spec: Box::new(spec.clone()),
        };
        Box::pin(async move { self.record(w) })
    }

    fn delete_plugin<'a>(
        &'a self,
        token: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<(), PersonError>> {
        let w = Written::PluginDeleted {
            token: token.into(),
            name: name.into(),
        };
        Box::pin(async move { self.record(w) })
    }
}

/// Shared, as the host API's state holds it.
pub type SharedPerson = Arc<dyn Person>;
