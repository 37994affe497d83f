//! `loop-plugins conformance --url URL --secret-file FILE --manifest plugin.json [--json]`:
//! wiring only; the check is `crates/conformance`.

use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct ConformanceArgs {
    /// The running plugin's base URL, e.g. http://127.0.0.1:8080.
    #[arg(long)]
    url: String,
    /// The file holding the secret the plugin was started with (LOOP_PLUGIN_SECRET_FILE).
    #[arg(long)]
    secret_file: PathBuf,
    /// The plugin's manifest: what it declares is what gets called.
    #[arg(long)]
    manifest: PathBuf,
    /// Print the report as JSON (for CI) instead of lines.
    #[arg(long)]
    json: bool,
}

/// Prints one line per check and a summary (or the JSON report); exits 1 on any failure, 2
/// when the check could not start.
pub fn run(args: ConformanceArgs) -> ExitCode {
    let outcome = async {
        let target = conformance::Target::from_files(&args.url, &args.secret_file, &args.manifest)?;
        let contract = conformance::Contract::load()?;
        conformance::check(&contract, &target).await
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
