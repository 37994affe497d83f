//! Who calls a run's MCP endpoint, decided purely from the run (as the index has it) and the
//! bearer token: the token must be the one in the run's Secret (its SHA-256 is on the run's
//! status, written by the controller as it started the run) and the run must be running.
//! Another run's token, a run that ended or never started, and no token at all are refused.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::protocol::{RunCaller, code};
use model::resources::{AgentRun, AgentRunPhase};

/// The shortest token taken: the controller's are 64 hex characters.
pub const MIN_TOKEN: usize = 32;

/// Why a caller is refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error(
        "no Authorization: Bearer header: send the token in the file LOOP_RUN_MCP_TOKEN_FILE names"
    )]
    NoToken,
    #[error("the token is not run {run}'s (each run's token is good for its own endpoint only)")]
    NotThisRun { run: String },
    #[error("run {run} has ended ({phase}): its MCP endpoint is closed")]
    Ended { run: String, phase: String },
    #[error("run {run} is not running yet")]
    NotStarted { run: String },
}

impl Refusal {
    /// The HTTP status of the refusal.
    pub fn status(&self) -> http::StatusCode {
        match self {
            Refusal::NoToken | Refusal::NotThisRun { .. } => http::StatusCode::UNAUTHORIZED,
            Refusal::Ended { .. } | Refusal::NotStarted { .. } => http::StatusCode::FORBIDDEN,
        }
    }

    /// The JSON-RPC error code of the refusal.
    pub fn code(&self) -> i64 {
        match self {
            Refusal::NoToken | Refusal::NotThisRun { .. } => code::UNAUTHORIZED,
            Refusal::Ended { .. } | Refusal::NotStarted { .. } => code::RUN_NOT_RUNNING,
        }
    }
}

/// The token of an `Authorization` header value (`Bearer <token>`, the scheme in any case).
pub fn bearer(header: Option<&str>) -> Option<&str> {
    let (scheme, token) = header?.trim().split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && token.len() >= MIN_TOKEN).then_some(token)
}

/// Checks `token` for run `name` (`run`, as the index has it, if it has it).
pub fn check(
    run: Option<&AgentRun>,
    name: &str,
    token: Option<&str>,
) -> Result<RunCaller, Refusal> {
    let token = token.ok_or(Refusal::NoToken)?;
    let not_this_run = || Refusal::NotThisRun { run: name.into() };
    let run = run.ok_or_else(not_this_run)?;
    let status = run.status.clone().unwrap_or_default();
    let expected = status
        .mcp_token_sha256
        .as_deref()
        .ok_or_else(not_this_run)?;
    let presented = hex::encode(Sha256::digest(token.as_bytes()));
    if !bool::from(presented.as_bytes().ct_eq(expected.as_bytes())) {
        return Err(not_this_run());
    }
    match status.phase {
        Some(AgentRunPhase::Running) => {}
        Some(phase) if phase.is_final() => {
            return Err(Refusal::Ended {
                run: name.into(),
                phase: format!("{phase:?}"),
            });
        }
        _ => return Err(Refusal::NotStarted { run: name.into() }),
    }
    Ok(RunCaller {
        run: name.into(),
        plugin: run.spec.plugin.clone(),
        agent: run.spec.agent.clone(),
        read_only: run.spec.read_only,
        thread: run.spec.thread.clone(),
    })
}

/// Whether `run` (as the index has it) may still be starting: not there yet, or without its
/// token's hash, or neither running nor ended. A token refused for such a run may be good in a
/// moment; one refused for a running or ended run never will be.
pub fn not_started(run: Option<&AgentRun>) -> bool {
    let Some(status) = run.map(|r| r.status.clone().unwrap_or_default()) else {
        return true;
    };
    status.mcp_token_sha256.is_none()
        || !status
            .phase
            .is_some_and(|p| p == AgentRunPhase::Running || p.is_final())
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resources::{AgentRunSpec, AgentRunStatus};

    const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn run(phase: AgentRunPhase, token: &str) -> AgentRun {
        let mut run = AgentRun::new(
            "echo-1",
            AgentRunSpec {
                plugin: "echo".into(),
                channel: "general".into(),
                thread: "plugin:echo".into(),
                agent: "say".into(),
                read_only: true,
                tools: vec!["plugin_echo".into()],
                prompt: "hi".into(),
            },
        );
        run.status = Some(AgentRunStatus {
            phase: Some(phase),
            mcp_token_sha256: Some(hex::encode(Sha256::digest(token.as_bytes()))),
            ..Default::default()
        });
        run
    }

    #[test]
    fn the_runs_own_token_while_it_runs_is_taken() {
        let r = run(AgentRunPhase::Running, TOKEN);
        let view = check(Some(&r), "echo-1", Some(TOKEN)).unwrap();
        assert_eq!((view.agent.as_str(), view.read_only), ("say", true));
    }

    #[test]
    fn every_other_caller_is_refused_with_why() {
        let other = TOKEN.replace('0', "1");
        let r = run(AgentRunPhase::Running, TOKEN);
        assert_eq!(check(Some(&r), "echo-1", None), Err(Refusal::NoToken));
        let not_this = Refusal::NotThisRun {
            run: "echo-1".into(),
        };
        assert_eq!(
            check(Some(&r), "echo-1", Some(&other)),
            Err(not_this.clone())
        );
        assert_eq!(check(None, "echo-1", Some(TOKEN)), Err(not_this));
        let ended = run(AgentRunPhase::Succeeded, TOKEN);
        let refused = check(Some(&ended), "echo-1", Some(TOKEN)).unwrap_err();
        assert_eq!(refused.status(), http::StatusCode::FORBIDDEN);
        assert!(
            refused.to_string().contains("ended (Succeeded)"),
            "{refused}"
        );
        let queued = run(AgentRunPhase::Queued, TOKEN);
        assert!(matches!(
            check(Some(&queued), "echo-1", Some(TOKEN)),
            Err(Refusal::NotStarted { .. })
        ));
    }

    #[test]
    fn only_a_run_the_index_may_not_show_started_yet_is_waited_for() {
        assert!(not_started(None));
        assert!(not_started(Some(&run(AgentRunPhase::Queued, TOKEN))));
        let mut unhashed = run(AgentRunPhase::Running, TOKEN);
        unhashed.status.as_mut().unwrap().mcp_token_sha256 = None;
        assert!(not_started(Some(&unhashed)));
        assert!(!not_started(Some(&run(AgentRunPhase::Running, TOKEN))));
        assert!(!not_started(Some(&run(AgentRunPhase::Failed, TOKEN))));
    }

    #[test]
    fn only_a_bearer_token_of_a_tokens_length_is_read() {
        assert_eq!(bearer(Some(&format!("Bearer {TOKEN}"))), Some(TOKEN));
        assert_eq!(bearer(Some(&format!("bearer  {TOKEN} "))), Some(TOKEN));
        assert_eq!(bearer(Some(&format!("Basic {TOKEN}"))), None);
        assert_eq!(bearer(Some("Bearer ")), None, "an empty token is none");
        assert_eq!(bearer(Some("Bearer short")), None);
        assert_eq!(bearer(None), None);
    }
}
