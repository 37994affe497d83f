//! A worktree task end to end on the local control plane, against a real git repository on
//! the channel's working-tree volume: a person sets the task's options through the host API
//! (refused without `update channels/tasks`), the controller gives the task's trigger
//! the volume and the flags, and the trigger's Jobs (made from the CronJob's own template, as
//! a run by hand is) make the worktree thread and its worktree on the first run, rebase it onto
//! the origin branch on the second, and Auto-delete has the controller delete the thread.
//!
//! Real: the controller under the chart's RBAC, the CronJob and the Jobs, `loop-plugins trigger`
//! in Pods on the kubelet stand-in (the chart's trigger role bound to its ServiceAccount), git
//! worktrees made by libgit2 in the claim's folder and read back with Debian's git, the host
//! API and the echo plugin in the thread's own container. Local only: the repository is made
//! in the claim's folder on this machine, which a kind node's volume is not.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, bail, ensure};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim, Pod};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{ListParams, PostParams};
use model::config::ScheduleEntry;
use model::names;
use model::resources::{Channel, ChannelKind, WorkingTree};
use model::schedule::ScheduleType;
use model::task::{ANNOTATION_DELETE_AT, worktree_thread_name};
use reqwest::StatusCode;
use serde_json::json;

use crate::controller_support::*;
use crate::host::{Caller, Grant, HostServer, caller_token, token_with, with_trigger_host};
use crate::support::{E2eTest, Ns, test, wait};

pub fn tests() -> Vec<E2eTest> {
    vec![
        test(
            "worktree_tasks::a_worktree_task_runs_in_its_thread_rebased_then_auto_deleted",
            |ns| with_trigger_host(ns, worktree_task),
        )
        .local_only("makes a git repository in the claim's folder on this machine")
        .timeout(Duration::from_secs(300)),
    ]
}

/// Debian's git with the test's own config, kept in the run's folder: the Pods run as another
/// user, who comes to own the volume's files, so git is told to trust them (as a global
/// config, which the git a push or fetch starts on the other repository reads too).
struct Git(PathBuf);

impl Git {
    fn new(ns: &Ns) -> anyhow::Result<Git> {
        let path = ns
            .cluster()
            .run_dir()
            .join(format!("{}.gitconfig", ns.name()));
        std::fs::write(
            &path,
            "[safe]\n\tdirectory = *\n[user]\n\tname = Teammate\n\temail = t@example.com\n[init]\n\tdefaultBranch = main\n",
        )?;
        Ok(Git(path))
    }

    fn run(&self, dir: &Path, args: &[&str]) -> anyhow::Result<String> {
        let out = Command::new("git")
            .env("GIT_CONFIG_GLOBAL", &self.0)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .args(args)
            .current_dir(dir)
            .output()
            .context("running git")?;
        ensure!(
            out.status.success(),
            "git {args:?} in {}: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    }
}

/// The folder the stand-in keeps claim `name`'s volume in, once it is bound.
async fn claim_folder(ns: &Ns, name: &str) -> anyhow::Result<PathBuf> {
    let claim: PersistentVolumeClaim = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": { "requests": { "storage": "1Gi" } },
        },
    }))?;
    apply(ns, &claim).await?;
    let bound = wait::matches(
        &ns.api::<PersistentVolumeClaim>(),
        name,
        "a bound claim",
        WAIT,
        |c: &PersistentVolumeClaim| {
            c.spec
                .as_ref()
                .and_then(|s| s.volume_name.as_ref())
                .is_some()
        },
    )
    .await?;
    let volume = bound.spec.and_then(|s| s.volume_name).unwrap_or_default();
    let pv = kube::Api::<PersistentVolume>::all(ns.client())
        .get(&volume)
        .await?;
    let path = pv
        .spec
        .and_then(|s| s.host_path)
        .map(|h| h.path)
        .context("the stand-in's volume is a hostPath")?;
    std::fs::create_dir_all(&path)?;
    Ok(PathBuf::from(path))
}

/// Runs the task once by hand (a Job from the CronJob's template, as `kubectl create job
/// --from` makes one) and waits for it; its trigger's log.
async fn run_once(ns: &Ns, task: &str, n: u32) -> anyhow::Result<String> {
    let cj = ns.api::<CronJob>().get(task).await?;
    let template = cj.spec.job_template;
    let name = format!("{task}-by-hand-{n}");
    let job = Job {
        metadata: kube::api::ObjectMeta {
            name: Some(name.clone()),
            labels: template.metadata.as_ref().and_then(|m| m.labels.clone()),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    };
    ns.api::<Job>().create(&PostParams::default(), &job).await?;
    let done = wait::matches(
        &ns.api::<Job>(),
        &name,
        "the Job to finish",
        Duration::from_secs(150),
        |j: &Job| {
            j.status
                .as_ref()
                .is_some_and(|s| s.succeeded.unwrap_or(0) > 0 || s.failed.unwrap_or(0) > 0)
        },
    )
    .await?;
    let pods = ns
        .api::<Pod>()
        .list(&ListParams::default().labels(&format!("job-name={name}")))
        .await?;
    let mut log = String::new();
    for pod in &pods.items {
        log.push_str(&ns.pod_log(&pod.name_any(), "trigger").await);
    }
    if done.status.and_then(|s| s.succeeded).unwrap_or(0) == 0 {
        bail!("run {n} of the task failed: {log}");
    }
    Ok(log)
}

async fn worktree_task(ns: &Ns, host: &HostServer) -> anyhow::Result<()> {
    // The trigger's ServiceAccount with the chart's own trigger role.
    let mut account = k8s_openapi::api::core::v1::ServiceAccount::default();
    account.metadata.name = Some(names::TRIGGER_SERVICE_ACCOUNT.into());
    apply(ns, &account).await?;
    bind_chart_role(ns, names::TRIGGER_SERVICE_ACCOUNT, "trigger").await?;

    // The channel's working tree: a clone of an origin, on the claim's volume.
    let volume = claim_folder(ns, "tree").await?;
    let git = Git::new(ns)?;
    git.run(&volume, &["init", "-q", "--bare", "origin.git"])?;
    git.run(&volume, &["init", "-q", "seed"])?;
    let seed = volume.join("seed");
    std::fs::write(seed.join("README"), "hello\n")?;
    git.run(&seed, &["add", "README"])?;
    git.run(&seed, &["commit", "-q", "-m", "first"])?;
    git.run(&seed, &["push", "-q", "../origin.git", "main"])?;
    git.run(&volume, &["clone", "-q", "origin.git", "repo"])?;
    git.run(&volume, &["clone", "-q", "origin.git", "teammate"])?;

    let id = plugin_id(ns, "wt");
    let hourly = ScheduleEntry {
        enabled: Some(true),
        kind: Some(ScheduleType::Cron),
        schedule: Some("0 * * * *".into()),
    };
    crate::host::world(
        ns,
        &[(echo_plugin(&id)?, entry(true, &[("tick", hourly)]))],
        &[],
    )
    .await?;
    let mut general = channel("general", "proj", ChannelKind::Channel, None);
    general.spec.working_tree = Some(WorkingTree {
        claim_name: "tree".into(),
        sub_path: Some("repo".into()),
    });
    apply(ns, &general).await?;
    let task = names::cronjob_name(&id, "general", "tick");
    wait::exists(&ns.api::<CronJob>(), &task, WAIT).await?;

    // The person sets the options: refused, naming the right, until RBAC lets them.
    let options = json!({"worktree": true, "updateBeforeRun": true, "autoDeleteSeconds": 3600});
    let path = format!("/channels/general/tasks/{task}/options");
    let stranger = Caller::new(
        host,
        ns,
        Some(caller_token(ns, "stranger", Grant::Actions).await?),
    );
    let refused = stranger.send("PUT", &path, Some(options.clone())).await?;
    ensure!(refused.status == StatusCode::FORBIDDEN, "{refused:?}");
    let said = refused.json["error"]["message"].as_str().unwrap_or("");
    ensure!(
        said.contains("update") && said.contains("channels/tasks"),
        "{said}"
    );
    let ann = Caller::new(
        host,
        ns,
        Some(token_with(ns, "ann", &["channels/tasks"]).await?),
    );
    let set = ann.send("PUT", &path, Some(options.clone())).await?;
    ensure!(set.status == StatusCode::OK, "{set:?}");

    // The controller gives the trigger the volume and the flags.
    let cj = wait::matches(
        &ns.api::<CronJob>(),
        &task,
        "the CronJob running a worktree task",
        WAIT,
        |c: &CronJob| {
            let args = c
                .spec
                .job_template
                .spec
                .as_ref()
                .and_then(|j| j.template.spec.as_ref())
                .and_then(|p| p.containers[0].args.clone())
                .unwrap_or_default();
            args.iter().any(|a| a == "--worktree")
                && args.iter().any(|a| a == "--update-before-run")
        },
    )
    .await?;
    let pod = cj.spec.job_template.spec.unwrap().template.spec.unwrap();
    ensure!(
        pod.volumes.as_ref().is_some_and(|v| v[0]
            .persistent_volume_claim
            .as_ref()
            .is_some_and(|c| c.claim_name == "tree")),
        "{:?}",
        pod.volumes
    );
    let listed = ann.send("GET", "/channels/general/tasks", None).await?;
    ensure!(
        listed.json["tasks"][0]["options"]["worktree"] == true,
        "{listed:?}"
    );

    // First run: the worktree thread and its worktree, made; the action runs there.
    let log = run_once(ns, &task, 1).await?;
    let thread = worktree_thread_name(&task);
    ensure!(
        log.contains(&format!("made the worktree thread {thread}")),
        "{log}"
    );
    let made: Channel = wait::exists(&ns.api::<Channel>(), &thread, WAIT).await?;
    ensure!(made.spec.kind == ChannelKind::Worktree, "{made:?}");
    ensure!(made.spec.parent.as_deref() == Some("general"), "{made:?}");
    let sub = format!(".loop-worktrees/general/{thread}");
    ensure!(
        made.spec.working_tree
            == Some(WorkingTree {
                claim_name: "tree".into(),
                sub_path: Some(sub.clone())
            }),
        "{made:?}"
    );
    let tree = volume.join(&sub);
    let branch = format!("loop/{thread}");
    ensure!(
        git.run(&tree, &["branch", "--show-current"])? == branch,
        "the worktree's branch"
    );
    let listing = git.run(&volume.join("repo"), &["worktree", "list", "--porcelain"])?;
    ensure!(
        listing.contains(&format!("refs/heads/{branch}")),
        "{listing}"
    );
    let app = Caller::new(host, ns, Some(caller_token(ns, "app", Grant::All).await?));
    let ticks = app.journal(&thread, &id, "/actions/tick").await?;
    ensure!(
        ticks.len() == 1 && ticks[0]["body"]["task_id"] == task.as_str(),
        "the action ran in the thread: {ticks:#?}"
    );
    ensure!(
        app.journal("general", &id, "/actions/tick")
            .await
            .unwrap_or_default()
            .is_empty(),
        "and not in the channel"
    );

    // The run's work in its worktree; a teammate pushes to the origin meanwhile.
    std::fs::write(tree.join("notes.md"), "from the task\n")?;
    git.run(&tree, &["add", "notes.md"])?;
    git.run(&tree, &["commit", "-q", "-m", "task's work"])?;
    let teammate = volume.join("teammate");
    std::fs::write(teammate.join("CHANGELOG"), "v2\n")?;
    git.run(&teammate, &["add", "CHANGELOG"])?;
    git.run(&teammate, &["commit", "-q", "-m", "teammate's work"])?;
    git.run(&teammate, &["push", "-q", "origin", "main"])?;
    let theirs = git.run(&teammate, &["rev-parse", "HEAD"])?;

    // Second run: the same thread, rebased first.
    let log = run_once(ns, &task, 2).await?;
    ensure!(
        log.contains("rebased 1 commit(s) onto origin/main"),
        "{log}"
    );
    ensure!(
        git.run(&tree, &["rev-parse", "HEAD~1"])? == theirs,
        "rebased onto the teammate's commit"
    );
    ensure!(
        git.run(&tree, &["log", "--format=%s"])? == "task's work\nteammate's work\nfirst",
        "the history"
    );
    let ticks = app.journal(&thread, &id, "/actions/tick").await?;
    ensure!(ticks.len() == 2, "both runs in the thread: {ticks:#?}");
    ensure!(
        git.run(&volume.join("repo"), &["status", "--porcelain"])?
            .is_empty(),
        "the channel's checkout is untouched"
    );

    // Auto-delete of a few seconds: the controller deletes the thread once its time comes.
    let short = json!({"worktree": true, "autoDeleteSeconds": 3});
    let set = ann.send("PUT", &path, Some(short)).await?;
    ensure!(set.status == StatusCode::OK, "{set:?}");
    wait::matches(
        &ns.api::<CronJob>(),
        &task,
        "the new options",
        WAIT,
        |c: &CronJob| {
            c.spec
                .job_template
                .spec
                .as_ref()
                .and_then(|j| j.template.spec.as_ref())
                .and_then(|p| p.containers[0].args.clone())
                .unwrap_or_default()
                .iter()
                .any(|a| a == "--auto-delete-seconds=3")
        },
    )
    .await?;
    run_once(ns, &task, 3).await?;
    let marked = ns.api::<Channel>().get_opt(&thread).await?;
    if let Some(marked) = marked {
        ensure!(
            marked.annotations().contains_key(ANNOTATION_DELETE_AT),
            "{marked:?}"
        );
    }
    wait::deleted(&ns.api::<Channel>(), &thread, Duration::from_secs(60)).await?;
    // The Event is written after the delete (the deletion is what it reports): seen on a
    // loaded machine a moment after the thread was gone.
    let until = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let events = ns.api::<Event>().list(&ListParams::default()).await?;
        if events.items.iter().any(|e| {
            e.reason.as_deref() == Some("AutoDeleted")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("general")
        }) {
            return Ok(());
        }
        ensure!(
            tokio::time::Instant::now() < until,
            "no AutoDeleted Event on the channel 30 s after its thread was deleted"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
