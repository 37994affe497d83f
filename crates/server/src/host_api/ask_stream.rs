//! The app's stream (`text/event-stream`) of one chat's asks of one kind (`crate::asks`): the
//! asks waiting, then each new one, each once; an idle stream says it is still there.

use std::collections::{HashSet, VecDeque};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use tokio::sync::broadcast::{self, error::RecvError};

use crate::asks::hub::{ForApp, Hub};
use crate::asks::record::Ask;

/// How often an idle stream says it is still there.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// The asks of chat `chat` of namespace `ns` waiting now, oldest first.
pub type Pending<A> = Arc<dyn Fn(&str, &str) -> Vec<A> + Send + Sync>;

/// What a stream has sent and has still to send.
struct Follow<A> {
    pending: Pending<A>,
    ns: String,
    chat: String,
    new: broadcast::Receiver<ForApp<A>>,
    sent: HashSet<String>,
    queue: VecDeque<A>,
    event: &'static str,
}

impl<A: Ask> Follow<A> {
    /// Queues the chat's waiting asks not sent yet.
    fn queue_pending(&mut self) {
        for ask in (self.pending)(&self.ns, &self.chat) {
            if self.sent.insert(ask.id().to_string()) {
                self.queue.push_back(ask);
            }
        }
    }

    fn event(&self, ask: &A) -> Result<Event, Infallible> {
        Ok(Event::default()
            .event(self.event)
            .id(ask.id())
            .data(serde_json::to_string(ask).expect("an ask serializes")))
    }
}

/// The stream of `ns`/`chat`'s asks from `hub`, each sent as an event named `event`.
pub fn response<A: Ask>(
    hub: &Hub<A>,
    pending: Pending<A>,
    ns: String,
    chat: String,
    event: &'static str,
) -> Response {
    Sse::new(stream(hub, pending, ns, chat, event))
        .keep_alive(KeepAlive::new().interval(KEEP_ALIVE))
        .into_response()
}

fn stream<A: Ask>(
    hub: &Hub<A>,
    pending: Pending<A>,
    ns: String,
    chat: String,
    event: &'static str,
) -> impl Stream<Item = Result<Event, Infallible>> + use<A> {
    // Subscribed before the waiting ones are listed, so none falls between the two.
    let new = hub.subscribe();
    let mut follow = Follow {
        pending,
        ns,
        chat,
        new,
        sent: HashSet::new(),
        queue: VecDeque::new(),
        event,
    };
    follow.queue_pending();
    futures::stream::unfold(follow, |mut f| async move {
        loop {
            if let Some(ask) = f.queue.pop_front() {
                return Some((f.event(&ask), f));
            }
            match f.new.recv().await {
                Ok(for_app) => {
                    if for_app.namespace == f.ns
                        && for_app.request.chat() == f.chat
                        && f.sent.insert(for_app.request.id().to_string())
                    {
                        f.queue.push_back(for_app.request);
                    }
                }
                // Fell behind: what is still waiting is in the index.
                Err(RecvError::Lagged(_)) => f.queue_pending(),
                Err(RecvError::Closed) => return None,
            }
        }
    })
}
