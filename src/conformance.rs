//! `loop-plugins conformance --url URL --secret-file FILE --manifest plugin.json [--json]`, or
//! `loop-plugins conformance --manifest plugin.json [--json] -- COMMAND...` to start the
//! plugin with the fake host as its Plugin API: wiring only; the check is
//! `crates/conformance`.

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
        match (&args.url, &args.secret_file) {
            (Some(url), Some(secret_file)) => {
                let target = conformance::Target::from_files(url, secret_file, &args.manifest)?;
                conformance::check(&contract, &target).await
            }
            _ => conformance::check_command(&contract, &args.command, &args.manifest).await,
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
