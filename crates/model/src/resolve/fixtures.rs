//! Small builders for the config tests.

use serde_json::{Value, json};

use crate::config::{PluginConfig, PluginsConfig};
use crate::manifest::{Manifest, parse_str};
use crate::resources::HostPlugins;

/// A `plugins` config from (id, entry as JSON) pairs.
pub(crate) fn config(entries: &[(&str, Value)]) -> PluginsConfig {
    entries
        .iter()
        .map(|(id, v)| ((*id).to_string(), entry(v.clone())))
        .collect()
}

/// One plugin's entry from JSON.
pub(crate) fn entry(v: Value) -> PluginConfig {
    serde_json::from_value(v).expect("a PluginConfig")
}

/// The global config with plugins on or off and these defaults.
pub(crate) fn host(enabled: bool, defaults: PluginsConfig) -> HostPlugins {
    HostPlugins {
        enabled,
        defaults,
        ..HostPlugins::default()
    }
}

/// A manifest with a few settings and actions.
pub(crate) fn manifest() -> Manifest {
    parse_str(
        &json!({
            "id": "cogtest", "name": "Cog", "version": "1", "api": "1",
            "capabilities": ["schedule"],
            "actions": [
                { "id": "ping" },
                { "id": "daily", "default_schedule": { "type": "cron", "schedule": "0 9 * * *" } },
                { "id": "poll", "default_schedule": { "type": "interval", "schedule": "15m" } },
            ],
            "settings": {
                "count": { "type": "integer", "minimum": 1, "maximum": 10, "default": 3 },
                "mode": { "type": "string", "enum": ["fast", "slow"] },
                "sync": { "type": "boolean", "default": false },
            },
        })
        .to_string(),
    )
    .expect("a valid manifest")
}
