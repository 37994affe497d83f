//! Agent runs on the real control plane: the controller runs each AgentRun as a Job of
//! HostConfig's runner (crates/controller/src/runs), one at a time per hidden thread, in the
//! order they were made, and the run's status follows its Job.
//!
//! The runner here is `/bin/sh` as the kubelet stand-in plays it, doing what a runner's
//! contract says it gets (docs/runner.md): it reads the prompt from its file and checks the
//! run's variables, and fails a run whose prompt it will not take. Until `loop-plugins agent`
//! is the runner (issue 28's next slice) it runs on the local control plane only: kind has no
//! `sh` image of ours.

use std::time::Duration;

use anyhow::{Context, ensure};
use k8s_openapi::api::batch::v1::Job;
use model::resources::{AgentRun, AgentRunPhase, AgentRunSpec, AgentRunner};

use crate::controller::world;
use crate::controller_support::*;
use crate::support::{E2eTest, IMAGE_SH, Ns, test, wait};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "runs::a_thread_runs_its_runs_one_at_a_time_in_order_and_a_failing_runner_fails_its_run",
            in_order,
        )
        .timeout(Duration::from_secs(240))
        .local_only(
            "the runner is /bin/sh as the stand-in plays it, until `loop-plugins agent` is the runner",
        ),
    ]
}

/// The runner: takes a prompt that greets, in the run's own thread, and takes a while.
const RUNNER_SCRIPT: &str = r#"grep -q hello "$LOOP_RUN_PROMPT_FILE" && test "$LOOP_RUN_THREAD" = "plugin:$LOOP_RUN_PLUGIN" && test "$LOOP_RUN_READ_ONLY" = true && sleep 2"#;

async fn in_order(ns: Ns) -> anyhow::Result<()> {
    // The runner is HostConfig's, for the whole cluster: no other test runs meanwhile.
    let _exclusive = exclusive().await;
    let id = world(&ns, "rn", &[]).await?;
    let mut host = host_spec(true);
    host.runner = Some(AgentRunner {
        image: IMAGE_SH.into(),
        command: vec!["sh".into(), "-c".into(), RUNNER_SCRIPT.into()],
        resources: None,
        service_account: None,
        credentials_secret: None,
        time_limit_seconds: 60,
    });
    apply_host(ns.client(), host).await?;
    let result = three_runs(&ns, &id).await;
    apply_host(ns.client(), host_spec(true)).await?;
    result
}

async fn three_runs(ns: &Ns, id: &str) -> anyhow::Result<()> {
    // Named in the order they are made: a thread runs by creation time, then name.
    let prompts = [
        ("run-a", "hello, summarize the chat"),
        ("run-b", "hello again"),
        ("run-c", "no greeting: the runner refuses this one"),
    ];
    for (name, prompt) in prompts {
        apply(ns, &run(id, name, prompt)).await?;
    }
    let runs = ns.api::<AgentRun>();
    let mut ended = Vec::new();
    for (name, _) in prompts {
        let run = wait::matches(
            &runs,
            name,
            "the run ended",
            Duration::from_secs(120),
            |r: &AgentRun| {
                r.status
                    .as_ref()
                    .and_then(|s| s.phase)
                    .is_some_and(AgentRunPhase::is_final)
            },
        )
        .await?;
        ended.push(run.status.context("an ended run has a status")?);
    }
    let phases: Vec<_> = ended
        .iter()
        .map(|s| (s.phase, s.reason.as_deref()))
        .collect();
    ensure!(
        phases
            == [
                (Some(AgentRunPhase::Succeeded), None),
                (Some(AgentRunPhase::Succeeded), None),
                (Some(AgentRunPhase::Failed), Some("BackoffLimitExceeded")),
            ],
        "the runs ended {phases:?}"
    );
    // One at a time, in order: each started once the one before it ended.
    for pair in ended.windows(2) {
        let (before, after) = (&pair[0], &pair[1]);
        let ended_at = before.end_time.as_ref().context("no end time")?;
        let started_at = after.start_time.as_ref().context("no start time")?;
        ensure!(
            started_at.0 >= ended_at.0,
            "a run started at {started_at:?}, before the one ahead of it ended at {ended_at:?}"
        );
    }
    ensure!(
        ended[2].result.as_deref() == Some("the runner failed"),
        "the failed run says {:?}",
        ended[2].result
    );
    // Each ran as a Job of its own, owned by its run.
    let jobs = ns.api::<Job>().list(&Default::default()).await?;
    for (name, _) in prompts {
        let job = jobs
            .items
            .iter()
            .find(|j| j.metadata.name.as_deref() == Some(&format!("run-{name}")))
            .with_context(|| format!("no Job for {name}"))?;
        let owner = job
            .metadata
            .owner_references
            .as_ref()
            .and_then(|o| o.first())
            .context("the Job has no owner")?;
        ensure!(owner.kind == "AgentRun" && owner.name == name, "{owner:?}");
    }
    Ok(())
}

/// A run of the plugin's `say` agent in chat `general`, as POST /runs makes it.
fn run(id: &str, name: &str, prompt: &str) -> AgentRun {
    let mut run = AgentRun::new(
        name,
        AgentRunSpec {
            plugin: id.into(),
            channel: "general".into(),
            thread: format!("plugin:{id}"),
            agent: "say".into(),
            read_only: true,
            tools: vec!["plugin_echo".into()],
            prompt: prompt.into(),
        },
    );
    run.metadata.labels = Some(model::names::labels(id, "proj", "general", "run"));
    run
}
