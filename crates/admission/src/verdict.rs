//! Admission's verdict as the Plugin's status records it, for those who ask after the
//! pipeline ran: whether a Plugin is admitted now ([`admit`], what the chat and instance
//! reconcilers ask) and which names the admitted plugins hold, in package-name order (what
//! the Names stage of the plugins after them is judged against).

use std::sync::Arc;

use kube::ResourceExt;

use model::manifest::{Manifest, ManifestError};
use model::resources::{AdmissionStage, HostConfigSpec, Plugin};

use crate::conflicts::{self, Holder};

/// Why a plugin is not admitted now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The stage that refused, when the status names one.
    pub stage: Option<AdmissionStage>,
    pub message: String,
}

/// The outcome of [`admit`].
pub type Admission = Result<Arc<Manifest>, Refusal>;

/// Whether `plugin` is admitted now, as the other reconcilers ask it: the host switch is on,
/// and the Plugin's status (written by admission) admits this very spec and digest; `manifest`
/// is its manifest as parsed (the controller keeps one a version of the Plugin).
pub fn admit(
    host: &HostConfigSpec,
    plugin: &Plugin,
    manifest: &Result<Arc<Manifest>, ManifestError>,
) -> Admission {
    if !host.plugins.enabled {
        return Err(Refusal {
            stage: Some(AdmissionStage::Host),
            message: "plugins.enabled is off in HostConfig default".into(),
        });
    }
    if !plugin.is_admitted() {
        let status = plugin.status.as_ref();
        let stage = status
            .and_then(|s| s.stage.as_deref())
            .and_then(|name| AdmissionStage::ALL.into_iter().find(|s| s.name() == name));
        let message = status
            .and_then(|s| {
                s.conditions
                    .iter()
                    .find(|c| c.r#type == model::resources::ADMITTED)
            })
            .filter(|c| c.observed_generation == plugin.metadata.generation)
            .map(|c| c.message.clone())
            .unwrap_or_else(|| "admission has not looked at this version yet".into());
        return Err(Refusal { stage, message });
    }
    manifest.clone().map_err(|err| Refusal {
        stage: Some(AdmissionStage::Manifest),
        message: err.to_string(),
    })
}

/// The admitted plugins of `installed` that come before `plugin` in package-name order (not
/// one being deleted), in that order, with the names they hold: of two plugins wanting a
/// name, the one first by name holds it, whenever each was created or admitted (zeroclaw's
/// "Tool plugins register in package-name order").
pub fn earlier_holders<'a>(
    plugin: &Plugin,
    installed: impl IntoIterator<Item = &'a Plugin>,
) -> Vec<Holder> {
    let me = plugin.name_any();
    let mut before: Vec<Holder> = installed
        .into_iter()
        .filter(|p| p.metadata.deletion_timestamp.is_none())
        .filter(|p| conflicts::registers_before(&p.name_any(), &me))
        .filter_map(holder)
        .collect();
    before.sort_by(|a, b| a.plugin.cmp(&b.plugin));
    before
}

/// The names an admitted plugin holds, from what its status recorded.
pub fn holder(plugin: &Plugin) -> Option<Holder> {
    if !plugin.is_admitted() {
        return None;
    }
    let status = plugin.status.as_ref()?;
    Some(Holder {
        plugin: plugin.metadata.name.clone()?,
        tools: status.tools.iter().map(|t| t.name.clone()).collect(),
    })
}
