//! `loop-plugins`: one binary, its roles as subcommands. Argument parsing and wiring only:
//! each role lives in its crate (controller, server, operator, model).

mod approvals;
mod conformance;
mod console;
mod gate_install;
mod manifest_check;
mod plugin;
mod project;
mod trigger;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "loop-plugins",
    version,
    about = "Runs Loop-style plugins as pods on Kubernetes"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Print the CustomResourceDefinitions of every resource as YAML.
    Crds,
    /// Run the controller: reconciles Plugins, Projects and Channels into instances, Pods,
    /// volumes, Secrets and CronJobs.
    Controller(ControllerArgs),
    /// Operator verbs on installed plugins.
    Plugin {
        #[command(subcommand)]
        command: plugin::PluginCommand,
    },
    /// Why PLUGIN runs or doesn't in a chat: the host switch, admission, the chat, the
    /// project's trust and whether it enables the plugin, each setting's value and where it
    /// came from, each refused value and why, each scheduled task and its source, the
    /// container, its last activity, switches and breaker.
    Explain {
        plugin: String,
        /// The chat, `NAMESPACE/CHAT`.
        #[arg(long)]
        chat: operator::plugins::stop::ChatRef,
    },
    /// Operator verbs on projects.
    Project {
        #[command(subcommand)]
        command: project::ProjectCommand,
    },
    /// Copy this binary to DEST for a plugin container to run as its gate, and write the
    /// gate's policy from $LOOP_GATE_POLICY (the gate's init container runs this).
    InstallGate {
        /// Where to put the binary.
        dest: std::path::PathBuf,
        /// Where to write the policy (read from $LOOP_GATE_POLICY, checked first).
        #[arg(long)]
        policy: Option<std::path::PathBuf>,
    },
    /// Run a plugin's command under the gate (Landlock, seccomp, audit):
    /// `loop-plugins gate --policy FILE -- COMMAND ARGS...`, or on a host
    /// `loop-plugins gate --manifest plugin.json --audit DIR [--writable DIR ...] -- COMMAND`.
    Gate(gate::GateArgs),
    /// Work with plugin manifests (plugin.json).
    Manifest {
        #[command(subcommand)]
        command: ManifestCommand,
    },
    /// Run the Plugin API server that plugin pods call (LOOP_API_URL).
    Api(server::serve::ApiArgs),
    /// Run a plugin's action once through the host API, as a schedule's CronJob does.
    Trigger(trigger::TriggerArgs),
    /// Check a plugin against the host -> plugin contract: an image (admission's stages, then
    /// run with Docker or Podman), a command, or one already running; every route, secret,
    /// action trigger, tool, switch and event its manifest declares. One line per check and
    /// a summary; exits 1 on any failure.
    Conformance(conformance::ConformanceArgs),
    /// Run one agent run, as HostConfig's runner: the run from the environment the
    /// controller gives its Job (docs/runner.md), the model an OpenAI-compatible
    /// chat-completions endpoint.
    Agent(agent::cli::AgentArgs),
    /// Print the console's URL (the API server's page that shows chats, plugins, panes and
    /// cards) for the current kubeconfig's user, signed in with its token when it has one.
    Console(console::ConsoleArgs),
    /// Agents' tool calls waiting for a person (ToolCallApprovals), in every namespace the
    /// token may list them in, or one (-n); --watch follows them as they are asked and decided.
    Approvals(approvals::ApprovalsArgs),
    /// Approve an agent's tool call (the approver role's `approve` verb): it runs with the
    /// input the approval shows; --always approves the tool for the rest of the run too.
    Approve(approvals::ApproveArgs),
    /// Deny an agent's tool call: it does not run, and the agent reads why (--reason).
    Deny(approvals::DecideArgs),
}

#[derive(clap::Args)]
struct ControllerArgs {
    /// Our own image, pinned by digest: CronJobs run `loop-plugins trigger` from it, and the
    /// gate's init container copies the binary out of it.
    #[arg(long, env = "LOOP_PLUGINS_IMAGE")]
    self_image: String,
    /// LOOP_API_URL for plugin pods, unless HostConfig sets apiUrl.
    #[arg(
        long,
        env = model::contract::API_URL_ENV,
        default_value = "http://loop-plugins-api.loop-plugins.svc:8080"
    )]
    api_url: String,
    /// Where /metrics and /healthz answer.
    #[arg(
        long,
        env = "LOOP_PLUGINS_METRICS_ADDR",
        default_value = "0.0.0.0:9090"
    )]
    metrics_addr: std::net::SocketAddr,
    /// The controller's own namespace: HostConfig's registry credentials Secret is read there.
    #[arg(long, env = runtime::pod_env::POD_NAMESPACE, default_value = "loop-plugins")]
    namespace: String,
    /// Reconciles each of the four controllers runs at once. Unbounded, a cold start at
    /// 3,000 instances had a thousand requests in flight, each on a connection of its own:
    /// the API server spent its CPU on TLS handshakes and the controller its memory on
    /// connection buffers (`make bench-scale`).
    #[arg(long, env = "LOOP_PLUGINS_CONCURRENCY", default_value_t = 8, value_parser = clap::value_parser!(u16).range(1..))]
    concurrency: u16,
    /// Writes (applies, creates, deletes, status patches, Events) in flight at once, across
    /// every reconcile: what the controller asks of the API server at most, whatever the
    /// concurrency. A chat's independent writes go out together within it.
    #[arg(long, env = "LOOP_PLUGINS_WRITES_IN_FLIGHT", default_value_t = 32, value_parser = clap::value_parser!(u16).range(1..))]
    writes_in_flight: u16,
    #[command(flatten)]
    leader: runtime::leader::LeaderArgs,
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
    // reqwest is built without a TLS provider of its own (the workspace's Cargo.toml): ring's,
    // for the whole process, before any client is built.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cli = Cli::parse();
    match cli.command {
        Command::Trigger(args) => run_async(trigger::run(args)),
        Command::Agent(args) => run_async(async move {
            agent::cli::run(args).await?;
            anyhow::Ok(())
        }),
        Command::Api(args) => run_role("loop-plugins-api", server::serve::serve(args)),
        Command::Controller(args) => run_role("loop-plugins-controller", async move {
            let client = kube::Client::try_default().await?;
            let options = controller::Options {
                self_image: args.self_image,
                api_url: args.api_url,
                namespace: args.namespace,
                concurrency: args.concurrency,
                writes_in_flight: args.writes_in_flight,
            };
            controller::run(client, options, args.metrics_addr, args.leader).await
        }),
        Command::Crds => {
            print!("{}", model::crdgen::yaml());
            ExitCode::SUCCESS
        }
        Command::Plugin { command } => plugin::run(command),
        Command::Project { command } => project::run(command),
        Command::Explain { plugin, chat } => run_async(async move {
            let client = kube::Client::try_default().await?;
            let gathered = operator::explain::gather(&client, &plugin, &chat).await?;
            let facts = operator::explain::explain(&gathered.world(&plugin));
            print!("{}", operator::explain::text(&facts));
            Ok(())
        }),
        Command::InstallGate { dest, policy } => {
            let json = std::env::var(model::contract::GATE_POLICY_ENV).ok();
            match gate_install::install(&dest, policy.as_deref(), json.as_deref()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(err) => {
                    eprintln!("{err}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Gate(args) => gate::run(args),
        Command::Conformance(args) => conformance::run(args),
        Command::Console(args) => console::run(args),
        Command::Approvals(args) => approvals::list(args),
        Command::Approve(args) => approvals::decide(
            args.decide,
            if args.always {
                operator::approvals::Answer::Always
            } else {
                operator::approvals::Answer::Once
            },
        ),
        Command::Deny(args) => approvals::decide(args, operator::approvals::Answer::Deny),
        Command::Manifest {
            command: ManifestCommand::Check { file },
        } => manifest_check::check_file_cli(&file),
    }
}

/// Runs a command on a Tokio runtime, with logs on stderr.
pub(crate) fn run_async(role: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    runtime::allocator::limit_arenas();
    runtime::logging::init();
    block_on(role)
}

/// Runs a long-lived role on a Tokio runtime, with logs on stderr and its spans exported as
/// `service` when an OTLP endpoint is set; what is left of them is sent once the role returns
/// (SIGTERM).
fn run_role(
    service: &'static str,
    role: impl std::future::Future<Output = anyhow::Result<()>>,
) -> ExitCode {
    runtime::allocator::limit_arenas();
    let traces = runtime::logging::init_traced(service);
    let code = block_on(role);
    drop(traces);
    code
}

fn block_on(role: impl std::future::Future<Output = anyhow::Result<()>>) -> ExitCode {
    let runtime = tokio::runtime::Runtime::new().expect("a Tokio runtime");
    let code = match runtime.block_on(role) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            tracing::error!("{err:#}");
            ExitCode::FAILURE
        }
    };
    // Tasks still running stop here, before the last spans are sent.
    drop(runtime);
    code
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::trigger::{TickDecision, decide};
    use clap::Parser;
    use controller::cronjob::{CronJobInputs, build_cronjob};
    use model::schedule::{AnchoredInterval, Timing};

    use super::{Cli, Command};

    /// What the controller puts in a CronJob is what `loop-plugins trigger` reads: its command
    /// and args parse, and the interval, its anchor and the Job's name decide the tick.
    #[test]
    fn the_cronjobs_command_is_the_triggers() {
        let anchor = "2026-12-01T10:30:00Z".parse().unwrap();
        let timing = Timing::Interval(AnchoredInterval {
            every: Duration::from_secs(90 * 60),
            anchor,
        });
        let cronjob = build_cronjob(&CronJobInputs {
            plugin: "echo",
            project: "proj",
            channel: "c",
            namespace: "team",
            action: "tick",
            timing: &timing,
            suspend: false,
            entry_hash: "sha256:00",
            entry_enabled: true,
            self_image: "registry.local/loop-plugins@sha256:00",
            api_url: "http://api:8080",
            owner: Default::default(),
            options: &Default::default(),
            working_tree: None,
        });
        let container = &cronjob
            .spec
            .job_template
            .spec
            .as_ref()
            .and_then(|job| job.template.spec.as_ref())
            .expect("a pod template")
            .containers[0];
        let command = container.command.clone().unwrap_or_default();
        assert_eq!(command[1], "trigger");
        let argv = ["loop-plugins".to_string()]
            .into_iter()
            .chain(command[1..].iter().cloned())
            .chain(container.args.clone().unwrap_or_default());
        let Command::Trigger(mut args) = Cli::try_parse_from(argv).expect("the args parse").command
        else {
            panic!("not the trigger");
        };
        assert_eq!(args.interval, Some(Duration::from_secs(5400)));
        assert_eq!(args.anchor, Some(anchor));
        // The Job of the tick 90 minutes after the anchor, as the CronJob controller names it.
        args.job = Some(format!("echo-c-tick-{}", anchor.as_second() / 60 + 90));
        assert!(matches!(decide(&args), TickDecision::Completes { .. }));
        args.job = Some(format!("echo-c-tick-{}", anchor.as_second() / 60 + 60));
        assert!(matches!(decide(&args), TickDecision::Waits { .. }));
    }

    /// A worktree task's flags parse as the trigger reads them.
    #[test]
    fn a_worktree_tasks_cronjob_gives_the_trigger_its_options() {
        let timing = Timing::EveryTick("0 * * * *".into());
        let options = model::task::TaskOptions {
            worktree: true,
            update_before_run: true,
            auto_delete_seconds: Some(600),
        };
        let tree = model::resources::WorkingTree {
            claim_name: "tree".into(),
            sub_path: Some("repo".into()),
        };
        let cronjob = build_cronjob(&CronJobInputs {
            plugin: "echo",
            project: "proj",
            channel: "c",
            namespace: "team",
            action: "tick",
            timing: &timing,
            suspend: false,
            entry_hash: "sha256:00",
            entry_enabled: true,
            self_image: "registry.local/loop-plugins@sha256:00",
            api_url: "http://api:8080",
            owner: Default::default(),
            options: &options,
            working_tree: Some(&tree),
        });
        let container = &cronjob
            .spec
            .job_template
            .spec
            .unwrap()
            .template
            .spec
            .unwrap()
            .containers[0];
        let command = container.command.clone().unwrap_or_default();
        let argv = ["loop-plugins".to_string()]
            .into_iter()
            .chain(command[1..].iter().cloned())
            .chain(container.args.clone().unwrap_or_default());
        let Command::Trigger(args) = Cli::try_parse_from(argv).expect("the args parse").command
        else {
            panic!("not the trigger");
        };
        assert!(args.worktree && args.update_before_run);
        assert_eq!(
            args.checkout.as_deref(),
            Some(std::path::Path::new("/workspace/repo"))
        );
        assert_eq!(
            args.worktrees.as_deref(),
            Some(std::path::Path::new("/workspace/.loop-worktrees/c"))
        );
        assert_eq!(args.auto_delete_seconds, Some(600));
    }
}
