//! The thin part of `project import`: reads the installed plugins' manifests, then applies
//! what [`carry_over`](super::carry_over) kept (the Project, trusted as exactly that version
//! with `--trust`; or HostConfig's `plugins.defaults` with `--global`), or returns it as YAML
//! for `--dry-run`. Both writes are server-side applies under the import's own field manager,
//! so an import owns only the entries it wrote.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use kube::api::{ListParams, Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use model::config::{ConfigLevel, PluginsConfig, config_hash};
use model::manifest::{self, Manifest};
use model::names::FIELD_MANAGER_IMPORT;
use model::resources::{HOST_CONFIG_NAME, HostConfig, Plugin, Project, ProjectSpec};
use serde_json::{Value, json};

use super::carry::{Carried, carry_over};
use super::file::{ImportError, read_plugins};
use crate::project::{trust_of, trust_project};

/// Where the imported config goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ImportTarget {
    /// A project's config: the Project `name` in `namespace`; with `trust`, also the
    /// ProjectTrust of exactly the imported version.
    Project {
        namespace: String,
        name: String,
        trust: bool,
    },
    /// The global config: HostConfig `default`'s `plugins.defaults`.
    Global,
}

/// What an import did (or, with `dry_run`, would do).
#[derive(Clone, Debug)]
pub struct Imported {
    pub carried: Carried,
    /// The objects written, as YAML documents.
    pub yaml: String,
    /// The config hash trusted, with `--trust`.
    pub trusted: Option<String>,
}

/// Imports the config at `path` into `target`; with `dry_run` writes nothing.
pub async fn import(
    client: Client,
    path: &Path,
    target: &ImportTarget,
    dry_run: bool,
) -> Result<Imported, ImportError> {
    let plugins = read_plugins(path)?;
    let installed = installed_manifests(&client).await?;
    let level = match target {
        ImportTarget::Project { .. } => ConfigLevel::Project,
        ImportTarget::Global => ConfigLevel::Global,
    };
    let carried = carry_over(&plugins, &installed, level);
    match target {
        ImportTarget::Project {
            namespace,
            name,
            trust,
        } => {
            let project = project_of(namespace, name, carried.plugins.clone());
            let mut yaml = to_yaml(&project);
            if *trust {
                yaml.push_str("---\n");
                yaml.push_str(&to_yaml(&trust_of(&project)));
            }
            let mut trusted = None;
            if !dry_run {
                let api: Api<Project> = Api::namespaced(client.clone(), namespace);
                api.patch(name, &apply_params(), &Patch::Apply(&project))
                    .await
                    .map_err(kube_error(format!("applying Project {namespace}/{name}")))?;
                if *trust {
                    let hash = config_hash(&carried.plugins);
                    trusted = Some(trust_project(client, namespace, name, Some(&hash)).await?);
                }
            }
            Ok(Imported {
                carried,
                yaml,
                trusted,
            })
        }
        ImportTarget::Global => {
            let patch = host_defaults_patch(&carried.plugins);
            if !dry_run {
                let api: Api<HostConfig> = Api::all(client);
                api.patch(HOST_CONFIG_NAME, &apply_params(), &Patch::Apply(&patch))
                    .await
                    .map_err(kube_error(format!(
                        "applying HostConfig {HOST_CONFIG_NAME}"
                    )))?;
            }
            Ok(Imported {
                carried,
                yaml: to_yaml(&patch),
                trusted: None,
            })
        }
    }
}

/// The project's name from its config's path, `<name>/.loop/config.json`, when that folder's
/// name is a valid Kubernetes object name.
pub fn project_name_of(path: &Path) -> Result<String, ImportError> {
    let no_name = || ImportError::NoName {
        path: PathBuf::from(path),
    };
    let absolute = std::path::absolute(path).map_err(|_| no_name())?;
    let dot_loop = absolute.parent().ok_or_else(no_name)?;
    if dot_loop.file_name().is_none_or(|n| n != ".loop") {
        return Err(no_name());
    }
    let name = dot_loop
        .parent()
        .and_then(|d| d.file_name())
        .and_then(|n| n.to_str())
        .ok_or_else(no_name)?;
    if is_object_name(name) {
        Ok(name.to_string())
    } else {
        Err(no_name())
    }
}

/// A DNS-1123 subdomain, as the API server requires of a Project's name.
fn is_object_name(name: &str) -> bool {
    let alnum = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit();
    !name.is_empty()
        && name.len() <= 253
        && name.starts_with(alnum)
        && name.ends_with(alnum)
        && name.chars().all(|c| alnum(c) || c == '-' || c == '.')
}

/// The Project holding the imported config.
pub fn project_of(namespace: &str, name: &str, plugins: PluginsConfig) -> Project {
    let mut project = Project::new(name, ProjectSpec { plugins });
    project.metadata.namespace = Some(namespace.into());
    project
}

/// The server-side apply of HostConfig `default` that owns only `plugins.defaults`.
pub fn host_defaults_patch(plugins: &PluginsConfig) -> Value {
    json!({
        "apiVersion": HostConfig::api_version(&()),
        "kind": HostConfig::kind(&()),
        "metadata": { "name": HOST_CONFIG_NAME },
        "spec": { "plugins": { "defaults": plugins } },
    })
}

/// Every installed Plugin's manifest by id (a Plugin whose stored manifest no longer passes
/// the rules counts as not installed: the controller would not run it).
async fn installed_manifests(client: &Client) -> Result<BTreeMap<String, Manifest>, ImportError> {
    let api: Api<Plugin> = Api::all(client.clone());
    let plugins = api
        .list(&ListParams::default())
        .await
        .map_err(kube_error("listing Plugins".into()))?;
    Ok(plugins
        .items
        .iter()
        .filter_map(|p| {
            let manifest = manifest::from_value(&p.spec.manifest.to_json()).ok()?;
            Some((p.name_any(), manifest))
        })
        .collect())
}

fn apply_params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER_IMPORT).force()
}

fn kube_error(what: String) -> impl FnOnce(kube::Error) -> ImportError {
    move |source| ImportError::Kube { what, source }
}

fn to_yaml<T: serde::Serialize>(object: &T) -> String {
    serde_saphyr::to_string(object).expect("a resource serializes to YAML")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_projects_name_is_the_folder_holding_dot_loop() {
        let name = project_name_of(Path::new("/src/my-app/.loop/config.json")).unwrap();
        assert_eq!(name, "my-app");
        for bad in ["/src/My_App/.loop/config.json", "/src/app/config.json"] {
            assert!(
                matches!(
                    project_name_of(Path::new(bad)),
                    Err(ImportError::NoName { .. })
                ),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_global_import_owns_only_the_plugin_defaults() {
        let plugins: PluginsConfig =
            serde_json::from_value(json!({ "echo": { "enabled": true } })).unwrap();
        let patch = host_defaults_patch(&plugins);
        assert_eq!(patch["metadata"]["name"], "default");
        assert_eq!(patch["kind"], "HostConfig");
        assert_eq!(
            patch["spec"],
            json!({ "plugins": { "defaults": { "echo": { "enabled": true } } } })
        );
    }
}
