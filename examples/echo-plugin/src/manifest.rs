//! The plugin's manifest: the parts of `plugin.json` the plugin itself acts on.

use std::path::Path;

use anyhow::Context;
use serde::Deserialize;

/// `plugin.json` as shipped in this crate, used when the image's copy is absent.
pub const BUILTIN: &str = include_str!("../plugin.json");

/// What the plugin reads from its manifest. Fields it doesn't act on are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct Manifest {
    pub id: String,
    pub version: String,
    #[serde(default)]
    pub capabilities: Vec<String>,
    #[serde(default)]
    pub tools: Vec<Tool>,
    #[serde(default)]
    pub actions: Vec<Action>,
    #[serde(default)]
    pub events: Vec<String>,
    #[serde(default)]
    pub settings: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    pub ui: Ui,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Tool {
    pub name: String,
    #[serde(default)]
    pub input_schema: Option<serde_json::Value>,
    #[serde(default)]
    pub output_schema: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct Action {
    pub id: String,
    #[serde(default)]
    pub default_schedule: Option<serde_json::Value>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct Ui {
    #[serde(default)]
    pub composer_switches: Vec<ComposerSwitch>,
}

#[derive(Debug, Clone, Deserialize)]
pub struct ComposerSwitch {
    pub id: String,
    pub label: String,
    #[serde(default)]
    pub icon: Option<String>,
    #[serde(default)]
    pub title: Option<String>,
}

impl Manifest {
    /// Parses JSON with comments and trailing commas.
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        json5::from_str(text).context("parsing the manifest")
    }

    /// Reads `path`; when there is no such file, the compiled-in manifest.
    pub fn load(path: &Path) -> anyhow::Result<Self> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(&text).with_context(|| path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::info!(path = %path.display(), "no manifest there; using the built-in one");
                Self::parse(BUILTIN)
            }
            Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
        }
    }

    pub fn tool(&self, name: &str) -> Option<&Tool> {
        self.tools.iter().find(|t| t.name == name)
    }

    pub fn action(&self, id: &str) -> Option<&Action> {
        self.actions.iter().find(|a| a.id == id)
    }

    pub fn switch(&self, id: &str) -> Option<&ComposerSwitch> {
        self.ui.composer_switches.iter().find(|s| s.id == id)
    }

    pub fn subscribes(&self, event: &str) -> bool {
        self.events.iter().any(|e| e == event)
    }

    /// A boolean setting's manifest default.
    pub fn bool_default(&self, setting: &str) -> bool {
        self.settings
            .get(setting)
            .and_then(|s| s.get("default"))
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(m: &Manifest, capability: &str) -> bool {
        m.capabilities.iter().any(|c| c == capability)
    }

    #[test]
    fn builtin_declares_what_the_plugin_serves() {
        let m = Manifest::parse(BUILTIN).unwrap();
        assert_eq!(m.id, "echo");
        assert_eq!(
            m.version,
            env!("CARGO_PKG_VERSION"),
            "manifest and crate versions differ"
        );
        let echo = m.tool("echo").unwrap();
        assert_eq!(echo.input_schema.as_ref().unwrap()["type"], "object");
        assert_eq!(echo.output_schema.as_ref().unwrap()["type"], "object");
        assert!(m.action("ping").unwrap().default_schedule.is_none());
        assert_eq!(
            m.action("tick").unwrap().default_schedule.as_ref().unwrap()["type"],
            "cron"
        );
        let mode = m.switch("mode").unwrap();
        assert_eq!(mode.icon.as_deref(), Some("ui/mode.svg"));
        assert!(m.subscribes("message.created") && m.subscribes("settings.changed"));
        assert!(!m.bool_default("verbose"));
    }

    #[test]
    fn builtin_asks_for_the_capabilities_its_features_need() {
        let m = Manifest::parse(BUILTIN).unwrap();
        assert!(has(&m, "schedule"), "tick has a default_schedule");
        assert!(has(&m, "ui.composer_switch"), "mode is a composer switch");
        assert!(has(&m, "events.subscribe"), "the manifest lists events");
        assert!(has(&m, "agent.readonly"), "say is a read-only agent");
    }

    #[test]
    fn switch_icon_is_shipped_and_small() {
        let m = Manifest::parse(BUILTIN).unwrap();
        for s in &m.ui.composer_switches {
            let icon = s.icon.as_deref().unwrap();
            assert!(icon.starts_with("ui/") && icon.ends_with(".svg"), "{icon}");
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(icon);
            let size = std::fs::metadata(&path).unwrap().len();
            assert!(size <= 16 * 1024, "{icon} is {size} bytes, over 16 KB");
            assert!(s.label.chars().count() <= 24);
            assert!(s.title.as_deref().unwrap_or("").chars().count() <= 200);
        }
        assert!(m.ui.composer_switches.len() <= 4);
    }

    #[test]
    fn load_falls_back_only_when_the_file_is_missing() {
        let dir = std::env::temp_dir().join(format!("echo-plugin-manifest-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert_eq!(Manifest::load(&dir.join("absent.json")).unwrap().id, "echo");
        let file = dir.join("plugin.json");
        std::fs::write(&file, "{ id: 'other', version: '9.9.9', /* c */ }").unwrap();
        assert_eq!(Manifest::load(&file).unwrap().version, "9.9.9");
        std::fs::write(&file, "{ id: ").unwrap();
        assert!(Manifest::load(&file).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
