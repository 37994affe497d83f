//! The plugin's settings as it last heard them: the manifest's defaults, then what
//! `settings.changed` events and the Plugin API's `GET /channel` bring.

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use crate::manifest::Manifest;

/// The settings the plugin acts on: `verbose` logs every request it takes.
pub struct Settings {
    verbose: AtomicBool,
}

impl Settings {
    pub fn from_manifest(m: &Manifest) -> Self {
        Self {
            verbose: AtomicBool::new(m.bool_default("verbose")),
        }
    }

    pub fn verbose(&self) -> bool {
        self.verbose.load(Ordering::Relaxed)
    }

    /// Takes `{"verbose": bool, ...}`; a setting that is absent or of another type keeps
    /// its value.
    pub fn update(&self, settings: &Value) {
        if let Some(v) = settings.get("verbose").and_then(Value::as_bool) {
            self.verbose.store(v, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_then_updates() {
        let m = Manifest::parse(crate::manifest::BUILTIN).unwrap();
        let s = Settings::from_manifest(&m);
        assert!(!s.verbose());
        s.update(&json!({"verbose": true}));
        assert!(s.verbose());
        s.update(&json!({"verbose": "yes"}));
        s.update(&json!({}));
        assert!(s.verbose());
    }
}
