//! The plugin's memory in a project (`memory.read`, `memory.write`): keyed JSON values, shared
//! by the plugin's instances in every chat of the project.
//!
//! Stored in one ConfigMap per (plugin, project), `memory-<plugin>-<project>`, owned by the
//! Project and labelled `app.kubernetes.io/component=memory`, one key per memory key, each
//! value the JSON text of the value. A key is what a ConfigMap key may be, at most 128
//! characters; a value at most [`MAX_VALUE_BYTES`] as JSON; at most [`MAX_KEYS`] keys.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

use super::error::{ApiError, Code};
use model::names;

pub use sdk::api::limits::{
    MAX_MEMORY_KEY as MAX_KEY, MAX_MEMORY_KEYS as MAX_KEYS,
    MAX_MEMORY_VALUE_BYTES as MAX_VALUE_BYTES,
};

/// The memory ConfigMap of a plugin in a project.
pub fn memory_name(plugin: &str, project: &str) -> String {
    names::join_name(&["memory", plugin, project])
}

/// A key as a ConfigMap may hold it: `[A-Za-z0-9._-]{1,128}`, not `.`, not starting with `..`.
pub fn check_key(key: &str) -> Result<(), ApiError> {
    sdk::api::limits::check_memory_key(key).map_err(|why| ApiError::new(Code::InvalidKey, why))
}

/// The memory ConfigMap as created when it does not exist yet.
pub fn template(
    namespace: &str,
    plugin: &str,
    project: &str,
    owner: Option<OwnerReference>,
) -> ConfigMap {
    let labels = BTreeMap::from([
        (
            names::LABEL_NAME.to_string(),
            names::PLUGIN_APP_NAME.to_string(),
        ),
        (names::LABEL_COMPONENT.to_string(), "memory".to_string()),
        (
            names::LABEL_MANAGED_BY.to_string(),
            names::MANAGED_BY.to_string(),
        ),
        (names::LABEL_PLUGIN.to_string(), plugin.to_string()),
        (names::LABEL_PROJECT.to_string(), project.to_string()),
    ]);
    crate::config_map::empty(memory_name(plugin, project), namespace, labels, owner)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys() {
        for good in ["a", "last-quiz", "v1.score_2", &"k".repeat(128)] {
            assert!(check_key(good).is_ok(), "{good}");
        }
        for bad in ["", ".", "..", "..x", "a/b", "a b", "ü", &"k".repeat(129)] {
            assert_eq!(check_key(bad).unwrap_err().code, Code::InvalidKey, "{bad}");
        }
        assert_eq!(memory_name("echo", "proj"), "memory-echo-proj");
    }
}
