//! Composer switch state, per switch and chat (the channel is the empty thread id), kept in
//! `<data dir>/switches.json` so a restarted container remembers what was on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use serde::Serialize;

use crate::manifest::ComposerSwitch;

/// The file's name in the data dir.
pub const FILE_NAME: &str = "switches.json";

/// A switch's state as the pill shows it: the contract's `SwitchState`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SwitchState {
    pub on: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl SwitchState {
    /// "<label> is on" or "<label> is off".
    pub fn of(switch: &ComposerSwitch, on: bool) -> Self {
        let word = if on { "on" } else { "off" };
        Self {
            on,
            title: Some(format!("{} is {word}", switch.label)),
            error: None,
        }
    }
}

type State = BTreeMap<String, BTreeMap<String, bool>>;

pub struct Switches {
    path: PathBuf,
    state: Mutex<State>,
}

impl Switches {
    /// Loads the state in `dir`; a missing or unreadable file starts with every switch off.
    pub fn open(dir: &Path) -> Self {
        let path = dir.join(FILE_NAME);
        let state = match std::fs::read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                tracing::warn!(error = %e, path = %path.display(), "ignoring unreadable switch state");
                State::new()
            }),
            Err(_) => State::new(),
        };
        Self {
            path,
            state: Mutex::new(state),
        }
    }

    /// Whether `switch` is on in the chat `thread` ("" for the channel).
    pub fn is_on(&self, switch: &str, thread: &str) -> bool {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state
            .get(switch)
            .and_then(|t| t.get(thread))
            .copied()
            .unwrap_or(false)
    }

    /// Sets a switch in a chat and saves the state.
    pub fn set(
        &self,
        switch: &ComposerSwitch,
        thread: &str,
        on: bool,
    ) -> std::io::Result<SwitchState> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state
            .entry(switch.id.clone())
            .or_default()
            .insert(thread.to_owned(), on);
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&*state)?)?;
        std::fs::rename(&tmp, &self.path)?;
        Ok(SwitchState::of(switch, on))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode() -> ComposerSwitch {
        ComposerSwitch {
            id: "mode".into(),
            label: "Mode".into(),
            icon: None,
            title: None,
        }
    }

    #[test]
    fn per_chat_and_persisted() {
        let dir = std::env::temp_dir().join(format!("echo-plugin-switches-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let s = Switches::open(&dir);
        assert!(!s.is_on("mode", ""));
        let on = s.set(&mode(), "", true).unwrap();
        assert_eq!(
            on,
            SwitchState {
                on: true,
                title: Some("Mode is on".into()),
                error: None
            }
        );
        assert!(!s.is_on("mode", "thread-1"));
        s.set(&mode(), "thread-1", false).unwrap();
        let s = Switches::open(&dir);
        assert!(s.is_on("mode", ""));
        assert!(!s.is_on("mode", "thread-1"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
