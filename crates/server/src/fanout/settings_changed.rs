//! `settings.changed` after a config write: a change to a Project's spec (its config, or the
//! version its owner trusts) or to the HostConfig's (the global config) sends the event to every
//! chat of the projects it touches; the routing rules then take it only to the containers
//! already running, without a thread id, with the settings as `GET /channel` has them. It
//! starts no container and keeps none up.

use std::sync::Arc;

use kube::ResourceExt;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::backlog::Handover;
use super::sent_mark::{self, SentRecord};
use crate::calls::CallOptions;
use crate::calls::Calls;
use crate::delivery::deliver_event;
use crate::delivery::routing::SETTINGS_CHANGED;
use crate::index::ConfigWrite;
use crate::index::config_writes::Whose;
use model::resources::Channel;

/// The chats a write concerns.
pub fn chats_of<'a>(
    whose: &Whose,
    chats: impl IntoIterator<Item = &'a Channel>,
) -> Vec<&'a Channel> {
    chats
        .into_iter()
        .filter(|c| match whose {
            Whose::Global => true,
            Whose::Project(ns, name) => {
                c.namespace().as_deref() == Some(ns.as_str()) && &c.spec.project == name
            }
        })
        .collect()
}

/// Sends the event for each write while leading; keeps the writes seen while not, and on
/// taking over sends those and what the mark shows the last holder did not send (see
/// [`Handover`] and [`super::sent_mark`]). The mark, when there is one, is written after each send.
pub async fn run(
    calls: Calls,
    mut writes: mpsc::UnboundedReceiver<ConfigWrite>,
    leading: watch::Receiver<bool>,
    mark: Option<Arc<SentRecord>>,
) {
    let mut handover = Handover::new(leading);
    loop {
        let (to_send, took_over) = tokio::select! {
            written = writes.recv() => {
                let Some(written) = written else { return };
                let now = handover.now_or_later(vec![written.whose]);
                if now.is_empty() {
                    tracing::debug!("settings.changed: kept until this replica leads");
                }
                (now, false)
            }
            kept = handover.taken_over() => (kept, true),
        };
        if took_over {
            take_over(&calls, mark.as_deref(), to_send).await;
            continue;
        }
        for whose in distinct(to_send) {
            send(&calls, &whose).await;
            if let Some(mark) = &mark {
                let configs = sent_mark::configs_now(calls.index());
                let sent_for = configs.iter().filter(|c| c.whose == whose);
                write_mark(mark, &sent_mark::settings_entries(sent_for), None).await;
            }
        }
    }
}

/// On taking over: sends what was kept and what the mark does not show as sent, one event per
/// config, then marks every config as it is now (dropping those gone).
async fn take_over(calls: &Calls, mark: Option<&SentRecord>, kept: Vec<Whose>) {
    let configs = sent_mark::configs_now(calls.index());
    let (unsent, marked) = match mark {
        None => (Vec::new(), None),
        Some(record) => match record.read().await {
            // No mark yet: nothing can be known to be unsent; from now on there is one.
            Ok(None) => (Vec::new(), Some(record)),
            Ok(Some(versions)) => (sent_mark::unsent(&versions, &configs), Some(record)),
            Err(err) => {
                tracing::warn!(%err, "settings.changed: the mark of what was sent is unreadable; sending only what this replica saw");
                (Vec::new(), None)
            }
        },
    };
    let from_mark = unsent.len();
    let to_send = distinct(kept.into_iter().chain(unsent).collect());
    if !to_send.is_empty() {
        tracing::info!(
            configs = to_send.len(),
            unsent_by_the_mark = from_mark,
            "settings.changed: sending what the last holder did not"
        );
    }
    for whose in &to_send {
        send(calls, whose).await;
    }
    if let Some(record) = marked {
        write_mark(
            record,
            &sent_mark::settings_entries(&configs),
            Some(sent_mark::SETTINGS),
        )
        .await;
    }
}

async fn write_mark(record: &SentRecord, entries: &sent_mark::Versions, snapshot: Option<&str>) {
    if let Err(err) = record.write(entries, snapshot).await {
        tracing::warn!(%err, "settings.changed: could not mark what was sent; the next holder may send it again");
    }
}

/// One event per config, the first: the event carries the settings as they are when it is
/// sent, so a second for the same chats would say the same.
pub fn distinct(writes: Vec<Whose>) -> Vec<Whose> {
    let mut out: Vec<Whose> = Vec::with_capacity(writes.len());
    for w in writes {
        if !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// Sends `settings.changed` to the running containers of the chats `whose` config concerns.
async fn send(calls: &Calls, whose: &Whose) {
    let all = calls.index().channels.state();
    let chats = chats_of(whose, all.iter().map(|c| c.as_ref()));
    let sends = chats.into_iter().map(|c| {
        let ns = c.namespace().unwrap_or_default();
        async move {
            let sent = deliver_event(
                calls,
                &ns,
                c,
                SETTINGS_CHANGED,
                &Value::Null,
                CallOptions::IF_RUNNING,
            )
            .await
            .delivered();
            if sent > 0 {
                tracing::info!(chat = %c.name_any(), namespace = %ns, sent, "settings.changed");
            }
        }
    });
    futures::future::join_all(sends).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use model::resources::ChannelSpec;

    fn chat(ns: &str, name: &str, project: &str) -> Channel {
        let mut c = Channel::new(
            name,
            ChannelSpec {
                project: project.into(),
                kind: Default::default(),
                parent: None,
                app: Default::default(),
                hidden: false,
                working_tree: None,
            },
        );
        c.metadata.namespace = Some(ns.into());
        c
    }

    #[test]
    fn a_write_concerns_its_project_or_everyone() {
        let chats = [
            chat("a", "x", "p"),
            chat("a", "y", "q"),
            chat("b", "z", "p"),
        ];
        let names = |w: &Whose| {
            chats_of(w, chats.iter())
                .iter()
                .map(|c| c.name_any())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&Whose::Project("a".into(), "p".into())), ["x"]);
        assert_eq!(names(&Whose::Global), ["x", "y", "z"]);
    }

    #[test]
    fn a_backlog_sends_one_event_per_whose() {
        let p = || Whose::Project("a".into(), "p".into());
        let q = || Whose::Project("a".into(), "q".into());
        let kept = distinct(vec![p(), q(), p(), Whose::Global]);
        assert_eq!(kept, [p(), q(), Whose::Global]);
    }
}
