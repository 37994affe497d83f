//! `plugin verify REF|NAME`: pulls the image (an installed Plugin's, or any reference) and
//! runs admission's stages on it here, under the cluster's HostConfig when there is one:
//! what the controller would decide, and why.

use kube::{Client, ResourceExt};
use model::resources::{HostConfigSpec, Plugin};

use super::cluster;
use super::error::PluginError;
use super::registry::{RegistryArgs, registry};
use admission::Outcome;
use install::candidate::{self, Approval};
use install::check::{self, Pulled};

/// What verify found.
pub struct Verified {
    /// The installed Plugin, or the one `install --approve-all` would make.
    pub plugin: Plugin,
    pub installed: bool,
    pub pulled: Pulled,
    pub outcome: Outcome,
    /// Whether a cluster's HostConfig was used (else its defaults, plugins on).
    pub cluster_policy: bool,
}

/// Verifies `target`: an installed Plugin's name, else an image reference.
pub async fn verify(
    client: Option<&Client>,
    args: &RegistryArgs,
    target: &str,
) -> Result<Verified, PluginError> {
    let (host, installed, cluster_policy) = match client {
        Some(c) => match (cluster::host(c).await, cluster::plugins(c).await) {
            (Ok(h), Ok(p)) => (h, p, true),
            _ => (HostConfigSpec::default(), vec![], false),
        },
        None => (HostConfigSpec::default(), vec![], false),
    };
    let existing = installed.iter().find(|p| p.name_any() == target).cloned();
    let reference = existing
        .as_ref()
        .map(|p| p.spec.image.clone())
        .unwrap_or_else(|| target.to_string());
    let registry = registry(args, client, Some(&host)).await?;
    let pulled = check::pull(&registry, &reference).await?;
    let plugin = match &existing {
        Some(p) => p.clone(),
        None => {
            let view = pulled.view();
            let says = pulled.says(&view, check::chosen_signature(&host, &pulled.signatures));
            let (manifest, spec) = candidate::manifest_of(&says)?;
            let approved = candidate::approve(&manifest, &Approval::All)?;
            candidate::plugin(&says, &manifest, spec, approved, false)
        }
    };
    let outcome = check::evaluate(&host, &plugin, &pulled, &installed, false);
    Ok(Verified {
        installed: existing.is_some(),
        plugin,
        pulled,
        outcome,
        cluster_policy,
    })
}
