//! The desired CronJob of a scheduled action in a channel: a pure builder, and what the plan
//! reads back from one.
//!
//! The CronJob ticks on its timing's cron expression and runs `loop-plugins trigger`. For an
//! interval whose ticks do not all complete one (see `model::schedule::ticks`), the trigger
//! gets the interval and its anchor as `--interval` and `--anchor`, and the Job's name (which
//! holds its tick) from the downward API; the anchor is read back from the args, so it stays
//! as long as the entry does, across restarts of the controller.

use k8s_openapi::api::batch::v1::{CronJob, CronJobSpec, JobSpec, JobTemplateSpec};
use k8s_openapi::api::core::v1::{
    Container, EnvVar, EnvVarSource, ObjectFieldSelector, PersistentVolumeClaimVolumeSource,
    PodSpec, PodTemplateSpec, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use model::contract::{SELF_IMAGE_BINARY, SERVICE_ACCOUNT_TOKEN, WORKTREE_DIR};
use model::names;
use model::resources::WorkingTree;
use model::schedule::ticks::{JOB_ENV, JOB_NAME_LABEL};
use model::schedule::{AnchoredInterval, Timing, format_interval, parse_interval};
use model::security::{restricted_container, restricted_pod};
use model::task::{ANNOTATION_TASK_OPTIONS, TaskOptions, WORKTREES_DIR};

use crate::plan::ExistingTask;

/// How long one run of a task's trigger may take in all: the worktree's git work (a fetch and
/// rebase of the project's repository, bounded per read but not in total), waiting for a new
/// thread (90 s), the call (its time limit, 150 s by default) and its retries. Kubernetes
/// ends a run still going then; the CronJob's Forbid keeps runs from piling up meanwhile.
pub const TRIGGER_DEADLINE_SECONDS: i64 = 15 * 60;

/// What a schedule's CronJob is made of.
#[derive(Clone, Debug)]
pub struct CronJobInputs<'a> {
    pub plugin: &'a str,
    pub project: &'a str,
    pub channel: &'a str,
    pub namespace: &'a str,
    pub action: &'a str,
    /// What it ticks on, and which ticks run the action.
    pub timing: &'a Timing,
    /// Kept but turned off: the entry says `enabled: false`, or the project stopped enabling the plugin.
    pub suspend: bool,
    /// The hash of the schedule entry this CronJob was made from.
    pub entry_hash: &'a str,
    /// Whether that entry leaves the task on (its `enabled` is not false).
    pub entry_enabled: bool,
    /// Our own image, which holds `loop-plugins trigger`.
    pub self_image: &'a str,
    /// Where the host API answers.
    pub api_url: &'a str,
    /// The chat, which owns the CronJob.
    pub owner: OwnerReference,
    /// The task's own options (kept on the CronJob as a person set them).
    pub options: &'a TaskOptions,
    /// The channel's working tree: a worktree task's trigger mounts its volume.
    pub working_tree: Option<&'a WorkingTree>,
}

/// Annotation carrying the schedule entry's hash.
pub const ANNOTATION_ENTRY: &str = "plugins.loop.dev/schedule-entry";

/// Annotation carrying whether that entry leaves the task on (`"true"` or `"false"`): what a
/// task whose later entry is refused resumes to (see `plan`).
pub const ANNOTATION_ENTRY_ENABLED: &str = "plugins.loop.dev/schedule-entry-enabled";

/// The trigger's flags that carry an interval and its anchor.
const ARG_INTERVAL: &str = "--interval=";
const ARG_ANCHOR: &str = "--anchor=";

/// The trigger's flags of a worktree task (see `model::task`).
const ARG_WORKTREE: &str = "--worktree";
const ARG_CHECKOUT: &str = "--checkout=";
const ARG_WORKTREES: &str = "--worktrees=";
const ARG_UPDATE_BEFORE_RUN: &str = "--update-before-run";
const ARG_AUTO_DELETE: &str = "--auto-delete-seconds=";

/// The volume a worktree task's trigger mounts: the channel's working tree, whole.
const VOLUME_WORKING_TREE: &str = "working-tree";

/// A CronJob we made, as the plan reads it: its (plugin, action) from its labels, and the
/// task it runs. None for one without our labels.
pub fn existing_task(cronjob: &CronJob) -> Option<((String, String), ExistingTask)> {
    let labels = cronjob.metadata.labels.as_ref()?;
    let key = (
        labels.get(names::LABEL_PLUGIN)?.clone(),
        labels.get(names::LABEL_ACTION)?.clone(),
    );
    let annotation = |key: &str| {
        cronjob
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
    };
    let suspended = cronjob.spec.suspend.unwrap_or(false);
    let task = ExistingTask {
        timing: timing_of(cronjob),
        entry_hash: annotation(ANNOTATION_ENTRY).cloned().unwrap_or_default(),
        // One made before the annotation: a suspended one may have been turned off by its
        // owner, so it is taken as off, and resumed only by a valid entry.
        entry_enabled: annotation(ANNOTATION_ENTRY_ENABLED)
            .map_or(!suspended, |v| v.as_str() != "false"),
        suspended,
        options: TaskOptions::of_annotation(
            annotation(ANNOTATION_TASK_OPTIONS).map(String::as_str),
        ),
        runs: options_of(cronjob),
    };
    Some((key, task))
}

fn trigger_args_of(cronjob: &CronJob) -> &[String] {
    cronjob
        .spec
        .job_template
        .spec
        .as_ref()
        .and_then(|job| job.template.spec.as_ref())
        .and_then(|pod| pod.containers.first())
        .and_then(|container| container.args.as_deref())
        .unwrap_or_default()
}

/// The options a CronJob's trigger runs with, read back from its args.
fn options_of(cronjob: &CronJob) -> TaskOptions {
    let args = trigger_args_of(cronjob);
    TaskOptions {
        worktree: args.iter().any(|a| a == ARG_WORKTREE),
        update_before_run: args.iter().any(|a| a == ARG_UPDATE_BEFORE_RUN),
        auto_delete_seconds: args
            .iter()
            .find_map(|a| a.strip_prefix(ARG_AUTO_DELETE))
            .and_then(|v| v.parse().ok()),
    }
}

/// What a CronJob we made runs on: the interval and anchor its trigger gets, or else every
/// tick of its schedule.
fn timing_of(cronjob: &CronJob) -> Timing {
    let args = trigger_args_of(cronjob);
    let flag = |prefix: &str| args.iter().find_map(|a| a.strip_prefix(prefix));
    let every = flag(ARG_INTERVAL).and_then(|v| parse_interval(v).ok());
    let anchor = flag(ARG_ANCHOR).and_then(model::time::parse);
    match (every, anchor) {
        (Some(every), Some(anchor)) => Timing::Interval(AnchoredInterval { every, anchor }),
        _ => Timing::EveryTick(cronjob.spec.schedule.clone()),
    }
}

/// The trigger's args: where to call, for which task, and for an interval, which ticks run it.
fn trigger_args(input: &CronJobInputs, task: &str) -> Vec<String> {
    let mut args = vec![
        format!("--api-url={}", input.api_url),
        format!("--namespace={}", input.namespace),
        format!("--channel={}", input.channel),
        format!("--plugin={}", input.plugin),
        format!("--action={}", input.action),
        format!("--task={task}"),
        // Said explicitly, so a kubelet that maps volume paths (the tests' stand-in) can.
        format!("--token-file={SERVICE_ACCOUNT_TOKEN}"),
    ];
    if let Some(interval) = input.timing.interval() {
        args.push(format!("{ARG_INTERVAL}{}", format_interval(interval.every)));
        args.push(format!(
            "{ARG_ANCHOR}{}",
            model::time::rfc3339(interval.anchor)
        ));
    }
    if input.options.worktree {
        args.push(ARG_WORKTREE.into());
        // The checkout and the worktrees' folder as the mounted volume shows them; without a
        // working tree the trigger says so and the run fails.
        if let Some(tree) = input.working_tree {
            let checkout = match tree.sub_path.as_deref().map(|p| p.trim_matches('/')) {
                Some(sub) if !sub.is_empty() => format!("{WORKTREE_DIR}/{sub}"),
                _ => WORKTREE_DIR.to_string(),
            };
            args.push(format!("{ARG_CHECKOUT}{checkout}"));
            args.push(format!(
                "{ARG_WORKTREES}{WORKTREE_DIR}/{WORKTREES_DIR}/{}",
                input.channel
            ));
        }
        if input.options.update_before_run {
            args.push(ARG_UPDATE_BEFORE_RUN.into());
        }
        if let Some(seconds) = input.options.auto_delete_seconds {
            args.push(format!("{ARG_AUTO_DELETE}{seconds}"));
        }
    }
    args
}

/// A worktree task's volume and its mount: the channel's working tree, read-write (the
/// worktrees are made there).
fn working_tree_volume(input: &CronJobInputs) -> Option<(Volume, VolumeMount)> {
    let tree = input.working_tree.filter(|_| input.options.worktree)?;
    Some((
        Volume {
            name: VOLUME_WORKING_TREE.into(),
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: tree.claim_name.clone(),
                read_only: Some(false),
            }),
            ..Default::default()
        },
        VolumeMount {
            name: VOLUME_WORKING_TREE.into(),
            mount_path: WORKTREE_DIR.into(),
            ..Default::default()
        },
    ))
}

/// The CronJob that runs `loop-plugins trigger` for one action of one plugin in one channel.
pub fn build_cronjob(input: &CronJobInputs) -> CronJob {
    let name = names::cronjob_name(input.plugin, input.channel, input.action);
    let mut labels = names::labels(input.plugin, input.project, input.channel, "schedule");
    labels.insert(names::LABEL_ACTION.into(), input.action.into());
    let volume = working_tree_volume(input);
    // The options' annotation is the person's (written through the host API): the controller
    // reads it and never applies it, so a change of theirs is never overwritten by a stale read.
    let annotations = [
        (ANNOTATION_ENTRY.to_string(), input.entry_hash.to_string()),
        (
            ANNOTATION_ENTRY_ENABLED.to_string(),
            input.entry_enabled.to_string(),
        ),
    ]
    .into();
    let container = Container {
        name: "trigger".into(),
        image: Some(input.self_image.into()),
        command: Some(vec![SELF_IMAGE_BINARY.into(), "trigger".into()]),
        args: Some(trigger_args(input, &name)),
        // The Job's name holds the tick it was made for (see `model::schedule::ticks`).
        env: Some(vec![EnvVar {
            name: JOB_ENV.into(),
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: format!("metadata.labels['{JOB_NAME_LABEL}']"),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        }]),
        security_context: Some(restricted_container(None)),
        volume_mounts: volume.as_ref().map(|(_, m)| vec![m.clone()]),
        ..Default::default()
    };
    CronJob {
        metadata: ObjectMeta {
            name: Some(name),
            namespace: Some(input.namespace.into()),
            labels: Some(labels.clone()),
            annotations: Some(annotations),
            owner_references: Some(vec![input.owner.clone()]),
            ..Default::default()
        },
        spec: CronJobSpec {
            schedule: input.timing.cron(),
            suspend: Some(input.suspend),
            concurrency_policy: Some("Forbid".into()),
            successful_jobs_history_limit: Some(1),
            failed_jobs_history_limit: Some(3),
            job_template: JobTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels.clone()),
                    ..Default::default()
                }),
                spec: Some(JobSpec {
                    backoff_limit: Some(0),
                    active_deadline_seconds: Some(TRIGGER_DEADLINE_SECONDS),
                    ttl_seconds_after_finished: Some(3600),
                    template: PodTemplateSpec {
                        metadata: Some(ObjectMeta {
                            labels: Some(labels),
                            ..Default::default()
                        }),
                        spec: Some(PodSpec {
                            service_account_name: Some(names::TRIGGER_SERVICE_ACCOUNT.into()),
                            restart_policy: Some("Never".into()),
                            security_context: Some(restricted_pod(None)),
                            containers: vec![container],
                            volumes: volume.map(|(v, _)| vec![v]),
                            ..Default::default()
                        }),
                    },
                    ..Default::default()
                }),
            },
            ..Default::default()
        },
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::LazyLock;
    use std::time::Duration;

    use super::*;

    static PLAIN: LazyLock<TaskOptions> = LazyLock::new(TaskOptions::default);
    static EVERY_FIVE_MINUTES: LazyLock<Timing> =
        LazyLock::new(|| Timing::EveryTick("*/5 * * * *".into()));
    static MONDAYS_AT_THREE: LazyLock<Timing> =
        LazyLock::new(|| Timing::EveryTick("0 3 * * 1".into()));
    static NINETY_MINUTES: LazyLock<Timing> = LazyLock::new(|| {
        Timing::Interval(AnchoredInterval {
            every: Duration::from_secs(90 * 60),
            anchor: "2026-12-01T10:30:00Z".parse().unwrap(),
        })
    });

    fn inputs(suspend: bool) -> CronJobInputs<'static> {
        CronJobInputs {
            plugin: "echo",
            project: "proj",
            channel: "general",
            namespace: "team",
            action: "tick",
            timing: &EVERY_FIVE_MINUTES,
            suspend,
            entry_hash: "abc",
            entry_enabled: true,
            self_image: "registry.local/loop-plugins@sha256:00",
            api_url: "http://api:8080",
            owner: OwnerReference::default(),
            options: &PLAIN,
            working_tree: None,
        }
    }

    /// The fields of `value` as server-side apply owns them: a list whose items all have a
    /// `name` is keyed by it (containers, env), item by item; any other list (args, command,
    /// capabilities) is atomic, one field whatever its length (see `drift`).
    fn paths(value: &serde_json::Value, at: String, all: &mut std::collections::BTreeSet<String>) {
        match value {
            serde_json::Value::Object(map) => {
                for (key, v) in map {
                    paths(v, format!("{at}.{key}"), all);
                }
            }
            serde_json::Value::Array(items)
                if !items.is_empty() && items.iter().all(|i| i.get("name").is_some()) =>
            {
                for item in items {
                    paths(item, format!("{at}[{}]", item["name"]), all);
                }
            }
            _ => {
                all.insert(at);
            }
        }
    }

    /// `Writes::apply` makes an absent CronJob with a create, whose fields an apply later
    /// takes only where it sets them: so whatever the inputs, the builder sets the same fields.
    #[test]
    fn sets_the_same_fields_whatever_the_inputs() {
        let fields = |inputs: &CronJobInputs| {
            let mut all = std::collections::BTreeSet::new();
            paths(
                &serde_json::to_value(build_cronjob(inputs)).unwrap(),
                String::new(),
                &mut all,
            );
            all
        };
        let other = CronJobInputs {
            plugin: "other",
            channel: "random",
            action: "sweep",
            timing: &MONDAYS_AT_THREE,
            suspend: true,
            entry_hash: "def",
            entry_enabled: false,
            api_url: "http://elsewhere:9090",
            ..inputs(false)
        };
        assert_eq!(fields(&inputs(false)), fields(&other));
        // A task that turns from every tick to an interval (its entry changed) too.
        let interval = CronJobInputs {
            timing: &NINETY_MINUTES,
            ..inputs(false)
        };
        assert_eq!(fields(&inputs(false)), fields(&interval));
    }

    /// The whole CronJob, as a reviewer reads it (see `pod::tests::built_objects_snapshot`).
    #[test]
    fn built_cronjob_snapshot() {
        insta::assert_yaml_snapshot!("cronjob", build_cronjob(&inputs(false)));
    }

    fn trigger(cj: &CronJob) -> &Container {
        let pod = cj
            .spec
            .job_template
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap();
        &pod.containers[0]
    }

    #[test]
    fn runs_trigger_for_its_plugin_channel_and_action() {
        let cj = build_cronjob(&inputs(false));
        let spec = &cj.spec;
        assert_eq!(spec.schedule, "*/5 * * * *");
        assert_eq!(spec.suspend, Some(false));
        let args = trigger(&cj).args.clone().unwrap();
        assert!(args.contains(&"--action=tick".to_string()));
        assert!(args.contains(&"--channel=general".to_string()));
        assert!(
            !args.iter().any(|a| a.starts_with("--interval")),
            "{args:?}"
        );
        assert_eq!(cj.metadata.name.as_deref(), Some("echo-general-tick"));
    }

    /// An interval ticks at its step; the trigger gets the interval, its anchor and its Job's
    /// name, which holds the tick.
    #[test]
    fn an_interval_ticks_at_its_step_and_tells_the_trigger_its_anchor() {
        let cj = build_cronjob(&CronJobInputs {
            timing: &NINETY_MINUTES,
            ..inputs(false)
        });
        assert_eq!(cj.spec.schedule, "*/30 * * * *");
        let container = trigger(&cj);
        let args = container.args.clone().unwrap();
        assert_eq!(
            args[args.len() - 2..],
            ["--interval=1h30m", "--anchor=2026-12-01T10:30:00Z"]
        );
        let env = container.env.clone().unwrap();
        assert_eq!(env[0].name, JOB_ENV);
        assert_eq!(
            env[0]
                .value_from
                .as_ref()
                .unwrap()
                .field_ref
                .as_ref()
                .unwrap()
                .field_path,
            "metadata.labels['batch.kubernetes.io/job-name']"
        );
        insta::assert_yaml_snapshot!("cronjob_interval", cj.spec);
    }

    /// What the plan reads back is what was built: an interval keeps its anchor across a
    /// restart of the controller, a cron task its expression, and each whether its entry
    /// left it on, whatever a pause did to `suspend`.
    #[test]
    fn the_plan_reads_back_the_task_it_built() {
        for timing in [&*EVERY_FIVE_MINUTES, &*NINETY_MINUTES] {
            for entry_enabled in [true, false] {
                let cj = build_cronjob(&CronJobInputs {
                    timing,
                    entry_enabled,
                    ..inputs(true)
                });
                let (key, task) = existing_task(&cj).unwrap();
                assert_eq!(key, ("echo".to_string(), "tick".to_string()));
                assert_eq!(&task.timing, timing);
                assert_eq!(task.entry_hash, "abc");
                assert_eq!(task.entry_enabled, entry_enabled);
                assert!(task.suspended);
            }
        }
    }

    /// A CronJob made before the on-or-off annotation: suspended, it is taken as turned off.
    #[test]
    fn a_task_without_its_entrys_on_or_off_is_off_when_suspended() {
        for suspend in [true, false] {
            let mut cj = build_cronjob(&inputs(suspend));
            cj.metadata
                .annotations
                .as_mut()
                .unwrap()
                .remove(ANNOTATION_ENTRY_ENABLED);
            assert_eq!(existing_task(&cj).unwrap().1.entry_enabled, !suspend);
        }
    }

    /// A worktree task's trigger mounts the channel's working tree whole and is told where the
    /// checkout and the worktrees are; the plan reads the options it runs with back, and the
    /// person's options from the annotation the controller never writes.
    #[test]
    fn a_worktree_task_mounts_the_working_tree_and_reads_its_options_back() {
        let options = TaskOptions {
            worktree: true,
            update_before_run: true,
            auto_delete_seconds: Some(600),
        };
        let tree = WorkingTree {
            claim_name: "general-tree".into(),
            sub_path: Some("repo/".into()),
        };
        let cj = build_cronjob(&CronJobInputs {
            options: &options,
            working_tree: Some(&tree),
            ..inputs(false)
        });
        let pod = cj
            .spec
            .job_template
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap();
        let volume = &pod.volumes.as_ref().unwrap()[0];
        let claim = volume.persistent_volume_claim.as_ref().unwrap();
        assert_eq!(
            (claim.claim_name.as_str(), claim.read_only),
            ("general-tree", Some(false))
        );
        let mount = &pod.containers[0].volume_mounts.as_ref().unwrap()[0];
        assert_eq!(
            (mount.mount_path.as_str(), mount.sub_path.as_deref()),
            ("/workspace", None)
        );
        let args = pod.containers[0].args.as_ref().unwrap();
        for arg in [
            "--worktree",
            "--checkout=/workspace/repo",
            "--worktrees=/workspace/.loop-worktrees/general",
            "--update-before-run",
            "--auto-delete-seconds=600",
        ] {
            assert!(args.iter().any(|a| a == arg), "{arg} in {args:?}");
        }
        let (_, task) = existing_task(&cj).unwrap();
        assert_eq!(task.runs, options);
        // The annotation is the person's: the controller's CronJob carries none.
        assert!(task.options.is_plain());
        assert!(
            !cj.metadata
                .annotations
                .as_ref()
                .unwrap()
                .contains_key(ANNOTATION_TASK_OPTIONS)
        );
        let mut set = cj.clone();
        set.metadata
            .annotations
            .as_mut()
            .unwrap()
            .insert(ANNOTATION_TASK_OPTIONS.into(), options.to_json());
        assert_eq!(existing_task(&set).unwrap().1.options, options);

        // A plain task: no volume, no worktree flags, even with a working tree.
        let plain = build_cronjob(&CronJobInputs {
            working_tree: Some(&tree),
            ..inputs(false)
        });
        let pod = plain
            .spec
            .job_template
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap();
        assert!(pod.volumes.is_none() && pod.containers[0].volume_mounts.is_none());
        assert!(existing_task(&plain).unwrap().1.runs.is_plain());
        // A checkout at the volume's root; a channel without a working tree gets only
        // --worktree, and the trigger says why it cannot run.
        let root = WorkingTree {
            claim_name: "t".into(),
            sub_path: None,
        };
        let cj = build_cronjob(&CronJobInputs {
            options: &options,
            working_tree: Some(&root),
            ..inputs(false)
        });
        let args = trigger_args_of(&cj);
        assert!(
            args.iter().any(|a| a == "--checkout=/workspace"),
            "{args:?}"
        );
        let cj = build_cronjob(&CronJobInputs {
            options: &options,
            ..inputs(false)
        });
        let args = trigger_args_of(&cj);
        assert!(
            args.iter().any(|a| a == "--worktree")
                && !args.iter().any(|a| a.starts_with("--checkout"))
        );
    }
}
