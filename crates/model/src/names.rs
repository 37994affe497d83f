//! Names and labels of the objects the controller makes. Every child carries the
//! `app.kubernetes.io/*` labels and ours, so watches select only what we own and orphans are
//! found by label and owner UID.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

/// The one field manager for everything the controller applies.
pub const FIELD_MANAGER: &str = "loop-plugins-controller";
/// The API server's field managers, one per field it writes (`crates/server/src/status.rs`
/// says which writes each): a PluginInstance's `status.lastActivity`,
pub const FIELD_MANAGER_ACTIVITY: &str = "loop-plugins-api-activity";
/// its `status.switches`,
pub const FIELD_MANAGER_SWITCHES: &str = "loop-plugins-api-switches";
/// its `status.liveHold`,
pub const FIELD_MANAGER_LIVE: &str = "loop-plugins-api-live";
/// its `status.breaker`;
pub const FIELD_MANAGER_BREAKER: &str = "loop-plugins-api-breaker";
/// what the API server creates (AgentRuns, inbox and memory ConfigMaps) and an AgentRun's
/// `status.doneDelivered`.
pub const FIELD_MANAGER_API: &str = "loop-plugins-api";
/// The API server's field manager for the tool calls on an AgentRun's status (a run's MCP
/// endpoint).
pub const FIELD_MANAGER_RUN_TOOLS: &str = "loop-plugins-api-run-tools";
/// `loop-plugins project trust`: a project's `ProjectTrust`.
pub const FIELD_MANAGER_TRUST: &str = "loop-plugins-project-trust";
/// `loop-plugins plugin stop`: a PluginInstance's `status.stoppedAt`.
pub const FIELD_MANAGER_STOP: &str = "loop-plugins-stop";
/// `loop-plugins project import`: the Project it writes, or HostConfig's `plugins.defaults`.
pub const FIELD_MANAGER_IMPORT: &str = "loop-plugins-import";
/// The recommended labels (`app.kubernetes.io/*`) we set.
pub const LABEL_NAME: &str = "app.kubernetes.io/name";
pub const LABEL_COMPONENT: &str = "app.kubernetes.io/component";
pub const LABEL_MANAGED_BY: &str = "app.kubernetes.io/managed-by";
pub const LABEL_PART_OF: &str = "app.kubernetes.io/part-of";
/// `app.kubernetes.io/managed-by` on every object we make.
pub const MANAGED_BY: &str = "loop-plugins";
/// Selects every object the controller made: `LABEL_MANAGED_BY=MANAGED_BY`.
pub const MANAGED_SELECTOR: &str = "app.kubernetes.io/managed-by=loop-plugins";
/// `app.kubernetes.io/name` of what belongs to a plugin: a chat's children, its memory.
pub const PLUGIN_APP_NAME: &str = "loop-plugin";
/// `app.kubernetes.io/part-of` of the API server's own records (they are not selected as
/// the controller's: no `managed-by`).
pub const PART_OF: &str = "loop-plugins";

pub const LABEL_PLUGIN: &str = "plugins.loop.dev/plugin";
pub const LABEL_PROJECT: &str = "plugins.loop.dev/project";
pub const LABEL_CHANNEL: &str = "plugins.loop.dev/channel";
pub const LABEL_INSTANCE: &str = "plugins.loop.dev/instance";
pub const LABEL_ACTION: &str = "plugins.loop.dev/action";
/// The agent run (the AgentRun's name) an object belongs to: its runner's Job, Secret and Pod,
/// its transcript.
pub const LABEL_RUN: &str = "plugins.loop.dev/run";

/// The ServiceAccount a schedule's CronJob runs `loop-plugins trigger` as, in the chat's
/// namespace (the chart makes it there, with the host API's `trigger` grant).
pub const TRIGGER_SERVICE_ACCOUNT: &str = "loop-plugins-trigger";

/// The longest name a label value or a Pod's hostname may have.
const MAX_NAME: usize = 63;

/// The longest name a CronJob may have: its Jobs add 11 characters to it.
const MAX_CRONJOB_NAME: usize = 52;

/// A DNS-1123 label made of `parts`, shortened with a hash of the whole when too long, so
/// distinct inputs keep distinct names.
pub fn join_name(parts: &[&str]) -> String {
    join_name_within(parts, MAX_NAME)
}

/// [`join_name`] for names of at most `max` characters.
fn join_name_within(parts: &[&str], max: usize) -> String {
    let full = parts.join("-");
    if full.len() <= max - 11 {
        return full;
    }
    let hash = short_hash(full.as_bytes());
    let keep = &full[..max - 11];
    format!("{}-{hash}", keep.trim_end_matches('-'))
}

/// Ten hex digits of a SHA-256: enough to tell objects apart, short enough for a name.
pub fn short_hash(bytes: &[u8]) -> String {
    let digest = Sha256::digest(bytes);
    hex::encode(&digest[..5])
}

/// The PluginInstance of `plugin` in chat `channel`.
pub fn instance_name(plugin: &str, channel: &str) -> String {
    join_name(&[plugin, channel])
}

/// The PersistentVolumeClaim holding /data of `plugin` in chat `channel`.
pub fn data_claim_name(plugin: &str, channel: &str) -> String {
    join_name(&["data", plugin, channel])
}

/// The Secret holding an instance's token and secret.
pub fn secret_name(instance: &str) -> String {
    join_name(&[instance, "token"])
}

/// The dockerconfigjson Secret an instance's Pod is pulled with.
pub fn pull_secret_name(instance: &str) -> String {
    join_name(&[instance, "pull"])
}

/// The CronJob of `action` of `plugin` in channel `channel`: at most 52 characters, which the
/// API server allows a CronJob (it refuses a longer one as invalid).
pub fn cronjob_name(plugin: &str, channel: &str, action: &str) -> String {
    join_name_within(&[plugin, channel, action], MAX_CRONJOB_NAME)
}

/// Labels every child of a (plugin, chat) carries.
pub fn labels(
    plugin: &str,
    project: &str,
    channel: &str,
    component: &str,
) -> BTreeMap<String, String> {
    BTreeMap::from([
        (LABEL_NAME.into(), PLUGIN_APP_NAME.into()),
        (LABEL_COMPONENT.into(), component.into()),
        (LABEL_MANAGED_BY.into(), MANAGED_BY.into()),
        (LABEL_PLUGIN.into(), plugin.into()),
        (LABEL_PROJECT.into(), project.into()),
        (LABEL_CHANNEL.into(), channel.into()),
    ])
}

/// A short hash of a value's content (a Pod's name carries its spec's, so a changed spec makes
/// a new Pod).
pub fn content_hash<T: serde::Serialize>(object: &T) -> String {
    let bytes = serde_json::to_vec(object).expect("objects serialize");
    short_hash(&bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_selector_selects_the_managed_by_label() {
        assert_eq!(MANAGED_SELECTOR, format!("{LABEL_MANAGED_BY}={MANAGED_BY}"));
    }

    #[test]
    fn short_names_stay_readable() {
        assert_eq!(instance_name("echo", "general"), "echo-general");
    }

    #[test]
    fn long_names_are_cut_and_stay_distinct() {
        let a = instance_name(
            "a-plugin-with-a-long-name-x",
            "a-channel-with-an-even-longer-name-1",
        );
        let b = instance_name(
            "a-plugin-with-a-long-name-x",
            "a-channel-with-an-even-longer-name-2",
        );
        assert!(a.len() <= 63 && b.len() <= 63, "{a} {b}");
        assert_ne!(a, b);
        assert!(!a.contains("--"));
    }

    #[test]
    fn cronjob_names_fit_what_a_cronjob_may_be_called() {
        // Short ones stay whole, as before.
        assert_eq!(cronjob_name("echo", "general", "tick"), "echo-general-tick");
        let long = cronjob_name(
            "ebi-6a96af",
            "a-chat-whose-name-is-long-enough-to-cut",
            "tick",
        );
        let other = cronjob_name(
            "ebi-6a96af",
            "a-chat-whose-name-is-long-enough-to-cut",
            "ping",
        );
        assert!(long.len() <= 52 && other.len() <= 52, "{long} {other}");
        assert_ne!(long, other);
    }
}
