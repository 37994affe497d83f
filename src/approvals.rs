//! `loop-plugins approvals`, `approve NAME`, `deny NAME`: an agent's tool calls waiting for a
//! person, answered from the shell through the host API with the person's own token
//! (crates/operator's `approvals`).

use std::process::ExitCode;

use clap::Args;
use operator::approvals::{Answer, HostApi, line, table};
use operator::console;

/// Where the host API answers and who asks.
#[derive(Args, Clone)]
pub struct HostApiArgs {
    /// Where the API server answers (`make dev` exports LOOP_API; else `kubectl -n
    /// loop-plugins port-forward svc/loop-plugins-api 8080`).
    #[arg(long, env = "LOOP_API", default_value = "http://127.0.0.1:8080")]
    api: String,
    /// The token to ask with (a ServiceAccount's, from `kubectl create token`); else the
    /// kubeconfig user's, when it has one. RBAC decides what it may do.
    #[arg(long, env = "LOOP_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

#[derive(Args)]
pub struct ApprovalsArgs {
    /// The namespace (default: every namespace the token may list approvals in).
    #[arg(long, short = 'n')]
    namespace: Option<String>,
    /// Also those already decided.
    #[arg(long)]
    all: bool,
    /// Keep following the namespace's approvals as they are asked and decided (needs -n).
    #[arg(long, short = 'w', requires = "namespace")]
    watch: bool,
    #[command(flatten)]
    host: HostApiArgs,
}

#[derive(Args)]
pub struct DecideArgs {
    /// The ToolCallApproval's name (`loop-plugins approvals` lists them).
    name: String,
    /// Its namespace (default: the current context's, else `default`).
    #[arg(long, short = 'n')]
    namespace: Option<String>,
    /// Why, as the agent and the Event will read it.
    #[arg(long)]
    reason: Option<String>,
    #[command(flatten)]
    host: HostApiArgs,
}

#[derive(Args)]
pub struct ApproveArgs {
    #[command(flatten)]
    pub decide: DecideArgs,
    /// Approve the tool for the rest of the run too (unless its risk profile always asks).
    #[arg(long)]
    pub always: bool,
}

/// The token given, or the kubeconfig user's; and the current context's namespace.
fn who(host: &HostApiArgs) -> Result<(String, Option<String>), String> {
    let current = {
        let env = std::env::var("KUBECONFIG").ok();
        let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
        let paths = console::kubeconfig_paths(env.as_deref(), home.as_deref());
        console::read_kubeconfig(&paths).and_then(|c| console::current(&c))
    };
    let namespace = current.as_ref().ok().and_then(|c| c.namespace.clone());
    if let Some(token) = host
        .token
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty())
    {
        return Ok((token.to_string(), namespace));
    }
    let current = current.map_err(|e| e.to_string())?;
    match console::resolve_token(&current).map_err(|e| e.to_string())? {
        Some(token) => Ok((token, namespace)),
        None => Err(format!(
            "the kubeconfig's user {} has no token: give one with --token (kubectl create token)",
            current.user
        )),
    }
}

pub fn list(args: ApprovalsArgs) -> ExitCode {
    crate::run_async(async move {
        let (token, _) = who(&args.host).map_err(anyhow::Error::msg)?;
        let api = HostApi::new(&args.host.api, &token);
        if args.watch {
            let ns = args.namespace.clone().unwrap_or_default();
            api.watch(&ns, |a| println!("{}", line(a))).await?;
            return Ok(());
        }
        let approvals = api.list(args.namespace.as_deref(), !args.all).await?;
        print!("{}", table(&approvals));
        Ok(())
    })
}

pub fn decide(args: DecideArgs, answer: Answer) -> ExitCode {
    crate::run_async(async move {
        let (token, current) = who(&args.host).map_err(anyhow::Error::msg)?;
        let namespace = args
            .namespace
            .clone()
            .or(current)
            .unwrap_or_else(|| "default".into());
        let api = HostApi::new(&args.host.api, &token);
        let decided = api
            .decide(&namespace, &args.name, answer, args.reason.as_deref())
            .await?;
        println!("{}", line(&decided));
        Ok(())
    })
}
