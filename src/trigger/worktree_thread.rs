//! A worktree task's run before its action (the reference's Tasks panel: "With Worktree on,
//! the action runs in a worktree thread made on the first run, its later runs first rebased
//! onto the origin branch when Update before run is on, and Auto-delete deletes the thread
//! that many seconds after the action started").
//!
//! The trigger's Pod mounts the channel's working-tree volume (see `controller::cronjob`). On
//! the first run, or the first after the thread was deleted, it makes the worktree (a real git
//! worktree of the channel's checkout, `crates/worktree`) and the worktree thread: a Channel of
//! kind `worktree`, child of the channel, whose working tree is that worktree on the same
//! volume. A later run rebases it first when asked. With Auto-delete, the thread carries the
//! time it is deleted at (`model::task::ANNOTATION_DELETE_AT`), which the controller acts on.
//! The Kubernetes calls are the trigger's ServiceAccount's own (the chart grants it get, create
//! and patch of Channels in the namespace).

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, bail};
use jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use model::names;
use model::resources::{App, Channel, ChannelKind, ChannelSpec, WorkingTree};
use model::task::{ANNOTATION_DELETE_AT, LABEL_TASK, worktree_sub_path, worktree_thread_name};
use serde_json::json;

use super::TriggerArgs;

/// How long a run waits for a deleted thread of the same name to be gone.
const GONE_WAIT: Duration = Duration::from_secs(60);

/// The worktree thread the action runs in this time, and whether it was made now.
pub struct Thread {
    pub name: String,
    pub made: bool,
}

/// Makes or updates the task's worktree thread; returns the chat the action runs in.
pub async fn prepare(args: &TriggerArgs, started: Timestamp) -> anyhow::Result<Thread> {
    let client = kube::Client::try_default()
        .await
        .context("connecting to the Kubernetes API as the trigger's ServiceAccount")?;
    let channels: Api<Channel> = Api::namespaced(client, &args.namespace);
    let parent = channels
        .get(&args.channel)
        .await
        .with_context(|| format!("reading the channel {}/{}", args.namespace, args.channel))?;
    let (Some(checkout), Some(worktrees), Some(tree)) = (
        args.checkout.as_deref(),
        args.worktrees.as_deref(),
        parent.spec.working_tree.as_ref(),
    ) else {
        bail!(
            "the channel {}/{} has no working tree (spec.workingTree): a Worktree task makes its worktree from the channel's checkout",
            args.namespace,
            args.channel
        );
    };
    let name = worktree_thread_name(&args.task);
    let path = worktrees.join(&name);
    let thread = wait_unless_deleting(&channels, &name).await?;
    let made = match thread {
        Some(_) if worktree::exists(checkout, &name, &path)? => {
            if args.update_before_run {
                let updated = worktree::update(checkout, &path)?;
                println!(
                    "task {}: worktree {name}: {}",
                    args.task,
                    describe(&updated)
                );
            }
            false
        }
        existing => {
            let made = worktree::make(checkout, &name, &path)?;
            exclude_when_inside(checkout, worktrees)?;
            println!(
                "task {}: made the worktree {name} on {} at {}",
                args.task, made.branch, made.commit
            );
            if existing.is_none() {
                create_thread(&channels, &parent, tree, &name, args).await?;
                println!("task {}: made the worktree thread {name}", args.task);
            }
            true
        }
    };
    if let Some(seconds) = args.auto_delete_seconds {
        let at = started + Duration::from_secs(seconds);
        let patch =
            json!({"metadata": {"annotations": {ANNOTATION_DELETE_AT: model::time::rfc3339(at)}}});
        channels
            .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
            .with_context(|| format!("setting when the thread {name} is deleted"))?;
        println!(
            "task {}: the thread {name} is deleted at {}",
            args.task,
            model::time::rfc3339(at)
        );
    }
    Ok(Thread { name, made })
}

fn describe(updated: &worktree::Updated) -> String {
    match updated {
        worktree::Updated::UpToDate { onto } => format!("up to date with {onto}"),
        worktree::Updated::FastForwarded { onto, to } => {
            format!("fast-forwarded to {onto} ({to})")
        }
        worktree::Updated::Rebased { onto, to, commits } => {
            format!("rebased {commits} commit(s) onto {onto} ({to})")
        }
    }
}

/// The thread of that name, unless it is being deleted: then, once it is gone, none.
async fn wait_unless_deleting(
    channels: &Api<Channel>,
    name: &str,
) -> anyhow::Result<Option<Channel>> {
    let deadline = tokio::time::Instant::now() + GONE_WAIT;
    loop {
        let thread = channels
            .get_opt(name)
            .await
            .with_context(|| format!("reading the worktree thread {name}"))?;
        match thread {
            Some(t) if t.meta().deletion_timestamp.is_some() => {
                if tokio::time::Instant::now() > deadline {
                    bail!("the worktree thread {name} is still being deleted after {GONE_WAIT:?}");
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
            other => return Ok(other),
        }
    }
}

/// When the worktrees' folder is inside the checkout (a checkout at the volume's root), the
/// checkout's `.git/info/exclude` names it, so the channel's own status stays clean.
fn exclude_when_inside(checkout: &Path, worktrees: &Path) -> anyhow::Result<()> {
    let Ok(inside) = worktrees.strip_prefix(checkout) else {
        return Ok(());
    };
    let Some(top) = inside.components().next() else {
        return Ok(());
    };
    let line = format!("/{}/", top.as_os_str().to_string_lossy());
    let exclude: PathBuf = checkout.join(".git/info/exclude");
    let text = std::fs::read_to_string(&exclude).unwrap_or_default();
    if text.lines().any(|l| l.trim() == line) {
        return Ok(());
    }
    if let Some(dir) = exclude.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("making {}", dir.display()))?;
    }
    let mut text = text;
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&line);
    text.push('\n');
    std::fs::write(&exclude, text).with_context(|| format!("writing {}", exclude.display()))
}

async fn create_thread(
    channels: &Api<Channel>,
    parent: &Channel,
    tree: &WorkingTree,
    name: &str,
    args: &TriggerArgs,
) -> anyhow::Result<()> {
    let mut thread = Channel::new(
        name,
        ChannelSpec {
            project: parent.spec.project.clone(),
            kind: ChannelKind::Worktree,
            parent: Some(parent.name_any()),
            app: App::Desktop,
            hidden: false,
            working_tree: Some(WorkingTree {
                claim_name: tree.claim_name.clone(),
                sub_path: Some(worktree_sub_path(&args.channel, name)),
            }),
        },
    );
    let meta = thread.meta_mut();
    meta.namespace = Some(args.namespace.clone());
    meta.labels = Some(
        [
            (LABEL_TASK.to_string(), args.task.clone()),
            (names::LABEL_PLUGIN.to_string(), args.plugin.clone()),
        ]
        .into(),
    );
    // Deleted with its channel.
    meta.owner_references = parent.controller_owner_ref(&()).map(|mut owner| {
        owner.controller = Some(false);
        owner.block_owner_deletion = Some(false);
        vec![owner]
    });
    match channels.create(&PostParams::default(), &thread).await {
        Ok(_) => Ok(()),
        // Made meanwhile by a run of the same task (a Job made by hand beside the tick's).
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e).with_context(|| format!("making the worktree thread {name}")),
    }
}
