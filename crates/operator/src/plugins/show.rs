//! `plugin list [--verify]` and `plugin info NAME`: what is installed, as admission left it,
//! and (with --verify) each image pulled and judged again by admission's stages here.

use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};
use model::manifest::{self, Manifest};
use model::resources::{ADMITTED, AdmissionStage, Plugin, PluginInstance};

use super::cluster;
use super::error::PluginError;
use super::registry::{RegistryArgs, registry};
use install::candidate::{self, CapabilityLine};
use install::check;

/// One row of `plugin list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Row {
    pub name: String,
    pub version: String,
    pub admitted: String,
    pub stage: String,
    pub reason: String,
    pub digest: String,
    /// With --verify: what admission's stages say of the image pulled now.
    pub verified: Option<String>,
}

/// `plugin list`.
pub async fn list(
    client: &Client,
    args: &RegistryArgs,
    verify: bool,
) -> Result<Vec<Row>, PluginError> {
    let host = cluster::host(client).await?;
    let mut plugins = cluster::plugins(client).await?;
    plugins.sort_by_key(|p| p.name_any());
    let registry = if verify {
        Some(registry(args, Some(client), Some(&host)).await?)
    } else {
        None
    };
    let mut rows = Vec::new();
    for p in &plugins {
        let status = p.status.clone().unwrap_or_default();
        let admitted = status.conditions.iter().find(|c| c.r#type == ADMITTED);
        let verified = match &registry {
            None => None,
            Some(registry) => Some(match check::pull(registry, &p.spec.image).await {
                Err(e) => format!("image: {e}"),
                Ok(pulled) => {
                    let outcome = check::evaluate(&host, p, &pulled, &plugins, true);
                    match outcome.stopped_at() {
                        None => "verified: every stage passes".into(),
                        Some(s) => format!("{} stage: {}: {}", s.stage, s.reason, s.message),
                    }
                }
            }),
        };
        rows.push(Row {
            name: p.name_any(),
            version: p.spec.manifest.version.clone().unwrap_or_default(),
            admitted: admitted
                .map(|c| format!("{:?}", c.status))
                .unwrap_or_else(|| "-".into()),
            stage: status.stage.unwrap_or_else(|| "-".into()),
            reason: admitted.map(|c| c.reason.clone()).unwrap_or_default(),
            digest: status.digest.unwrap_or_default(),
            verified,
        });
    }
    Ok(rows)
}

/// Everything `plugin info` shows.
pub struct Info {
    pub plugin: Plugin,
    pub manifest: Option<Manifest>,
    pub capabilities: Vec<CapabilityLine>,
    /// Each stage's condition: (stage, status, reason, message).
    pub stages: Vec<(AdmissionStage, String, String, String)>,
    pub summary: Option<(String, String, String)>,
    /// (namespace/name, phase, pod).
    pub instances: Vec<(String, String, String)>,
}

/// `plugin info NAME`.
pub async fn info(client: &Client, name: &str) -> Result<Info, PluginError> {
    let plugin = cluster::plugin(client, name)
        .await?
        .ok_or_else(|| PluginError::NotInstalled(name.into()))?;
    let manifest = manifest::from_value(&plugin.spec.manifest.to_json()).ok();
    let capabilities = manifest
        .as_ref()
        .map(|m| candidate::capability_lines(m, &plugin.spec.approved_capabilities))
        .unwrap_or_default();
    let stages = AdmissionStage::ALL
        .iter()
        .filter_map(|s| {
            plugin.stage_condition(*s).map(|c| {
                (
                    *s,
                    format!("{:?}", c.status),
                    c.reason.clone(),
                    c.message.clone(),
                )
            })
        })
        .collect();
    let summary = plugin.status.as_ref().and_then(|s| {
        s.conditions.iter().find(|c| c.r#type == ADMITTED).map(|c| {
            (
                format!("{:?}", c.status),
                c.reason.clone(),
                c.message.clone(),
            )
        })
    });
    let api: Api<PluginInstance> = Api::all(client.clone());
    let mut instances: Vec<(String, String, String)> = api
        .list(&ListParams::default())
        .await
        .map_err(PluginError::kube("listing PluginInstances"))?
        .items
        .into_iter()
        .filter(|i| i.spec.plugin == name)
        .map(|i| {
            let status = i.status.clone().unwrap_or_default();
            (
                format!("{}/{}", i.namespace().unwrap_or_default(), i.name_any()),
                status
                    .phase
                    .map(|p| format!("{p:?}"))
                    .unwrap_or_else(|| "-".into()),
                status.pod.unwrap_or_else(|| "-".into()),
            )
        })
        .collect();
    instances.sort();
    Ok(Info {
        plugin,
        manifest,
        capabilities,
        stages,
        summary,
        instances,
    })
}
