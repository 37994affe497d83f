//! A count of the changes to what decides who a plugin's token speaks for: the HostConfig, the
//! Plugins, Projects, ProjectTrusts, chats, instances and token Secrets. The watches count each
//! event after their store holds it (`start`), so an answer decided from the stores after
//! reading the count is at least as new as that count: a memo of answers tagged with the count
//! they were decided at (the Plugin API's callers) holds while the count has not moved.

use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Epoch(AtomicU64);

impl Epoch {
    /// The count now. Read it before reading the stores an answer is decided from.
    pub fn now(&self) -> u64 {
        self.0.load(Ordering::Acquire)
    }

    /// Counts one change, after the store holds it.
    pub fn bump(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_change_moves_the_count() {
        let epoch = Epoch::default();
        let before = epoch.now();
        epoch.bump();
        assert_ne!(epoch.now(), before);
        assert_eq!(epoch.now(), before + 1);
    }
}
