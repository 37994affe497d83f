//! Every write the API server makes to a PluginInstance's status, one field manager per field
//! (see `model::names`), each by server-side apply, so no write takes another writer's field
//! away and no merge patch races an apply:
//!
//! | field | manager | written by |
//! |---|---|---|
//! | `lastActivity` | `loop-plugins-api-activity` | accepted work: calls to the plugin, its accepted Plugin API writes |
//! | `switches` | `loop-plugins-api-switches` | a click (host API), the plugin's `PUT`/`DELETE /composer/switches/{id}`, the sweep of stale state |
//! | `liveHold` | `loop-plugins-api-live` | `PUT /channel/live/hold`, the sweep |
//! | `breaker` | `loop-plugins-api-breaker` | the breaker in front of the container |
//! | `stoppedAt` | `loop-plugins-stop` | the host API's Stop (the same field and manager as `loop-plugins plugin stop`) |
//!
//! The switch list is one field that a click and a plugin's `PUT` both change: its writes are
//! read-modify-write under the `resourceVersion` read ([`SwitchEdit`] is the pure part), read
//! again on a conflict, so two that arrive together both survive.
//!
//! The writes sit behind [`StatusWriter`], so request-level tests record them.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use futures::future::BoxFuture;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource};
use serde_json::{Value, json};

use crate::index::InstanceKey;
use model::manifest::{Capability, Manifest};
use model::names::{
    FIELD_MANAGER_ACTIVITY, FIELD_MANAGER_BREAKER, FIELD_MANAGER_LIVE, FIELD_MANAGER_STOP,
    FIELD_MANAGER_SWITCHES,
};
use model::resources::{BreakerState, PluginInstance, PluginInstanceStatus, SwitchState};

/// How often a switch write reads again after another write came in between.
pub const SWITCH_ATTEMPTS: usize = 8;

/// A write that did not happen.
#[derive(Debug, Clone, thiserror::Error)]
pub enum StatusError {
    #[error("PluginInstance {0} does not exist")]
    NotFound(InstanceKey),
    #[error("PluginInstance {0} kept changing under {SWITCH_ATTEMPTS} attempts")]
    Contended(InstanceKey),
    #[error("writing the status of PluginInstance {key}: {message}")]
    Failed { key: InstanceKey, message: String },
}

/// A change to a chat's switches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SwitchChange {
    /// Sets one switch's state (a click's answer, or the plugin's `PUT`).
    Set(SwitchState),
    /// Forgets one switch's state: back to the manifest's off state and title.
    Reset(String),
    /// Changes none: only drops what is stale.
    Sweep,
}

/// A change, with the switches the plugin may show now: the ids its manifest declares, in
/// the manifest's order, or none when `ui.composer_switch` is not approved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SwitchEdit {
    pub change: SwitchChange,
    pub declared: Vec<String>,
}

impl SwitchEdit {
    /// `change`, with the switches `manifest` declares when `ui.composer_switch` is approved.
    pub fn for_plugin(
        change: SwitchChange,
        manifest: &Manifest,
        approved: &BTreeSet<Capability>,
    ) -> Self {
        let declared = if approved.contains(&Capability::UiComposerSwitch) {
            manifest
                .ui
                .composer_switches
                .iter()
                .map(|s| s.id.clone())
                .collect()
        } else {
            Vec::new()
        };
        Self { change, declared }
    }

    /// The switches after the edit: the change made, states of switches no longer declared
    /// dropped, in the manifest's order (so an unchanged state applies unchanged).
    pub fn apply(&self, current: &[SwitchState]) -> Vec<SwitchState> {
        let mut next: Vec<SwitchState> = current.to_vec();
        match &self.change {
            SwitchChange::Set(state) => {
                next.retain(|s| s.id != state.id);
                next.push(state.clone());
            }
            SwitchChange::Reset(id) => next.retain(|s| &s.id != id),
            SwitchChange::Sweep => {}
        }
        next.retain(|s| self.declared.contains(&s.id));
        next.sort_by_key(|s| self.declared.iter().position(|d| d == &s.id));
        next
    }
}

/// The API server's writes to instances.
pub trait StatusWriter: Send + Sync {
    /// Sets `status.lastActivity`.
    fn last_activity<'a>(
        &'a self,
        key: &'a InstanceKey,
        at: String,
    ) -> BoxFuture<'a, Result<(), StatusError>>;

    /// Sets `status.breaker`.
    fn breaker<'a>(
        &'a self,
        key: &'a InstanceKey,
        state: &'a BreakerState,
    ) -> BoxFuture<'a, Result<(), StatusError>>;

    /// Edits `status.switches` from what the instance holds now; answers the instance as
    /// written (or as read, when the edit changed nothing).
    fn switches<'a>(
        &'a self,
        key: &'a InstanceKey,
        edit: &'a SwitchEdit,
    ) -> BoxFuture<'a, Result<PluginInstance, StatusError>>;

    /// Sets `status.liveHold`; answers the instance as written.
    fn live_hold<'a>(
        &'a self,
        key: &'a InstanceKey,
        hold: bool,
    ) -> BoxFuture<'a, Result<PluginInstance, StatusError>>;

    /// Sets `status.stoppedAt`: the Stop button, as `loop-plugins plugin stop` records it.
    fn stopped_at<'a>(
        &'a self,
        key: &'a InstanceKey,
        at: String,
    ) -> BoxFuture<'a, Result<(), StatusError>>;
}

/// The status part a manager applies to a `K`: apiVersion, kind and its fields, under the
/// resourceVersion read when there is one.
pub fn status_body<K: Resource<DynamicType = ()>>(
    status: Value,
    resource_version: Option<&str>,
) -> Value {
    let mut body = json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "status": status,
    });
    if let Some(rv) = resource_version {
        body["metadata"] = json!({ "resourceVersion": rv });
    }
    body
}

/// JSON text the API server's YAML decoder takes. Server-side apply bodies are sent as
/// `application/apply-patch+yaml`, and YAML refuses characters JSON carries raw (DEL, the C1
/// controls but NEL, U+FFFE and U+FFFF): a switch title holding one would fail the write. They
/// can only stand inside JSON strings, so writing them as `\u` escapes keeps the same JSON.
pub fn yaml_safe_json(value: &Value) -> Box<serde_json::value::RawValue> {
    use std::fmt::Write as _;
    let text = value.to_string();
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '\u{7f}'..='\u{84}' | '\u{86}'..='\u{9f}' | '\u{fffe}' | '\u{ffff}') {
            let _ = write!(out, "\\u{:04x}", c as u32);
        } else {
            out.push(c);
        }
    }
    serde_json::value::RawValue::from_string(out)
        .expect("escaping characters within strings keeps the JSON valid")
}

/// The breaker as its manager applies it.
pub fn breaker_json(state: &BreakerState) -> Value {
    serde_json::to_value(state).unwrap_or_default()
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

    async fn apply(
        &self,
        key: &InstanceKey,
        manager: &str,
        body: &Value,
    ) -> Result<PluginInstance, kube::Error> {
        self.api(key)
            .patch_status(
                &key.name,
                &PatchParams::apply(manager).force(),
                &Patch::Apply(&yaml_safe_json(body)),
            )
            .await
    }

    /// Applies one field of the status with its manager.
    async fn apply_field(
        &self,
        key: &InstanceKey,
        manager: &str,
        field: Value,
    ) -> Result<(), StatusError> {
        self.apply(key, manager, &status_body::<PluginInstance>(field, None))
            .await
            .map(|_| ())
            .map_err(|e| Self::failed(key, e))
    }

    fn failed(key: &InstanceKey, err: kube::Error) -> StatusError {
        match err {
            kube::Error::Api(s) if s.is_not_found() => StatusError::NotFound(key.clone()),
            err => StatusError::Failed {
                key: key.clone(),
                message: err.to_string(),
            },
        }
    }
}

impl StatusWriter for KubeStatusWriter {
    fn last_activity<'a>(
        &'a self,
        key: &'a InstanceKey,
        at: String,
    ) -> BoxFuture<'a, Result<(), StatusError>> {
        Box::pin(self.apply_field(key, FIELD_MANAGER_ACTIVITY, json!({ "lastActivity": at })))
    }

    fn breaker<'a>(
        &'a self,
        key: &'a InstanceKey,
        state: &'a BreakerState,
    ) -> BoxFuture<'a, Result<(), StatusError>> {
        Box::pin(self.apply_field(
            key,
            FIELD_MANAGER_BREAKER,
            json!({ "breaker": breaker_json(state) }),
        ))
    }

    fn switches<'a>(
        &'a self,
        key: &'a InstanceKey,
        edit: &'a SwitchEdit,
    ) -> BoxFuture<'a, Result<PluginInstance, StatusError>> {
        Box::pin(async move {
            let api = self.api(key);
            for _ in 0..SWITCH_ATTEMPTS {
                let current = api
                    .get_status(&key.name)
                    .await
                    .map_err(|e| Self::failed(key, e))?;
                let now = current
                    .status
                    .as_ref()
                    .map(|s| s.switches.clone())
                    .unwrap_or_default();
                let next = edit.apply(&now);
                if next == now {
                    return Ok(current);
                }
                let body = status_body::<PluginInstance>(
                    json!({ "switches": next }),
                    current.metadata.resource_version.as_deref(),
                );
                match self.apply(key, FIELD_MANAGER_SWITCHES, &body).await {
                    Ok(written) => return Ok(written),
                    Err(kube::Error::Api(s)) if s.is_conflict() => continue,
                    Err(e) => return Err(Self::failed(key, e)),
                }
            }
            Err(StatusError::Contended(key.clone()))
        })
    }

    fn live_hold<'a>(
        &'a self,
        key: &'a InstanceKey,
        hold: bool,
    ) -> BoxFuture<'a, Result<PluginInstance, StatusError>> {
        Box::pin(async move {
            let body = status_body::<PluginInstance>(json!({ "liveHold": hold }), None);
            self.apply(key, FIELD_MANAGER_LIVE, &body)
                .await
                .map_err(|e| Self::failed(key, e))
        })
    }

    fn stopped_at<'a>(
        &'a self,
        key: &'a InstanceKey,
        at: String,
    ) -> BoxFuture<'a, Result<(), StatusError>> {
        Box::pin(self.apply_field(key, FIELD_MANAGER_STOP, json!({ "stoppedAt": at })))
    }
}

/// One recorded write: which field of which instance, and the value written.
#[derive(Clone, Debug, PartialEq)]
pub struct Recorded {
    pub key: InstanceKey,
    /// `last_activity`, `breaker`, `switches`, `live_hold` or `stopped_at`.
    pub field: &'static str,
    pub value: Value,
}

/// Writes kept in memory, for tests: each instance's status as the writes left it, and every
/// write in order.
#[derive(Default)]
pub struct RecordingWriter {
    pub writes: Mutex<Vec<Recorded>>,
    statuses: Mutex<HashMap<InstanceKey, PluginInstanceStatus>>,
    /// When set, every write fails (the API server is down).
    pub fail: std::sync::atomic::AtomicBool,
    /// The resourceVersion of the last write.
    version: std::sync::atomic::AtomicU64,
}

impl RecordingWriter {
    /// Starts from these instances' statuses.
    pub fn with_instances<'a>(instances: impl IntoIterator<Item = &'a PluginInstance>) -> Self {
        let writer = Self::default();
        {
            let mut statuses = writer.statuses.lock().expect("recording lock");
            for i in instances {
                let key = InstanceKey::new(
                    i.metadata.namespace.as_deref().unwrap_or_default(),
                    i.metadata.name.as_deref().unwrap_or_default(),
                );
                statuses.insert(key, i.status.clone().unwrap_or_default());
            }
        }
        writer
    }

    /// The writes of one field, in order.
    pub fn of(&self, field: &str) -> Vec<(InstanceKey, Value)> {
        self.writes
            .lock()
            .expect("recording lock")
            .iter()
            .filter(|w| w.field == field)
            .map(|w| (w.key.clone(), w.value.clone()))
            .collect()
    }

    /// The instance's status as the writes left it.
    pub fn status(&self, key: &InstanceKey) -> PluginInstanceStatus {
        self.statuses
            .lock()
            .expect("recording lock")
            .get(key)
            .cloned()
            .unwrap_or_default()
    }

    pub fn clear(&self) {
        self.writes.lock().expect("recording lock").clear();
    }

    fn record(
        &self,
        key: &InstanceKey,
        field: &'static str,
        value: Value,
        change: impl FnOnce(&mut PluginInstanceStatus),
    ) -> Result<PluginInstance, StatusError> {
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StatusError::Failed {
                key: key.clone(),
                message: "the API server is down (test)".into(),
            });
        }
        let mut statuses = self.statuses.lock().expect("recording lock");
        let status = statuses.entry(key.clone()).or_default();
        change(status);
        self.writes.lock().expect("recording lock").push(Recorded {
            key: key.clone(),
            field,
            value,
        });
        let mut instance = PluginInstance::new(
            &key.name,
            model::resources::PluginInstanceSpec {
                plugin: String::new(),
                channel: String::new(),
                project: String::new(),
            },
        );
        instance.metadata.namespace = Some(key.namespace.clone());
        let version = 1000
            + self
                .version
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        instance.metadata.resource_version = Some(version.to_string());
        instance.status = Some(status.clone());
        Ok(instance)
    }
}

impl StatusWriter for RecordingWriter {
    fn last_activity<'a>(
        &'a self,
        key: &'a InstanceKey,
        at: String,
    ) -> BoxFuture<'a, Result<(), StatusError>> {
        let result = self
            .record(key, "last_activity", json!(at), |s| {
                s.last_activity = Some(at.clone())
            })
            .map(|_| ());
        Box::pin(async move { result })
    }

    fn breaker<'a>(
        &'a self,
        key: &'a InstanceKey,
        state: &'a BreakerState,
    ) -> BoxFuture<'a, Result<(), StatusError>> {
        let result = self
            .record(key, "breaker", breaker_json(state), |s| {
                s.breaker = Some(state.clone())
            })
            .map(|_| ());
        Box::pin(async move { result })
    }

    fn switches<'a>(
        &'a self,
        key: &'a InstanceKey,
        edit: &'a SwitchEdit,
    ) -> BoxFuture<'a, Result<PluginInstance, StatusError>> {
        let next = edit.apply(&self.status(key).switches);
        let value = serde_json::to_value(&next).unwrap_or_default();
        let result = self.record(key, "switches", value, |s| s.switches = next);
        Box::pin(async move { result })
    }

    fn live_hold<'a>(
        &'a self,
        key: &'a InstanceKey,
        hold: bool,
    ) -> BoxFuture<'a, Result<PluginInstance, StatusError>> {
        let result = self.record(key, "live_hold", json!(hold), |s| s.live_hold = hold);
        Box::pin(async move { result })
    }

    fn stopped_at<'a>(
        &'a self,
        key: &'a InstanceKey,
        at: String,
    ) -> BoxFuture<'a, Result<(), StatusError>> {
        let result = self
            .record(key, "stopped_at", json!(at), |s| {
                s.stopped_at = Some(at.clone())
            })
            .map(|_| ());
        Box::pin(async move { result })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(id: &str, title: Option<&str>) -> SwitchState {
        SwitchState {
            id: id.into(),
            on: true,
            title: title.map(Into::into),
            error: false,
            busy: false,
        }
    }

    fn edit(change: SwitchChange, declared: &[&str]) -> SwitchEdit {
        SwitchEdit {
            change,
            declared: declared.iter().map(|s| s.to_string()).collect(),
        }
    }

    #[test]
    fn switches_are_set_reset_and_kept_in_manifest_order() {
        let declared = ["sync", "quiz"];
        let a = edit(SwitchChange::Set(on("quiz", None)), &declared).apply(&[]);
        let b = edit(SwitchChange::Set(on("sync", Some("Syncing"))), &declared).apply(&a);
        assert_eq!(
            b.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
            ["sync", "quiz"]
        );
        let c = edit(SwitchChange::Reset("sync".into()), &declared).apply(&b);
        assert_eq!(c, vec![on("quiz", None)]);
        // The same state again changes nothing.
        assert_eq!(
            edit(SwitchChange::Set(on("quiz", None)), &declared).apply(&c),
            c
        );
    }

    #[test]
    fn stale_switches_are_dropped() {
        let current = [on("gone", None), on("sync", None)];
        assert_eq!(
            edit(SwitchChange::Sweep, &["sync"]).apply(&current),
            vec![on("sync", None)]
        );
        // Without ui.composer_switch approved nothing is declared: every state goes.
        assert!(edit(SwitchChange::Sweep, &[]).apply(&current).is_empty());
        assert!(
            edit(SwitchChange::Set(on("sync", None)), &[])
                .apply(&[])
                .is_empty()
        );
    }

    #[test]
    fn apply_bodies_carry_no_character_yaml_refuses() {
        let value = json!({ "title": "a\u{7f}b\u{9b}c\u{85}d\u{ffff}\n\u{1}é" });
        let raw = yaml_safe_json(&value);
        let text = raw.get();
        assert!(
            !text
                .chars()
                .any(|c| matches!(c, '\u{7f}'..='\u{84}' | '\u{86}'..='\u{9f}' | '\u{ffff}')),
            "{text}"
        );
        assert!(text.contains("\\u009b") && text.contains('\u{85}') && text.contains('é'));
        assert_eq!(serde_json::from_str::<Value>(text).unwrap(), value);
    }

    #[test]
    fn each_field_has_its_own_manager_and_a_switch_write_carries_the_version_read() {
        let body = status_body::<PluginInstance>(json!({ "switches": [] }), Some("42"));
        assert_eq!(body["metadata"]["resourceVersion"], "42");
        assert_eq!(body["kind"], "PluginInstance");
        let managers = [
            FIELD_MANAGER_ACTIVITY,
            FIELD_MANAGER_BREAKER,
            FIELD_MANAGER_LIVE,
            FIELD_MANAGER_SWITCHES,
        ];
        let distinct: std::collections::BTreeSet<_> = managers.iter().collect();
        assert_eq!(distinct.len(), managers.len());
        assert!(!managers.contains(&model::names::FIELD_MANAGER));
    }
}
