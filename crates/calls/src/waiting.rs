//! How many calls wait for each container to start: a bounded queue per instance.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::index::InstanceKey;

/// How many calls wait for each container to start.
#[derive(Default)]
pub struct Waiting {
    counts: Mutex<HashMap<InstanceKey, usize>>,
}

/// A place in the queue of calls waiting for a container; leaving it frees the place.
pub struct Place<'a> {
    waiting: &'a Waiting,
    key: InstanceKey,
}

impl Waiting {
    /// A place for one more call, unless `max` already wait.
    pub fn enter(&self, key: &InstanceKey, max: usize) -> Option<Place<'_>> {
        let mut counts = self.counts.lock().expect("waiting lock");
        let n = counts.entry(key.clone()).or_default();
        if *n >= max {
            return None;
        }
        *n += 1;
        Some(Place {
            waiting: self,
            key: key.clone(),
        })
    }

    /// How many calls wait for the container now.
    pub fn count(&self, key: &InstanceKey) -> usize {
        self.counts
            .lock()
            .expect("waiting lock")
            .get(key)
            .copied()
            .unwrap_or(0)
    }
}

impl Drop for Place<'_> {
    fn drop(&mut self) {
        let mut counts = self.waiting.counts.lock().expect("waiting lock");
        if let Some(n) = counts.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_queue_is_bounded_and_places_free_up() {
        let w = Waiting::default();
        let key = InstanceKey::new("ns", "i");
        let a = w.enter(&key, 2).unwrap();
        let _b = w.enter(&key, 2).unwrap();
        assert!(w.enter(&key, 2).is_none());
        drop(a);
        assert_eq!(w.count(&key), 1);
        assert!(w.enter(&key, 2).is_some());
    }
}
