//! The plugin container's contract, as names both sides use: the controller builds Pods with
//! them, the API server calls plugins and reads their Secrets with them.

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
