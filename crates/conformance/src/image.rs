//! `conformance IMAGE`: the image as the host gets it. Pulled by tag or digest and judged by
//! admission's stages as `plugin verify` judges it (crates/operator: the same pull, the Plugin
//! `plugin install --approve-all` would make, HostConfig's defaults with plugins on), each
//! stage a finding ([`crate::stages`]); a refused image is not run, as the host would never
//! run it. An admitted one has its manifest and UI bundle written out ([`crate::unpack`]), is
//! run by a container engine by digest, as its Pod runs it ([`crate::container`]), with the
//! SDK's fake host as its Plugin API, and checked as `conformance -- COMMAND` checks a process
//! ([`crate::check_started`]), its panels and cards drawn when it declares any.

use std::path::PathBuf;

use model::manifest::Manifest;
use operator::plugins::PluginError;
use operator::plugins::registry::RegistryArgs;
use operator::plugins::verify::{self, Verified};

use crate::container;
use crate::error::SetupError;
use crate::report::Report;
use crate::{Contract, engine, stages, ui, unpack};

/// How to reach the image and what to run it with.
#[derive(Clone, Debug)]
pub struct ImageOptions {
    /// How the registry is reached (`plugin install`'s `--registry-config`,
    /// `--insecure-registry`).
    pub registry: RegistryArgs,
    /// The engines to try, in order ([`engine::from_env`]).
    pub engines: Vec<PathBuf>,
    /// The Chromium that draws the panels and cards (none there: the drawing is skipped).
    pub chromium: PathBuf,
}

/// Pulls `reference`, runs admission's stages on it and, admitted, runs and checks it.
pub async fn check_image(
    contract: &Contract,
    reference: &str,
    options: &ImageOptions,
) -> Result<Report, SetupError> {
    let verified = match verify::verify(None, &options.registry, reference).await {
        Ok(v) => v,
        Err(e) => return refused(reference, e),
    };
    if let Some(stopped) = verified
        .outcome
        .stopped_at()
        .filter(|_| verified.outcome.pending())
    {
        return Err(SetupError::Undecided {
            reference: reference.into(),
            stage: stopped.stage.name().into(),
            reason: stopped.reason.clone(),
            message: stopped.message.clone(),
        });
    }
    let mut findings = stages::findings(&verified.outcome);
    let admitted = verified.outcome.admitted();
    let (Some(status), Some(manifest), true) = (
        &verified.outcome.image,
        &verified.outcome.manifest,
        admitted,
    ) else {
        findings.push(stages::not_run());
        return Ok(Report {
            plugin: named(&verified),
            findings,
        });
    };
    let draw = !ui::pages::pages(manifest).is_empty();
    let dir = tempfile::tempdir().map_err(|source| SetupError::Write {
        path: std::env::temp_dir(),
        source,
    })?;
    let unpacked = unpack::unpack(&verified.pulled.facts.tree, draw, dir.path())?;
    // As the plugin reads it, with the SDK's reader.
    let manifest = crate::read_manifest(&unpacked.manifest)?;
    let engine = engine::find(&options.engines).await?;
    let host = sdk::testing::FakeHost::start(sdk::testing::Config::new(manifest.clone()))
        .await
        .map_err(SetupError::FakeHost)?;
    let facts = &verified.pulled.facts;
    let image = facts
        .reference
        .by_digest(facts.manifest_digest.clone())
        .to_string();
    let plugin =
        container::start(&engine, &image, status.run_as(), host.url(), host.token()).await?;
    let ui = draw.then(|| ui::Options::new(unpacked.ui.clone(), options.chromium.clone()));
    let report = crate::check_started(contract, &plugin, manifest, &host, ui.as_ref()).await?;
    drop(plugin);
    findings.extend(report.findings);
    Ok(Report {
        plugin: report.plugin,
        findings,
    })
}

/// What stopped the image before admission's stages could run on a Plugin made of it: a
/// refusal (a finding), or a pull that did not happen (an error).
fn refused(reference: &str, error: PluginError) -> Result<Report, SetupError> {
    let finding = match &error {
        PluginError::Image(e) if !e.is_transient() => stages::image_refused(e.reason(), e),
        PluginError::Candidate(e) => stages::manifest_refused(e),
        _ => {
            return Err(SetupError::Pull {
                reference: reference.into(),
                source: Box::new(error),
            });
        }
    };
    Ok(Report {
        plugin: reference.into(),
        findings: vec![finding, stages::not_run()],
    })
}

/// `echo 0.1.0`, from the manifest admission read, else the image.
fn named(verified: &Verified) -> String {
    match &verified.outcome.manifest {
        Some(Manifest { id, version, .. }) => format!("{id} {version}"),
        None => verified.pulled.facts.pinned.to_string(),
    }
}
