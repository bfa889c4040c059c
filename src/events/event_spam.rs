//! The burst cap on events, as client-go's `EventSourceObjectSpamFilter`
//! applies it to every event before anything else: one token bucket per
//! source and object (a pod's events share one bucket whatever the
//! container, reason or message), holding 25 tokens and refilled with one
//! every 5 minutes, the buckets of at most 4096 objects kept (least recently
//! used go first). A crash-looping pod thereby sends its first 25 events at
//! once and then one every 5 minutes, however fast it loops; an event
//! refused here is dropped, not counted in its series.
//!
//! Invariant: pure. Time is passed in (a monotonic offset), so tests step it.

use std::collections::HashMap;
use std::time::Duration;

use super::recorder::EventObject;

/// client-go's defaults (`defaultSpamBurst`, `defaultSpamQPS` = 1/300,
/// `maxLruCacheEntries`).
pub const SPAM_BURST: u32 = 25;
pub const SPAM_REFILL: Duration = Duration::from_secs(300);
pub const SPAM_OBJECTS: usize = 4096;

/// The object part of the spam key: the source is the same for every event
/// a recorder sends, and the fieldPath is not part of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct SpamKey {
    api_version: String,
    kind: String,
    namespace: String,
    name: String,
    uid: String,
}

impl SpamKey {
    fn of(o: &EventObject) -> SpamKey {
        SpamKey {
            api_version: o.api_version.clone(),
            kind: o.kind.clone(),
            namespace: o.namespace.clone(),
            name: o.name.clone(),
            uid: o.uid.clone(),
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Bucket {
    /// The tokens, in nanoseconds of refill (a token is `refill` long):
    /// integer arithmetic, so a token is back exactly on time.
    credit: u128,
    /// When `tokens` was last brought up to date; also the LRU stamp.
    at: Duration,
}

#[derive(Debug, Clone)]
pub struct SpamFilter {
    /// One token, in nanoseconds (at least 1).
    token: u128,
    /// The full bucket, in nanoseconds.
    full: u128,
    capacity: usize,
    buckets: HashMap<SpamKey, Bucket>,
}

impl Default for SpamFilter {
    fn default() -> Self {
        SpamFilter::new(SPAM_BURST, SPAM_REFILL, SPAM_OBJECTS)
    }
}

impl SpamFilter {
    /// `burst` events at once per object, then one per `refill`; buckets of
    /// at most `capacity` objects.
    pub fn new(burst: u32, refill: Duration, capacity: usize) -> SpamFilter {
        let token = refill.as_nanos().max(1);
        SpamFilter {
            token,
            full: token * u128::from(burst),
            capacity: capacity.max(1),
            buckets: HashMap::new(),
        }
    }

    /// True when an event regarding `object` at `now` may be sent (and
    /// takes its token); false when it is to be dropped.
    pub fn allow(&mut self, object: &EventObject, now: Duration) -> bool {
        let key = SpamKey::of(object);
        if !self.buckets.contains_key(&key) && self.buckets.len() >= self.capacity {
            self.evict_oldest();
        }
        let fresh = Bucket {
            credit: self.full,
            at: now,
        };
        let bucket = self.buckets.entry(key).or_insert(fresh);
        let elapsed = now.saturating_sub(bucket.at).as_nanos();
        bucket.credit = (bucket.credit + elapsed).min(self.full);
        bucket.at = bucket.at.max(now);
        if bucket.credit >= self.token {
            bucket.credit -= self.token;
            true
        } else {
            false
        }
    }

    /// How many objects have a bucket.
    pub fn len(&self) -> usize {
        self.buckets.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty()
    }

    fn evict_oldest(&mut self) {
        let oldest = self.buckets.iter().min_by_key(|(_, b)| b.at);
        if let Some(key) = oldest.map(|(k, _)| k.clone()) {
            self.buckets.remove(&key);
        }
    }
}

#[cfg(test)]
#[path = "event_spam_tests.rs"]
mod tests;
