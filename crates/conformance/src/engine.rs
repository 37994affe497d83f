//! Which container engine runs an image for `conformance IMAGE`: `$LOOP_PLUGINS_CONTAINER_ENGINE`
//! when set (a name on `PATH` or a path), else the first of `docker` and `podman` that
//! answers `version`. Choosing is pure ([`candidates`]); asking is [`find`].

use std::ffi::OsStr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use crate::error::SetupError;

/// Names the engine to use, instead of trying docker then podman.
pub const ENGINE_ENV: &str = "LOOP_PLUGINS_CONTAINER_ENGINE";
/// The engines tried, in order, when [`ENGINE_ENV`] is not set.
pub const DEFAULT_ENGINES: [&str; 2] = ["docker", "podman"];
/// How long an engine has to answer `version` (a daemon that is down can hang).
pub const ANSWER_LIMIT: Duration = Duration::from_secs(10);

/// A container engine that answered: its program (docker's command line: pull, run, logs,
/// inspect, rm).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Engine {
    pub program: PathBuf,
}

/// The engines to try, in order: the one `chosen` names (the environment's value), else the
/// defaults. An empty value counts as unset.
pub fn candidates(chosen: Option<&OsStr>) -> Vec<PathBuf> {
    match chosen {
        Some(c) if !c.is_empty() => vec![PathBuf::from(c)],
        _ => DEFAULT_ENGINES.iter().map(PathBuf::from).collect(),
    }
}

/// The first of `candidates` that answers `version`.
pub async fn find(candidates: &[PathBuf]) -> Result<Engine, SetupError> {
    let mut said = Vec::new();
    for program in candidates {
        match answers(program).await {
            Ok(()) => {
                return Ok(Engine {
                    program: program.clone(),
                });
            }
            Err(why) => said.push(format!("{}: {why}", program.display())),
        }
    }
    Err(SetupError::NoEngine {
        tried: said.join("; "),
        env: ENGINE_ENV,
    })
}

/// The engines `$LOOP_PLUGINS_CONTAINER_ENGINE` names, or the defaults.
pub fn from_env() -> Vec<PathBuf> {
    candidates(std::env::var_os(ENGINE_ENV).as_deref())
}

/// Whether `program version` succeeds, and what went wrong when not.
async fn answers(program: &PathBuf) -> Result<(), String> {
    let run = tokio::process::Command::new(program)
        .arg("version")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    match tokio::time::timeout(ANSWER_LIMIT, run).await {
        Err(_) => Err(format!("no answer within {ANSWER_LIMIT:?}")),
        Ok(Err(e)) => Err(e.to_string()),
        Ok(Ok(out)) if out.status.success() => Ok(()),
        Ok(Ok(out)) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().rev().find(|l| !l.trim().is_empty());
            Err(format!(
                "{} ({})",
                out.status,
                last.unwrap_or("no output").trim()
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_chooses_else_docker_then_podman() {
        assert_eq!(
            candidates(Some(OsStr::new("/opt/bin/nerdctl"))),
            [PathBuf::from("/opt/bin/nerdctl")]
        );
        let defaults = [PathBuf::from("docker"), PathBuf::from("podman")];
        assert_eq!(candidates(None), defaults);
        assert_eq!(candidates(Some(OsStr::new(""))), defaults);
    }

    #[tokio::test]
    async fn an_engine_that_does_not_answer_is_named_with_why() {
        let err = find(&[PathBuf::from("/nonexistent/docker"), PathBuf::from("false")])
            .await
            .unwrap_err();
        let text = err.to_string();
        assert!(text.contains("/nonexistent/docker: "), "{text}");
        assert!(text.contains("false: exit status: 1"), "{text}");
        assert!(text.contains(ENGINE_ENV), "{text}");
        let found = find(&[PathBuf::from("/nonexistent/docker"), PathBuf::from("true")])
            .await
            .unwrap();
        assert_eq!(found.program, PathBuf::from("true"));
    }
}
