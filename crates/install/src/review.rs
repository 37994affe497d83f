//! An upgrade's capability review (zeroclaw: an upgrade shows what the new version asks for
//! that the old did not, and the owner approves it or not). Pure: the installed Plugin, the
//! image pulled and the owner's new approvals in; the replacement and each capability's line
//! out. Approvals of capabilities the new version still declares carry over; a capability it
//! newly asks for stays unapproved unless approved now; what it no longer declares goes.

use admission::Outcome;
use model::manifest::{Capability, Manifest};
use model::resources::{HostConfigSpec, Plugin};

use crate::candidate::{self, Approval, CandidateError, CapabilityLine};
use crate::check::{self, Pulled};

/// Where a capability of the new version stood in the installed one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Before {
    /// Declared and approved: the approval carries over.
    Approved,
    /// Declared, not approved: still not, unless approved now.
    Declined,
    /// Not declared: the new version asks for it (the review's point).
    New,
}

impl Before {
    pub fn as_str(self) -> &'static str {
        match self {
            Before::Approved => "approved",
            Before::Declined => "declined",
            Before::New => "new",
        }
    }
}

/// One capability of the new version: what it allows, whether the replacement approves it,
/// and where it stood before.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReviewLine {
    pub line: CapabilityLine,
    pub before: Before,
}

/// What upgrading would apply.
#[derive(Debug)]
pub struct Upgrade {
    /// The replacement: the installed Plugin's metadata (its resourceVersion too, so a
    /// change in between is refused), the new image's spec.
    pub plugin: Plugin,
    pub manifest: Manifest,
    pub capabilities: Vec<ReviewLine>,
    /// Approved before, no longer declared: dropped by the upgrade.
    pub dropped: Vec<String>,
    /// Admission's stages over the replacement, as the controller will run them.
    pub checked: Outcome,
}

/// The capabilities a Plugin's manifest declares, as written.
pub fn declared(plugin: &Plugin) -> Vec<String> {
    plugin
        .spec
        .manifest
        .rest
        .get("capabilities")
        .and_then(|c| c.as_array())
        .map(|a| {
            a.iter()
                .filter_map(|c| c.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// The replacement of `current` by the image `pulled`, approving `approve_now` on top of
/// what carries over. Refused when the image's manifest is not one (or names another
/// plugin), or an approval names a capability it does not declare.
pub fn upgrade(
    host: &HostConfigSpec,
    current: &Plugin,
    pulled: &Pulled,
    approve_now: &[String],
    installed: &[Plugin],
) -> Result<Upgrade, CandidateError> {
    let view = pulled.view();
    let says = pulled.says(&view, check::chosen_signature(host, &pulled.signatures));
    let (manifest, spec) = candidate::manifest_of(&says)?;
    let name = current.metadata.name.clone().unwrap_or_default();
    if manifest.id != name {
        return Err(CandidateError::Renamed {
            id: manifest.id.clone(),
            name,
        });
    }
    let approved = candidate::carried_approvals(
        &manifest,
        &current.spec.approved_capabilities,
        Some(&Approval::Each(approve_now.to_vec())),
    )?;
    let (capabilities, dropped) = lines(&manifest, &approved, current);
    let mut plugin = candidate::plugin(
        &says,
        &manifest,
        spec,
        approved,
        current.spec.purge_on_delete,
    );
    plugin.metadata = current.metadata.clone();
    let checked = check::evaluate(host, &plugin, pulled, installed, false);
    Ok(Upgrade {
        plugin,
        manifest,
        capabilities,
        dropped,
        checked,
    })
}

/// Each capability `manifest` declares with where it stood in `current`, and what `current`
/// approved that `manifest` no longer declares.
pub fn lines(
    manifest: &Manifest,
    approved: &[String],
    current: &Plugin,
) -> (Vec<ReviewLine>, Vec<String>) {
    let before_approved = &current.spec.approved_capabilities;
    let before_declared = declared(current);
    let capabilities = candidate::capability_lines(manifest, approved)
        .into_iter()
        .map(|line| {
            let name = line.capability.as_str();
            let before = if before_approved.iter().any(|a| a == name) {
                Before::Approved
            } else if before_declared.iter().any(|d| d == name) {
                Before::Declined
            } else {
                Before::New
            };
            ReviewLine { line, before }
        })
        .collect();
    let dropped = before_approved
        .iter()
        .filter(|a| Capability::parse(a).is_none_or(|c| !manifest.declares_capability(c)))
        .cloned()
        .collect();
    (capabilities, dropped)
}

/// `repo:tag@sha256:...` → `repo:tag`: an upgrade with no image given looks the installed
/// tag up again. None when the image names no tag.
pub fn looked_up_again(image: &str) -> Result<Option<String>, oci::ReferenceError> {
    let r = oci::ImageRef::parse(image)?;
    match r.tag() {
        Some(tag) => Ok(Some(r.with_tag(tag)?.to_string())),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::manifest;
    use model::resources::{PluginManifestSpec, PluginSpec};
    use serde_json::json;

    fn installed(capabilities: &[&str], approved: &[&str]) -> Plugin {
        let manifest: PluginManifestSpec = serde_json::from_value(json!({
            "id": "echo", "name": "Echo", "version": "0.1.0", "api": "1",
            "capabilities": capabilities,
        }))
        .unwrap();
        Plugin::new(
            "echo",
            PluginSpec {
                image: format!("r.test/echo:1@sha256:{}", "a".repeat(64)),
                command: vec!["/echo".into()],
                manifest,
                approved_capabilities: approved.iter().map(|a| a.to_string()).collect(),
                signature: None,
                purge_on_delete: false,
            },
        )
    }

    fn next(capabilities: &[&str]) -> Manifest {
        manifest::from_value(&json!({
            "id": "echo", "name": "Echo", "version": "0.2.0", "api": "1",
            "capabilities": capabilities,
        }))
        .unwrap()
    }

    /// The review tells a new capability from one declined before and one approved before,
    /// and names what the upgrade drops.
    #[test]
    fn the_review_tells_new_declined_and_carried_apart() {
        let current = installed(
            &["agent.readonly", "schedule", "files.read"],
            &["agent.readonly", "files.read"],
        );
        let m = next(&["agent.readonly", "schedule", "notifications.send"]);
        let approved = candidate::carried_approvals(
            &m,
            &current.spec.approved_capabilities,
            Some(&Approval::Each(vec![])),
        )
        .unwrap();
        let (review, dropped) = lines(&m, &approved, &current);
        let seen: Vec<(&str, Before, bool)> = review
            .iter()
            .map(|l| (l.line.capability.as_str(), l.before, l.line.approved))
            .collect();
        assert_eq!(
            seen,
            [
                ("agent.readonly", Before::Approved, true),
                ("schedule", Before::Declined, false),
                ("notifications.send", Before::New, false),
            ]
        );
        assert_eq!(dropped, ["files.read"]);
        // Approved now: the new one counts.
        let approved = candidate::carried_approvals(
            &m,
            &current.spec.approved_capabilities,
            Some(&Approval::Each(vec!["notifications.send".into()])),
        )
        .unwrap();
        assert_eq!(approved, ["agent.readonly", "notifications.send"]);
    }

    #[test]
    fn upgrades_look_the_tag_up_again() {
        let pinned = format!("r.test:5000/p/echo:1.2@sha256:{}", "a".repeat(64));
        assert_eq!(
            looked_up_again(&pinned).unwrap().as_deref(),
            Some("r.test:5000/p/echo:1.2")
        );
        let bare = format!("r.test/p/echo@sha256:{}", "a".repeat(64));
        assert_eq!(looked_up_again(&bare).unwrap(), None);
    }
}
