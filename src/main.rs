//! `loop-plugins`: one binary, its roles as subcommands.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "loop-plugins", version, about = "Runs Loop-style plugins as pods on Kubernetes")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions of every resource as YAML.
    Crds,
    /// Work with plugin manifests (plugin.json).
    Manifest {
        #[command(subcommand)]
        command: ManifestCommand,
    },
}

#[derive(Subcommand)]
enum ManifestCommand {
    /// Check a plugin.json against every rule; exits non-zero when there is a problem.
    Check {
        /// The manifest file.
        file: std::path::PathBuf,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Crds => {
            print!("{}", loop_plugins::crdgen::yaml());
            ExitCode::SUCCESS
        }
        Command::Manifest {
            command: ManifestCommand::Check { file },
        } => loop_plugins::manifest::check_file_cli(&file),
    }
}
