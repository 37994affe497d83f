//! What the host writes on a PluginInstance's status, with the field manager
//! `loop-plugins-api`: `lastActivity` (demand), `breaker` and `switches`. Each write is a JSON
//! merge patch of its own field, so it never takes another writer's fields away; the switch
//! list is replaced whole, under a `resourceVersion` precondition, read again on a conflict.
//!
//! The writes sit behind [`StatusWriter`], so request-level tests record them.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::pods::InstanceKey;
use super::switches::with_state;
use model::resources::{BreakerState, PluginInstance, SwitchState};

/// The field manager of everything the API server writes.
pub const FIELD_MANAGER: &str = "loop-plugins-api";

/// The host's writes to instances.
pub trait StatusWriter: Send + Sync {
    /// Sets `status.lastActivity`.
    fn last_activity<'a>(
        &'a self,
        key: &'a InstanceKey,
        at: String,
    ) -> BoxFuture<'a, Result<(), String>>;

    /// Sets `status.breaker`.
    fn breaker<'a>(
        &'a self,
        key: &'a InstanceKey,
        state: &'a BreakerState,
    ) -> BoxFuture<'a, Result<(), String>>;

    /// Sets one switch's state in `status.switches`, keeping the others.
    fn switch<'a>(
        &'a self,
        key: &'a InstanceKey,
        state: &'a SwitchState,
    ) -> BoxFuture<'a, Result<(), String>>;
}

/// The breaker as a merge patch writes it: `openUntil` null removes an old one.
pub fn breaker_json(state: &BreakerState) -> Value {
    json!({
        "state": state.state,
        "failures": state.failures,
        "openUntil": state.open_until,
        "container": state.container,
    })
}

/// The writes, made through the Kubernetes API.
#[derive(Clone)]
pub struct KubeStatusWriter {
    client: Client,
}

impl KubeStatusWriter {
    pub fn new(client: Client) -> Self {
        Self { client }
    }

    fn api(&self, key: &InstanceKey) -> Api<PluginInstance> {
        Api::namespaced(self.client.clone(), &key.namespace)
    }

    async fn merge(&self, key: &InstanceKey, patch: Value) -> Result<(), String> {
        let params = PatchParams {
            field_manager: Some(FIELD_MANAGER.into()),
            ..Default::default()
        };
        self.api(key)
            .patch_status(&key.name, &params, &Patch::Merge(&patch))
            .await
            .map(|_| ())
            .map_err(|e| format!("patching the status of PluginInstance {key}: {e}"))
    }
}

impl StatusWriter for KubeStatusWriter {
    fn last_activity<'a>(
        &'a self,
        key: &'a InstanceKey,
        at: String,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(self.merge(key, json!({ "status": { "lastActivity": at } })))
    }

    fn breaker<'a>(
        &'a self,
        key: &'a InstanceKey,
        state: &'a BreakerState,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(self.merge(key, json!({ "status": { "breaker": breaker_json(state) } })))
    }

    fn switch<'a>(
        &'a self,
        key: &'a InstanceKey,
        state: &'a SwitchState,
    ) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let api = self.api(key);
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            for _ in 0..5 {
                let current = api
                    .get_status(&key.name)
                    .await
                    .map_err(|e| format!("reading PluginInstance {key}: {e}"))?;
                let switches = current
                    .status
                    .as_ref()
                    .map(|s| s.switches.clone())
                    .unwrap_or_default();
                let patch = json!({
                    "metadata": { "resourceVersion": current.metadata.resource_version },
                    "status": { "switches": with_state(&switches, state.clone()) },
                });
                match api
                    .patch_status(&key.name, &params, &Patch::Merge(&patch))
                    .await
                {
                    Ok(_) => return Ok(()),
                    Err(kube::Error::Api(s)) if s.is_conflict() => continue,
                    Err(e) => return Err(format!("patching the switches of {key}: {e}")),
                }
            }
            Err(format!("PluginInstance {key} kept changing"))
        })
    }
}

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

/// Writes recorded in memory, for tests.
#[derive(Default)]
pub struct RecordingWriter {
    pub writes: Mutex<Vec<(InstanceKey, String, Value)>>,
}

impl RecordingWriter {
    /// The writes of one kind (`last_activity`, `breaker`, `switch`), in order.
    pub fn of(&self, kind: &str) -> Vec<(InstanceKey, Value)> {
        self.writes
            .lock()
            .expect("recording lock")
            .iter()
            .filter(|(_, k, _)| k == kind)
            .map(|(key, _, v)| (key.clone(), v.clone()))
            .collect()
    }

    fn record(&self, key: &InstanceKey, kind: &str, value: Value) {
        self.writes
            .lock()
            .expect("recording lock")
            .push((key.clone(), kind.into(), value));
    }
}

impl StatusWriter for RecordingWriter {
    fn last_activity<'a>(
        &'a self,
        key: &'a InstanceKey,
        at: String,
    ) -> BoxFuture<'a, Result<(), String>> {
        self.record(key, "last_activity", json!(at));
        Box::pin(async { Ok(()) })
    }

    fn breaker<'a>(
        &'a self,
        key: &'a InstanceKey,
        state: &'a BreakerState,
    ) -> BoxFuture<'a, Result<(), String>> {
        self.record(key, "breaker", breaker_json(state));
        Box::pin(async { Ok(()) })
    }

    fn switch<'a>(
        &'a self,
        key: &'a InstanceKey,
        state: &'a SwitchState,
    ) -> BoxFuture<'a, Result<(), String>> {
        self.record(
            key,
            "switch",
            serde_json::to_value(state).unwrap_or_default(),
        );
        Box::pin(async { Ok(()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(writes.last().unwrap().1["openUntil"], Value::Null);
        // Written: the same state again writes nothing.
        let n = writes.len();
        sync.set(&key, state("Open", 3), None);
        tokio::task::yield_now().await;
        assert_eq!(writer.of("breaker").len(), n);
    }
}
