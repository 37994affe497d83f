//! `POST .../plugins/{plugin}/stop`: the reference's Stop button, for one chat's container.
//! It does what `loop-plugins plugin stop NAME --chat NS/CHAT` does (`operator::plugins::stop`):
//! records the time of the stop on the instance (`status.stoppedAt`, the stop's own field
//! manager), so the controller's demand rule counts nothing recorded up to then and deletes the
//! Pod; the next call, event or schedule starts it again. The caller needs its own grant
//! (`create plugininstances/stop`); the write is the API server's. The Pod going sends
//! `plugins.changed`, as every stop does. It calls no plugin and works for an instance whose
//! plugin the project no longer enables (the controller stops that one anyway).

use axum::Json;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::auth::Permission;
use super::error::{Code, HostError};
use super::state::HostState;
use crate::delivery::target;
use crate::index::InstanceKey;
use crate::status::StatusError;
use model::names;

/// The stop's time: now, to the second, as the CLI writes it.
pub fn stop_time(now: jiff::Timestamp) -> String {
    now.round(jiff::Unit::Second)
        .expect("a timestamp rounds to the second")
        .to_string()
}

/// `POST .../plugins/{plugin}/stop`.
pub async fn post(
    State(s): State<HostState>,
    Path((ns, chat, plugin)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    let name = names::instance_name(&plugin, &chat);
    s.authorize(&headers, &Permission::stop(&ns, &name)).await?;
    target::chat(s.index(), &ns, &chat)?;
    let key = InstanceKey::new(&ns, &name);
    let no_instance = || {
        HostError::new(
            Code::PluginNotFound,
            format!("plugin {plugin} has no instance in chat {chat}: nothing to stop"),
        )
    };
    if s.index().instance(&key).is_none() {
        return Err(no_instance());
    }
    let at = stop_time(jiff::Timestamp::now());
    match s.status.stopped_at(&key, at.clone()).await {
        Ok(()) => {}
        Err(StatusError::NotFound(_)) => return Err(no_instance()),
        Err(e) => {
            return Err(HostError::new(
                Code::Unavailable,
                format!("the stop could not be recorded; try again: {e}"),
            )
            .retry_after(1));
        }
    }
    Ok(
        Json(json!({ "plugin": plugin, "chat": chat, "instance": name, "stoppedAt": at }))
            .into_response(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_is_recorded_to_the_second() {
        let t: jiff::Timestamp = "2026-12-05T09:00:01.600Z".parse().unwrap();
        assert_eq!(stop_time(t), "2026-12-05T09:00:02Z");
    }
}
