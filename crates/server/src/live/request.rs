//! A plugin's control request on its way to the app and back, decided purely. The replica the
//! plugin called writes it as a ConfigMap (`live-req-<id>`, key `request`) in the chat's
//! namespace; the replica holding the app's stream sees it through its index and sends it; the
//! app's answer, taken by any replica, is written into it (key `response`); the plugin's
//! replica sees that and answers the plugin, then deletes the ConfigMap. A request nobody
//! answered lapses at its `expires` and is sent no more.

use std::collections::BTreeMap;
use std::time::Duration;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use model::names;

/// The component label of a control request's ConfigMap.
pub const COMPONENT: &str = "live-request";
/// The key holding the request.
pub const REQUEST_KEY: &str = "request";
/// The key holding the app's response.
pub const RESPONSE_KEY: &str = "response";

/// A control request, as the app gets it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ControlRequest {
    /// The request's id: the app answers it by this.
    pub id: String,
    /// The chat whose session it is for.
    pub chat: String,
    /// The plugin that sent it.
    pub plugin: String,
    pub subtype: String,
    /// The request's fields, as the plugin sent them.
    pub request: Value,
    pub created: Timestamp,
    /// Past this the plugin has been told the session did not answer.
    pub expires: Timestamp,
}

impl ControlRequest {
    /// A request of `plugin` in `chat`, made at `now`, waited for `wait`.
    pub fn new(
        id: String,
        chat: &str,
        plugin: &str,
        subtype: &str,
        request: Value,
        now: Timestamp,
        wait: Duration,
    ) -> Self {
        Self {
            id,
            chat: chat.into(),
            plugin: plugin.into(),
            subtype: subtype.into(),
            request,
            created: now,
            expires: now + wait,
        }
    }
}

/// The ConfigMap name of request `id`.
pub fn name(id: &str) -> String {
    format!("live-req-{id}")
}

/// The request a ConfigMap holds.
pub fn read(map: &ConfigMap) -> Option<ControlRequest> {
    serde_json::from_str(map.data.as_ref()?.get(REQUEST_KEY)?).ok()
}

/// The app's response a ConfigMap holds, once answered.
pub fn response(map: &ConfigMap) -> Option<Value> {
    serde_json::from_str(map.data.as_ref()?.get(RESPONSE_KEY)?).ok()
}

/// Whether the app still owes an answer to the request at `now`.
pub fn pending(map: &ConfigMap, now: Timestamp) -> Option<ControlRequest> {
    let request = read(map)?;
    (response(map).is_none() && now < request.expires).then_some(request)
}

/// The ConfigMap carrying `request` (of a chat in project `project`), owned by the chat.
pub fn config_map(
    namespace: &str,
    project: &str,
    owner: Option<OwnerReference>,
    request: &ControlRequest,
) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name(&request.id)),
            namespace: Some(namespace.into()),
            labels: Some(names::labels(
                &request.plugin,
                project,
                &request.chat,
                COMPONENT,
            )),
            owner_references: owner.map(|o| vec![o]),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            REQUEST_KEY.to_string(),
            serde_json::to_string(request).expect("a request serializes"),
        )])),
        ..Default::default()
    }
}

/// The data patch that answers a request with `response`.
pub fn answer(response: &Value) -> BTreeMap<String, String> {
    BTreeMap::from([(RESPONSE_KEY.to_string(), response.to_string())])
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    #[test]
    fn a_request_is_pending_until_answered_or_lapsed() {
        let request = ControlRequest::new(
            "abc".into(),
            "general",
            "echo",
            "interrupt",
            json!({"why": "stop"}),
            at(0),
            Duration::from_secs(30),
        );
        let mut map = config_map("team", "proj", None, &request);
        assert_eq!(map.metadata.name.as_deref(), Some("live-req-abc"));
        assert_eq!(pending(&map, at(29)), Some(request.clone()));
        assert_eq!(pending(&map, at(30)), None, "lapsed");
        map.data
            .as_mut()
            .unwrap()
            .extend(answer(&json!({"ok": true})));
        assert_eq!(response(&map), Some(json!({"ok": true})));
        assert_eq!(pending(&map, at(1)), None, "answered");
        let labels = map.metadata.labels.unwrap();
        assert_eq!(labels[names::LABEL_COMPONENT], COMPONENT);
        assert_eq!(labels[names::LABEL_PLUGIN], "echo");
    }
}
