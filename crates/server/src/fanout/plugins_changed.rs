//! `plugins.changed` to the containers already running (those whose manifest subscribes to
//! it), when a plugin is installed, upgraded or removed, and when a container stops (the
//! reference: "Installing, removing and stopping send a plugins.changed event ..., and so do
//! ... the idle or disabled containers the daemon stops on its own").

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use kube::ResourceExt;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::backlog::Handover;
use super::sent_mark::{self, SentRecord};
use crate::calls::CallOptions;
use crate::calls::Calls;
use crate::delivery::changes::changes;
use crate::delivery::deliver_event;
use crate::delivery::routing::PLUGINS_CHANGED;
use crate::index::InstanceKey;

fn installed(calls: &Calls) -> BTreeMap<String, i64> {
    crate::delivery::changes::installed(calls.index())
}

/// Sends the event for each change while leading; keeps the changes seen while not, and on
/// taking over sends those and the changes since the plugins the mark says were last told of
/// (see [`Handover`] and [`super::sent_mark`]). The mark, when there is one, is written after each
/// change to the plugins is sent.
pub async fn run(calls: Calls, leading: watch::Receiver<bool>, mark: Option<Arc<SentRecord>>) {
    let mut known = installed(&calls);
    let mut gone = calls.index().pods.gone();
    let mut plugins = calls.index().changed.plugins.subscribe();
    let mut handover = Handover::new(leading);
    loop {
        let (mut data, took_over, plugins_moved) = tokio::select! {
            _ = plugins.changed() => {
                let now = installed(&calls);
                let found = changes(&known, &now);
                known = now;
                let moved = !found.is_empty();
                let found = found.into_iter().map(|(plugin, what)| event(&plugin, what)).collect();
                let now = handover.now_or_later(found);
                let moved = moved && !now.is_empty();
                (now, false, moved)
            }
            uid = gone.recv() => match uid {
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    (handover.now_or_later(vec![json!({ "change": "stopped" })]), false, false)
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            },
            kept = handover.taken_over() => (kept, true, false),
        };
        let mut marked = plugins_moved;
        if took_over && let Some(record) = &mark {
            match record.read().await {
                Ok(told) => {
                    let told = told.map(|m| sent_mark::plugins_told(&m));
                    let unsent = told.map_or_else(Vec::new, |told| changes(&told, &known));
                    if !unsent.is_empty() {
                        tracing::info!(
                            changes = unsent.len(),
                            "plugins.changed: sending what the last holder did not"
                        );
                    }
                    data.extend(
                        unsent
                            .into_iter()
                            .map(|(plugin, what)| event(&plugin, what)),
                    );
                    marked = true;
                }
                Err(err) => {
                    tracing::warn!(%err, "plugins.changed: the mark of what was sent is unreadable; sending only what this replica saw")
                }
            }
        }
        for d in distinct(data) {
            send(&calls, &d).await;
        }
        if marked && let Some(record) = &mark {
            let entries = sent_mark::plugin_entries(&known);
            if let Err(err) = record.write(&entries, Some(sent_mark::PLUGINS)).await {
                tracing::warn!(%err, "plugins.changed: could not mark what was sent; the next holder may send it again");
            }
        }
    }
}

fn event(plugin: &str, change: &str) -> Value {
    json!({ "plugin": plugin, "change": change })
}

/// Each event once, where it last came: a container told twice that a plugin was installed,
/// or that some container stopped, learns nothing the first did not tell it, and the last word
/// on a plugin stays last.
fn distinct(data: Vec<Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::with_capacity(data.len());
    for d in data.into_iter().rev() {
        if !out.contains(&d) {
            out.push(d);
        }
    }
    out.reverse();
    out
}

/// Sends `data` to every chat with a running container.
async fn send(calls: &Calls, data: &Value) {
    let index = calls.index();
    let chats: BTreeSet<(String, String)> = index
        .instances
        .state()
        .iter()
        .filter(|i| {
            calls.running(&InstanceKey::new(
                &i.namespace().unwrap_or_default(),
                &i.name_any(),
            ))
        })
        .map(|i| (i.namespace().unwrap_or_default(), i.spec.channel.clone()))
        .collect();
    for (ns, chat) in chats {
        if let Some(channel) = index.channel(&ns, &chat) {
            deliver_event(
                calls,
                &ns,
                &channel,
                PLUGINS_CHANGED,
                data,
                CallOptions::IF_RUNNING,
            )
            .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backlog_sends_each_event_once_where_it_last_came() {
        let installed = json!({ "plugin": "a", "change": "installed" });
        let removed = json!({ "plugin": "a", "change": "removed" });
        let stopped = json!({ "change": "stopped" });
        assert_eq!(
            distinct(vec![
                installed.clone(),
                stopped.clone(),
                removed.clone(),
                stopped.clone(),
                installed.clone(),
            ]),
            [removed, stopped, installed]
        );
    }
}
