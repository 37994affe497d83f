//! What `plugin install` and `plugin upgrade` would apply, from what the image is: the
//! Plugin pinned by digest, its command and manifest read from the image, the approved
//! capabilities, the signature published next to it. Pure: facts and choices in, a Plugin
//! (or why not) out.

use std::collections::BTreeMap;

use model::manifest::{self, Capability, Manifest, ManifestError, bundle};
use model::resources::{Plugin, PluginManifestSpec, PluginSignature, PluginSpec};
use oci::signing::record::SignatureRecord;

/// Which capabilities the owner approves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Approval {
    /// Every capability the manifest declares.
    All,
    /// These, each by name (each must be declared).
    Each(Vec<String>),
}

/// One capability the manifest declares, what it allows, and whether it is approved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CapabilityLine {
    pub capability: Capability,
    pub allows: &'static str,
    /// What exactly it opens, where the manifest says: `network.egress`'s destinations.
    pub reaches: Vec<String>,
    pub approved: bool,
}

impl CapabilityLine {
    /// What approving it allows, with what exactly it reaches.
    pub fn allows_here(&self) -> String {
        if self.reaches.is_empty() {
            self.allows.to_string()
        } else {
            format!("{}: {}", self.allows, self.reaches.join(", "))
        }
    }
}

/// Why the image cannot be installed as it is.
#[derive(Debug, thiserror::Error)]
pub enum CandidateError {
    #[error("the image's /loop-plugin/plugin.json is not UTF-8")]
    NotUtf8,
    #[error("the image's /loop-plugin/plugin.json: {0}")]
    Manifest(#[from] ManifestError),
    #[error("the image's /loop-plugin: {0}")]
    Bundle(String),
    #[error(
        "--approve {0}: the manifest does not declare it (it declares: {1}); approve only what it asks for"
    )]
    NotDeclared(String, String),
    #[error("--approve {0:?}: unknown capability: one of {1}")]
    Unknown(String, String),
    #[error("the manifest's id {id:?} is not the Plugin {name:?} being upgraded")]
    Renamed { id: String, name: String },
}

/// What the image says, as install needs it.
pub struct PulledImage<'a> {
    /// `REF@sha256:...`.
    pub pinned: String,
    pub command: Vec<String>,
    pub plugin_json: &'a [u8],
    pub bundle: &'a BTreeMap<String, bundle::BundleEntry>,
    /// The signature to copy into `spec.signature`, if one was published.
    pub signature: Option<&'a SignatureRecord>,
}

/// The manifest the image ships, checked: every rule, and the bundle holds what it names.
pub fn manifest_of(image: &PulledImage) -> Result<(Manifest, PluginManifestSpec), CandidateError> {
    let text = std::str::from_utf8(image.plugin_json).map_err(|_| CandidateError::NotUtf8)?;
    let value = manifest::json5_value(text)?;
    let manifest = manifest::from_value(&value)?;
    let problems = bundle::check(&manifest, image.bundle);
    if !problems.is_empty() {
        let list: Vec<String> = problems.iter().map(|p| p.to_string()).collect();
        return Err(CandidateError::Bundle(list.join("; ")));
    }
    let spec: PluginManifestSpec = serde_json::from_value(value).map_err(|e| {
        CandidateError::Manifest(ManifestError::Syntax {
            line: 0,
            column: 0,
            message: e.to_string(),
        })
    })?;
    Ok((manifest, spec))
}

/// The approved capabilities, in the manifest's order.
pub fn approve(manifest: &Manifest, approval: &Approval) -> Result<Vec<String>, CandidateError> {
    let declared = || {
        manifest
            .capabilities
            .iter()
            .map(|c| c.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let chosen: Vec<Capability> = match approval {
        Approval::All => manifest.capabilities.clone(),
        Approval::Each(names) => {
            let mut chosen = Vec::new();
            for name in names {
                let c = Capability::parse(name)
                    .ok_or_else(|| CandidateError::Unknown(name.clone(), Capability::names()))?;
                if !manifest.declares_capability(c) {
                    return Err(CandidateError::NotDeclared(name.clone(), declared()));
                }
                chosen.push(c);
            }
            chosen
        }
    };
    Ok(manifest
        .capabilities
        .iter()
        .filter(|c| chosen.contains(c))
        .map(|c| c.as_str().to_string())
        .collect())
}

/// Each declared capability, what it allows, and whether `approved` has it.
pub fn capability_lines(manifest: &Manifest, approved: &[String]) -> Vec<CapabilityLine> {
    manifest
        .capabilities
        .iter()
        .map(|c| CapabilityLine {
            capability: *c,
            allows: c.allows(),
            reaches: match c {
                Capability::NetworkEgress => {
                    manifest.egress.iter().map(|e| e.destination()).collect()
                }
                _ => Vec::new(),
            },
            approved: approved.iter().any(|a| a == c.as_str()),
        })
        .collect()
}

/// The Plugin to apply.
pub fn plugin(
    image: &PulledImage,
    manifest: &Manifest,
    spec_manifest: PluginManifestSpec,
    approved: Vec<String>,
    purge_on_delete: bool,
) -> Plugin {
    Plugin::new(
        &manifest.id,
        PluginSpec {
            image: image.pinned.clone(),
            command: image.command.clone(),
            manifest: spec_manifest,
            approved_capabilities: approved,
            signature: image.signature.map(|s| PluginSignature {
                payload: s.payload.clone(),
                signature: s.signature.clone(),
                public_key: s.public_key.clone(),
            }),
            purge_on_delete,
        },
    )
}

/// For an upgrade: the approvals of the installed version that the new manifest still
/// declares, plus what the owner approves now.
pub fn carried_approvals(
    manifest: &Manifest,
    before: &[String],
    now: Option<&Approval>,
) -> Result<Vec<String>, CandidateError> {
    let mut names: Vec<String> = before
        .iter()
        .filter(|b| Capability::parse(b).is_some_and(|c| manifest.declares_capability(c)))
        .cloned()
        .collect();
    match now {
        Some(Approval::All) => return approve(manifest, &Approval::All),
        Some(Approval::Each(more)) => names.extend(more.iter().cloned()),
        None => {}
    }
    names.dedup();
    approve(manifest, &Approval::Each(names))
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::manifest::bundle::BundleEntry;

    const JSON: &str = r#"{
      // JSON5, as plugin.json may be
      "id": "echo", "name": "Echo", "version": "0.2.0", "api": "1",
      "capabilities": ["agent.readonly", "ui.composer_switch", "schedule"],
      "ui": { "composer_switches": [{ "id": "mode", "label": "Mode", "icon": "ui/mode.svg" }] },
    }"#;

    fn bundle(icon: u64) -> BTreeMap<String, BundleEntry> {
        BTreeMap::from([("ui/mode.svg".to_string(), BundleEntry::File { size: icon })])
    }

    fn says<'a>(b: &'a BTreeMap<String, BundleEntry>) -> PulledImage<'a> {
        PulledImage {
            pinned: format!("r.test/echo:1@sha256:{}", "a".repeat(64)),
            command: vec!["/echo-plugin".into()],
            plugin_json: JSON.as_bytes(),
            bundle: b,
            signature: None,
        }
    }

    #[test]
    fn the_plugin_is_what_the_image_says() {
        let b = bundle(100);
        let image = says(&b);
        let (m, spec) = manifest_of(&image).unwrap();
        let approved = approve(&m, &Approval::Each(vec!["schedule".into()])).unwrap();
        let p = plugin(&image, &m, spec, approved, false);
        assert_eq!(p.metadata.name.as_deref(), Some("echo"));
        assert_eq!(p.spec.image, image.pinned);
        assert_eq!(p.spec.command, ["/echo-plugin"]);
        assert_eq!(p.spec.approved_capabilities, ["schedule"]);
        assert_eq!(p.spec.manifest.version.as_deref(), Some("0.2.0"));
        let lines = capability_lines(&m, &p.spec.approved_capabilities);
        assert_eq!(lines.len(), 3);
        assert!(lines.iter().filter(|l| l.approved).count() == 1);
        assert!(lines.iter().all(|l| !l.allows.is_empty()));
    }

    #[test]
    fn the_egress_capability_shows_each_destination_it_opens() {
        let mut m: serde_json::Value = manifest::json5_value(JSON).unwrap();
        m["capabilities"]
            .as_array_mut()
            .unwrap()
            .push("network.egress".into());
        m["egress"] = serde_json::json!([
            { "host": "api.github.com", "ports": [443] },
            { "cidr": "10.20.0.0/16", "ports": [5433, 5432] },
        ]);
        let m = manifest::from_value(&m).unwrap();
        let lines = capability_lines(&m, &["network.egress".into()]);
        let egress = lines
            .iter()
            .find(|l| l.capability == Capability::NetworkEgress)
            .unwrap();
        assert!(egress.approved);
        assert_eq!(
            egress.allows_here(),
            format!(
                "{}: api.github.com:443, 10.20.0.0/16:5432,5433",
                Capability::NetworkEgress.allows()
            )
        );
        let others: Vec<String> = lines
            .iter()
            .filter(|l| l.capability != Capability::NetworkEgress)
            .map(CapabilityLine::allows_here)
            .collect();
        assert!(others.iter().all(|a| !a.contains(':')), "{others:?}");
    }

    #[test]
    fn approvals_are_checked_against_the_manifest() {
        let b = bundle(100);
        let (m, _) = manifest_of(&says(&b)).unwrap();
        assert_eq!(approve(&m, &Approval::All).unwrap().len(), 3);
        let err = approve(&m, &Approval::Each(vec!["files.read".into()])).unwrap_err();
        assert!(err.to_string().contains("does not declare"), "{err}");
        let err = approve(&m, &Approval::Each(vec!["files.write".into()])).unwrap_err();
        assert!(err.to_string().contains("unknown capability"), "{err}");
        // Manifest order, whatever the command line's.
        let a = approve(
            &m,
            &Approval::Each(vec!["schedule".into(), "agent.readonly".into()]),
        )
        .unwrap();
        assert_eq!(a, ["agent.readonly", "schedule"]);
    }

    #[test]
    fn an_oversized_icon_refuses_the_install() {
        let b = bundle(16 * 1024 + 1);
        let err = manifest_of(&says(&b)).unwrap_err().to_string();
        assert!(err.contains("ui.composer_switches[0].icon"), "{err}");
    }

    /// `plugin install` names where a `plugin.json` cut short ends, as `manifest check` does.
    #[test]
    fn a_manifest_cut_short_is_refused_where_it_ends() {
        let b = bundle(100);
        let cut: String = JSON.lines().take(3).collect::<Vec<_>>().join("\n");
        let image = PulledImage {
            plugin_json: cut.as_bytes(),
            ..says(&b)
        };
        let err = manifest_of(&image).unwrap_err().to_string();
        let last = JSON.lines().nth(2).unwrap();
        assert_eq!(
            err,
            format!(
                "the image's /loop-plugin/plugin.json: line 3, column {}: EOF parsing object",
                last.chars().count() + 1
            )
        );
    }

    #[test]
    fn upgrades_carry_what_is_still_declared() {
        let b = bundle(1);
        let (m, _) = manifest_of(&says(&b)).unwrap();
        let before = vec!["agent.readonly".to_string(), "files.read".to_string()];
        assert_eq!(
            carried_approvals(&m, &before, None).unwrap(),
            ["agent.readonly"]
        );
        assert_eq!(
            carried_approvals(&m, &before, Some(&Approval::Each(vec!["schedule".into()]))).unwrap(),
            ["agent.readonly", "schedule"]
        );
        assert_eq!(
            carried_approvals(&m, &before, Some(&Approval::All))
                .unwrap()
                .len(),
            3
        );
    }
}
