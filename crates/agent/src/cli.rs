//! `loop-plugins agent`'s arguments: the model endpoint, from flags or the environment (a
//! HostConfig runner's `credentialsSecret` holds them as variables), and the run's own
//! variables (model::run_contract) read from the environment.

use std::io::Write;

use super::mcp::McpTools;
use super::run_env::RunEnv;
use super::tools::{NoTools, Tools};
use super::{Ended, Error, ModelSettings};

#[derive(clap::Args, Clone, Debug)]
pub struct AgentArgs {
    /// The chat-completions endpoint's base URL, up to /v1 (`http://ollama:11434/v1`).
    #[arg(long, env = "LOOP_AGENT_MODEL_URL")]
    pub model_url: String,
    /// The model's name, as the endpoint knows it.
    #[arg(long, env = "LOOP_AGENT_MODEL")]
    pub model: String,
    /// A bearer key for the endpoint.
    #[arg(long, env = "LOOP_AGENT_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// The most model turns one run may take.
    #[arg(long, env = "LOOP_AGENT_MAX_TURNS", default_value_t = 16)]
    pub max_turns: usize,
}

/// Runs the run the environment describes; its final message goes to stdout and to the
/// Pod's termination message (`LOOP_RUN_TERMINATION_LOG`, else Kubernetes' default path),
/// which the controller reads into the run's status and the plugin's `/done`.
pub async fn run(args: AgentArgs) -> Result<Ended, Error> {
    let env = RunEnv::read(|name| std::env::var(name).ok())?;
    let settings = ModelSettings {
        url: args.model_url,
        model: args.model,
        api_key: args.api_key.filter(|k| !k.is_empty()),
        max_turns: args.max_turns,
    };
    let tools: Box<dyn Tools> = match &env.mcp {
        Some((url, token_file)) => {
            Box::new(McpTools::connect(url, token_file.clone(), env.time_limit).await?)
        }
        None => Box::new(NoTools),
    };
    let ended = super::run(&env, &settings, tools.as_ref()).await?;
    println!("{}", ended.message);
    let path = std::env::var(model::run_contract::TERMINATION_LOG)
        .unwrap_or_else(|_| model::run_contract::TERMINATION_LOG_PATH.into());
    // Written only where the runtime made the file: a runner started by hand has none.
    if let Ok(mut log) = std::fs::OpenOptions::new().write(true).open(&path) {
        let message: String = ended
            .message
            .chars()
            .take(model::run_contract::MAX_FINAL_MESSAGE)
            .collect();
        let _ = log.write_all(message.as_bytes());
    }
    Ok(ended)
}
