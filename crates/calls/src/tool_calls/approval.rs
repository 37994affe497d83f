//! Asking a person before an agent's tool call runs (`model::resolve::approval` decides who
//! asks; this is the asking).
//!
//! An agent's call that its risk profile does not pre-approve becomes a `ToolCallApproval` in
//! the chat's namespace (the call exactly as the tool gets it; its spec never changes), and
//! the call waits, held open, until a person decides through the host API or the deadline
//! (HostConfig's `approval.wait`) passes. Approved: the tool runs with the approval's input.
//! Denied, expired, or denied at once (an unattended profile, an input too large to show): the
//! agent gets an `is_error` result saying so, and the run goes on.
//!
//! A decision is written once: every status write carries the resourceVersion it was decided
//! on, so of two deciders (two people, or a person and the deadline) the second is refused.
//! The waiting replica writes `Expired` at the deadline; a call whose replica went away leaves
//! its approval pending until `sweep` expires it (the fan-out's holder runs it).

use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use serde_json::Value;

use super::ToolResult;
use crate::index::Index;
use model::names;
use model::resolve::ProjectView;
use model::resolve::approval::{ChosenProfile, Need, profile_of};
use model::resources::{
    ApprovalVia, Decision, MAX_APPROVAL_INPUT_BYTES, ToolCallApproval, ToolCallApprovalSpec,
    ToolCallApprovalStatus,
};

/// The longest a call waits for a person, whatever `approval.wait` says: a year is as good as
/// forever for a call held open, and a longer wait (`999999999h` parses) would overflow the
/// deadline's arithmetic.
const WAIT_AT_MOST: Duration = Duration::from_secs(365 * 24 * 3600);

/// How long a call waits for a person: HostConfig's `approval.wait`, 5 minutes when it does not
/// parse, a year at most.
pub fn approval_wait(written: &str) -> Duration {
    model::schedule::parse_interval(written)
        .unwrap_or(Duration::from_secs(300))
        .min(WAIT_AT_MOST)
}

/// The component label of approvals.
pub const COMPONENT: &str = "approval";
/// Who decides when nobody did in time.
pub const EXPIRED_BY: &str = "loop-plugins";
/// The `error_code` of a call that did not run for want of approval.
pub const APPROVAL_DENIED: &str = "approval_denied";

/// Why a decision could not be written.
#[derive(Debug, Clone, thiserror::Error)]
pub enum DecideError {
    /// Someone decided (or it expired) since it was read.
    #[error("decided meanwhile")]
    Conflict,
    #[error("no such approval")]
    Gone,
    #[error("{0}")]
    Failed(String),
}

impl DecideError {
    /// What the API server's answer means for a decision.
    fn of(e: kube::Error) -> Self {
        match e {
            kube::Error::Api(s) if s.is_conflict() => DecideError::Conflict,
            kube::Error::Api(s) if s.is_not_found() => DecideError::Gone,
            e => DecideError::Failed(e.to_string()),
        }
    }
}

/// The approvals' writes: behind a trait, so request-level tests record them.
pub trait ApprovalWriter: Send + Sync {
    /// Makes the approval (its name generated); answers it as stored.
    fn create<'a>(
        &'a self,
        approval: &'a ToolCallApproval,
    ) -> BoxFuture<'a, Result<ToolCallApproval, String>>;
    /// Writes the status, provided the approval is still at `resource_version`.
    fn decide<'a>(
        &'a self,
        approval: &'a ToolCallApproval,
        status: &'a ToolCallApprovalStatus,
    ) -> BoxFuture<'a, Result<ToolCallApproval, DecideError>>;
    /// Records an Event about the approval (a decision, and who made it).
    fn event<'a>(
        &'a self,
        approval: &'a ToolCallApproval,
        reason: &'a str,
        note: String,
    ) -> BoxFuture<'a, ()>;
    /// The approval as stored now (not as a cache shows it): what a decision that met a
    /// conflict reads again.
    fn fresh<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<ToolCallApproval, DecideError>>;
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    decision: &'static str,
}

/// What approvals are counted by.
pub struct ApprovalMetrics {
    decisions: Family<OutcomeLabels, Counter>,
    waited: Histogram,
}

impl ApprovalMetrics {
    pub fn new(registry: &mut Registry) -> Self {
        let m = Self::unregistered();
        registry.register(
            "loop_plugins_approval_decisions",
            "Agents' tool calls decided, by decision (Approved, ApprovedAlways, Denied, Expired, and Unattended and TooLarge: denied without asking)",
            m.decisions.clone(),
        );
        registry.register(
            "loop_plugins_approval_wait_seconds",
            "How long a tool call waited for a person's decision",
            m.waited.clone(),
        );
        m
    }

    pub fn unregistered() -> Self {
        Self {
            decisions: Family::default(),
            waited: Histogram::new([1.0, 5.0, 15.0, 60.0, 180.0, 300.0, 900.0]),
        }
    }

    fn decided(&self, decision: &'static str) {
        self.decisions
            .get_or_create(&OutcomeLabels { decision })
            .inc();
    }
}

/// One agent's call as the approval desk sees it.
pub struct Asked<'a> {
    pub namespace: &'a str,
    pub chat: &'a str,
    pub plugin: &'a str,
    /// The tool as the agent calls it (`plugin_<tool>`).
    pub tool: &'a str,
    pub agent: &'a str,
    /// The run (an AgentRun's name, or a host API call's `run_id`).
    pub run: &'a str,
    pub via: ApprovalVia,
    pub input: &'a Value,
    /// What owns the approval (the AgentRun, else the plugin's instance), so it goes with it.
    pub owner: OwnerReference,
}

/// What came of asking.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// The call runs, with this input (the approval's, when a person approved it).
    Runs(Value),
    /// It does not run: the agent's result says why.
    Refused(ToolResult),
}

/// Asks a person when a call needs one, and waits for the answer.
#[derive(Clone)]
pub struct ApprovalDesk {
    index: Arc<Index>,
    writer: Arc<dyn ApprovalWriter>,
    metrics: Arc<ApprovalMetrics>,
}

impl ApprovalDesk {
    pub fn new(
        index: Arc<Index>,
        writer: Arc<dyn ApprovalWriter>,
        metrics: Arc<ApprovalMetrics>,
    ) -> Self {
        Self {
            index,
            writer,
            metrics,
        }
    }

    pub fn writer(&self) -> &Arc<dyn ApprovalWriter> {
        &self.writer
    }

    /// The profile the plugin's agents get in the chat's project.
    pub fn profile(&self, namespace: &str, chat: &str, plugin: &str) -> ChosenProfile {
        let host = self.index.host_config();
        let project = self
            .index
            .channel(namespace, chat)
            .and_then(|c| self.index.project(namespace, &c.spec.project));
        let trust = project
            .as_ref()
            .and_then(|p| self.index.project_trust(namespace, &p.name_any()));
        let empty = model::resources::Project::new("", Default::default());
        let project_ref = project.as_deref().unwrap_or(&empty);
        profile_of(
            &host.spec,
            ProjectView::new(project_ref, trust.as_deref()),
            plugin,
        )
    }

    /// Whether a person answered Always for `tool` earlier in `run`.
    pub fn approved_always(&self, namespace: &str, run: &str, tool: &str) -> bool {
        self.index.approvals.state().iter().any(|a| {
            a.namespace().as_deref() == Some(namespace)
                && a.spec.run == run
                && a.spec.tool == tool
                && a.decision() == Decision::ApprovedAlways
        })
    }

    /// What an agent's call needs, asked for and waited on: it runs (with the input to run
    /// with) or it is refused.
    pub async fn ask(&self, asked: Asked<'_>) -> Answer {
        let chosen = self.profile(asked.namespace, asked.chat, asked.plugin);
        let earlier = self.approved_always(asked.namespace, asked.run, asked.tool);
        match model::resolve::approval::need(&chosen.effective(), asked.tool, earlier) {
            Need::Nothing(_) => Answer::Runs(asked.input.clone()),
            Need::Denied => {
                self.metrics.decided("Unattended");
                Answer::Refused(ToolResult::host_error(
                    APPROVAL_DENIED,
                    format!(
                        "the call of {} was denied and did not run: it needs a person's approval, and risk profile {:?} says nobody attends these runs",
                        asked.tool, chosen.name
                    ),
                ))
            }
            Need::Person(_) => self.wait_for_person(asked, &chosen.name).await,
        }
    }

    async fn wait_for_person(&self, asked: Asked<'_>, profile: &str) -> Answer {
        let shown = serde_json::to_vec(asked.input).map_or(usize::MAX, |b| b.len());
        if shown > MAX_APPROVAL_INPUT_BYTES {
            self.metrics.decided("TooLarge");
            return Answer::Refused(ToolResult::host_error(
                APPROVAL_DENIED,
                format!(
                    "the call of {} was denied and did not run: its input is {shown} bytes, more than the {MAX_APPROVAL_INPUT_BYTES} a person can be shown to approve",
                    asked.tool
                ),
            ));
        }
        let host = self.index.host_config();
        let wait = approval_wait(&host.spec.approval.wait);
        let now = jiff::Timestamp::now();
        let deadline = now + wait;
        let approval = approval_of(&asked, profile, now, deadline);
        let made = match self.writer.create(&approval).await {
            Ok(made) => made,
            Err(e) => {
                return Answer::Refused(ToolResult::host_error(
                    "unavailable",
                    format!(
                        "the call of {} did not run: asking a person failed ({e})",
                        asked.tool
                    ),
                ));
            }
        };
        let pending = ToolCallApprovalStatus {
            decision: Some(Decision::Pending),
            ..Default::default()
        };
        let made = self.writer.decide(&made, &pending).await.unwrap_or(made);
        let started = tokio::time::Instant::now();
        let name = made.name_any();
        let decided = self
            .wait(asked.namespace, &name, started + wait)
            .await
            .unwrap_or_else(|| Arc::new(made.clone()));
        let decided = match decided.decision() {
            Decision::Pending => self.expire(asked.namespace, &name, &made).await,
            _ => decided,
        };
        self.metrics.waited.observe(started.elapsed().as_secs_f64());
        let decision = decided.decision();
        self.metrics.decided(decision.as_str());
        let status = decided.status.clone().unwrap_or_default();
        let by = status.decided_by.as_deref().unwrap_or("someone");
        let because = status
            .reason
            .as_deref()
            .filter(|r| !r.is_empty())
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        match decision {
            Decision::Approved | Decision::ApprovedAlways => {
                Answer::Runs(decided.spec.input.clone())
            }
            Decision::Expired => Answer::Refused(ToolResult::host_error(
                APPROVAL_DENIED,
                format!(
                    "the call of {} was denied and did not run: nobody approved it within {} (ToolCallApproval {name})",
                    asked.tool, host.spec.approval.wait
                ),
            )),
            Decision::Denied | Decision::Pending => Answer::Refused(ToolResult::host_error(
                APPROVAL_DENIED,
                format!(
                    "the call of {} was denied by {by}{because} and did not run (ToolCallApproval {name})",
                    asked.tool
                ),
            )),
        }
    }

    /// The approval once decided, or `None` at `until`.
    async fn wait(
        &self,
        namespace: &str,
        name: &str,
        until: tokio::time::Instant,
    ) -> Option<Arc<ToolCallApproval>> {
        let mut changed = self.index.changed.approvals.subscribe();
        let at = ObjectRef::new(name).within(namespace);
        loop {
            changed.mark_unchanged();
            if let Some(a) = self.index.approvals.get(&at)
                && a.decision().is_final()
            {
                return Some(a);
            }
            tokio::select! {
                _ = changed.changed() => {}
                _ = tokio::time::sleep_until(until) => return None,
            }
        }
    }

    /// Expires the approvals still pending past their deadline whose waiting call went away
    /// with its replica (a restart, a crash): denied, with an Event saying so, so that no
    /// approval waits for an answer nobody can act on. A decision racing it stands (the write
    /// carries the resourceVersion). Answers how many it expired. The fan-out leader runs it.
    pub async fn expire_overdue(&self, now: jiff::Timestamp) -> usize {
        let mut expired = 0;
        for approval in overdue(&self.index, now) {
            let status = expired_status();
            match self.writer.decide(&approval, &status).await {
                Ok(written) => {
                    expired += 1;
                    self.metrics.decided(Decision::Expired.as_str());
                    self.writer
                        .event(
                            &written,
                            "Expired",
                            format!(
                                "Nobody decided the call of {} by agent {} before {}, and the \
                                 call that waited went away: denied",
                                written.spec.tool, written.spec.agent, written.spec.deadline
                            ),
                        )
                        .await;
                }
                Err(DecideError::Conflict | DecideError::Gone) => {}
                Err(e) => tracing::warn!(
                    approval = %approval.name_any(),
                    error = %e,
                    "could not expire an overdue approval"
                ),
            }
        }
        expired
    }

    /// Writes that nobody decided in time, unless someone did meanwhile: the approval as
    /// decided.
    async fn expire(
        &self,
        namespace: &str,
        name: &str,
        made: &ToolCallApproval,
    ) -> Arc<ToolCallApproval> {
        let at = ObjectRef::new(name).within(namespace);
        let latest = self
            .index
            .approvals
            .get(&at)
            .unwrap_or_else(|| Arc::new(made.clone()));
        if latest.decision().is_final() {
            return latest;
        }
        let expired = expired_status();
        match self.writer.decide(&latest, &expired).await {
            Ok(written) => {
                self.writer
                    .event(
                        &written,
                        "Expired",
                        format!(
                            "Nobody decided the call of {} by agent {} before {}: denied",
                            written.spec.tool, written.spec.agent, written.spec.deadline
                        ),
                    )
                    .await;
                Arc::new(written)
            }
            // Someone decided as it ran out: theirs stands.
            Err(DecideError::Conflict) => match self
                .wait(
                    namespace,
                    name,
                    tokio::time::Instant::now() + Duration::from_secs(5),
                )
                .await
            {
                Some(decided) => decided,
                None => Arc::new(with_status(&latest, expired_status())),
            },
            Err(_) => Arc::new(with_status(&latest, expired_status())),
        }
    }
}

fn expired_status() -> ToolCallApprovalStatus {
    ToolCallApprovalStatus {
        decision: Some(Decision::Expired),
        decided_by: Some(EXPIRED_BY.into()),
        decided_at: Some(model::time::rfc3339(jiff::Timestamp::now())),
        reason: Some("nobody decided before the deadline".into()),
    }
}

fn with_status(a: &ToolCallApproval, status: ToolCallApprovalStatus) -> ToolCallApproval {
    let mut a = a.clone();
    a.status = Some(status);
    a
}

/// The approval to make for a call: named after its chat and tool (the API server adds a
/// suffix), labelled as ours, owned so that it goes with its run.
pub fn approval_of(
    asked: &Asked<'_>,
    profile: &str,
    now: jiff::Timestamp,
    deadline: jiff::Timestamp,
) -> ToolCallApproval {
    let prefix: String = format!("{}-{}-", asked.chat, asked.tool.replace('_', "-"))
        .chars()
        .take(57)
        .collect::<String>()
        .to_lowercase();
    let project = String::new();
    ToolCallApproval {
        metadata: ObjectMeta {
            generate_name: Some(prefix),
            namespace: Some(asked.namespace.into()),
            labels: Some(names::labels(asked.plugin, &project, asked.chat, COMPONENT)),
            owner_references: Some(vec![asked.owner.clone()]),
            ..Default::default()
        },
        spec: ToolCallApprovalSpec {
            chat: asked.chat.into(),
            plugin: asked.plugin.into(),
            tool: asked.tool.into(),
            agent: asked.agent.into(),
            run: asked.run.into(),
            via: asked.via,
            profile: profile.into(),
            input: asked.input.clone(),
            requested_at: model::time::rfc3339_millis(now),
            deadline: model::time::rfc3339(deadline),
        },
        status: None,
    }
}

/// Why a person's decision is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecisionRefused {
    #[error("no ToolCallApproval {name} in namespace {namespace}")]
    NotFound { namespace: String, name: String },
    #[error("ToolCallApproval {name} is a call in chat {chat}, not in {asked}")]
    OtherChat {
        name: String,
        chat: String,
        asked: String,
    },
    #[error("ToolCallApproval {name} was already decided: {decision} by {by}")]
    AlreadyDecided {
        name: String,
        decision: &'static str,
        by: String,
    },
    #[error("ToolCallApproval {name} waited until {deadline}; the call was denied")]
    PastDeadline { name: String, deadline: String },
}

/// A person's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum PersonAnswer {
    /// This call only.
    Once,
    /// This call, and the tool for the rest of the run (or the agent's turn), unless its
    /// profile always asks for it.
    Always,
    Deny,
}

impl PersonAnswer {
    pub fn decision(self) -> Decision {
        match self {
            PersonAnswer::Once => Decision::Approved,
            PersonAnswer::Always => Decision::ApprovedAlways,
            PersonAnswer::Deny => Decision::Denied,
        }
    }
}

/// Whether `approval` may take a person's decision now (a decision is taken once, in its own
/// chat, before the deadline). Pure.
pub fn may_decide(
    approval: &ToolCallApproval,
    chat: &str,
    now: jiff::Timestamp,
) -> Result<(), DecisionRefused> {
    let name = approval.name_any();
    if approval.spec.chat != chat {
        return Err(DecisionRefused::OtherChat {
            name,
            chat: approval.spec.chat.clone(),
            asked: chat.into(),
        });
    }
    let decision = approval.decision();
    if decision.is_final() {
        let by = approval
            .status
            .as_ref()
            .and_then(|s| s.decided_by.clone())
            .unwrap_or_default();
        return Err(DecisionRefused::AlreadyDecided {
            name,
            decision: decision.as_str(),
            by,
        });
    }
    let past = approval
        .spec
        .deadline
        .parse::<jiff::Timestamp>()
        .is_ok_and(|d| now >= d);
    if past {
        return Err(DecisionRefused::PastDeadline {
            name,
            deadline: approval.spec.deadline.clone(),
        });
    }
    Ok(())
}

/// The status a person's answer writes.
pub fn decided_status(
    answer: PersonAnswer,
    by: &str,
    reason: Option<String>,
    now: jiff::Timestamp,
) -> ToolCallApprovalStatus {
    ToolCallApprovalStatus {
        decision: Some(answer.decision()),
        decided_by: Some(by.into()),
        decided_at: Some(model::time::rfc3339(now)),
        reason,
    }
}

/// The approvals still pending past their deadline (their waiting replica went away), to
/// expire.
pub fn overdue(index: &Index, now: jiff::Timestamp) -> Vec<Arc<ToolCallApproval>> {
    index
        .approvals
        .state()
        .into_iter()
        .filter(|a| a.decision() == Decision::Pending)
        .filter(|a| {
            a.spec
                .deadline
                .parse::<jiff::Timestamp>()
                .is_ok_and(|d| now >= d + Duration::from_secs(30))
        })
        .collect()
}

/// The approvals' writes to the cluster: created as the API server, their status written by
/// a JSON merge patch that carries the resourceVersion it was decided on (so a second
/// decision is refused with 409), Events from the API server's recorder.
pub struct KubeApprovals {
    client: kube::Client,
    recorder: kube::runtime::events::Recorder,
}

impl KubeApprovals {
    pub fn new(client: kube::Client) -> Self {
        let reporter = kube::runtime::events::Reporter {
            controller: names::FIELD_MANAGER_API.into(),
            instance: std::env::var("POD_NAME").ok(),
        };
        Self {
            recorder: kube::runtime::events::Recorder::new(client.clone(), reporter),
            client,
        }
    }

    fn api(&self, namespace: &str) -> kube::Api<ToolCallApproval> {
        kube::Api::namespaced(self.client.clone(), namespace)
    }
}

impl ApprovalWriter for KubeApprovals {
    fn create<'a>(
        &'a self,
        approval: &'a ToolCallApproval,
    ) -> BoxFuture<'a, Result<ToolCallApproval, String>> {
        Box::pin(async move {
            let ns = approval.namespace().unwrap_or_default();
            let params = kube::api::PostParams {
                field_manager: Some(names::FIELD_MANAGER_API.into()),
                ..Default::default()
            };
            self.api(&ns)
                .create(&params, approval)
                .await
                .map_err(|e| format!("creating a ToolCallApproval in {ns}: {e}"))
        })
    }

    fn decide<'a>(
        &'a self,
        approval: &'a ToolCallApproval,
        status: &'a ToolCallApprovalStatus,
    ) -> BoxFuture<'a, Result<ToolCallApproval, DecideError>> {
        Box::pin(async move {
            let ns = approval.namespace().unwrap_or_default();
            let patch = serde_json::json!({
                "metadata": { "resourceVersion": approval.metadata.resource_version },
                "status": status,
            });
            let params = kube::api::PatchParams {
                field_manager: Some(names::FIELD_MANAGER_API.into()),
                ..Default::default()
            };
            self.api(&ns)
                .patch_status(
                    &approval.name_any(),
                    &params,
                    &kube::api::Patch::Merge(&patch),
                )
                .await
                .map_err(DecideError::of)
        })
    }

    fn fresh<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<ToolCallApproval, DecideError>> {
        Box::pin(async move {
            self.api(namespace)
                .get_status(name)
                .await
                .map_err(DecideError::of)
        })
    }

    fn event<'a>(
        &'a self,
        approval: &'a ToolCallApproval,
        reason: &'a str,
        note: String,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            use kube::Resource;
            let event = kube::runtime::events::Event {
                type_: if matches!(reason, "Approved" | "ApprovedAlways") {
                    kube::runtime::events::EventType::Normal
                } else {
                    kube::runtime::events::EventType::Warning
                },
                reason: reason.into(),
                note: Some(note),
                action: "Decide".into(),
                secondary: None,
            };
            if let Err(e) = self
                .recorder
                .publish(&event, &approval.object_ref(&()))
                .await
            {
                tracing::warn!(error = %e, "could not record an Event of a decision");
            }
        })
    }
}

/// Approvals written into an index's store, as the API server and its watch would: for
/// request-level tests, which decide as a person would and see what the desk made.
pub struct StoreApprovals {
    index: Arc<Index>,
    store: std::sync::Mutex<kube::runtime::reflector::store::Writer<ToolCallApproval>>,
    made: std::sync::atomic::AtomicU64,
    /// Every Event recorded: (approval, reason, note).
    pub events: std::sync::Mutex<Vec<(String, String, String)>>,
    /// The next this many decisions meet a conflict, as when the cache a decision was read
    /// from is a write behind.
    pub conflicts: std::sync::atomic::AtomicUsize,
}

impl StoreApprovals {
    pub fn new(
        index: Arc<Index>,
        store: kube::runtime::reflector::store::Writer<ToolCallApproval>,
    ) -> Self {
        Self {
            index,
            store: std::sync::Mutex::new(store),
            made: Default::default(),
            events: Default::default(),
            conflicts: Default::default(),
        }
    }

    fn put(&self, approval: &ToolCallApproval) {
        self.store
            .lock()
            .expect("store lock")
            .apply_watcher_event(&kube::runtime::watcher::Event::Apply(approval.clone()));
        crate::index::bump(&self.index.changed.approvals);
    }
}

impl ApprovalWriter for StoreApprovals {
    fn create<'a>(
        &'a self,
        approval: &'a ToolCallApproval,
    ) -> BoxFuture<'a, Result<ToolCallApproval, String>> {
        Box::pin(async move {
            let n = self.made.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let mut made = approval.clone();
            let prefix = made.metadata.generate_name.take().unwrap_or_default();
            if made.metadata.name.is_none() {
                made.metadata.name = Some(format!("{prefix}{n:05}"));
            }
            made.metadata.resource_version = Some("1".into());
            made.metadata.uid = Some(format!("uid-approval-{n}"));
            self.put(&made);
            Ok(made)
        })
    }

    fn decide<'a>(
        &'a self,
        approval: &'a ToolCallApproval,
        status: &'a ToolCallApprovalStatus,
    ) -> BoxFuture<'a, Result<ToolCallApproval, DecideError>> {
        Box::pin(async move {
            use std::sync::atomic::Ordering;
            let conflict = self
                .conflicts
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            if conflict.is_ok() {
                return Err(DecideError::Conflict);
            }
            let ns = approval.namespace().unwrap_or_default();
            let at = ObjectRef::new(&approval.name_any()).within(&ns);
            let Some(now) = self.index.approvals.get(&at) else {
                return Err(DecideError::Gone);
            };
            if now.metadata.resource_version != approval.metadata.resource_version {
                return Err(DecideError::Conflict);
            }
            let mut written = (*now).clone();
            written.status = Some(status.clone());
            let version: u64 = now
                .metadata
                .resource_version
                .as_deref()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            written.metadata.resource_version = Some((version + 1).to_string());
            self.put(&written);
            Ok(written)
        })
    }

    fn event<'a>(
        &'a self,
        approval: &'a ToolCallApproval,
        reason: &'a str,
        note: String,
    ) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            self.events.lock().expect("events lock").push((
                approval.name_any(),
                reason.to_string(),
                note,
            ));
        })
    }

    fn fresh<'a>(
        &'a self,
        namespace: &'a str,
        name: &'a str,
    ) -> BoxFuture<'a, Result<ToolCallApproval, DecideError>> {
        Box::pin(async move {
            self.index
                .approvals
                .get(&ObjectRef::new(name).within(namespace))
                .map(|a| (*a).clone())
                .ok_or(DecideError::Gone)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wait_is_the_written_one_five_minutes_when_unreadable_and_a_year_at_most() {
        assert_eq!(approval_wait("90s"), Duration::from_secs(90));
        assert_eq!(approval_wait("soon"), Duration::from_secs(300));
        assert_eq!(approval_wait("999999999h"), WAIT_AT_MOST);
        // The deadline's arithmetic holds at the longest wait.
        let now = jiff::Timestamp::now();
        let _ = now + approval_wait("999999999h");
        let _ = tokio::time::Instant::now() + approval_wait("999999999h");
    }
}
