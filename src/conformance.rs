//! `loop-plugins conformance --url URL --secret-file FILE --manifest plugin.json [--json]`, or
//! `loop-plugins conformance --manifest plugin.json [--json] -- COMMAND...` to start the
//! plugin with the fake host as its Plugin API; either with `--bundle DIR [--chromium PATH]`
//! to draw its panels and cards too: wiring only; the check is `crates/conformance`.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ConformanceArgs {
    /// The running plugin's base URL, e.g. http://127.0.0.1:8080 (or give its command after
    /// `--` instead).
    #[arg(
        long,
        required_unless_present = "command",
        requires = "secret_file",
        conflicts_with = "command"
    )]
    url: Option<String>,
    /// The file holding the secret the plugin was started with (LOOP_PLUGIN_SECRET_FILE).
    #[arg(long)]
    secret_file: Option<PathBuf>,
    /// The plugin's manifest: what it declares is what gets called.
    #[arg(long)]
    manifest: PathBuf,
    /// Print the report as JSON (for CI) instead of lines.
    #[arg(long)]
    json: bool,
    /// The plugin's UI bundle (the folder that is /loop-plugin/ui in its image): each panel
    /// and card of the manifest is drawn in headless Chromium the way the host draws them.
    #[arg(long, value_name = "DIR")]
    bundle: Option<PathBuf>,
    /// The Chromium (or Chrome) binary for --bundle (default: $LOOP_PLUGINS_CHROMIUM, else
    /// /usr/bin/chromium). Given, it must be there; by default, where there is none, the
    /// drawing is skipped, which is not a failure.
    #[arg(long, value_name = "PATH", requires = "bundle")]
    chromium: Option<PathBuf>,
    /// The plugin's command line, after `--`: the check starts it as the host would (a fresh
    /// secret, a free loopback port, its own data folder, the SDK's fake host as its Plugin
    /// API), ends each agent run it starts, reports the calls the host refused it, and stops
    /// it.
    #[arg(last = true, value_name = "COMMAND")]
    command: Vec<String>,
}

/// Prints one line per check and a summary (or the JSON report); exits 1 on any failure, 2
/// when the check could not start.
pub fn run(args: ConformanceArgs) -> ExitCode {
    let outcome = async {
        let contract = conformance::Contract::load()?;
        if let Some(given) = &args.chromium
            && !given.is_file()
        {
            return Err(conformance::SetupError::NoChromium(given.clone()));
        }
        let ui = args.bundle.as_ref().map(|bundle| conformance::ui::Options {
            bundle: bundle.clone(),
            chromium: conformance::ui::chromium(args.chromium.as_deref()),
        });
        match (&args.url, &args.secret_file) {
            (Some(url), Some(secret_file)) => {
                let target = conformance::Target::from_files(url, secret_file, &args.manifest)?;
                let mut report = conformance::check(&contract, &target).await?;
                if let Some(ui) = &ui {
                    report
                        .findings
                        .extend(conformance::check_ui(ui, &target).await?);
                }
                Ok(report)
            }
            _ => {
                conformance::check_command_with_ui(
                    &contract,
                    &args.command,
                    &args.manifest,
                    ui.as_ref(),
                )
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
