//! What the controller gives a run (model::run_contract), read from the environment: pure
//! over a lookup, so tests need no process environment.

use std::path::PathBuf;
use std::time::Duration;

use model::run_contract as contract;

/// A run, as its runner sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunEnv {
    pub run_id: String,
    pub agent: String,
    pub read_only: bool,
    pub plugin: String,
    pub thread: String,
    /// The agent's tools as MCP names (`plugin_<tool>`).
    pub tools: Vec<String>,
    /// The whole prompt.
    pub prompt: String,
    pub time_limit: Duration,
    /// The run's MCP endpoint and its token's file (absent for a run made by a controller
    /// that served none: the run then has no tools).
    pub mcp: Option<(String, PathBuf)>,
    /// The chat's working tree, when the chat has one.
    pub workspace: Option<PathBuf>,
}

/// What is missing or wrong in a run's environment.
#[derive(Debug, thiserror::Error)]
pub enum EnvError {
    #[error("{0} is not set: is this run by the loop-plugins controller? (docs/runner.md)")]
    Missing(&'static str),
    #[error("{name} is {value:?}, not {expected}")]
    Invalid {
        name: &'static str,
        value: String,
        expected: &'static str,
    },
    #[error("reading the prompt from {path}: {source}")]
    Prompt {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl RunEnv {
    /// Reads the run from `lookup` (the environment) and its prompt from the file it names.
    pub fn read(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, EnvError> {
        let get = |name: &'static str| lookup(name).ok_or(EnvError::Missing(name));
        let read_only = match get(contract::READ_ONLY)?.as_str() {
            "true" => true,
            "false" => false,
            other => {
                return Err(EnvError::Invalid {
                    name: contract::READ_ONLY,
                    value: other.into(),
                    expected: "true or false",
                });
            }
        };
        let limit = get(contract::TIME_LIMIT)?;
        let seconds = limit.parse::<u64>().map_err(|_| EnvError::Invalid {
            name: contract::TIME_LIMIT,
            value: limit.clone(),
            expected: "a number of seconds",
        })?;
        let path = PathBuf::from(get(contract::PROMPT_FILE)?);
        let prompt =
            std::fs::read_to_string(&path).map_err(|source| EnvError::Prompt { path, source })?;
        Ok(RunEnv {
            run_id: get(contract::RUN_ID)?,
            agent: get(contract::AGENT)?,
            read_only,
            plugin: get(contract::PLUGIN)?,
            thread: get(contract::THREAD)?,
            tools: get(contract::TOOLS)?
                .split(',')
                .filter(|t| !t.is_empty())
                .map(String::from)
                .collect(),
            prompt,
            time_limit: Duration::from_secs(seconds),
            mcp: match (lookup(contract::MCP_URL), lookup(contract::MCP_TOKEN_FILE)) {
                (Some(url), Some(file)) if !url.is_empty() => Some((url, PathBuf::from(file))),
                _ => None,
            },
            workspace: lookup(contract::WORKSPACE)
                .filter(|w| !w.is_empty())
                .map(PathBuf::from),
        })
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn env(prompt_file: &str, read_only: &str) -> BTreeMap<&'static str, String> {
        BTreeMap::from([
            (contract::RUN_ID, "echo-1".to_string()),
            (contract::AGENT, "helper".into()),
            (contract::READ_ONLY, read_only.into()),
            (contract::PLUGIN, "echo".into()),
            (contract::CHANNEL, "general".into()),
            (contract::THREAD, "plugin:echo".into()),
            (contract::TOOLS, "plugin_a,plugin_b".into()),
            (contract::PROMPT_FILE, prompt_file.into()),
            (contract::TIME_LIMIT, "30".into()),
            (
                contract::MCP_URL,
                "http://api/mcp/namespaces/team/runs/echo-1".into(),
            ),
            (contract::MCP_TOKEN_FILE, "/run/loop-run/mcp-token".into()),
        ])
    }

    #[test]
    fn reads_every_variable_and_the_prompt_file() {
        let dir = std::env::temp_dir().join(format!("run-env-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("prompt");
        std::fs::write(&file, "Summarize.").unwrap();
        let vars = env(file.to_str().unwrap(), "true");
        let run = RunEnv::read(|n| vars.get(n).cloned()).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(run.prompt, "Summarize.");
        assert!(run.read_only);
        assert_eq!(run.tools, ["plugin_a", "plugin_b"]);
        assert_eq!(run.time_limit, Duration::from_secs(30));
        let (url, token) = run.mcp.unwrap();
        assert_eq!(url, "http://api/mcp/namespaces/team/runs/echo-1");
        assert_eq!(token, PathBuf::from("/run/loop-run/mcp-token"));
    }

    #[test]
    fn a_missing_or_wrong_variable_is_named() {
        let vars = env("/nonexistent", "yes");
        let err = RunEnv::read(|n| vars.get(n).cloned()).unwrap_err();
        assert!(err.to_string().contains(contract::READ_ONLY), "{err}");
        let err = RunEnv::read(|_| None).unwrap_err();
        assert!(matches!(err, EnvError::Missing(_)), "{err}");
    }
}
