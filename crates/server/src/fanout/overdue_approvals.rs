//! Approvals nobody will answer: a call waiting for a person expires its own approval when its
//! wait runs out, but a call whose replica went away (a restart, a crash, a lost node) cannot.
//! The fan-out leader expires those, a short while after their deadline
//! ([`ApprovalDesk::expire_overdue`](crate::tool_calls::approval::ApprovalDesk::expire_overdue)),
//! so that `kubectl get toolcallapprovals` never shows a call as waiting when nothing waits.

use std::time::Duration;

use tokio::sync::watch;

use crate::tool_calls::approval::ApprovalDesk;

/// How often the leader looks: overdue approvals are expired this long after their grace.
pub const EVERY: Duration = Duration::from_secs(15);

/// Expires overdue approvals every [`EVERY`], while leading.
pub async fn run(desk: ApprovalDesk, mut leading: watch::Receiver<bool>) {
    loop {
        super::until_leading(&mut leading).await;
        let expired = desk.expire_overdue(jiff::Timestamp::now()).await;
        if expired > 0 {
            tracing::info!(expired, "expired approvals whose waiting call went away");
        }
        tokio::select! {
            _ = tokio::time::sleep(EVERY) => {}
            _ = super::until_not_leading(&mut leading) => {}
        }
    }
}
