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
//! - [`judge`]: pure, answer (or none) + expectation → pass or fail with why;
//! - [`report`]: the findings as lines and a summary, or JSON.
//!
//! What it does not do yet (issue 29): start an image (`conformance IMAGE`), play the Plugin
//! API for the plugin (the SDK's fake host), follow runs the plugin starts, and draw its
//! panels and cards in Chromium. [`check`] is the entry point those will share.

pub mod contract;
pub mod error;
pub mod judge;
pub mod plan;
pub mod probe;
pub mod report;
pub mod sample;

use std::path::Path;

pub use contract::Contract;
pub use error::{ContractError, SetupError};
pub use report::{Area, Finding, Outcome, Report};

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
        let read = |path: &Path| {
            std::fs::read_to_string(path).map_err(|source| SetupError::Read {
                path: path.into(),
                source,
            })
        };
        let secret = read(secret_file)?.trim().to_string();
        if secret.is_empty() {
            return Err(SetupError::EmptySecret(secret_file.into()));
        }
        let manifest =
            manifest::parse_str(&read(manifest_file)?).map_err(|source| SetupError::Manifest {
                path: manifest_file.into(),
                source,
            })?;
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
    let probe = probe::Probe::new(&target.url, target.secret.clone())?;
    let (steps, mut findings) = plan::plan(&target.manifest);
    for step in &steps {
        let got = probe.call(step, contract.time_limit(step.route)).await;
        findings.push(Finding {
            area: step.area,
            what: step.what.clone(),
            at: step.at(),
            outcome: judge::judge(contract, &step.expect, got.as_ref()),
        });
    }
    findings.sort_by_key(|f| f.area);
    Ok(Report {
        plugin: format!("{} {}", target.manifest.id, target.manifest.version),
        findings,
    })
}
