//! `loop-plugins conformance`, in three forms, each checking the plugin against the host →
//! plugin contract:
//!
//! - `conformance --url URL --secret-file FILE --manifest plugin.json`: a plugin already
//!   running;
//! - `conformance --manifest plugin.json -- COMMAND...`: started as a local process with the
//!   SDK's fake host as its Plugin API (its runs ended, the calls the host refused reported);
//! - `conformance IMAGE [--chromium PATH] [--registry-config FILE] [--insecure-registry
//!   HOST:PORT]`: the image as the host gets it, for a plugin's CI to run on every image it
//!   pushes: pulled by tag or digest as `plugin install` pulls it, admission's stages run on
//!   it (HostConfig's defaults, plugins on; a refusal is a finding), then run by digest with
//!   docker or podman (`$LOOP_PLUGINS_CONTAINER_ENGINE` chooses) as its Pod runs it, checked
//!   as a command is, and its panels and cards drawn from the bundle it ships.
//!
//! The first two take `--bundle DIR [--chromium PATH] [--no-bridge]` to draw the panels and
//! cards too. Each prints one line per finding and a summary (`--json`: the report as JSON);
//! exit 1 when an answer broke a sentence of the reference (the FAIL line quotes it), 0 when
//! it only missed this host's stricter conventions (WARN lines), 2 when the check could not
//! start. Wiring only: the check is `crates/conformance`.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::plugin::RegistryFlags;

#[derive(clap::Args)]
#[command(group = clap::ArgGroup::new("ui_source").args(["bundle", "image"]))]
pub struct ConformanceArgs {
    /// A plugin image, `registry/repository:tag` or `...@sha256:<hex>`: pulled, judged by
    /// admission's stages, run by digest with docker or podman
    /// ($LOOP_PLUGINS_CONTAINER_ENGINE chooses) as its Pod runs it, and checked; its
    /// manifest and UI bundle are the image's own.
    #[arg(
        value_name = "IMAGE",
        conflicts_with_all = ["url", "secret_file", "manifest", "bundle", "command"]
    )]
    image: Option<String>,
    /// The running plugin's base URL, e.g. http://127.0.0.1:8080 (or give its command after
    /// `--`, or an IMAGE, instead).
    #[arg(
        long,
        required_unless_present_any = ["command", "image"],
        requires = "secret_file",
        conflicts_with = "command"
    )]
    url: Option<String>,
    /// The file holding the secret the plugin was started with (LOOP_PLUGIN_SECRET_FILE).
    #[arg(long)]
    secret_file: Option<PathBuf>,
    /// The plugin's manifest: what it declares is what gets called.
    #[arg(long, required_unless_present = "image")]
    manifest: Option<PathBuf>,
    /// Print the report as JSON (for CI) instead of lines.
    #[arg(long)]
    json: bool,
    /// The plugin's UI bundle (the folder that is /loop-plugin/ui in its image): each panel
    /// and card of the manifest is drawn in headless Chromium the way the host draws them.
    #[arg(long, value_name = "DIR")]
    bundle: Option<PathBuf>,
    /// The Chromium (or Chrome) binary for --bundle or IMAGE (default: $LOOP_PLUGINS_CHROMIUM,
    /// else /usr/bin/chromium). Given, it must be there; by default, where there is none, the
    /// drawing is skipped, which is not a failure.
    #[arg(long, value_name = "PATH", requires = "ui_source")]
    chromium: Option<PathBuf>,
    /// With --bundle: post the pages no bridge port and judge each once its frame has loaded
    /// (the reference's NoBridge, for pages that draw without the bridge).
    #[arg(long, requires = "bundle")]
    no_bridge: bool,
    /// How IMAGE's registry is reached, as `plugin install` reaches it.
    #[command(flatten)]
    registry: RegistryFlags,
    /// The plugin's command line, after `--`: the check starts it as the host would (a fresh
    /// secret, a free loopback port, its own data folder, the SDK's fake host as its Plugin
    /// API), ends each agent run it starts, reports the calls the host refused it, and stops
    /// it.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Prints one line per check and a summary (or the JSON report); exits 1 on any failure (a
/// warning is not one), 2 when the check could not start.
pub fn run(args: ConformanceArgs) -> ExitCode {
    if args.image.is_none() && args.registry.given() {
        eprintln!(
            "loop-plugins conformance: --registry-config and --insecure-registry are for IMAGE"
        );
        return ExitCode::from(2);
    }
    let outcome = async {
        let contract = conformance::Contract::load()?;
        if let Some(given) = &args.chromium
            && !given.is_file()
        {
            return Err(conformance::SetupError::NoChromium(given.clone()));
        }
        if let Some(image) = &args.image {
            let options = conformance::image::ImageOptions {
                // No cluster is asked: credentials from --registry-config or the docker
                // config, never HostConfig's Secret.
                registry: args.registry.registry_args(""),
                engines: conformance::engine::from_env(),
                chromium: conformance::ui::chromium(args.chromium.as_deref()),
            };
            return conformance::image::check_image(&contract, image, &options).await;
        }
        let manifest = args
            .manifest
            .as_ref()
            .expect("clap requires --manifest without IMAGE");
        let ui = args.bundle.as_ref().map(|bundle| conformance::ui::Options {
            bundle: bundle.clone(),
            chromium: conformance::ui::chromium(args.chromium.as_deref()),
            no_bridge: args.no_bridge,
        });
        match (&args.url, &args.secret_file) {
            (Some(url), Some(secret_file)) => {
                let target = conformance::Target::from_files(url, secret_file, manifest)?;
                let mut report = conformance::check(&contract, &target).await?;
                if let Some(ui) = &ui {
                    report
                        .findings
                        .extend(conformance::check_ui(ui, &target).await?);
                }
                Ok(report)
            }
            _ => {
                conformance::check_command_with_ui(&contract, &args.command, manifest, ui.as_ref())
                    .await
            }
        }
    };
    let runtime = tokio::runtime::Runtime::new().expect("a Tokio runtime");
    match runtime.block_on(outcome) {
        Ok(report) => {
            if args.json {
                println!("{}", report.json());
            } else {
                print!("{}", report.text());
            }
            if report.passed() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(err) => {
            eprintln!("loop-plugins conformance: {err}");
            ExitCode::from(2)
        }
    }
}
