//! A plugin's control request to the chat's live session, as the app gets it: an ask
//! (`crate::asks`) kept in the chat's live ConfigMap beside the session. The next time the app
//! opens or renews the session, the requests that lapsed go.

use std::time::Duration;

use jiff::Timestamp;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::asks::record::Ask;

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

impl Ask for ControlRequest {
    fn id(&self) -> &str {
        &self.id
    }
    fn chat(&self) -> &str {
        &self.chat
    }
    fn created(&self) -> Timestamp {
        self.created
    }
    fn expires(&self) -> Timestamp {
        self.expires
    }
}
