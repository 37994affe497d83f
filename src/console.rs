//! `loop-plugins console`: prints (or opens) the console's URL for the current kubeconfig's
//! user; crates/operator's `console` reads the kubeconfig and makes the URL and the text.

use std::process::ExitCode;

use clap::Args;
use operator::console::{self, ConsoleError};

#[derive(Args)]
pub struct ConsoleArgs {
    /// The namespace the console opens (default: the current context's, else `default`).
    #[arg(long, short = 'n')]
    namespace: Option<String>,
    /// Where the API server answers, as the browser reaches it (`make dev` exports LOOP_API;
    /// else `kubectl -n loop-plugins port-forward svc/loop-plugins-api 8080`).
    #[arg(long, env = "LOOP_API", default_value = "http://127.0.0.1:8080")]
    api: String,
    /// Sign in with this token instead of the kubeconfig user's (a ServiceAccount's, from
    /// `kubectl create token`).
    #[arg(long, env = "LOOP_CONSOLE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Open the URL in the browser too (xdg-open).
    #[arg(long)]
    open: bool,
}

pub fn run(args: ConsoleArgs) -> ExitCode {
    match url_and_text(&args) {
        Ok((url, text)) => {
            print!("{text}");
            if args.open {
                open(&url);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("loop-plugins console: {e}");
            ExitCode::FAILURE
        }
    }
}

fn url_and_text(args: &ConsoleArgs) -> Result<(String, String), ConsoleError> {
    let given = args
        .token
        .as_deref()
        .map(str::trim)
        .filter(|t| !t.is_empty());
    let current = match (kubeconfig_user(), given) {
        (Ok(current), None) => current,
        (Ok(current), Some(token)) => console::given_token(current, token),
        // A token given needs no kubeconfig: it only names the default namespace.
        (Err(_), Some(token)) => console::given_token(console::Current::nobody(), token),
        (Err(e), None) => return Err(e),
    };
    let namespace = args
        .namespace
        .clone()
        .or_else(|| current.namespace.clone())
        .unwrap_or_else(|| "default".into());
    let token = console::resolve_token(&current)?;
    let url = console::url(&args.api, &namespace, token.as_deref());
    let text = console::text(&args.api, &namespace, &current, token.as_deref());
    Ok((url, text))
}

/// The current kubeconfig's user, as kubectl finds it.
fn kubeconfig_user() -> Result<console::Current, ConsoleError> {
    let env = std::env::var("KUBECONFIG").ok();
    let home = std::env::var_os("HOME").map(std::path::PathBuf::from);
    let paths = console::kubeconfig_paths(env.as_deref(), home.as_deref());
    console::current(&console::read_kubeconfig(&paths)?)
}

fn open(url: &str) {
    match std::process::Command::new("xdg-open").arg(url).status() {
        Ok(s) if s.success() => {}
        Ok(s) => eprintln!("loop-plugins console: xdg-open answered {s}; open the URL by hand"),
        Err(e) => {
            eprintln!("loop-plugins console: could not run xdg-open ({e}); open the URL by hand")
        }
    }
}
