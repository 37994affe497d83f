//! The plugin container's contract, as names both sides use: the controller builds Pods with
//! them, the API server calls plugins and reads their Secrets with them. Who the container
//! runs as ([`RunAs`]) is one type for the image check that reads it, the Pod that runs it
//! and `loop-plugins conformance`, which runs it as the Pod does.

use std::fmt;

/// The port a plugin serves HTTP on (`LOOP_PLUGIN_PORT`).
pub const PLUGIN_PORT: i32 = 8080;
/// The env var naming the API server's address: a plugin's Plugin API, `loop-plugins
/// trigger`'s host API, and the controller's setting of what plugin Pods get.
pub const API_URL_ENV: &str = "LOOP_API_URL";
/// Where the instance's Secret is mounted.
pub const SECRET_DIR: &str = "/var/run/loop-plugin";
/// The plugin's own data, kept across Pods and instances.
pub const DATA_DIR: &str = "/data";
/// The chat's working tree, read-only.
pub const WORKTREE_DIR: &str = "/workspace";
/// Where our own image (the Dockerfile's, and the stand-ins the tests and `make dev` push)
/// holds the loop-plugins binary: a schedule's CronJob runs `trigger` from it, the gate's
/// init container runs `install-gate`.
pub const SELF_IMAGE_BINARY: &str = "/loop-plugins";
/// Where the gate's init container puts our binary.
pub const GATE_DIR: &str = "/loop-gate";
/// The env var the gate's init container (`loop-plugins install-gate`) gets the policy in.
pub const GATE_POLICY_ENV: &str = "LOOP_GATE_POLICY";

/// The key of the instance's Secret holding the plugin's Plugin API token
/// (`LOOP_PLUGIN_TOKEN_FILE`).
pub const TOKEN_KEY: &str = "token";
/// The key of the instance's Secret holding the secret every call to the plugin carries
/// (`LOOP_PLUGIN_SECRET_FILE`).
pub const SECRET_KEY: &str = "secret";

/// Where a Pod finds its ServiceAccount's token: `loop-plugins trigger` (a schedule's CronJob)
/// sends it to the host API.
pub const SERVICE_ACCOUNT_TOKEN: &str = "/var/run/secrets/kubernetes.io/serviceaccount/token";

/// Who a plugin's container runs as: its image's numeric USER. oci's `checks::parse_user` is
/// the one parser of USER (it gives ids a Linux uid holds, never root); the ids are kept as
/// the Pod's `runAsUser` and `runAsGroup` take them (Kubernetes' int64), as the Plugin's
/// status records them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunAs {
    pub uid: i64,
    /// The USER's group, when it names one (`uid:gid`).
    pub gid: Option<i64>,
}

impl RunAs {
    /// The gid the container runs as: the USER's group, or the uid's own when USER names
    /// none (a runtime would take the passwd entry's group, or 0; the Pod spec says it).
    pub fn group(self) -> i64 {
        self.gid.unwrap_or(self.uid)
    }
}

/// As USER says it: `uid` or `uid:gid`.
impl fmt::Display for RunAs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.gid {
            Some(gid) => write!(f, "{}:{gid}", self.uid),
            None => write!(f, "{}", self.uid),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_as_reads_as_user_and_runs_as_the_uids_group_when_user_names_none() {
        let named = RunAs {
            uid: 1000,
            gid: Some(1001),
        };
        assert_eq!(
            (named.to_string(), named.group()),
            ("1000:1001".into(), 1001)
        );
        let uid_only = RunAs {
            uid: 65532,
            gid: None,
        };
        assert_eq!(
            (uid_only.to_string(), uid_only.group()),
            ("65532".into(), 65532)
        );
    }
}
