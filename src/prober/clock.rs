//! Where the prober reads the time. Probe tasks compute each wait from
//! `now` and sleep on tokio's timer; the agent reads the wall clock
//! ([`SystemClock`]), tests a clock that moves with tokio's paused time
//! ([`TokioClock`]), so `tokio::time::advance` moves both together.
//!
//! Invariant: a [`Clock`] only reads; nothing here sleeps.

use jiff::Timestamp;

/// The prober's source of `now`.
pub trait Clock: Send + Sync {
    fn now(&self) -> Timestamp;
}

/// The wall clock: what container start times (initialDelaySeconds) are
/// compared with.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// `start` plus the time tokio's clock has moved since this was made: under
/// `tokio::time::pause()` it moves only when the test (or auto-advance)
/// moves tokio's time. Make it inside the runtime whose time it follows.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    start: Timestamp,
    base: tokio::time::Instant,
}

impl TokioClock {
    pub fn new(start: Timestamp) -> Self {
        TokioClock {
            start,
            base: tokio::time::Instant::now(),
        }
    }
}

impl Clock for TokioClock {
    fn now(&self) -> Timestamp {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.base);
        self.start.checked_add(elapsed).unwrap_or(Timestamp::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_moves_only_with_tokio_time() {
        let start = Timestamp::from_second(1_700_000_000).unwrap();
        let clock = TokioClock::new(start);
        assert_eq!(clock.now(), start);
        tokio::time::advance(Duration::from_millis(10_500)).await;
        let moved = clock.now().duration_since(start);
        assert_eq!(moved, jiff::SignedDuration::from_millis(10_500));
    }
}
