//! Leader election on a `coordination.k8s.io/v1` Lease, so that more than one controller
//! replica is safe: only the holder runs the work (the reconcilers), the others wait to take
//! over.
//!
//! [`decide`] is the rule, a pure function of the Lease, the time and who we are; [`claimed`]
//! and [`released`] are the specs we write; [`lead`] is the loop around them. Every write is
//! conditional: a create, or a replace carrying the resourceVersion read, which the API server
//! refuses (409) when anyone wrote in between, so two replicas never both win.
//!
//! Why not kube-lease-manager (0.13, which fits kube 5): a replica waiting there sleeps until
//! the holder's Lease would run out, and a holder re-reads the Lease only when it renews. So a
//! release on SIGTERM (a rolling update) hands over only after up to 15 s, and a holder whose
//! Lease another replica took keeps working until its next renewal. Here the waiting replicas
//! look every [`RETRY_EVERY`] and every renewal is a conditional write of what was read, so a
//! handover takes about 2 s and a loss is seen at the next renewal (tested in e2e
//! `chart::one_holder_at_a_time_and_a_quick_handover_on_release` and
//! `chart::a_taken_lease_stops_the_work`).
//!
//! Times: the holder renews a Lease of [`LEASE_DURATION`] (15 s) every [`RENEW_EVERY`] (5 s),
//! and stops the work when it could not renew for [`RENEW_DEADLINE`] (10 s), which is 5 s before
//! anyone else may take the Lease. Others judge expiry by `renewTime` against their own clock,
//! so the nodes' clocks must agree within those 5 s (NTP does far better).

use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

// The jiff that k8s-openapi's MicroTime wraps (0.2, not our own jiff 1).
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use tokio::time::Instant;

use crate::pod_env::{LEADER_ELECTION_NAMESPACE, POD_NAME};

/// How long a Lease holds without renewal (`leaseDurationSeconds`).
pub const LEASE_DURATION: Duration = Duration::from_secs(15);
/// How often the holder renews.
pub const RENEW_EVERY: Duration = Duration::from_secs(5);
/// How long the holder goes on without a successful renewal before it stops the work.
pub const RENEW_DEADLINE: Duration = Duration::from_secs(10);
/// How often a replica that waits looks again, and how soon a failed renewal is retried.
pub const RETRY_EVERY: Duration = Duration::from_secs(2);
/// How long before it takes over a replica may see a change the last holder never acted on:
/// a holder that dies renewed at most [`RENEW_EVERY`] before, the others take the Lease
/// [`LEASE_DURATION`] after that renewal and look every [`RETRY_EVERY`]; one more
/// [`RENEW_EVERY`] covers a late renewal and the watches' lag. Work that acts on watch events
/// while leading keeps what it saw for this long while waiting, and does it on taking over.
pub const HANDOVER_WINDOW: Duration = Duration::from_secs(
    LEASE_DURATION.as_secs() + 2 * RENEW_EVERY.as_secs() + RETRY_EVERY.as_secs(),
);
/// The Lease's name unless told otherwise (the chart passes `<release>-controller`).
pub const DEFAULT_LEASE_NAME: &str = "loop-plugins-controller";

/// The controller's leader-election flags, to `#[command(flatten)]` into its arguments.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct LeaderArgs {
    /// Elect a leader on a Lease in this namespace before reconciling (needed for replicas
    /// > 1); without it, reconcile at once.
    #[arg(long, env = LEADER_ELECTION_NAMESPACE)]
    pub leader_election_namespace: Option<String>,
    /// The Lease's name.
    #[arg(long, env = "LOOP_PLUGINS_LEASE_NAME", default_value = DEFAULT_LEASE_NAME)]
    pub lease_name: String,
    /// Our holderIdentity; default: $POD_NAME, else the hostname.
    #[arg(long)]
    pub leader_identity: Option<String>,
}

impl LeaderArgs {
    /// Runs `work` as the Lease holder when leader election is on; at once otherwise. When
    /// `stop` resolves first (SIGTERM), drops the work, releases the Lease if held (so the next
    /// replica leads at once rather than after the Lease runs out) and returns None.
    pub async fn run<F: Future>(
        &self,
        client: Client,
        work: F,
        stop: impl Future<Output = ()>,
    ) -> Result<Option<F::Output>, LeaderError> {
        match &self.leader_election_namespace {
            None => {
                tokio::select! {
                    output = work => Ok(Some(output)),
                    () = stop => Ok(None),
                }
            }
            Some(namespace) => {
                let identity = self
                    .leader_identity
                    .clone()
                    .unwrap_or_else(default_identity);
                lead_until(client, namespace, &self.lease_name, &identity, work, stop).await
            }
        }
    }
}

/// Who we are: `$POD_NAME` (the chart sets it from the downward API), else the hostname.
pub fn default_identity() -> String {
    let non_empty = |s: String| {
        let s = s.trim().to_string();
        (!s.is_empty()).then_some(s)
    };
    std::env::var(POD_NAME)
        .ok()
        .and_then(non_empty)
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .and_then(non_empty)
        })
        .or_else(|| std::env::var("HOSTNAME").ok().and_then(non_empty))
        .unwrap_or_else(|| format!("loop-plugins-{}", std::process::id()))
}

/// What to do about a Lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Nobody holds it (no Lease, no holder, or the holder's time ran out): take it.
    Acquire,
    /// We hold it: renew it.
    Renew,
    /// `holder` holds it until `expires` unless it renews.
    Wait { holder: String, expires: Timestamp },
}

/// The rule: who may hold the Lease described by `spec` at `now`, from `identity`'s view.
pub fn decide(spec: Option<&LeaseSpec>, now: Timestamp, identity: &str) -> Decision {
    let Some(spec) = spec else {
        return Decision::Acquire;
    };
    let holder = spec.holder_identity.as_deref().unwrap_or_default();
    if holder.is_empty() {
        return Decision::Acquire;
    }
    if holder == identity {
        return Decision::Renew;
    }
    match expiry(spec) {
        Some(expires) if now < expires => Decision::Wait {
            holder: holder.to_string(),
            expires,
        },
        _ => Decision::Acquire,
    }
}

/// When the holder's claim ends: its last renewal (else its acquisition) plus the duration.
/// `None` when the Lease records neither time.
pub fn expiry(spec: &LeaseSpec) -> Option<Timestamp> {
    let last = spec.renew_time.as_ref().or(spec.acquire_time.as_ref())?;
    let seconds = spec
        .lease_duration_seconds
        .unwrap_or(LEASE_DURATION.as_secs() as i32)
        .max(0);
    last.0
        .checked_add(SignedDuration::from_secs(i64::from(seconds)))
        .ok()
}

/// The spec to write after `decision`; `None` for [`Decision::Wait`] (nothing to write).
/// Taking the Lease from someone counts a transition; fields we don't use are kept.
pub fn claimed(
    current: Option<&LeaseSpec>,
    decision: &Decision,
    now: Timestamp,
    identity: &str,
) -> Option<LeaseSpec> {
    let base = current.cloned().unwrap_or_default();
    let duration = Some(LEASE_DURATION.as_secs() as i32);
    match decision {
        Decision::Wait { .. } => None,
        Decision::Renew => Some(LeaseSpec {
            holder_identity: Some(identity.to_string()),
            lease_duration_seconds: duration,
            renew_time: Some(MicroTime(now)),
            acquire_time: base.acquire_time.clone().or(Some(MicroTime(now))),
            ..base
        }),
        Decision::Acquire => {
            let transitions = base.lease_transitions.unwrap_or(0);
            let taken_over = current.is_some() && base.holder_identity.as_deref() != Some(identity);
            Some(LeaseSpec {
                holder_identity: Some(identity.to_string()),
                lease_duration_seconds: duration,
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(transitions + i32::from(taken_over)),
                ..base
            })
        }
    }
}

/// The spec a holder that stops writes: no holder and a one-second duration, so a waiting
/// replica takes over at its next look instead of after the Lease's full time.
pub fn released(current: &LeaseSpec, now: Timestamp) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        lease_duration_seconds: Some(1),
        renew_time: Some(MicroTime(now)),
        ..current.clone()
    }
}

/// Why [`lead`] stopped before the work ended.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// Someone else took the Lease, it was deleted, or it could not be renewed in time. The work
    /// was stopped; exit, and let the next start wait for the Lease again.
    #[error("lost the Lease {namespace}/{name}: {reason}")]
    Lost {
        namespace: String,
        name: String,
        reason: String,
    },
    /// RBAC does not let us read or write the Lease: waiting would never help.
    #[error("may not use the Lease {namespace}/{name}: {source}")]
    Forbidden {
        namespace: String,
        name: String,
        #[source]
        source: kube::Error,
    },
}

/// Waits to hold the Lease `namespace/name` as `identity`, then runs `work` while renewing
/// it. When `work` ends, releases the Lease and returns its output; when the Lease is lost,
/// drops `work` (stopping it) and returns [`LeaderError::Lost`]. Errors while waiting are
/// logged and retried, except a refusal by RBAC.
pub async fn lead<F: Future>(
    client: Client,
    namespace: &str,
    name: &str,
    identity: &str,
    work: F,
) -> Result<F::Output, LeaderError> {
    let never = std::future::pending::<()>();
    let output = lead_until(client, namespace, name, identity, work, never).await?;
    Ok(output.expect("a pending stop never resolves"))
}

/// [`lead`], and when `stop` resolves first: stops waiting, or drops `work` and releases
/// the Lease; returns None then.
pub async fn lead_until<F: Future>(
    client: Client,
    namespace: &str,
    name: &str,
    identity: &str,
    work: F,
    stop: impl Future<Output = ()>,
) -> Result<Option<F::Output>, LeaderError> {
    let elector = Elector {
        api: Api::namespaced(client, namespace),
        namespace: namespace.to_string(),
        name: name.to_string(),
        identity: identity.to_string(),
    };
    tokio::pin!(stop);
    let (lease, acquired_at) = tokio::select! {
        acquired = elector.acquire() => acquired?,
        () = &mut stop => {
            tracing::info!(lease = %name, %namespace, "stopped while waiting to lead");
            // An acquiring write the server took just as the stop came holds it all the same.
            elector.release_if_held().await;
            return Ok(None);
        }
    };
    tracing::info!(lease = %name, %namespace, %identity, "holding the Lease: leading");
    let latest = Mutex::new(lease);
    let keep = elector.keep(&latest, acquired_at);
    // Boxed so that stopping can drop it before the release.
    let mut work = Box::pin(work);
    tokio::pin!(keep);
    tokio::select! {
        biased;
        output = &mut work => {
            let lease = latest.lock().expect("the Lease lock").clone();
            elector.release(lease).await;
            Ok(Some(output))
        }
        lost = &mut keep => {
            tracing::error!(error = %lost, "stopping the work: no longer the leader");
            Err(lost)
        }
        () = &mut stop => {
            drop(work);
            let lease = latest.lock().expect("the Lease lock").clone();
            elector.release(lease).await;
            Ok(None)
        }
    }
}

/// One replica's view of one Lease.
struct Elector {
    api: Api<Lease>,
    namespace: String,
    name: String,
    identity: String,
}

/// What one attempt to take the Lease found.
enum Attempt {
    /// We hold it: the Lease as written.
    Held(Box<Lease>),
    /// Someone else holds it.
    HeldBy { holder: String, expires: Timestamp },
    /// Someone wrote it between our read and our write: look again.
    Raced,
}

/// What one renewal found.
enum Renewal {
    Renewed(Box<Lease>),
    Lost(String),
}

impl Elector {
    /// Waits until we hold the Lease; returns it and when the winning attempt started.
    async fn acquire(&self) -> Result<(Lease, Instant), LeaderError> {
        let mut waiting_for: Option<String> = None;
        loop {
            let started = Instant::now();
            match self.try_acquire().await {
                Ok(Attempt::Held(lease)) => return Ok((*lease, started)),
                Ok(Attempt::Raced) => continue,
                Ok(Attempt::HeldBy { holder, expires }) => {
                    if waiting_for.as_deref() != Some(holder.as_str()) {
                        tracing::info!(lease = %self.name, %holder, %expires, "waiting for the Lease");
                        waiting_for = Some(holder);
                    }
                }
                Err(source) if is_forbidden(&source) => {
                    return Err(LeaderError::Forbidden {
                        namespace: self.namespace.clone(),
                        name: self.name.clone(),
                        source,
                    });
                }
                Err(err) => {
                    tracing::warn!(lease = %self.name, error = %err, "could not read or take the Lease; retrying")
                }
            }
            tokio::time::sleep(RETRY_EVERY).await;
        }
    }

    async fn try_acquire(&self) -> Result<Attempt, kube::Error> {
        let current = self.api.get_opt(&self.name).await?;
        let now = Timestamp::now();
        let spec = current.as_ref().and_then(|l| l.spec.as_ref());
        let decision = decide(spec, now, &self.identity);
        let Some(next) = claimed(spec, &decision, now, &self.identity) else {
            let Decision::Wait { holder, expires } = decision else {
                unreachable!("only Wait writes nothing")
            };
            return Ok(Attempt::HeldBy { holder, expires });
        };
        match self.write(current, next).await {
            Ok(lease) => Ok(Attempt::Held(Box::new(lease))),
            Err(kube::Error::Api(s)) if s.is_conflict() || s.is_already_exists() => {
                Ok(Attempt::Raced)
            }
            Err(err) => Err(err),
        }
    }

    /// Creates the Lease when there was none; else replaces the one read, whose
    /// resourceVersion makes the write conditional.
    async fn write(&self, current: Option<Lease>, spec: LeaseSpec) -> Result<Lease, kube::Error> {
        let params = PostParams::default();
        match current {
            None => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.name.clone()),
                        namespace: Some(self.namespace.clone()),
                        ..Default::default()
                    },
                    spec: Some(spec),
                };
                self.api.create(&params, &lease).await
            }
            Some(mut lease) => {
                lease.spec = Some(spec);
                self.api.replace(&self.name, &params, &lease).await
            }
        }
    }

    /// Renews the Lease until it is lost; returns why. Keeps the newest Lease in `latest`.
    async fn keep(&self, latest: &Mutex<Lease>, acquired_at: Instant) -> LeaderError {
        let mut renewed_at = acquired_at;
        let mut wait = RENEW_EVERY;
        loop {
            tokio::time::sleep(wait).await;
            let started = Instant::now();
            let left = RENEW_DEADLINE.saturating_sub(started - renewed_at);
            if left.is_zero() {
                return self.lost(format!("not renewed for {}s", RENEW_DEADLINE.as_secs()));
            }
            let lease = latest.lock().expect("the Lease lock").clone();
            match tokio::time::timeout(left, self.renew(lease)).await {
                Ok(Ok(Renewal::Renewed(lease))) => {
                    *latest.lock().expect("the Lease lock") = *lease;
                    renewed_at = started;
                    wait = RENEW_EVERY;
                }
                Ok(Ok(Renewal::Lost(reason))) => return self.lost(reason),
                Ok(Err(err)) => {
                    tracing::warn!(lease = %self.name, error = %err, "could not renew the Lease; retrying");
                    wait = RETRY_EVERY;
                }
                Err(_) => wait = Duration::ZERO,
            }
        }
    }

    /// One renewal: a replace of the Lease as we last wrote it; when someone wrote since, the
    /// fresh Lease decides.
    async fn renew(&self, lease: Lease) -> Result<Renewal, kube::Error> {
        let params = PostParams::default();
        let mut next = lease.clone();
        next.spec = claimed(
            lease.spec.as_ref(),
            &Decision::Renew,
            Timestamp::now(),
            &self.identity,
        );
        match self.api.replace(&self.name, &params, &next).await {
            Ok(written) => return Ok(Renewal::Renewed(Box::new(written))),
            Err(kube::Error::Api(s)) if s.is_conflict() => {}
            Err(kube::Error::Api(s)) if s.is_not_found() => {
                return Ok(Renewal::Lost("the Lease was deleted".into()));
            }
            Err(err) => return Err(err),
        }
        let Some(current) = self.api.get_opt(&self.name).await? else {
            return Ok(Renewal::Lost("the Lease was deleted".into()));
        };
        let now = Timestamp::now();
        let spec = current.spec.as_ref();
        match decide(spec, now, &self.identity) {
            Decision::Renew => {
                let mut next = current.clone();
                next.spec = claimed(spec, &Decision::Renew, now, &self.identity);
                match self.api.replace(&self.name, &params, &next).await {
                    Ok(written) => Ok(Renewal::Renewed(Box::new(written))),
                    Err(kube::Error::Api(s)) if s.is_conflict() => {
                        Ok(Renewal::Lost("the Lease keeps changing under us".into()))
                    }
                    Err(err) => Err(err),
                }
            }
            Decision::Wait { holder, .. } => Ok(Renewal::Lost(format!("{holder} holds it"))),
            Decision::Acquire => Ok(Renewal::Lost(
                "someone else released or took it meanwhile".into(),
            )),
        }
    }

    /// Gives the Lease up so a waiting replica takes over at once; failing is harmless (the
    /// Lease then expires).
    async fn release(&self, mut lease: Lease) {
        let Some(spec) = lease.spec.as_ref() else {
            return;
        };
        lease.spec = Some(released(spec, Timestamp::now()));
        match self
            .api
            .replace(&self.name, &PostParams::default(), &lease)
            .await
        {
            Ok(_) => tracing::info!(lease = %self.name, "released the Lease"),
            Err(err) => {
                tracing::warn!(lease = %self.name, error = %err, "could not release the Lease; it expires")
            }
        }
    }

    /// Releases the Lease if it names this identity as its holder.
    async fn release_if_held(&self) {
        match self.api.get_opt(&self.name).await {
            Ok(Some(lease))
                if lease
                    .spec
                    .as_ref()
                    .and_then(|s| s.holder_identity.as_deref())
                    == Some(self.identity.as_str()) =>
            {
                self.release(lease).await
            }
            Ok(_) => {}
            Err(err) => {
                tracing::warn!(lease = %self.name, error = %err, "could not read the Lease to release it")
            }
        }
    }

    fn lost(&self, reason: String) -> LeaderError {
        LeaderError::Lost {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            reason,
        }
    }
}

fn is_forbidden(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.is_forbidden())
}

/// Whether this replica holds the Lease `namespace/name` as `identity`, as it changes, for work
/// that starts and stops with leading while the process goes on (the API server's fan-out).
/// Waits again after a loss; releases the Lease once `stop` turns true.
pub fn leading(
    client: Client,
    lease: Option<(String, String, String)>,
    stop: tokio::sync::watch::Receiver<bool>,
) -> tokio::sync::watch::Receiver<bool> {
    let Some((namespace, name, identity)) = lease else {
        return tokio::sync::watch::channel(true).1;
    };
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        loop {
            let mut stopped = stop.clone();
            let until_stop = async move {
                let _ = stopped.wait_for(|s| *s).await;
            };
            let flag = tx.clone();
            let work = async move {
                flag.send_replace(true);
                std::future::pending::<()>().await
            };
            let result = lead_until(
                client.clone(),
                &namespace,
                &name,
                &identity,
                work,
                until_stop,
            )
            .await;
            tx.send_replace(false);
            match result {
                Ok(_) => return,
                Err(err @ LeaderError::Forbidden { .. }) => {
                    tracing::error!(error = %err, "cannot lead: retrying in a minute");
                    tokio::time::sleep(Duration::from_secs(60)).await;
                }
                Err(err) => {
                    tracing::warn!(error = %err, "no longer leading; waiting for the Lease again");
                    tokio::time::sleep(RETRY_EVERY).await;
                }
            }
            if *stop.borrow() {
                return;
            }
        }
    });
    rx
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_767_225_600 + seconds).unwrap()
    }

    fn held(holder: &str, renewed: i64) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(holder.into()),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(t(renewed - 100))),
            renew_time: Some(MicroTime(t(renewed))),
            lease_transitions: Some(3),
            ..Default::default()
        }
    }

    #[test]
    fn no_lease_or_no_holder_is_taken() {
        assert_eq!(decide(None, t(0), "a"), Decision::Acquire);
        let mut spec = held("b", 0);
        spec.holder_identity = None;
        assert_eq!(decide(Some(&spec), t(1), "a"), Decision::Acquire);
        spec.holder_identity = Some(String::new());
        assert_eq!(decide(Some(&spec), t(1), "a"), Decision::Acquire);
    }

    #[test]
    fn our_own_lease_is_renewed_even_late() {
        assert_eq!(decide(Some(&held("a", 0)), t(1), "a"), Decision::Renew);
        assert_eq!(decide(Some(&held("a", 0)), t(60), "a"), Decision::Renew);
    }

    #[test]
    fn someone_elses_lease_is_waited_for_until_it_expires() {
        let spec = held("b", 0);
        let wait = Decision::Wait {
            holder: "b".into(),
            expires: t(15),
        };
        assert_eq!(decide(Some(&spec), t(0), "a"), wait);
        assert_eq!(decide(Some(&spec), t(14), "a"), wait);
        assert_eq!(decide(Some(&spec), t(15), "a"), Decision::Acquire);
        assert_eq!(decide(Some(&spec), t(100), "a"), Decision::Acquire);
    }

    #[test]
    fn expiry_uses_the_leases_own_duration_and_falls_back_to_acquire_time() {
        let mut spec = held("b", 0);
        spec.lease_duration_seconds = Some(40);
        assert_eq!(expiry(&spec), Some(t(40)));
        assert!(matches!(
            decide(Some(&spec), t(30), "a"),
            Decision::Wait { .. }
        ));
        spec.renew_time = None;
        assert_eq!(expiry(&spec), Some(t(-60)));
        spec.lease_duration_seconds = None;
        assert_eq!(expiry(&spec), Some(t(-85)));
        spec.acquire_time = None;
        assert_eq!(expiry(&spec), None);
        assert_eq!(decide(Some(&spec), t(0), "a"), Decision::Acquire);
    }

    #[test]
    fn a_new_lease_starts_with_no_transition() {
        let spec = claimed(None, &Decision::Acquire, t(5), "a").unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.lease_duration_seconds, Some(15));
        assert_eq!(spec.acquire_time, Some(MicroTime(t(5))));
        assert_eq!(spec.renew_time, Some(MicroTime(t(5))));
        assert_eq!(spec.lease_transitions, Some(0));
    }

    #[test]
    fn taking_over_counts_a_transition_and_keeps_other_fields() {
        let mut current = held("b", 0);
        current.preferred_holder = Some("c".into());
        let spec = claimed(Some(&current), &Decision::Acquire, t(20), "a").unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(spec.acquire_time, Some(MicroTime(t(20))));
        assert_eq!(spec.renew_time, Some(MicroTime(t(20))));
        assert_eq!(spec.lease_transitions, Some(4));
        assert_eq!(spec.preferred_holder.as_deref(), Some("c"));
    }

    #[test]
    fn renewing_moves_only_the_renew_time() {
        let current = held("a", 0);
        let spec = claimed(Some(&current), &Decision::Renew, t(5), "a").unwrap();
        assert_eq!(spec.renew_time, Some(MicroTime(t(5))));
        assert_eq!(spec.acquire_time, current.acquire_time);
        assert_eq!(spec.lease_transitions, Some(3));
        assert_eq!(spec.holder_identity.as_deref(), Some("a"));
        assert_eq!(
            decide(Some(&spec), t(19), "b"),
            Decision::Wait {
                holder: "a".into(),
                expires: t(20),
            }
        );
    }

    #[test]
    fn waiting_writes_nothing() {
        let wait = Decision::Wait {
            holder: "b".into(),
            expires: t(15),
        };
        assert_eq!(claimed(Some(&held("b", 0)), &wait, t(1), "a"), None);
    }

    #[test]
    fn a_released_lease_is_taken_at_once() {
        let spec = released(&held("a", 0), t(3));
        assert_eq!(spec.holder_identity, None);
        assert_eq!(decide(Some(&spec), t(3), "b"), Decision::Acquire);
        let taken = claimed(Some(&spec), &Decision::Acquire, t(3), "b").unwrap();
        assert_eq!(taken.lease_transitions, Some(4));
    }

    #[test]
    fn the_timings_leave_a_margin_before_anyone_else_may_take_over() {
        assert!(RENEW_EVERY < RENEW_DEADLINE);
        assert!(RENEW_DEADLINE < LEASE_DURATION);
        assert!(RETRY_EVERY < RENEW_EVERY);
    }

    #[test]
    fn an_identity_is_always_found() {
        assert!(!default_identity().is_empty());
    }
}
