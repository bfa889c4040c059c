//! Crash back-off, as the kubelet keeps it per container: the first restart
//! is immediate, then the wait doubles from 10 s up to 300 s, and an entry
//! untouched for twice the maximum (10 min) starts over.
//!
//! Invariant: pure; every method takes the current time (nanoseconds since
//! the Unix epoch, the unit CRI timestamps use).

use std::collections::HashMap;
use std::time::Duration;

pub const INITIAL_BACKOFF: Duration = Duration::from_secs(10);
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    delay: Duration,
    last_update: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackOff {
    initial: Duration,
    max: Duration,
    entries: HashMap<String, Entry>,
}

impl Default for BackOff {
    fn default() -> Self {
        BackOff::new(INITIAL_BACKOFF, MAX_BACKOFF)
    }
}

fn nanos(d: Duration) -> i64 {
    i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
}

impl BackOff {
    pub fn new(initial: Duration, max: Duration) -> Self {
        BackOff {
            initial,
            max,
            entries: HashMap::new(),
        }
    }

    fn expired(&self, e: &Entry, now: i64) -> bool {
        now.saturating_sub(e.last_update) > nanos(self.max) * 2
    }

    /// Records a restart of `key` at `now`: the next wait doubles (or
    /// starts at the initial delay when the entry is new or expired).
    pub fn next(&mut self, key: &str, now: i64) {
        let delay = match self.entries.get(key) {
            Some(e) if !self.expired(e, now) => (e.delay * 2).min(self.max),
            _ => self.initial,
        };
        self.entries.insert(
            key.to_string(),
            Entry {
                delay,
                last_update: now,
            },
        );
    }

    /// When `key`, which last finished at `finished_at`, may restart; `None`
    /// when it may restart now.
    pub fn blocked_until(&self, key: &str, finished_at: i64, now: i64) -> Option<i64> {
        let e = self.entries.get(key)?;
        if self.expired(e, now) {
            return None;
        }
        let until = finished_at.saturating_add(nanos(e.delay));
        (now < until).then_some(until)
    }

    /// The current wait of `key`, if it has one.
    pub fn delay(&self, key: &str) -> Option<Duration> {
        self.entries.get(key).map(|e| e.delay)
    }

    /// Forgets `key` (its container or pod is gone).
    pub fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Drops entries that have expired at `now`, so the map does not grow.
    pub fn gc(&mut self, now: i64) {
        let limit = nanos(self.max) * 2;
        self.entries
            .retain(|_, e| now.saturating_sub(e.last_update) <= limit);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn first_restart_is_free_then_the_wait_doubles_to_the_cap() {
        let mut b = BackOff::default();
        assert_eq!(b.blocked_until("c", 0, 0), None);
        let mut now = 100 * S;
        let mut want = 10;
        for _ in 0..8 {
            b.next("c", now);
            assert_eq!(b.delay("c"), Some(Duration::from_secs(want)));
            // Crashed right away: blocked for exactly the delay after it finished.
            assert_eq!(
                b.blocked_until("c", now, now + S),
                Some(now + want as i64 * S)
            );
            now += want as i64 * S;
            want = (want * 2).min(300);
        }
        assert_eq!(b.delay("c"), Some(MAX_BACKOFF));
    }

    #[test]
    fn wait_is_measured_from_when_the_container_finished() {
        let mut b = BackOff::default();
        b.next("c", 0);
        // Finished 4 s after the restart, asked at 10 s: blocked until 14 s.
        assert_eq!(b.blocked_until("c", 4 * S, 10 * S), Some(14 * S));
        assert_eq!(b.blocked_until("c", 4 * S, 14 * S), None);
    }

    #[test]
    fn ten_minutes_without_a_restart_start_over() {
        let mut b = BackOff::default();
        for i in 0..5 {
            b.next("c", i * S);
        }
        assert_eq!(b.delay("c"), Some(Duration::from_secs(160)));
        let later = 4 * S + 601 * S;
        assert_eq!(b.blocked_until("c", later - S, later), None);
        b.next("c", later);
        assert_eq!(b.delay("c"), Some(INITIAL_BACKOFF));
    }

    #[test]
    fn keys_are_independent_and_gc_drops_expired() {
        let mut b = BackOff::default();
        b.next("a", 0);
        b.next("b", 700 * S);
        b.gc(700 * S);
        assert_eq!(b.delay("a"), None);
        assert_eq!(b.delay("b"), Some(INITIAL_BACKOFF));
        b.reset("b");
        assert_eq!(b.delay("b"), None);
    }
}
