//! The chat's live session (the claude process its turns run in), as the Plugin API reaches
//! it. Loop's live sessions run in the app, not in the cluster, so the server takes them
//! through [`LiveSessions`]; until the app offers one, [`NoLiveSessions`] answers that the
//! chat is not live (409 `not_live`, as the reference's test kit answers without a session).

use futures::future::BoxFuture;
use serde_json::Value;

/// A chat, as live sessions name it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatRef {
    pub namespace: String,
    pub channel: String,
}

/// Where control requests go.
pub trait LiveSessions: Send + Sync {
    /// Sends a control request of `subtype` to the chat's live session; answers its response,
    /// or `None` when the chat has no live session.
    fn control<'a>(
        &'a self,
        chat: &'a ChatRef,
        subtype: &'a str,
        request: &'a Value,
    ) -> BoxFuture<'a, Option<Value>>;
}

/// No chat is live.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoLiveSessions;

impl LiveSessions for NoLiveSessions {
    fn control<'a>(
        &'a self,
        _: &'a ChatRef,
        _: &'a str,
        _: &'a Value,
    ) -> BoxFuture<'a, Option<Value>> {
        Box::pin(async { None })
    }
}
