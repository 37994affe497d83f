//! A change counter per kind the API server's fan-out follows: each follower subscribes and
//! sees every change since it last looked (a change while it worked is seen at its next wait).

use tokio::sync::watch;

/// The counters, each counting every event of its kind's watch.
pub struct Changed {
    pub plugins: watch::Sender<u64>,
    pub instances: watch::Sender<u64>,
    pub runs: watch::Sender<u64>,
    /// ToolCallApprovals: a call waiting for a person follows it.
    pub approvals: watch::Sender<u64>,
    /// The configs: HostConfig, Projects and ProjectTrusts (`plugins.changed` to clients on
    /// every config write and trust).
    pub configs: watch::Sender<u64>,
}

impl Default for Changed {
    fn default() -> Self {
        Self {
            plugins: watch::channel(0).0,
            instances: watch::channel(0).0,
            runs: watch::channel(0).0,
            approvals: watch::channel(0).0,
            configs: watch::channel(0).0,
        }
    }
}

/// Counts one change.
pub fn bump(counter: &watch::Sender<u64>) {
    counter.send_modify(|n| *n = n.wrapping_add(1));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_follower_sees_a_change_made_while_it_worked() {
        let changed = Changed::default();
        let mut plugins = changed.plugins.subscribe();
        bump(&changed.plugins);
        bump(&changed.plugins);
        plugins.changed().await.expect("the counter is there");
        assert_eq!(*plugins.borrow_and_update(), 2);
        assert!(!plugins.has_changed().unwrap());
        bump(&changed.plugins);
        assert!(plugins.has_changed().unwrap());
    }
}
