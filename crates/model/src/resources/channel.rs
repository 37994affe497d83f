//! `Channel`: a chat (a channel, a thread or a worktree thread) of a project.

use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Condition;
use crate::config::ConfigLevel;

/// A chat. Threads and worktree threads name their parent channel and follow its project.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "plugins.loop.dev",
    version = "v1alpha1",
    kind = "Channel",
    namespaced,
    status = "ChannelStatus",
    shortname = "chat",
    category = "loop-plugins",
    doc = "A Loop chat: a channel, a thread or a worktree thread",
    printcolumn(name = "Project", type_ = "string", json_path = ".spec.project"),
    printcolumn(name = "Kind", type_ = "string", json_path = ".spec.kind"),
    printcolumn(name = "Parent", type_ = "string", json_path = ".spec.parent"),
    printcolumn(name = "App", type_ = "string", json_path = ".spec.app"),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(validation = Rule::new("self.kind == 'channel' ? !has(self.parent) : has(self.parent)").message("a thread or worktree thread names its parent channel in parent; a channel has none"))]
#[serde(rename_all = "camelCase")]
pub struct ChannelSpec {
    /// The Project (in this namespace) whose config the chat follows.
    #[schemars(regex(pattern = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"), length(max = 63))]
    pub project: String,
    /// channel, thread or worktree.
    #[serde(default)]
    pub kind: ChannelKind,
    /// The parent channel of a thread or worktree thread.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// The app the chat lives in; plugins run only in desktop chats.
    #[serde(default)]
    pub app: App,
    /// A hidden thread (such as a plugin's own plugin:<id> thread): no events, no switches.
    #[serde(default)]
    pub hidden: bool,
    /// The chat's working tree: the channel's checkout, or a worktree thread's worktree.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub working_tree: Option<WorkingTree>,
}

/// Whether a chat is a channel, a thread or a worktree thread.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum ChannelKind {
    #[default]
    Channel,
    Thread,
    Worktree,
}

/// The app a chat lives in.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum App {
    #[default]
    Desktop,
    Slack,
    Discord,
}

/// Where a chat's working tree lives.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct WorkingTree {
    /// The PersistentVolumeClaim holding the checkout, in the chat's namespace.
    pub claim_name: String,
    /// The folder of the checkout within that volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sub_path: Option<String>,
}

/// What the controller observed of the chat.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ChannelStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The plugins enabled in this chat.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub plugins: Vec<String>,
    /// The schedule entries applied to this channel's CronJobs: each is applied once per
    /// change, so a CronJob deleted by hand comes back only when its entry changes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied_schedules: Vec<AppliedSchedule>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A schedule entry applied to a channel.
#[derive(JsonSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
#[serde(rename_all = "camelCase")]
pub struct AppliedSchedule {
    pub plugin: String,
    pub action: String,
    /// The hash of the entry as applied.
    pub entry_hash: String,
    /// The config whose entry it is: `global` (HostConfig) or `project` (absent on entries
    /// recorded before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<ConfigLevel>,
}

impl AppliedSchedule {
    /// Whether `other` records the same entry (its source aside: the hash covers it).
    pub fn same_entry(&self, other: &AppliedSchedule) -> bool {
        self.plugin == other.plugin
            && self.action == other.action
            && self.entry_hash == other.entry_hash
    }
}
