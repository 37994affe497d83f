//! `plugin install REF` and `plugin upgrade NAME [REF]`: pull the image and check it, show
//! each capability with what it allows and take the owner's approvals, run admission's
//! stages as the controller will (refusing what it would refuse), then create (or replace)
//! the Plugin pinned by digest, or print it with `--dry-run`. After applying, wait a little
//! for the controller's verdict.

use std::time::Duration;

use admission::{Outcome, StageState};
use kube::api::PostParams;
use kube::{Api, Client, ResourceExt};
use model::resources::{AdmissionStage, HostConfigSpec, Plugin};

use super::cluster;
use super::error::PluginError;
use super::registry::{RegistryArgs, registry};
use install::candidate::{self, Approval, CapabilityLine};
use install::check::{self, Pulled};

/// The field manager of the CLI's writes.
pub const FIELD_MANAGER: &str = "loop-plugins-cli";

/// How the owner approves capabilities: given on the command line, or asked one by one.
pub enum Approvals<'a> {
    Given(Approval),
    /// Asked for each capability the manifest declares; true approves it.
    Ask(&'a mut dyn FnMut(&CapabilityLine) -> bool),
}

/// What install (or upgrade) did.
pub struct InstallReport {
    pub plugin: Plugin,
    pub capabilities: Vec<CapabilityLine>,
    /// Admission's stages as the CLI ran them before applying.
    pub checked: Outcome,
    /// Whether the Plugin was written (false with --dry-run).
    pub applied: bool,
    /// The controller's verdict once it came (None: not within the wait, or not applied).
    pub verdict: Option<(String, String, String)>,
}

/// `plugin install REF`.
pub async fn install(
    client: Option<&Client>,
    args: &RegistryArgs,
    reference: &str,
    approvals: Approvals<'_>,
    dry_run: bool,
    wait: Duration,
) -> Result<InstallReport, PluginError> {
    let (host, installed) = read_cluster(client, dry_run).await?;
    let registry = registry(args, client, Some(&host)).await?;
    let pulled = check::pull(&registry, reference).await?;
    let (plugin, capabilities) = candidate_from(&host, &pulled, approvals, None, false)?;
    let name = plugin.name_any();
    if installed.iter().any(|p| p.name_any() == name) {
        return Err(PluginError::Exists(name));
    }
    let checked = check::evaluate(&host, &plugin, &pulled, &installed, false);
    refuse_unless_admissible(&checked)?;
    if dry_run {
        return Ok(InstallReport {
            plugin,
            capabilities,
            checked,
            applied: false,
            verdict: None,
        });
    }
    let client = client.ok_or_else(|| PluginError::Refused("no cluster to install into".into()))?;
    let api: Api<Plugin> = Api::all(client.clone());
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let created = api.create(&params, &plugin).await.map_err(|e| match &e {
        kube::Error::Api(s) if s.is_already_exists() => PluginError::Exists(name.clone()),
        _ => PluginError::Kube {
            what: format!("creating Plugin {name}"),
            source: e,
        },
    })?;
    let verdict = wait_for_verdict(client, &created, wait).await;
    Ok(InstallReport {
        plugin: created,
        capabilities,
        checked,
        applied: true,
        verdict,
    })
}

/// `plugin upgrade NAME [REF]`: REF defaults to the installed image's tag, resolved again.
pub async fn upgrade(
    client: &Client,
    args: &RegistryArgs,
    name: &str,
    reference: Option<&str>,
    approvals: Option<Approvals<'_>>,
    dry_run: bool,
    wait: Duration,
) -> Result<InstallReport, PluginError> {
    let (host, installed) = read_cluster(Some(client), false).await?;
    let current = installed
        .iter()
        .find(|p| p.name_any() == name)
        .cloned()
        .ok_or_else(|| PluginError::NotInstalled(name.into()))?;
    let reference = match reference {
        Some(r) => r.to_string(),
        None => retag(&current.spec.image)?,
    };
    let registry = registry(args, Some(client), Some(&host)).await?;
    let pulled = check::pull(&registry, &reference).await?;
    let (mut plugin, capabilities) = candidate_from(
        &host,
        &pulled,
        approvals.unwrap_or(Approvals::Given(Approval::Each(vec![]))),
        Some(&current),
        current.spec.purge_on_delete,
    )?;
    if plugin.name_any() != name {
        return Err(candidate::CandidateError::Renamed {
            id: plugin.name_any(),
            name: name.into(),
        }
        .into());
    }
    // Judged in its place among the installed plugins.
    plugin.metadata = kube::api::ObjectMeta {
        resource_version: current.metadata.resource_version.clone(),
        ..current.metadata.clone()
    };
    let checked = check::evaluate(&host, &plugin, &pulled, &installed, false);
    refuse_unless_admissible(&checked)?;
    if dry_run {
        return Ok(InstallReport {
            plugin,
            capabilities,
            checked,
            applied: false,
            verdict: None,
        });
    }
    let api: Api<Plugin> = Api::all(client.clone());
    let params = PostParams {
        field_manager: Some(FIELD_MANAGER.into()),
        ..Default::default()
    };
    let mut replacement = current.clone();
    replacement.spec = plugin.spec.clone();
    let replaced = api
        .replace(name, &params, &replacement)
        .await
        .map_err(PluginError::kube(format!("replacing Plugin {name}")))?;
    let verdict = wait_for_verdict(client, &replaced, wait).await;
    Ok(InstallReport {
        plugin: replaced,
        capabilities,
        checked,
        applied: true,
        verdict,
    })
}

/// HostConfig and the installed plugins; with `--dry-run` and no cluster, defaults.
async fn read_cluster(
    client: Option<&Client>,
    dry_run: bool,
) -> Result<(HostConfigSpec, Vec<Plugin>), PluginError> {
    let Some(client) = client else {
        return Ok((HostConfigSpec::default(), vec![]));
    };
    match (cluster::host(client).await, cluster::plugins(client).await) {
        (Ok(h), Ok(p)) => Ok((h, p)),
        (Err(e), _) | (_, Err(e)) if !dry_run => Err(e),
        _ => Ok((HostConfigSpec::default(), vec![])),
    }
}

/// The Plugin to apply from what was pulled, with the owner's approvals.
fn candidate_from(
    host: &HostConfigSpec,
    pulled: &Pulled,
    approvals: Approvals<'_>,
    current: Option<&Plugin>,
    purge_on_delete: bool,
) -> Result<(Plugin, Vec<CapabilityLine>), PluginError> {
    let view = pulled.view();
    let says = pulled.says(&view, check::chosen_signature(host, &pulled.signatures));
    let (manifest, spec) = candidate::manifest_of(&says)?;
    let approved = match (approvals, current) {
        (Approvals::Given(a), None) => candidate::approve(&manifest, &a)?,
        (Approvals::Given(a), Some(c)) => {
            candidate::carried_approvals(&manifest, &c.spec.approved_capabilities, Some(&a))?
        }
        (Approvals::Ask(ask), current) => {
            let before = current
                .map(|c| c.spec.approved_capabilities.clone())
                .unwrap_or_default();
            let carried = candidate::carried_approvals(&manifest, &before, None)?;
            let mut names = carried.clone();
            for line in candidate::capability_lines(&manifest, &carried) {
                if !line.approved && ask(&line) {
                    names.push(line.capability.as_str().to_string());
                }
            }
            candidate::approve(&manifest, &Approval::Each(names))?
        }
    };
    let capabilities = candidate::capability_lines(&manifest, &approved);
    Ok((
        candidate::plugin(&says, &manifest, spec, approved, purge_on_delete),
        capabilities,
    ))
}

/// Refuses what admission would refuse (the host switch aside).
fn refuse_unless_admissible(outcome: &Outcome) -> Result<(), PluginError> {
    match outcome.stopped_at() {
        Some(s) if s.state == StageState::Refused => Err(PluginError::Refused(format!(
            "admission would refuse it at the {} stage ({}): {}",
            s.stage, s.reason, s.message
        ))),
        _ => Ok(()),
    }
}

/// `repo:tag@sha256:...` → `repo:tag`, to resolve the tag again.
fn retag(image: &str) -> Result<String, PluginError> {
    ::install::review::looked_up_again(image)?.ok_or_else(|| {
        PluginError::Refused(format!(
            "{image} names no tag to look up again: give the image to upgrade to"
        ))
    })
}

/// Waits up to `wait` for the controller to judge this generation; its Admitted condition.
async fn wait_for_verdict(
    client: &Client,
    plugin: &Plugin,
    wait: Duration,
) -> Option<(String, String, String)> {
    let api: Api<Plugin> = Api::all(client.clone());
    let name = plugin.name_any();
    let generation = plugin.metadata.generation;
    let deadline = tokio::time::Instant::now() + wait;
    while tokio::time::Instant::now() < deadline {
        if let Ok(Some(p)) = api.get_opt(&name).await
            && let Some(status) = &p.status
            && status.observed_generation == generation
            && let Some(c) = status
                .conditions
                .iter()
                .find(|c| c.r#type == model::resources::ADMITTED)
            && c.status != model::resources::ConditionStatus::Unknown
        {
            return Some((
                format!("{:?}", c.status),
                status.stage.clone().unwrap_or_default(),
                c.message.clone(),
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    None
}

/// The stages, as the report prints them.
pub fn stage_lines(outcome: &Outcome) -> Vec<(AdmissionStage, &'static str, String)> {
    outcome
        .stages
        .iter()
        .map(|s| {
            let mark = match s.state {
                StageState::Passed => "ok",
                StageState::Warned => "warning",
                StageState::Refused => "refused",
                StageState::Pending => "pending",
                StageState::NotReached => "-",
            };
            (s.stage, mark, format!("{}: {}", s.reason, s.message))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upgrades_look_the_tag_up_again() {
        let pinned = format!("r.test:5000/p/echo:1.2@sha256:{}", "a".repeat(64));
        assert_eq!(retag(&pinned).unwrap(), "r.test:5000/p/echo:1.2");
        let bare = format!("r.test/p/echo@sha256:{}", "a".repeat(64));
        assert!(retag(&bare).unwrap_err().to_string().contains("no tag"));
    }
}
