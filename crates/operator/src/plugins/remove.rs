//! `plugin remove NAME [--purge]`: deletes the Plugin. Its instances, Pods and CronJobs go
//! with the chats' next reconcile; each chat's /data and the plugin's agent runs stay unless
//! `--purge`, which the controller's finalizer carries out (spec.purgeOnDelete, set before the
//! delete).

use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client};
use model::resources::Plugin;

use super::error::PluginError;

/// Removes `name`; returns whether the data goes too.
pub async fn remove(client: &Client, name: &str, purge: bool) -> Result<bool, PluginError> {
    let api: Api<Plugin> = Api::all(client.clone());
    if api
        .get_opt(name)
        .await
        .map_err(PluginError::kube(format!("reading Plugin {name}")))?
        .is_none()
    {
        return Err(PluginError::NotInstalled(name.into()));
    }
    if purge {
        let patch = serde_json::json!({ "spec": { "purgeOnDelete": true } });
        api.patch(
            name,
            &PatchParams::apply(super::install::FIELD_MANAGER).force(),
            &Patch::Merge(&patch),
        )
        .await
        .map_err(PluginError::kube(format!("asking Plugin {name} to purge")))?;
    }
    api.delete(name, &DeleteParams::default())
        .await
        .map_err(PluginError::kube(format!("deleting Plugin {name}")))?;
    Ok(purge)
}
