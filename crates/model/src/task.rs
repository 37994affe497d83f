//! A scheduled task's own options, as the reference's Tasks panel sets them: "With Worktree
//! on, the action runs in a worktree thread made on the first run, its later runs first
//! rebased onto the origin branch when Update before run is on, and Auto-delete deletes the
//! thread that many seconds after the action started." They are the task's, not the
//! schedule entry's: kept on the task's CronJob ([`ANNOTATION_TASK_OPTIONS`]), set by a person
//! in the Tasks panel, gone with the task.
//!
//! Where a worktree task's files live: the channel's working-tree volume is mounted whole in
//! the trigger's Pod at [`crate::contract::WORKTREE_DIR`]; the checkout is its `subPath`, and
//! each worktree is `.loop-worktrees/<channel>/<thread>` at the volume's root ([`worktree_sub_path`]),
//! so the worktree thread's Channel names the same claim with that `subPath`.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::names;
use crate::resources::{Channel, ChannelKind};

/// The annotation of a task's CronJob holding its options (JSON of [`TaskOptions`]).
pub const ANNOTATION_TASK_OPTIONS: &str = "plugins.loop.dev/task-options";

/// The annotation of a worktree thread (a Channel) saying when it is deleted (RFC 3339):
/// Auto-delete's seconds after its latest action started.
pub const ANNOTATION_DELETE_AT: &str = "plugins.loop.dev/delete-at";

/// The label of a worktree thread naming the task that made it.
pub const LABEL_TASK: &str = "plugins.loop.dev/task";

/// The folder at a working-tree volume's root that holds worktree tasks' worktrees.
pub const WORKTREES_DIR: &str = ".loop-worktrees";

/// The longest Auto-delete: 30 days.
pub const MAX_AUTO_DELETE_SECONDS: u64 = 30 * 24 * 3600;

/// The longest options annotation read; anything longer is no options of ours.
const MAX_ANNOTATION_BYTES: usize = 1024;

/// How a task runs.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaskOptions {
    /// The action runs in a worktree thread made on the first run.
    #[serde(default)]
    pub worktree: bool,
    /// Later runs first rebase the worktree onto the origin branch.
    #[serde(default)]
    pub update_before_run: bool,
    /// The thread is deleted this many seconds after the action started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auto_delete_seconds: Option<u64>,
}

/// Why options are refused, naming the field.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum TaskOptionsError {
    #[error("{field}: needs worktree on (it acts on the task's worktree thread)")]
    NeedsWorktree { field: &'static str },
    #[error("autoDeleteSeconds: {value} is not between 1 and {MAX_AUTO_DELETE_SECONDS} (30 days)")]
    AutoDeleteOutOfRange { value: u64 },
    #[error("not task options: {0}")]
    Unreadable(String),
}

impl TaskOptions {
    /// Whether the task runs as a plain one (every option off).
    pub fn is_plain(&self) -> bool {
        *self == TaskOptions::default()
    }

    /// The rules of the options together.
    pub fn check(&self) -> Result<(), TaskOptionsError> {
        if !self.worktree {
            if self.update_before_run {
                return Err(TaskOptionsError::NeedsWorktree {
                    field: "updateBeforeRun",
                });
            }
            if self.auto_delete_seconds.is_some() {
                return Err(TaskOptionsError::NeedsWorktree {
                    field: "autoDeleteSeconds",
                });
            }
        }
        match self.auto_delete_seconds {
            Some(value) if value == 0 || value > MAX_AUTO_DELETE_SECONDS => {
                Err(TaskOptionsError::AutoDeleteOutOfRange { value })
            }
            _ => Ok(()),
        }
    }

    /// Reads and checks options from JSON someone wrote.
    pub fn from_json(text: &str) -> Result<TaskOptions, TaskOptionsError> {
        if text.len() > MAX_ANNOTATION_BYTES {
            return Err(TaskOptionsError::Unreadable(format!(
                "{} bytes, more than {MAX_ANNOTATION_BYTES}",
                text.len()
            )));
        }
        let options: TaskOptions =
            serde_json::from_str(text).map_err(|e| TaskOptionsError::Unreadable(e.to_string()))?;
        options.check()?;
        Ok(options)
    }

    /// The options a CronJob's annotation holds; none, or unreadable ones, run the task plain
    /// (the Tasks panel shows the annotation's problem, see [`TaskOptions::from_json`]).
    pub fn of_annotation(value: Option<&str>) -> TaskOptions {
        value
            .and_then(|v| TaskOptions::from_json(v).ok())
            .unwrap_or_default()
    }

    /// The annotation's value.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("options serialize")
    }
}

/// The worktree thread (a Channel) of task `task`: one per task, made again after it is
/// deleted.
pub fn worktree_thread_name(task: &str) -> String {
    names::join_name(&[task, "worktree"])
}

/// Where a worktree thread's worktree is within the working-tree volume.
pub fn worktree_sub_path(channel: &str, thread: &str) -> String {
    format!("{WORKTREES_DIR}/{channel}/{thread}")
}

/// When a chat is deleted by Auto-delete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    /// Not a worktree task's thread with a deletion time: never by Auto-delete.
    Never,
    /// Its time has come.
    Due,
    /// Later, at that time.
    At(Timestamp),
}

/// Auto-delete's verdict on `chat` at `now`: only a worktree thread a task made (kind
/// `worktree`, [`LABEL_TASK`]) with a readable [`ANNOTATION_DELETE_AT`] is ever deleted.
pub fn expiry(chat: &Channel, now: Timestamp) -> Expiry {
    let meta = &chat.metadata;
    let made_by_task = meta
        .labels
        .as_ref()
        .is_some_and(|l| l.contains_key(LABEL_TASK));
    if chat.spec.kind != ChannelKind::Worktree || !made_by_task {
        return Expiry::Never;
    }
    let at = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(ANNOTATION_DELETE_AT))
        .and_then(|v| crate::time::parse(v));
    match at {
        None => Expiry::Never,
        Some(at) if at <= now => Expiry::Due,
        Some(at) => Expiry::At(at),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resources::ChannelSpec;

    #[test]
    fn only_a_tasks_worktree_thread_with_a_time_is_auto_deleted() {
        let now: Timestamp = "2026-12-07T10:00:00Z".parse().unwrap();
        let chat = |kind: ChannelKind, label: bool, at: Option<&str>| {
            let mut c = Channel::new(
                "t",
                ChannelSpec {
                    project: "p".into(),
                    kind,
                    parent: Some("general".into()),
                    app: Default::default(),
                    hidden: false,
                    working_tree: None,
                },
            );
            if label {
                c.metadata.labels = Some([(LABEL_TASK.to_string(), "task".to_string())].into());
            }
            if let Some(at) = at {
                c.metadata.annotations =
                    Some([(ANNOTATION_DELETE_AT.to_string(), at.to_string())].into());
            }
            c
        };
        let later: Timestamp = "2026-12-07T10:05:00Z".parse().unwrap();
        assert_eq!(
            expiry(
                &chat(ChannelKind::Worktree, true, Some("2026-12-07T10:05:00Z")),
                now
            ),
            Expiry::At(later)
        );
        assert_eq!(
            expiry(
                &chat(ChannelKind::Worktree, true, Some("2026-12-07T10:00:00Z")),
                now
            ),
            Expiry::Due
        );
        assert_eq!(
            expiry(
                &chat(ChannelKind::Worktree, true, Some("2026-12-07T09:00:00Z")),
                now
            ),
            Expiry::Due
        );
        // Anything else is never deleted by it: another kind, a thread no task made, no or an
        // unreadable time.
        assert_eq!(
            expiry(
                &chat(ChannelKind::Thread, true, Some("2026-12-07T09:00:00Z")),
                now
            ),
            Expiry::Never
        );
        assert_eq!(
            expiry(
                &chat(ChannelKind::Worktree, false, Some("2026-12-07T09:00:00Z")),
                now
            ),
            Expiry::Never
        );
        assert_eq!(
            expiry(&chat(ChannelKind::Worktree, true, None), now),
            Expiry::Never
        );
        assert_eq!(
            expiry(&chat(ChannelKind::Worktree, true, Some("soon")), now),
            Expiry::Never
        );
    }

    #[test]
    fn options_read_check_and_name_the_field() {
        assert!(TaskOptions::from_json("{}").unwrap().is_plain());
        let all = TaskOptions::from_json(
            r#"{"worktree":true,"updateBeforeRun":true,"autoDeleteSeconds":600}"#,
        )
        .unwrap();
        assert_eq!(
            all,
            TaskOptions {
                worktree: true,
                update_before_run: true,
                auto_delete_seconds: Some(600)
            }
        );
        assert_eq!(TaskOptions::from_json(&all.to_json()).unwrap(), all);
        let refused = |text: &str| TaskOptions::from_json(text).unwrap_err().to_string();
        assert!(
            refused(r#"{"updateBeforeRun":true}"#).starts_with("updateBeforeRun: needs worktree")
        );
        assert!(
            refused(r#"{"autoDeleteSeconds":5}"#).starts_with("autoDeleteSeconds: needs worktree")
        );
        assert!(
            refused(r#"{"worktree":true,"autoDeleteSeconds":0}"#)
                .starts_with("autoDeleteSeconds: 0 is not")
        );
        assert!(refused(r#"{"worktree":true,"autoDeleteSeconds":2592001}"#).contains("30 days"));
        assert!(
            refused(r#"{"worktree":true,"autoDeleteSeconds":-1}"#).starts_with("not task options")
        );
        assert!(refused(r#"{"worktree":"yes"}"#).starts_with("not task options"));
        assert!(refused(r#"{"worktree":true,"rebase":true}"#).contains("unknown field"));
        assert!(
            refused(&format!(r#"{{"worktree":true{}}}"#, " ".repeat(2000)))
                .contains("more than 1024")
        );
        // An unreadable annotation runs the task plain.
        assert!(TaskOptions::of_annotation(Some("{")).is_plain());
        assert!(TaskOptions::of_annotation(None).is_plain());
    }

    #[test]
    fn a_worktree_thread_is_named_after_its_task_within_a_name() {
        assert_eq!(
            worktree_thread_name("echo-general-ping"),
            "echo-general-ping-worktree"
        );
        let long = "a".repeat(52);
        let name = worktree_thread_name(&long);
        assert!(name.len() <= 63, "{name}");
        assert_ne!(name, worktree_thread_name(&"a".repeat(51)));
        assert_eq!(
            worktree_sub_path("general", "t-worktree"),
            ".loop-worktrees/general/t-worktree"
        );
    }
}
