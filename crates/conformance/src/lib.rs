//! `loop-plugins conformance`: checks a running plugin against the host → plugin contract
//! (`openapi/plugin-contract-v1.yaml` and the reference's "Loop → plugin" rules) and reports
//! every problem it saw, not just the first.
//!
//! The shape, as in `admission`: gather, decide purely, report.
//!
//! - [`contract`]: the spec compiled (answer schemas, time limits), read from the YAML;
//! - [`plan`]: pure, manifest → the calls to make and what each answer must be (its module
//!   doc has the table of what is checked);
//! - [`sample`]: pure, a tool's input built from its `input_schema`;
//! - [`probe`]: thin, one HTTP call per step with the route's time limit;
//! - [`judge`]: pure, answer (or none) + expectation → pass, fail (naming the sentence of the
//!   reference the answer breaks: [`reference`](mod@reference)) or warn (within the reference, not within this
//!   host's stricter conventions), with why;
//! - [`reference`](mod@reference): the sentences of the reference the failures quote;
//! - [`report`]: the findings as lines and a summary, or JSON; only a failure fails the check;
//! - [`follow`]: with the SDK's fake host as the plugin's Plugin API, the end of each run the
//!   plugin started and the calls of its the host refused ([`check_with_host`]);
//! - [`started`]: what every way of starting a plugin shares (its files, the host's
//!   environment, the wait until it answers) and the handle the check drives ([`Started`]);
//! - [`launch`]: thin, a plugin started as a local process the way the host starts it, with
//!   the fake host as its Plugin API ([`check_command`]);
//! - [`ui`]: with the plugin's UI bundle, each panel and card drawn in headless Chromium the
//!   way the host draws them, under the API server's own policy and the console's bridge
//!   ([`ui::check`], [`check_command_with_ui`]);
//! - [`image`]: `conformance IMAGE`, the image as the host gets it: pulled and judged by
//!   admission's stages ([`stages`]: pure, the stages as findings), its manifest and bundle
//!   written out ([`unpack`]), run by a container engine ([`engine`]: which one;
//!   [`container`]: the run as the Pod's, the other [`Started`]) and checked as above
//!   ([`image::check_image`]).

pub mod container;
pub mod contract;
pub mod engine;
pub mod error;
pub mod follow;
pub mod image;
pub mod judge;
pub mod launch;
pub mod plan;
pub mod probe;
pub mod reference;
pub mod report;
pub mod sample;
pub mod stages;
pub mod started;
pub mod ui;
pub mod unpack;

use std::path::Path;
use std::time::Duration;

pub use contract::Contract;
pub use error::{ContractError, SetupError};
pub use report::{Area, Breach, Finding, Outcome, Report};
pub use started::Started;

/// A running plugin to check.
pub struct Target {
    /// Its base URL: `http://127.0.0.1:8080`.
    pub url: String,
    /// The secret it was started with.
    pub secret: String,
    pub manifest: manifest::Manifest,
}

impl Target {
    /// Reads the secret file (trimmed, as a plugin reads it) and the manifest.
    pub fn from_files(
        url: &str,
        secret_file: &Path,
        manifest_file: &Path,
    ) -> Result<Self, SetupError> {
        let secret = std::fs::read_to_string(secret_file).map_err(|source| SetupError::Read {
            path: secret_file.into(),
            source,
        })?;
        let secret = secret.trim().to_string();
        if secret.is_empty() {
            return Err(SetupError::EmptySecret(secret_file.into()));
        }
        let manifest = read_manifest(manifest_file)?;
        Ok(Self {
            url: url.into(),
            secret,
            manifest,
        })
    }
}

/// Makes every call the manifest calls for, one at a time (as a plugin sees them from one
/// chat's host), and judges each answer.
pub async fn check(contract: &Contract, target: &Target) -> Result<Report, SetupError> {
    run(contract, target, None).await
}

/// How long the plugin may keep calling the fake host after the last call of the check
/// before its runs are ended.
pub const SETTLE_QUIET: Duration = Duration::from_millis(500);
pub const SETTLE_MAX: Duration = Duration::from_secs(10);

/// [`check`], with `host` as the plugin's Plugin API: then each run the plugin started is
/// ended (and `POST /runs/{run_id}/done` must be taken), and each call the host refused for
/// the plugin's own fault is a problem.
pub async fn check_with_host(
    contract: &Contract,
    target: &Target,
    host: &sdk::testing::FakeHost,
) -> Result<Report, SetupError> {
    run(contract, target, Some(host)).await
}

/// Starts `command` as the host starts a plugin, with the fake host as its Plugin API, and
/// checks it ([`check_with_host`]); the process is stopped after.
pub async fn check_command(
    contract: &Contract,
    command: &[String],
    manifest_file: &Path,
) -> Result<Report, SetupError> {
    check_command_with_ui(contract, command, manifest_file, None).await
}

/// [`check_command`], then, with `ui`, the plugin's panels and cards drawn ([`ui::check`])
/// while it still runs, their `api.request` reaching it.
pub async fn check_command_with_ui(
    contract: &Contract,
    command: &[String],
    manifest_file: &Path,
    ui: Option<&ui::Options>,
) -> Result<Report, SetupError> {
    let manifest = read_manifest(manifest_file)?;
    let host = sdk::testing::FakeHost::start(sdk::testing::Config::new(manifest.clone()))
        .await
        .map_err(SetupError::FakeHost)?;
    let plugin = launch::launch(command, manifest_file, host.url(), host.token()).await?;
    check_started(contract, &plugin, manifest, &host, ui).await
}

/// [`check_with_host`] on a plugin started with `host` as its Plugin API, then, with `ui`,
/// its panels and cards drawn while it still runs.
pub async fn check_started(
    contract: &Contract,
    plugin: &dyn Started,
    manifest: manifest::Manifest,
    host: &sdk::testing::FakeHost,
    ui: Option<&ui::Options>,
) -> Result<Report, SetupError> {
    let target = Target {
        url: plugin.url().into(),
        secret: plugin.secret().into(),
        manifest,
    };
    let mut report = check_with_host(contract, &target, host).await?;
    if let Some(ui) = ui {
        report.findings.extend(check_ui(ui, &target).await?);
    }
    Ok(report)
}

/// [`ui::check`] for a running plugin: its pages' `api.request` reaches it.
pub async fn check_ui(ui: &ui::Options, target: &Target) -> Result<Vec<Finding>, SetupError> {
    let plugin = ui::stand_in::PluginAt {
        url: target.url.clone(),
        secret: target.secret.clone(),
    };
    ui::check(ui, &target.manifest, Some(plugin)).await
}

async fn run(
    contract: &Contract,
    target: &Target,
    host: Option<&sdk::testing::FakeHost>,
) -> Result<Report, SetupError> {
    let probe = probe::Probe::new(&target.url, target.secret.clone())?;
    let (steps, mut findings) = plan::plan(&target.manifest);
    for step in &steps {
        let got = probe.call(step, contract.time_limit(step.route)).await;
        findings.push(Finding {
            area: step.area,
            what: step.what.clone(),
            at: step.at(),
            outcome: judge::judge(contract, &step.expect, step.route, got.as_ref()),
        });
    }
    if let Some(host) = host {
        follow::settle(host, SETTLE_QUIET, SETTLE_MAX).await;
        findings.extend(follow::follow(contract, &probe, host, &target.manifest).await);
    }
    findings.sort_by_key(|f| f.area);
    Ok(Report {
        plugin: format!("{} {}", target.manifest.id, target.manifest.version),
        findings,
    })
}

/// The SDK's reader, as a plugin reads its manifest.
pub fn read_manifest(path: &Path) -> Result<manifest::Manifest, SetupError> {
    sdk::env::read_manifest(path).map_err(|e| match e {
        sdk::env::ManifestReadError::Read { path, source } => SetupError::Read { path, source },
        sdk::env::ManifestReadError::Invalid { path, source } => {
            SetupError::Manifest { path, source }
        }
    })
}
