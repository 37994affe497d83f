//! What the plugin verbs read from the cluster: HostConfig `default` and the installed
//! Plugins. Thin reads.

use kube::api::ListParams;
use kube::{Api, Client};
use model::resources::{HOST_CONFIG_NAME, HostConfig, HostConfigSpec, Plugin};

use super::error::PluginError;

/// HostConfig `default`'s spec (its defaults when there is none).
pub async fn host(client: &Client) -> Result<HostConfigSpec, PluginError> {
    let api: Api<HostConfig> = Api::all(client.clone());
    Ok(api
        .get_opt(HOST_CONFIG_NAME)
        .await
        .map_err(PluginError::kube("reading HostConfig default"))?
        .map(|h| h.spec)
        .unwrap_or_default())
}

/// Every installed Plugin.
pub async fn plugins(client: &Client) -> Result<Vec<Plugin>, PluginError> {
    let api: Api<Plugin> = Api::all(client.clone());
    Ok(api
        .list(&ListParams::default())
        .await
        .map_err(PluginError::kube("listing Plugins"))?
        .items)
}

/// One Plugin, if installed.
pub async fn plugin(client: &Client, name: &str) -> Result<Option<Plugin>, PluginError> {
    let api: Api<Plugin> = Api::all(client.clone());
    api.get_opt(name)
        .await
        .map_err(PluginError::kube(format!("reading Plugin {name}")))
}
