//! The reads `explain` makes: the objects the controller decides from. Thin.

use kube::{Api, Client};
use model::manifest::{self, Manifest};
use model::names::instance_name;
use model::resources::{Channel, HostConfigSpec, Plugin, PluginInstance, Project, ProjectTrust};

use crate::plugins::cluster;
use crate::plugins::error::PluginError;
use crate::plugins::stop::ChatRef;

/// What was read, owned; [`super::World`] borrows it.
pub struct Gathered {
    pub host: HostConfigSpec,
    pub plugin: Option<Plugin>,
    pub manifest: Option<Manifest>,
    pub chat: Option<Channel>,
    pub project: Option<Project>,
    pub trust: Option<ProjectTrust>,
    pub instance: Option<PluginInstance>,
}

/// Reads what the controller decides `plugin`'s instance in `chat` from.
pub async fn gather(
    client: &Client,
    plugin: &str,
    chat: &ChatRef,
) -> Result<Gathered, PluginError> {
    let host = cluster::host(client).await?;
    let installed = cluster::plugin(client, plugin).await?;
    let manifest = installed
        .as_ref()
        .and_then(|p| manifest::from_value(&p.spec.manifest.to_json()).ok());
    let ns = &chat.namespace;
    let read = |what: String| PluginError::kube(format!("reading {what} in {ns}"));
    let channel = Api::<Channel>::namespaced(client.clone(), ns)
        .get_opt(&chat.channel)
        .await
        .map_err(read(format!("Channel {}", chat.channel)))?;
    let (project, trust) = match &channel {
        None => (None, None),
        Some(c) => {
            let name = &c.spec.project;
            let project = Api::<Project>::namespaced(client.clone(), ns)
                .get_opt(name)
                .await
                .map_err(read(format!("Project {name}")))?;
            let trust = Api::<ProjectTrust>::namespaced(client.clone(), ns)
                .get_opt(name)
                .await
                .map_err(read(format!("ProjectTrust {name}")))?;
            (project, trust)
        }
    };
    let name = instance_name(plugin, &chat.channel);
    let instance = Api::<PluginInstance>::namespaced(client.clone(), ns)
        .get_opt(&name)
        .await
        .map_err(read(format!("PluginInstance {name}")))?;
    Ok(Gathered {
        host,
        plugin: installed,
        manifest,
        chat: channel,
        project,
        trust,
        instance,
    })
}

impl Gathered {
    /// The facts' view of what was read.
    pub fn world<'a>(&'a self, plugin_name: &'a str) -> super::World<'a> {
        super::World {
            plugin_name,
            host: &self.host,
            plugin: self.plugin.as_ref(),
            manifest: self.manifest.as_ref(),
            chat: self.chat.as_ref(),
            project: self.project.as_ref(),
            trust: self.trust.as_ref(),
            instance: self.instance.as_ref(),
        }
    }
}
