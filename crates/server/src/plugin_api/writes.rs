//! Every write the API server makes, behind [`Writer`], so request-level tests record them and
//! the server itself writes through `kube::Api`. Three kinds of write:
//! - creating an AgentRun (`POST /runs`);
//! - applying the API server's part of a PluginInstance's status (server-side apply, field
//!   manager `loop-plugins-api`: switches, live hold, last activity);
//! - merging keys into an inbox or memory ConfigMap (a JSON merge patch, so concurrent writers
//!   of different keys never undo each other), creating it first when it is missing.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use serde_json::value::RawValue;

use super::instance_state::FIELD_MANAGER;
use model::resources::{AgentRun, PluginInstance, PluginInstanceStatus};

/// A write that did not happen.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{0} exists already")]
    AlreadyExists(String),
    #[error("{0}")]
    Failed(String),
}

/// Keys to set (`Some`) or remove (`None`) in a ConfigMap's data.
pub type DataPatch = BTreeMap<String, Option<String>>;

/// The writes of the API server.
pub trait Writer: Send + Sync {
    /// Creates the run; answers it as the API server stored it.
    fn create_run<'a>(&'a self, run: &'a AgentRun) -> BoxFuture<'a, Result<AgentRun, WriteError>>;

    /// Applies the API server's part of an instance's status.
    fn apply_instance_status<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        status: &'a PluginInstanceStatus,
    ) -> BoxFuture<'a, Result<PluginInstance, WriteError>>;

    /// Merges `data` into the ConfigMap `template` names, creating it from `template` first
    /// when missing.
    fn merge_config_map<'a>(
        &'a self,
        template: &'a ConfigMap,
        data: &'a DataPatch,
    ) -> BoxFuture<'a, Result<ConfigMap, WriteError>>;
}

/// JSON text the API server's YAML decoder takes. Server-side apply bodies are sent as
/// `application/apply-patch+yaml`, and YAML refuses characters JSON carries raw (DEL, the C1
/// controls but NEL, U+FFFE and U+FFFF): a switch title holding one would fail the write. They
/// can only stand inside JSON strings, so writing them as `\u` escapes keeps the same JSON.
pub fn yaml_safe_json(value: &serde_json::Value) -> Box<RawValue> {
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
    RawValue::from_string(out).expect("escaping characters within strings keeps the JSON valid")
}

/// The writes, made through the Kubernetes API.
#[derive(Clone)]
pub struct KubeWriter {
    client: Client,
}

impl KubeWriter {
    pub fn new(client: Client) -> Self {
        Self { client }
    }
}

fn failed(what: &str, name: &str, err: kube::Error) -> WriteError {
    match err {
        kube::Error::Api(s) if s.is_already_exists() => WriteError::AlreadyExists(name.into()),
        err => WriteError::Failed(format!("{what} {name}: {err}")),
    }
}

fn is_not_found(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_not_found())
}

impl Writer for KubeWriter {
    fn create_run<'a>(&'a self, run: &'a AgentRun) -> BoxFuture<'a, Result<AgentRun, WriteError>> {
        Box::pin(async move {
            let ns = run.namespace().unwrap_or_default();
            let api: Api<AgentRun> = Api::namespaced(self.client.clone(), &ns);
            let params = PostParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            api.create(&params, run)
                .await
                .map_err(|e| failed("creating AgentRun", &run.name_any(), e))
        })
    }

    fn apply_instance_status<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
        status: &'a PluginInstanceStatus,
    ) -> BoxFuture<'a, Result<PluginInstance, WriteError>> {
        Box::pin(async move {
            let api: Api<PluginInstance> = Api::namespaced(self.client.clone(), namespace);
            let patch = json!({
                "apiVersion": PluginInstance::api_version(&()),
                "kind": PluginInstance::kind(&()),
                "status": status,
            });
            let patch = yaml_safe_json(&patch);
            api.patch_status(
                name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
            .map_err(|e| failed("applying the status of PluginInstance", name, e))
        })
    }

    fn merge_config_map<'a>(
        &'a self,
        template: &'a ConfigMap,
        data: &'a DataPatch,
    ) -> BoxFuture<'a, Result<ConfigMap, WriteError>> {
        Box::pin(async move {
            let name = template.name_any();
            let ns = template.namespace().unwrap_or_default();
            let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &ns);
            let params = PatchParams {
                field_manager: Some(FIELD_MANAGER.into()),
                ..Default::default()
            };
            let patch = json!({ "data": data });
            // Twice at most: a missing ConfigMap is created, and one made meanwhile by another
            // call is patched.
            for _ in 0..2 {
                match api.patch(&name, &params, &Patch::Merge(&patch)).await {
                    Ok(map) => return Ok(map),
                    Err(e) if is_not_found(&e) => {}
                    Err(e) => return Err(failed("patching ConfigMap", &name, e)),
                }
                let mut fresh = template.clone();
                fresh.data = Some(
                    data.iter()
                        .filter_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone())))
                        .collect(),
                );
                let post = PostParams {
                    field_manager: Some(FIELD_MANAGER.into()),
                    ..Default::default()
                };
                match api.create(&post, &fresh).await {
                    Ok(map) => return Ok(map),
                    Err(kube::Error::Api(s)) if s.is_already_exists() => continue,
                    Err(e) => return Err(failed("creating ConfigMap", &name, e)),
                }
            }
            Err(WriteError::Failed(format!(
                "ConfigMap {name} kept changing"
            )))
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

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
}
