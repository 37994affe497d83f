//! Where a person answers an agent's tool call (`crate::tool_calls::approval` makes and waits
//! on them):
//!
//! | method | route (under `/api/host/v1`) | RBAC (group `plugins.loop.dev`) |
//! |---|---|---|
//! | GET | `/approvals` (every namespace the caller may list them in) | `list toolcallapprovals`, per namespace |
//! | GET | `/namespaces/{ns}/approvals` (`?chat=`, `?pending=true`) | `list toolcallapprovals` |
//! | GET | `/namespaces/{ns}/approvals/watch` (a stream of each approval as it is asked and decided) | `watch toolcallapprovals` |
//! | POST | `/namespaces/{ns}/channels/{chat}/approvals/{name}` `{"answer": "once" \| "always" \| "deny", "reason"?}` | `approve toolcallapprovals` on `{name}` |
//!
//! Deciding is a verb of its own, as Kubernetes has `approve` for CertificateSigningRequests,
//! so RBAC says who may approve in which namespace; the chart's `<release>-approver` role grants
//! it. A decision is taken once, for an approval of the route's chat, before its deadline
//! (`may_decide`); the status carries the resourceVersion it was decided on, so of two people
//! deciding at once the second is refused. Each decision is recorded as an Event with who made
//! it. Lists read the index, never the cluster.

use std::collections::BTreeSet;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::Stream;
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::auth::Permission;
use super::error::{Code, HostError};
use super::state::{HostState, json_body};
use crate::tool_calls::approval::{
    DecideError, DecisionRefused, PersonAnswer, decided_status, may_decide,
};
use model::resources::{Decision, ToolCallApproval};

/// The most characters of a reason kept.
pub const MAX_REASON: usize = 500;

/// An approval as the lists answer it: the call, and what was decided.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalView {
    pub name: String,
    pub namespace: String,
    pub chat: String,
    pub plugin: String,
    pub tool: String,
    pub agent: String,
    pub run: String,
    pub profile: String,
    pub input: Value,
    pub requested_at: String,
    pub deadline: String,
    pub decision: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decided_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ApprovalView {
    pub fn of(a: &ToolCallApproval) -> Self {
        let status = a.status.clone().unwrap_or_default();
        Self {
            name: a.name_any(),
            namespace: a.namespace().unwrap_or_default(),
            chat: a.spec.chat.clone(),
            plugin: a.spec.plugin.clone(),
            tool: a.spec.tool.clone(),
            agent: a.spec.agent.clone(),
            run: a.spec.run.clone(),
            profile: a.spec.profile.clone(),
            input: a.spec.input.clone(),
            requested_at: a.spec.requested_at.clone(),
            deadline: a.spec.deadline.clone(),
            decision: a.decision().as_str(),
            decided_by: status.decided_by,
            decided_at: status.decided_at,
            reason: status.reason,
        }
    }
}

/// `?chat=` and `?pending=true`.
#[derive(Debug, Default, Deserialize)]
pub struct Filter {
    #[serde(default)]
    pub chat: Option<String>,
    #[serde(default)]
    pub pending: bool,
}

/// The approvals of `namespaces` the filter keeps, newest first.
pub fn listed<'a>(
    approvals: impl IntoIterator<Item = &'a ToolCallApproval>,
    namespaces: &BTreeSet<String>,
    filter: &Filter,
) -> Vec<ApprovalView> {
    let mut out: Vec<ApprovalView> = approvals
        .into_iter()
        .filter(|a| a.namespace().is_some_and(|ns| namespaces.contains(&ns)))
        .filter(|a| filter.chat.as_ref().is_none_or(|c| &a.spec.chat == c))
        .filter(|a| !filter.pending || a.decision() == Decision::Pending)
        .map(ApprovalView::of)
        .collect();
    out.sort_by(|a, b| {
        b.requested_at
            .cmp(&a.requested_at)
            .then_with(|| a.name.cmp(&b.name))
    });
    out
}

/// `GET /namespaces/{ns}/approvals`.
pub async fn list(
    State(s): State<HostState>,
    Path(ns): Path<String>,
    Query(filter): Query<Filter>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    s.authorize(&headers, &Permission::approvals("list", &ns))
        .await?;
    let all = s.index().approvals.state();
    let listed = listed(all.iter().map(Arc::as_ref), &BTreeSet::from([ns]), &filter);
    Ok(Json(json!({ "approvals": listed })).into_response())
}

/// `GET /approvals`: in every namespace that holds approvals and the caller may list them
/// in.
pub async fn list_all(
    State(s): State<HostState>,
    Query(filter): Query<Filter>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    let all = s.index().approvals.state();
    let held: BTreeSet<String> = all.iter().filter_map(|a| a.namespace()).collect();
    let mut readable = BTreeSet::new();
    let mut refused = None;
    for ns in held {
        match s
            .authorize(&headers, &Permission::approvals("list", &ns))
            .await
        {
            Ok(()) => {
                readable.insert(ns);
            }
            Err(e) if e.code == Code::Forbidden => refused = Some(e),
            Err(e) => return Err(e),
        }
    }
    if readable.is_empty()
        && let Some(e) = refused
    {
        // Nothing readable, and something refused: say what is missing.
        return Err(e);
    }
    let listed = listed(all.iter().map(Arc::as_ref), &readable, &filter);
    Ok(Json(json!({ "approvals": listed })).into_response())
}

/// `GET /namespaces/{ns}/approvals/watch`: every approval of the namespace as it is now, then
/// each as it changes (asked, decided), as server-sent events `approval`.
pub async fn watch(
    State(s): State<HostState>,
    Path(ns): Path<String>,
    headers: HeaderMap,
) -> Result<Response, HostError> {
    s.authorize(&headers, &Permission::approvals("watch", &ns))
        .await?;
    Ok(Sse::new(stream(s, ns))
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response())
}

fn stream(s: HostState, ns: String) -> impl Stream<Item = Result<Event, Infallible>> {
    let mut changed = s.index().changed.approvals.subscribe();
    let mut seen: std::collections::BTreeMap<String, (String, String)> = Default::default();
    async_stream_events(move |out| {
        let s = s.clone();
        let ns = ns.clone();
        async move {
            loop {
                changed.mark_unchanged();
                let now = s.index().approvals.state();
                // What was seen of approvals gone since (their runs deleted) is forgotten: the
                // stream holds no more than the namespace does.
                let present: BTreeSet<String> = now
                    .iter()
                    .filter(|a| a.namespace().as_deref() == Some(ns.as_str()))
                    .map(|a| a.name_any())
                    .collect();
                seen.retain(|name, _| present.contains(name));
                for a in now {
                    if a.namespace().as_deref() != Some(&ns) {
                        continue;
                    }
                    let key = a.name_any();
                    let version = (
                        a.metadata.resource_version.clone().unwrap_or_default(),
                        a.decision().as_str().to_string(),
                    );
                    if seen.get(&key) == Some(&version) {
                        continue;
                    }
                    seen.insert(key, version);
                    let data = serde_json::to_string(&ApprovalView::of(&a)).unwrap_or_default();
                    if out
                        .send(Ok(Event::default().event("approval").data(data)))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                if changed.changed().await.is_err() {
                    return;
                }
            }
        }
    })
}

/// A stream fed by `task`, which sends into a channel until the client goes.
fn async_stream_events<F, Fut>(task: F) -> impl Stream<Item = Result<Event, Infallible>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<Result<Event, Infallible>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(16);
    tokio::spawn(task(tx));
    tokio_stream_of(rx)
}

fn tokio_stream_of<T: Send + 'static>(
    mut rx: tokio::sync::mpsc::Receiver<T>,
) -> impl Stream<Item = T> {
    futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// `POST .../approvals/{name}`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DecisionBody {
    pub answer: PersonAnswer,
    #[serde(default)]
    pub reason: Option<String>,
}

/// `POST /namespaces/{ns}/channels/{chat}/approvals/{name}`: a person's answer.
/// How often a decision reads the approval again after a conflict.
const DECIDE_ATTEMPTS: usize = 3;

pub async fn decide(
    State(s): State<HostState>,
    Path((ns, chat, name)): Path<(String, String, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<Response, HostError> {
    let user = s
        .authorized_user(&headers, &Permission::approve(&ns, &name))
        .await?;
    let body: DecisionBody = json_body(&body)?;
    let reason = body
        .reason
        .map(|r| r.trim().chars().take(MAX_REASON).collect::<String>())
        .filter(|r| !r.is_empty());
    let approval = s
        .index()
        .approvals
        .get(&ObjectRef::new(&name).within(&ns))
        .ok_or_else(|| {
            refused(DecisionRefused::NotFound {
                namespace: ns.clone(),
                name: name.clone(),
            })
        })?;
    let now = jiff::Timestamp::now();
    let status = decided_status(body.answer, &user.username, reason, now);
    let writer = s.tools.desk().writer().clone();
    // The cache may be a write behind (the desk's own pending status): a conflict reads the
    // approval as stored and decides again while it is still pending, or says who decided.
    let failed = |e: DecideError| match e {
        DecideError::Gone => refused(DecisionRefused::NotFound {
            namespace: ns.clone(),
            name: name.clone(),
        }),
        DecideError::Conflict => HostError::new(
            Code::Unavailable,
            format!("ToolCallApproval {name} kept changing; try again"),
        )
        .retry_after(1),
        DecideError::Failed(e) => HostError::new(Code::Unavailable, e).retry_after(1),
    };
    let mut approval = (*approval).clone();
    let mut attempts = 0;
    let written = loop {
        may_decide(&approval, &chat, now).map_err(refused)?;
        match writer.decide(&approval, &status).await {
            Ok(written) => break written,
            Err(DecideError::Conflict) if attempts < DECIDE_ATTEMPTS => {
                attempts += 1;
                approval = writer.fresh(&ns, &name).await.map_err(&failed)?;
            }
            Err(e) => return Err(failed(e)),
        }
    };
    let decision = written.decision();
    let note = format!(
        "{} {} the call of {} by agent {} in chat {}{}",
        user.username,
        match decision {
            Decision::ApprovedAlways => "approved, for the rest of the run,",
            Decision::Approved => "approved",
            _ => "denied",
        },
        written.spec.tool,
        written.spec.agent,
        written.spec.chat,
        written
            .status
            .as_ref()
            .and_then(|st| st.reason.as_deref())
            .map(|r| format!(": {r}"))
            .unwrap_or_default()
    );
    writer.event(&written, decision.as_str(), note).await;
    Ok(Json(ApprovalView::of(&written)).into_response())
}

/// A refused decision as the host API answers it.
fn refused(e: DecisionRefused) -> HostError {
    let code = match &e {
        DecisionRefused::NotFound { .. } => Code::ApprovalNotFound,
        DecisionRefused::OtherChat { .. } => Code::ApprovalOtherChat,
        DecisionRefused::AlreadyDecided { .. } => Code::ApprovalDecided,
        DecisionRefused::PastDeadline { .. } => Code::ApprovalExpired,
    };
    HostError::new(code, e.to_string())
}
