//! The registry client the CLI pulls and pushes with, reaching registries as this machine
//! does. Credentials, first found: `--registry-config FILE`, HostConfig's credentials Secret
//! (read from the cluster, in the controller's namespace), `$DOCKER_CONFIG/config.json` or
//! `~/.docker/config.json`; none means anonymous. Plain-HTTP registries: HostConfig's
//! `plugins.registry.insecure` and `--insecure-registry`. HostConfig's mirrors are the
//! controller's view from inside the cluster and are not used here.

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Secret;
use kube::{Api, Client};
use model::resources::HostConfigSpec;
use oci::{DOCKER_CONFIG_SECRET_KEY, DockerConfig, Registry, RegistryOptions};

use super::error::PluginError;

/// How the CLI reaches registries.
#[derive(Clone, Debug, Default)]
pub struct RegistryArgs {
    /// A dockerconfigjson file to take credentials from.
    pub config: Option<PathBuf>,
    /// More registries reached over plain HTTP.
    pub insecure: Vec<String>,
    /// The controller's namespace, where HostConfig's credentials Secret is.
    pub namespace: String,
}

/// Builds the client.
pub async fn registry(
    args: &RegistryArgs,
    client: Option<&Client>,
    host: Option<&HostConfigSpec>,
) -> Result<Registry, PluginError> {
    let credentials = credentials(args, client, host).await?;
    let mut insecure = args.insecure.clone();
    if let Some(host) = host {
        insecure.extend(host.plugins.registry.insecure.iter().cloned());
    }
    Ok(Registry::new(RegistryOptions {
        credentials,
        insecure,
        ..RegistryOptions::default()
    })?)
}

async fn credentials(
    args: &RegistryArgs,
    client: Option<&Client>,
    host: Option<&HostConfigSpec>,
) -> Result<DockerConfig, PluginError> {
    let parse = |what: String, bytes: &[u8]| {
        DockerConfig::parse(bytes).map_err(|e| PluginError::Credentials {
            what,
            message: e.to_string(),
        })
    };
    if let Some(path) = &args.config {
        let bytes = std::fs::read(path).map_err(|source| PluginError::Io {
            path: path.display().to_string(),
            source,
        })?;
        return parse(path.display().to_string(), &bytes);
    }
    if let (Some(client), Some(name)) = (
        client,
        host.and_then(|h| h.plugins.registry.credentials_secret.as_ref()),
    ) {
        let what = format!("Secret {}/{name}", args.namespace);
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &args.namespace);
        let secret = secrets
            .get(name)
            .await
            .map_err(PluginError::kube(format!("reading {what}")))?;
        let bytes = secret
            .data
            .and_then(|d| d.get(DOCKER_CONFIG_SECRET_KEY).map(|b| b.0.clone()))
            .ok_or_else(|| PluginError::Credentials {
                what: what.clone(),
                message: format!("no {DOCKER_CONFIG_SECRET_KEY} key"),
            })?;
        return parse(what, &bytes);
    }
    let file = std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))
        .map(|d| d.join("config.json"))
        .filter(|p| p.is_file());
    match file {
        Some(path) => {
            let bytes = std::fs::read(&path).map_err(|source| PluginError::Io {
                path: path.display().to_string(),
                source,
            })?;
            parse(path.display().to_string(), &bytes)
        }
        None => Ok(DockerConfig::default()),
    }
}
