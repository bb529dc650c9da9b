//! A small map whose entries expire: the answers of TokenReviews and
//! SubjectAccessReviews, kept for a few seconds so a page load or a burst of requests
//! costs the API server one review each, and bounded so a flood of distinct tokens
//! cannot grow it without end.

use std::collections::HashMap;
use std::hash::Hash;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

/// Entries for `ttl`, at most `limit` of them.
#[derive(Debug)]
pub struct Expiring<K, V> {
    entries: Mutex<HashMap<K, (Instant, V)>>,
    ttl: Duration,
    limit: usize,
}

impl<K: Eq + Hash + Clone, V: Clone> Expiring<K, V> {
    pub fn new(ttl: Duration, limit: usize) -> Self {
        Expiring {
            entries: Mutex::new(HashMap::new()),
            ttl,
            limit,
        }
    }

    /// The value kept for `key` within the last `ttl`.
    pub fn get(&self, key: &K) -> Option<V> {
        let entries = self.entries.lock();
        entries
            .get(key)
            .filter(|(at, _)| at.elapsed() < self.ttl)
            .map(|(_, value)| value.clone())
    }

    /// Keeps `value` for `key`. When full, expired entries go first; if none has
    /// expired, the oldest goes (an O(n) scan, only when the map is full).
    pub fn insert(&self, key: K, value: V) {
        let mut entries = self.entries.lock();
        if entries.len() >= self.limit && !entries.contains_key(&key) {
            let ttl = self.ttl;
            entries.retain(|_, (at, _)| at.elapsed() < ttl);
            let oldest = (entries.len() >= self.limit)
                .then(|| entries.iter().min_by_key(|(_, (at, _))| *at))
                .flatten()
                .map(|(k, _)| k.clone());
            if let Some(oldest) = oldest {
                entries.remove(&oldest);
            }
        }
        entries.insert(key, (Instant::now(), value));
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.entries.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_and_the_map_never_grows_past_its_limit() {
        let cache = Expiring::new(Duration::from_secs(60), 3);
        for i in 0..10 {
            cache.insert(i, i * 10);
        }
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get(&9), Some(90));
        assert_eq!(cache.get(&0), None);
        let short = Expiring::new(Duration::ZERO, 3);
        short.insert("a", 1);
        assert_eq!(short.get(&"a"), None);
    }
}
