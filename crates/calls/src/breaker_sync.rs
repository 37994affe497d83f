//! Publishes each instance's breaker state on its status (`status.breaker`, through
//! [`StatusWriter::breaker`]): the latest state wins, one write at a time, none when the
//! status already shows it.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;

use crate::index::InstanceKey;
use crate::status::StatusWriter;
use model::resources::BreakerState;

/// Publishes each instance's breaker state on its status: the latest state wins, one write
/// at a time, none when the status already shows it.
pub struct BreakerSync {
    desired: Mutex<HashMap<InstanceKey, BreakerState>>,
    written: Mutex<HashMap<InstanceKey, BreakerState>>,
    dirty: Mutex<BTreeSet<InstanceKey>>,
    notify: Notify,
}

impl Default for BreakerSync {
    fn default() -> Self {
        Self {
            desired: Mutex::new(HashMap::new()),
            written: Mutex::new(HashMap::new()),
            dirty: Mutex::new(BTreeSet::new()),
            notify: Notify::new(),
        }
    }
}

impl BreakerSync {
    /// Asks for the instance's status to show `state`; `shown` is what it shows now.
    pub fn set(&self, key: &InstanceKey, state: BreakerState, shown: Option<&BreakerState>) {
        let known = self
            .written
            .lock()
            .expect("breaker sync lock")
            .get(key)
            .cloned()
            .or_else(|| shown.cloned())
            .unwrap_or_else(closed);
        let mut desired = self.desired.lock().expect("breaker sync lock");
        if desired.get(key) == Some(&state) || (known == state && !desired.contains_key(key)) {
            return;
        }
        desired.insert(key.clone(), state);
        self.dirty
            .lock()
            .expect("breaker sync lock")
            .insert(key.clone());
        self.notify.notify_one();
    }

    /// Writes what was asked for, for ever.
    pub async fn run(self: Arc<Self>, writer: Arc<dyn StatusWriter>) {
        loop {
            self.notify.notified().await;
            loop {
                let next = {
                    let mut dirty = self.dirty.lock().expect("breaker sync lock");
                    let k = dirty.iter().next().cloned();
                    if let Some(k) = &k {
                        dirty.remove(k);
                    }
                    k
                };
                let Some(key) = next else { break };
                let Some(state) = self
                    .desired
                    .lock()
                    .expect("breaker sync lock")
                    .get(&key)
                    .cloned()
                else {
                    continue;
                };
                match writer.breaker(&key, &state).await {
                    Ok(()) => {
                        self.written
                            .lock()
                            .expect("breaker sync lock")
                            .insert(key.clone(), state.clone());
                        let mut desired = self.desired.lock().expect("breaker sync lock");
                        if desired.get(&key) == Some(&state) {
                            desired.remove(&key);
                        }
                    }
                    Err(e) => {
                        tracing::warn!(instance = %key, error = %e, "could not write the breaker state");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        self.dirty
                            .lock()
                            .expect("breaker sync lock")
                            .insert(key.clone());
                    }
                }
            }
        }
    }
}

fn closed() -> BreakerState {
    BreakerState {
        state: "Closed".into(),
        failures: 0,
        open_until: None,
        container: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::RecordingWriter;

    fn state(s: &str, failures: u32) -> BreakerState {
        BreakerState {
            state: s.into(),
            failures,
            open_until: None,
            container: None,
        }
    }

    #[tokio::test]
    async fn the_latest_breaker_state_is_written_once() {
        let sync = Arc::new(BreakerSync::default());
        let writer = Arc::new(RecordingWriter::default());
        tokio::spawn(sync.clone().run(writer.clone()));
        let key = InstanceKey::new("ns", "i");
        // Already shown: nothing to write.
        sync.set(&key, state("Closed", 0), None);
        sync.set(&key, state("Closed", 1), None);
        sync.set(&key, state("Closed", 2), None);
        sync.set(&key, state("Open", 3), None);
        for _ in 0..100 {
            tokio::task::yield_now().await;
        }
        let writes = writer.of("breaker");
        assert_eq!(writes.last().unwrap().1["state"], "Open");
        assert!(writes.len() <= 3, "{writes:?}");
        assert!(writes.last().unwrap().1.get("openUntil").is_none());
        // Written: the same state again writes nothing.
        let n = writes.len();
        sync.set(&key, state("Open", 3), None);
        tokio::task::yield_now().await;
        assert_eq!(writer.of("breaker").len(), n);
    }
}
