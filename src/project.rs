//! `loop-plugins project ...`: the arguments of each project verb and their wiring to
//! crates/operator, which does the work.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;
use operator::import::{ImportTarget, project_name_of};

#[derive(Subcommand)]
pub enum ProjectCommand {
    /// Trust the project's current plugin config: record its canonical hash and the config
    /// itself as the last approved version (the same-named ProjectTrust), so its enabled values
    /// and schedules apply. Needs the trustee's RBAC (create, patch projecttrusts), which
    /// editing the Project does not give.
    Trust {
        /// The Project's name.
        name: String,
        /// The Project's namespace.
        #[arg(long, short = 'n', default_value = "default")]
        namespace: String,
        /// Trust only if the current config has this hash (`sha256:<hex>`, the Project's
        /// status.configHash as you reviewed it); refuse if it changed since.
        #[arg(long)]
        hash: Option<String>,
    },
    /// Import a desktop project's config (`DIR/.loop/config.json`, JSON with comments) as its
    /// Project, named after DIR; with --global, the global `~/.loop/config.json` as
    /// HostConfig's plugin defaults. What cannot carry over (a plugin not installed, a setting
    /// the manifest doesn't declare or its schema refuses, a schedule that yields no task) is
    /// listed on stderr and not written.
    Import {
        /// The config file.
        file: PathBuf,
        /// The Project's namespace.
        #[arg(
            long,
            short = 'n',
            default_value = "default",
            conflicts_with = "global"
        )]
        namespace: String,
        /// The Project's name, when the folder holding .loop is not a valid one.
        #[arg(long, conflicts_with = "global")]
        name: Option<String>,
        /// Also trust exactly the imported version (needs the trustee's RBAC).
        #[arg(long, conflicts_with = "global")]
        trust: bool,
        /// FILE is the global config: write HostConfig default's plugins.defaults.
        #[arg(long)]
        global: bool,
        /// Print what would be written, as YAML, and write nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

pub fn run(command: ProjectCommand) -> ExitCode {
    crate::run_async(async move {
        match command {
            ProjectCommand::Trust {
                name,
                namespace,
                hash,
            } => {
                let client = kube::Client::try_default().await?;
                let hash =
                    operator::trust_project(client, &namespace, &name, hash.as_deref()).await?;
                println!("project {namespace}/{name}: trusted config {hash}");
            }
            ProjectCommand::Import {
                file,
                namespace,
                name,
                trust,
                global,
                dry_run,
            } => {
                let target = if global {
                    ImportTarget::Global
                } else {
                    let name = match name {
                        Some(name) => name,
                        None => project_name_of(&file)?,
                    };
                    ImportTarget::Project {
                        namespace,
                        name,
                        trust,
                    }
                };
                let client = kube::Client::try_default().await?;
                let imported = operator::import::import(client, &file, &target, dry_run).await?;
                for left in &imported.carried.not_carried {
                    eprintln!("not imported: {left}");
                }
                if dry_run {
                    print!("{}", imported.yaml);
                } else {
                    let what = match &target {
                        ImportTarget::Global => "HostConfig default: plugin defaults".to_string(),
                        ImportTarget::Project {
                            namespace, name, ..
                        } => format!("project {namespace}/{name}"),
                    };
                    let count = imported.carried.plugins.len();
                    println!("{what}: imported {count} plugin entries");
                    if let Some(hash) = imported.trusted {
                        println!("{what}: trusted config {hash}");
                    }
                }
            }
        }
        Ok(())
    })
}
