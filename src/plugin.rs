//! `loop-plugins plugin ...`: the arguments of each plugin verb and their wiring to
//! crates/operator, which does the work and formats what is printed.

use std::io::{BufRead, IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use operator::plugins::candidate::{Approval, CapabilityLine};
use operator::plugins::install::{self, Approvals};
use operator::plugins::registry::RegistryArgs;
use operator::plugins::{keys, remove, show, stop, text, verify};

#[derive(Subcommand)]
pub enum PluginCommand {
    /// Install a plugin from its image: pulls REF (a tag is pinned to its digest), checks
    /// it, lists each capability it asks for with what it allows, and creates the Plugin.
    Install {
        /// The image, `registry/repository:tag` or `...@sha256:<hex>`.
        reference: String,
        #[command(flatten)]
        approvals: ApprovalArgs,
        /// Print the Plugin instead of creating it.
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Replace an installed plugin's image: REF, or its tag looked up again. Approvals the
    /// new manifest still declares are kept.
    Upgrade {
        name: String,
        reference: Option<String>,
        #[command(flatten)]
        approvals: ApprovalArgs,
        #[arg(long)]
        dry_run: bool,
        #[command(flatten)]
        common: Common,
    },
    /// Remove a plugin; each chat's /data and its agent runs stay unless --purge.
    Remove {
        name: String,
        /// Delete each chat's /data volume and the plugin's agent runs too.
        #[arg(long)]
        purge: bool,
    },
    /// Stop a plugin's containers now (in every chat, or the one given), as the desktop's
    /// Stop button does; the next call, event or schedule starts each again.
    Stop {
        name: String,
        /// Only the container of this chat, `NAMESPACE/CHAT`.
        #[arg(long)]
        chat: Option<operator::plugins::stop::ChatRef>,
    },
    /// List installed plugins and how admission left them.
    List {
        /// Pull each image again and run admission's stages on it here.
        #[arg(long)]
        verify: bool,
        #[command(flatten)]
        common: Common,
    },
    /// One plugin: digest, version, capabilities approved and not, signature, admission
    /// stages, instances.
    Info { name: String },
    /// Pull an installed plugin's image (NAME) or any image (REF) and run admission's
    /// stages on it, under the cluster's HostConfig when there is one.
    Verify {
        target: String,
        #[command(flatten)]
        common: Common,
    },
    /// Make an Ed25519 publisher key (PKCS#8 PEM, mode 0600); prints its public key for
    /// HostConfig's trustedPublisherKeys.
    Keygen {
        /// Where to write the key (never overwritten).
        #[arg(long, default_value = "loop-plugin-publisher.pem")]
        out: PathBuf,
    },
    /// Sign an image with a publisher key and publish the signature next to it
    /// (`<repository>:sha256-<hex>.sig`).
    Sign {
        /// The publisher key file (from `plugin keygen`).
        #[arg(long)]
        key: PathBuf,
        reference: String,
        #[command(flatten)]
        common: Common,
    },
}

#[derive(Args)]
pub struct ApprovalArgs {
    /// Approve this capability (repeatable). With neither this nor --approve-all, each
    /// capability is asked on a terminal (and none is approved without one).
    #[arg(long = "approve", value_name = "CAP", conflicts_with = "approve_all")]
    approve: Vec<String>,
    /// Approve every capability the manifest declares.
    #[arg(long)]
    approve_all: bool,
}

/// How the CLI reaches registries: the plugin verbs' and `conformance IMAGE`'s.
#[derive(Args)]
pub struct RegistryFlags {
    /// A dockerconfigjson file with registry credentials (default: HostConfig's Secret,
    /// then ~/.docker/config.json).
    #[arg(long, value_name = "FILE")]
    registry_config: Option<PathBuf>,
    /// A registry (host:port) reached over plain HTTP (repeatable; loopback always is).
    #[arg(long, value_name = "HOST:PORT")]
    insecure_registry: Vec<String>,
}

impl RegistryFlags {
    /// The registry client's arguments; `namespace` is where HostConfig's credentials Secret
    /// is, when a cluster is asked.
    pub fn registry_args(&self, namespace: &str) -> RegistryArgs {
        RegistryArgs {
            config: self.registry_config.clone(),
            insecure: self.insecure_registry.clone(),
            namespace: namespace.into(),
        }
    }

    /// Whether any was given.
    pub fn given(&self) -> bool {
        self.registry_config.is_some() || !self.insecure_registry.is_empty()
    }
}

#[derive(Args)]
pub struct Common {
    #[command(flatten)]
    registry: RegistryFlags,
    /// The controller's namespace, where HostConfig's credentials Secret is.
    #[arg(long, default_value = "loop-plugins")]
    controller_namespace: String,
    /// How long to wait for the controller's verdict after writing, in seconds.
    #[arg(long, default_value_t = 30)]
    wait: u64,
}

impl Common {
    fn registry(&self) -> RegistryArgs {
        self.registry.registry_args(&self.controller_namespace)
    }
}

/// Runs a plugin verb; an error is printed as one line naming what failed.
pub fn run(command: PluginCommand) -> ExitCode {
    let runtime = tokio::runtime::Runtime::new().expect("a Tokio runtime");
    match runtime.block_on(verb(command)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            // Our errors name their cause in their own message: one line, no chain.
            eprintln!("loop-plugins plugin: {err}");
            ExitCode::FAILURE
        }
    }
}

async fn verb(command: PluginCommand) -> anyhow::Result<()> {
    {
        match command {
            PluginCommand::Install {
                reference,
                approvals,
                dry_run,
                common,
            } => {
                let client = match kube::Client::try_default().await {
                    Ok(c) => Some(c),
                    Err(e) if dry_run => {
                        eprintln!("no cluster ({e}): checking against HostConfig's defaults");
                        None
                    }
                    Err(e) => return Err(e.into()),
                };
                let mut ask = ask_on_terminal;
                let approvals = approvals.into_approvals(&mut ask);
                let report = install::install(
                    client.as_ref(),
                    &common.registry(),
                    &reference,
                    approvals,
                    dry_run,
                    Duration::from_secs(common.wait),
                )
                .await?;
                eprint!("{}", text::checked(&report));
                print!("{}", text::install(&report, "installed"));
                Ok(())
            }
            PluginCommand::Upgrade {
                name,
                reference,
                approvals,
                dry_run,
                common,
            } => {
                let client = kube::Client::try_default().await?;
                let mut ask = ask_on_terminal;
                let approvals = approvals.into_approvals(&mut ask);
                let report = install::upgrade(
                    &client,
                    &common.registry(),
                    &name,
                    reference.as_deref(),
                    Some(approvals),
                    dry_run,
                    Duration::from_secs(common.wait),
                )
                .await?;
                eprint!("{}", text::checked(&report));
                print!("{}", text::install(&report, "upgraded"));
                Ok(())
            }
            PluginCommand::Remove { name, purge } => {
                let client = kube::Client::try_default().await?;
                let purged = remove::remove(&client, &name, purge).await?;
                println!(
                    "removed plugin {name}; {}",
                    if purged {
                        "each chat's /data and its agent runs are deleted with it"
                    } else {
                        "each chat's /data and its agent runs are kept (--purge deletes them)"
                    }
                );
                Ok(())
            }
            PluginCommand::Stop { name, chat } => {
                let client = kube::Client::try_default().await?;
                for instance in stop::stop(&client, &name, chat.as_ref()).await? {
                    println!("stopped {instance}");
                }
                Ok(())
            }
            PluginCommand::List { verify, common } => {
                let client = kube::Client::try_default().await?;
                let rows = show::list(&client, &common.registry(), verify).await?;
                print!("{}", text::list(&rows));
                Ok(())
            }
            PluginCommand::Info { name } => {
                let client = kube::Client::try_default().await?;
                print!("{}", text::info(&show::info(&client, &name).await?));
                Ok(())
            }
            PluginCommand::Verify { target, common } => {
                let client = kube::Client::try_default().await.ok();
                let verified = verify::verify(client.as_ref(), &common.registry(), &target).await?;
                print!("{}", text::verified(&verified));
                if !verified.outcome.admitted() {
                    anyhow::bail!("{target} would not be admitted");
                }
                Ok(())
            }
            PluginCommand::Keygen { out } => {
                let public = keys::keygen(&out)?;
                eprintln!("wrote {} (keep it secret); its public key:", out.display());
                println!("{public}");
                Ok(())
            }
            PluginCommand::Sign {
                key,
                reference,
                common,
            } => {
                let signed = keys::sign(&common.registry(), &key, &reference).await?;
                print!("{}", text::signed(&signed));
                Ok(())
            }
        }
    }
}

impl ApprovalArgs {
    /// `--approve-all`, the `--approve` list, or (none given, on a terminal) asked one by one.
    fn into_approvals<'a>(self, ask: &'a mut dyn FnMut(&CapabilityLine) -> bool) -> Approvals<'a> {
        if self.approve_all {
            Approvals::Given(Approval::All)
        } else if self.approve.is_empty() && std::io::stdin().is_terminal() {
            Approvals::Ask(ask)
        } else {
            Approvals::Given(Approval::Each(self.approve))
        }
    }
}

/// Asks on the terminal whether to approve one capability.
fn ask_on_terminal(line: &CapabilityLine) -> bool {
    eprint!(
        "approve {} ({})? [y/N] ",
        line.capability.as_str(),
        line.allows_here()
    );
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if std::io::stdin().lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim(), "y" | "Y" | "yes")
}
