//! The API server's bundles by image digest, bounded in bytes. An image never changes for its
//! digest, so an entry is never stale: a new image is a new entry, the least recently served
//! entries go when the bytes would pass the bound, and [`BundleCache::keep_only`] drops the
//! entries no Plugin runs any more (a removed plugin's, an upgraded one's old image). A bundle
//! larger than the whole bound is served but not kept. Pure: no I/O, no clock.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use super::bundle::Bundle;

/// Bytes of bundles kept unless told otherwise: a few dozen typical bundles, while one
/// image's /loop-plugin may hold up to 50 MB.
pub const DEFAULT_CACHE_BYTES: u64 = 64 * 1024 * 1024;

/// Bundles by image digest, least recently served first out.
#[derive(Debug)]
pub struct BundleCache {
    limit: u64,
    bytes: u64,
    by_digest: HashMap<String, Arc<Bundle>>,
    /// Digests, least recently served first.
    order: VecDeque<String>,
}

impl BundleCache {
    pub fn new(limit: u64) -> Self {
        Self {
            limit,
            bytes: 0,
            by_digest: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// The bundle of `digest`, if kept; it becomes the most recently served.
    pub fn get(&mut self, digest: &str) -> Option<Arc<Bundle>> {
        let bundle = self.by_digest.get(digest)?.clone();
        self.touch(digest);
        Some(bundle)
    }

    /// Keeps `bundle` for `digest`, making room by dropping the least recently served.
    pub fn put(&mut self, digest: &str, bundle: Arc<Bundle>) {
        if bundle.bytes() > self.limit {
            return;
        }
        self.remove(digest);
        while self.bytes + bundle.bytes() > self.limit {
            let Some(oldest) = self.order.front().cloned() else {
                break;
            };
            self.remove(&oldest);
        }
        self.bytes += bundle.bytes();
        self.by_digest.insert(digest.to_string(), bundle);
        self.order.push_back(digest.to_string());
    }

    /// Drops every entry whose digest `live` does not hold.
    pub fn keep_only(&mut self, live: impl Fn(&str) -> bool) {
        let gone: Vec<String> = self.order.iter().filter(|d| !live(d)).cloned().collect();
        for digest in gone {
            self.remove(&digest);
        }
    }

    /// Bytes of the bundles kept.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    fn touch(&mut self, digest: &str) {
        if let Some(at) = self.order.iter().position(|d| d == digest) {
            let digest = self.order.remove(at).expect("found at that position");
            self.order.push_back(digest);
        }
    }

    fn remove(&mut self, digest: &str) {
        if let Some(bundle) = self.by_digest.remove(digest) {
            self.bytes -= bundle.bytes();
            self.order.retain(|d| d != digest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bundle(bytes: usize) -> Arc<Bundle> {
        Arc::new(Bundle::from_files([(
            "main/index.html".to_string(),
            Arc::new(vec![0; bytes]),
        )]))
    }

    #[test]
    fn the_least_recently_served_goes_first_and_the_bound_holds() {
        let mut cache = BundleCache::new(100);
        cache.put("a", bundle(40));
        cache.put("b", bundle(40));
        assert!(cache.get("a").is_some());
        cache.put("c", bundle(40));
        assert!(cache.get("b").is_none(), "b was served least recently");
        assert!(cache.get("a").is_some());
        assert!(cache.get("c").is_some());
        assert_eq!(cache.bytes(), 80);
    }

    #[test]
    fn a_bundle_over_the_bound_is_not_kept_and_drops_nothing() {
        let mut cache = BundleCache::new(100);
        cache.put("a", bundle(60));
        cache.put("huge", bundle(101));
        assert!(cache.get("huge").is_none());
        assert!(cache.get("a").is_some());
    }

    #[test]
    fn putting_a_digest_again_counts_its_bytes_once() {
        let mut cache = BundleCache::new(100);
        cache.put("a", bundle(60));
        cache.put("a", bundle(60));
        assert_eq!(cache.bytes(), 60);
        assert!(cache.get("a").is_some());
    }

    #[test]
    fn entries_no_plugin_runs_are_dropped() {
        let mut cache = BundleCache::new(100);
        cache.put("removed", bundle(10));
        cache.put("running", bundle(10));
        cache.keep_only(|d| d == "running");
        assert!(cache.get("removed").is_none());
        assert!(cache.get("running").is_some());
        assert_eq!(cache.bytes(), 10);
    }
}
