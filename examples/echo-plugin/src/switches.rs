//! Composer switch state, per switch and chat (the channel is the empty thread id), kept in
//! `<data dir>/switches.json` so a restarted container remembers what was on.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use loop_plugin_sdk::SwitchState;

/// The file's name in the data dir.
pub const FILE_NAME: &str = "switches.json";

type State = BTreeMap<String, BTreeMap<String, bool>>;

pub struct Switches {
    path: PathBuf,
    state: Mutex<State>,
}

impl Switches {
    /// Loads the state in `dir`; a missing or unreadable file starts with every switch off.
    pub fn open(dir: &Path) -> Self {
        let path = dir.join(FILE_NAME);
        let state = std::fs::read(&path).ok().map(|bytes| {
            serde_json::from_slice(&bytes).unwrap_or_else(|e| {
                let path = path.display();
                tracing::warn!(error = %e, %path, "ignoring unreadable switch state");
                State::new()
            })
        });
        Self {
            state: Mutex::new(state.unwrap_or_default()),
            path,
        }
    }

    /// Whether `switch` is on in the chat `thread` ("" for the channel).
    pub fn is_on(&self, switch: &str, thread: &str) -> bool {
        let state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state.get(switch).and_then(|t| t.get(thread)) == Some(&true)
    }

    /// Sets `switch` (shown as `label`) in the chat `thread`, saves the state, and answers
    /// the pill's state: "<label> is on" or "<label> is off".
    pub fn set(
        &self,
        switch: &str,
        label: &str,
        thread: &str,
        on: bool,
    ) -> std::io::Result<SwitchState> {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        state
            .entry(switch.into())
            .or_default()
            .insert(thread.into(), on);
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(&*state)?)?;
        std::fs::rename(&tmp, &self.path)?;
        let word = if on { "on" } else { "off" };
        Ok(SwitchState {
            on,
            title: Some(format!("{label} is {word}")),
            ..Default::default()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_chat_and_persisted() {
        let dir = tempfile::tempdir().unwrap();
        let s = Switches::open(dir.path());
        assert!(!s.is_on("mode", ""));
        let on = s.set("mode", "Mode", "", true).unwrap();
        assert_eq!(
            on,
            SwitchState {
                on: true,
                title: Some("Mode is on".into()),
                ..Default::default()
            }
        );
        assert!(!s.is_on("mode", "thread-1"));
        s.set("mode", "Mode", "thread-1", false).unwrap();
        let s = Switches::open(dir.path());
        assert!(s.is_on("mode", ""));
        assert!(!s.is_on("mode", "thread-1"));
    }
}
