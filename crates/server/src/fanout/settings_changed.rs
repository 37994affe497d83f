//! `settings.changed` after a config write: a change to a Project's spec (its config, or the
//! version its owner trusts) or to the HostConfig's (the global config) sends the event to every
//! chat of the projects it touches; the routing rules then take it only to the containers
//! already running, without a thread id, with the settings as `GET /channel` has them. It
//! starts no container and keeps none up.

use kube::ResourceExt;
use serde_json::Value;
use tokio::sync::{mpsc, watch};

use super::backlog::Handover;
use crate::calls::CallOptions;
use crate::host_api::events::SETTINGS_CHANGED;
use crate::host_api::{HostState, deliver_event};
use crate::index::Written;
use crate::index::config_writes::Whose;
use model::resources::Channel;

/// The chats a write concerns.
pub fn chats_of<'a>(
    written: &Written,
    chats: impl IntoIterator<Item = &'a Channel>,
) -> Vec<&'a Channel> {
    chats
        .into_iter()
        .filter(|c| match &written.whose {
            Whose::Global => true,
            Whose::Project(ns, name) => {
                c.namespace().as_deref() == Some(ns.as_str()) && &c.spec.project == name
            }
        })
        .collect()
}

/// Sends the event for each write while leading; keeps the writes seen while not, and sends
/// those on taking over (see [`Handover`]).
pub async fn run(
    host: HostState,
    mut writes: mpsc::UnboundedReceiver<Written>,
    leading: watch::Receiver<bool>,
) {
    let mut handover = Handover::new(leading);
    loop {
        let to_send = tokio::select! {
            written = writes.recv() => {
                let Some(written) = written else { return };
                let now = handover.now_or_later(vec![written]);
                if now.is_empty() {
                    tracing::debug!("settings.changed: kept until this replica leads");
                }
                now
            }
            kept = handover.taken_over() => {
                let kept = distinct(kept);
                if !kept.is_empty() {
                    tracing::info!(writes = kept.len(), "settings.changed: sending the writes seen before leading");
                }
                kept
            }
        };
        for written in to_send {
            send(&host, &written).await;
        }
    }
}

/// One write per whose, the first: the event carries the settings as they are when it is
/// sent, so a second for the same chats would say the same.
pub fn distinct(writes: Vec<Written>) -> Vec<Written> {
    let mut out: Vec<Written> = Vec::with_capacity(writes.len());
    for w in writes {
        if !out.iter().any(|o| o.whose == w.whose) {
            out.push(w);
        }
    }
    out
}

/// Sends `settings.changed` to the running containers of the chats `written` concerns.
async fn send(host: &HostState, written: &Written) {
    let all = host.index().channels.state();
    let chats = chats_of(written, all.iter().map(|c| c.as_ref()));
    let sends = chats.into_iter().map(|c| {
        let ns = c.namespace().unwrap_or_default();
        async move {
            let answer = deliver_event(
                host,
                &ns,
                c,
                SETTINGS_CHANGED,
                &Value::Null,
                CallOptions::IF_RUNNING,
            )
            .await;
            let sent = answer["deliveries"]
                .as_array()
                .map_or(0, |d| d.iter().filter(|d| d["delivered"] == true).count());
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
        let project = Written {
            whose: Whose::Project("a".into(), "p".into()),
            uid: "u".into(),
            generation: 2,
        };
        let names = |w: &Written| {
            chats_of(w, chats.iter())
                .iter()
                .map(|c| c.name_any())
                .collect::<Vec<_>>()
        };
        assert_eq!(names(&project), ["x"]);
        let global = Written {
            whose: Whose::Global,
            ..project
        };
        assert_eq!(names(&global), ["x", "y", "z"]);
    }

    #[test]
    fn a_backlog_sends_one_event_per_whose() {
        let write = |whose: Whose, generation| Written {
            whose,
            uid: "u".into(),
            generation,
        };
        let p = || Whose::Project("a".into(), "p".into());
        let q = || Whose::Project("a".into(), "q".into());
        let kept = distinct(vec![
            write(p(), 2),
            write(q(), 1),
            write(p(), 3),
            write(Whose::Global, 4),
        ]);
        assert_eq!(
            kept.iter().map(|w| w.whose.clone()).collect::<Vec<_>>(),
            [p(), q(), Whose::Global]
        );
    }
}
