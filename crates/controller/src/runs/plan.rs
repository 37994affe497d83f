//! Which run of a thread runs, and what a run's Job says of it: pure, over gathered facts.
//!
//! A thread (`plugin:<id>` of one chat) runs one run at a time, in the order they were made:
//! its *head* is the oldest run that has not ended (by creation time, then name). Only the
//! head may start, so two reconciles of one thread, at once or against a stale cache, never
//! start two runs: at worst the next waits for the cache to show the head ended.
//!
//! | the run | its Job | step |
//! |---|---|---|
//! | ended | any | nothing (its Job stays until the run goes) |
//! | not the head | none | stays queued (`Queued` written once) |
//! | the head, no runner configured | none | stays queued |
//! | the head | none, never started | start: Secret, Job, `Running` |
//! | started | none | lost (`RunnerLost`), once a live read confirms it |
//! | started | running | `Running` |
//! | started | complete | `Succeeded` |
//! | started | failed | `Failed`, the Job's reason (`DeadlineExceeded` past the time limit, `BackoffLimitExceeded` for a runner that failed or was killed) |

use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;

use model::resources::{AgentRun, AgentRunPhase};
use model::run_contract::MAX_FINAL_MESSAGE;

/// Why a run whose Job went away failed.
pub const RUNNER_LOST: &str = "RunnerLost";

/// What becomes of one run.
#[derive(Clone, Debug, PartialEq)]
pub enum Step {
    /// Nothing to do: it ended, or it runs and its status says so.
    Nothing,
    /// Waiting its turn (or for a runner): its status says `Queued`.
    Queue,
    /// Its turn: make its Job, and say it runs.
    Start,
    /// Its Job runs: say so.
    Running,
    /// It started and its Job is gone: fail it, once a live read agrees.
    Lost,
    /// Its Job ended.
    Ended(Outcome),
}

/// How a Job ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub phase: AgentRunPhase,
    /// Why it failed; none for a success.
    pub reason: Option<String>,
    /// When, as the Job says.
    pub at: Option<Time>,
}

/// Decides for `run`, one of `thread` (every run of its thread, itself included), whose Job
/// is `job` (from the cache), with a runner configured or not.
pub fn decide(run: &AgentRun, thread: &[&AgentRun], job: Option<&Job>, runner: bool) -> Step {
    let phase = run.status.as_ref().and_then(|s| s.phase);
    if phase.is_some_and(AgentRunPhase::is_final) {
        return Step::Nothing;
    }
    if let Some(job) = job {
        return match outcome(job) {
            Some(ended) => Step::Ended(ended),
            None if phase == Some(AgentRunPhase::Running) => Step::Nothing,
            None => Step::Running,
        };
    }
    if started(run) {
        return Step::Lost;
    }
    let its_turn = head(thread).is_some_and(|h| h.name_any() == run.name_any());
    if its_turn && runner {
        Step::Start
    } else if phase == Some(AgentRunPhase::Queued) {
        Step::Nothing
    } else {
        Step::Queue
    }
}

/// Whether the controller started the run (its status has a start time).
pub fn started(run: &AgentRun) -> bool {
    run.status.as_ref().is_some_and(|s| s.start_time.is_some())
}

/// The thread's head: its oldest run that has not ended.
pub fn head<'a>(thread: &[&'a AgentRun]) -> Option<&'a AgentRun> {
    thread
        .iter()
        .copied()
        .filter(|r| {
            !r.status
                .as_ref()
                .and_then(|s| s.phase)
                .is_some_and(AgentRunPhase::is_final)
        })
        .min_by(|a, b| order(a).cmp(&order(b)))
}

/// When a run was made, then its name: the order a thread runs in.
fn order(run: &AgentRun) -> (Option<k8s_openapi::jiff::Timestamp>, String) {
    (
        run.metadata.creation_timestamp.as_ref().map(|t| t.0),
        run.name_any(),
    )
}

/// How `job` ended, if it did: its `Complete` or `Failed` condition.
pub fn outcome(job: &Job) -> Option<Outcome> {
    let conditions = job.status.as_ref()?.conditions.as_ref()?;
    conditions
        .iter()
        .filter(|c| c.status == "True")
        .find_map(|c| match c.type_.as_str() {
            "Complete" => Some(Outcome {
                phase: AgentRunPhase::Succeeded,
                reason: None,
                at: c.last_transition_time.clone(),
            }),
            "Failed" => Some(Outcome {
                phase: AgentRunPhase::Failed,
                reason: Some(c.reason.clone().unwrap_or_else(|| "Failed".into())),
                at: c.last_transition_time.clone(),
            }),
            _ => None,
        })
}

/// A succeeded run's final message: the termination message its runner container left on
/// the Job's Pod that succeeded, cut to [`MAX_FINAL_MESSAGE`] characters (`None`: the runner
/// left none).
pub fn final_message(pods: &[Pod]) -> Option<String> {
    pods.iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Succeeded"))
        .flat_map(|p| {
            p.status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
        })
        .find_map(|c| {
            let message = c.state.as_ref()?.terminated.as_ref()?.message.as_deref()?;
            let message = message.trim();
            (!message.is_empty()).then(|| message.chars().take(MAX_FINAL_MESSAGE).collect())
        })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::batch::v1::{JobCondition, JobStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;
    use model::resources::{AgentRunSpec, AgentRunStatus};

    /// A run made `second` seconds in, in `phase`, started or not.
    fn run(name: &str, second: i64, phase: Option<AgentRunPhase>, started: bool) -> AgentRun {
        let at =
            |s: i64| Time(k8s_openapi::jiff::Timestamp::from_second(1_800_000_000 + s).unwrap());
        AgentRun {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("team".into()),
                creation_timestamp: Some(at(second)),
                ..Default::default()
            },
            spec: AgentRunSpec {
                plugin: "echo".into(),
                channel: "general".into(),
                thread: "plugin:echo".into(),
                agent: "helper".into(),
                read_only: false,
                tools: vec![],
                prompt: "hi".into(),
            },
            status: Some(AgentRunStatus {
                phase,
                start_time: started.then(|| at(second + 1)),
                ..Default::default()
            }),
        }
    }

    fn job(condition: Option<(&str, &str)>) -> Job {
        Job {
            status: Some(JobStatus {
                conditions: condition.map(|(type_, reason)| {
                    vec![JobCondition {
                        type_: type_.into(),
                        status: "True".into(),
                        reason: (!reason.is_empty()).then(|| reason.into()),
                        ..Default::default()
                    }]
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    use AgentRunPhase::*;

    #[test]
    fn the_oldest_run_not_ended_is_the_head_whatever_the_names() {
        let done = run("a", 0, Some(Succeeded), true);
        let second = run("z", 1, Some(Queued), false);
        let third = run("b", 2, None, false);
        let thread = [&third, &done, &second];
        assert_eq!(head(&thread).map(|r| r.name_any()), Some("z".into()));
        let same_time = run("c", 1, None, false);
        let thread = [&second, &same_time];
        assert_eq!(head(&thread).map(|r| r.name_any()), Some("c".into()));
        assert!(head(&[&done]).is_none());
    }

    #[test]
    fn only_the_head_starts_and_only_with_a_runner() {
        let first = run("a", 0, None, false);
        let second = run("b", 1, None, false);
        let thread = [&first, &second];
        assert_eq!(decide(&first, &thread, None, true), Step::Start);
        assert_eq!(decide(&second, &thread, None, true), Step::Queue);
        assert_eq!(decide(&first, &thread, None, false), Step::Queue);
        let queued = run("b", 1, Some(Queued), false);
        let thread = [&first, &queued];
        assert_eq!(
            decide(&queued, &thread, None, true),
            Step::Nothing,
            "Queued is written once"
        );
    }

    #[test]
    fn the_next_starts_once_the_head_ended() {
        let first = run("a", 0, Some(Failed), true);
        let second = run("b", 1, Some(Queued), false);
        let thread = [&first, &second];
        assert_eq!(decide(&second, &thread, None, true), Step::Start);
        assert_eq!(decide(&first, &thread, None, true), Step::Nothing);
    }

    #[test]
    fn a_running_head_keeps_the_rest_waiting() {
        let first = run("a", 0, Some(Running), true);
        let second = run("b", 1, Some(Queued), false);
        let thread = [&first, &second];
        assert_eq!(decide(&second, &thread, None, true), Step::Nothing);
        assert_eq!(
            decide(&first, &thread, Some(&job(None)), true),
            Step::Nothing
        );
    }

    #[test]
    fn a_started_run_follows_its_job() {
        let first = run("a", 0, Some(Running), true);
        let thread = [&first];
        let step = |j: Option<&Job>| decide(&first, &thread, j, true);
        assert_eq!(
            step(Some(&job(Some(("Complete", ""))))),
            Step::Ended(Outcome {
                phase: Succeeded,
                reason: None,
                at: None
            })
        );
        assert_eq!(
            step(Some(&job(Some(("Failed", "DeadlineExceeded"))))),
            Step::Ended(Outcome {
                phase: Failed,
                reason: Some("DeadlineExceeded".into()),
                at: None
            })
        );
        assert_eq!(
            step(Some(&job(Some(("Failed", ""))))),
            Step::Ended(Outcome {
                phase: Failed,
                reason: Some("Failed".into()),
                at: None
            })
        );
        assert_eq!(step(None), Step::Lost, "its Job went away");
    }

    #[test]
    fn a_job_the_status_does_not_show_yet_is_reported() {
        // The controller stopped between making the Job and writing Running.
        let first = run("a", 0, Some(Queued), false);
        let thread = [&first];
        assert_eq!(
            decide(&first, &thread, Some(&job(None)), true),
            Step::Running
        );
    }

    #[test]
    fn a_run_that_ended_while_the_controller_was_down_is_recorded() {
        let first = run("a", 0, Some(Running), true);
        let thread = [&first];
        assert!(matches!(
            decide(&first, &thread, Some(&job(Some(("Complete", "")))), true),
            Step::Ended(Outcome {
                phase: Succeeded,
                ..
            })
        ));
    }

    fn pod(phase: &str, message: Option<&str>) -> Pod {
        use k8s_openapi::api::core::v1::{
            ContainerState, ContainerStateTerminated, ContainerStatus, PodStatus,
        };
        Pod {
            status: Some(PodStatus {
                phase: Some(phase.into()),
                container_statuses: Some(vec![ContainerStatus {
                    name: "runner".into(),
                    state: Some(ContainerState {
                        terminated: Some(ContainerStateTerminated {
                            message: message.map(String::from),
                            ..Default::default()
                        }),
                        ..Default::default()
                    }),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    #[test]
    fn the_final_message_is_the_succeeded_pods_termination_message_cut() {
        assert_eq!(
            final_message(&[
                pod("Failed", Some("not this one")),
                pod("Succeeded", Some("3 of 3 correct\n")),
            ]),
            Some("3 of 3 correct".into())
        );
        assert_eq!(final_message(&[pod("Succeeded", None)]), None);
        assert_eq!(final_message(&[pod("Succeeded", Some("  "))]), None);
        assert_eq!(final_message(&[]), None);
        let long = "é".repeat(MAX_FINAL_MESSAGE + 10);
        assert_eq!(
            final_message(&[pod("Succeeded", Some(&long))])
                .unwrap()
                .chars()
                .count(),
            MAX_FINAL_MESSAGE
        );
    }
}
