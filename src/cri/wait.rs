//! Time a task spends waiting on the runtime: the wall time during which at
//! least one of its CRI calls was in flight, and apart from it the time its
//! mutating calls queued for a slot of `--max-parallel-runtime-mutations`
//! (`BoundedRuntime`). A pod worker runs inside [`scope`], and its start-up
//! trace charges each step's time to the runtime, to that queue, or to
//! crilet's own code (the rest).
//!
//! Invariant: overlapping calls of one task (the sandbox's status read beside
//! the image's) count once, so the clock never runs faster than the wall; a
//! call dropped before it returns (a cancelled sync) stops counting then.
//! Calls outside a scope, or from tasks the scoped task spawned, are not
//! counted.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

tokio::task_local! {
    static RUNTIME_WAIT: Arc<RuntimeWait>;
}

/// One task's clocks of runtime waits: in calls, and queued for a slot.
#[derive(Debug, Default)]
pub struct RuntimeWait {
    state: Mutex<WaitState>,
    queued: Mutex<WaitState>,
}

/// The pure half: calls in flight, since when, and the total of the
/// intervals already closed.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
struct WaitState {
    in_flight: u32,
    since: Option<Instant>,
    total: Duration,
}

impl WaitState {
    fn enter(&mut self, now: Instant) {
        if self.in_flight == 0 {
            self.since = Some(now);
        }
        self.in_flight += 1;
    }

    fn exit(&mut self, now: Instant) {
        self.in_flight = self.in_flight.saturating_sub(1);
        if self.in_flight == 0 {
            if let Some(since) = self.since.take() {
                self.total += now.saturating_duration_since(since);
            }
        }
    }

    fn total_at(&self, now: Instant) -> Duration {
        self.total
            + self
                .since
                .map_or(Duration::ZERO, |s| now.saturating_duration_since(s))
    }
}

impl RuntimeWait {
    /// The time waited on the runtime so far, a call still in flight
    /// included up to now.
    pub fn total(&self) -> Duration {
        lock(&self.state).total_at(Instant::now())
    }

    /// The time queued for a mutation slot so far.
    pub fn queued(&self) -> Duration {
        lock(&self.queued).total_at(Instant::now())
    }
}

fn lock(m: &Mutex<WaitState>) -> std::sync::MutexGuard<'_, WaitState> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Runs `fut` with its CRI calls counted on `wait`.
pub async fn scope<F: Future>(wait: Arc<RuntimeWait>, fut: F) -> F::Output {
    RUNTIME_WAIT.scope(wait, fut).await
}

/// Held for as long as one CRI call is in flight (the client's call
/// wrapper takes it) or queued for a slot (`BoundedRuntime`); stops
/// counting when dropped.
pub(crate) struct InFlight(Option<Arc<RuntimeWait>>, bool);

impl InFlight {
    /// A CRI call.
    pub(crate) fn enter() -> InFlight {
        Self::start(false)
    }

    /// A wait for a mutation slot.
    pub(crate) fn queue() -> InFlight {
        Self::start(true)
    }

    fn start(queued: bool) -> InFlight {
        let wait = RUNTIME_WAIT.try_with(Arc::clone).ok();
        if let Some(w) = &wait {
            lock(w.clock(queued)).enter(Instant::now());
        }
        InFlight(wait, queued)
    }
}

impl RuntimeWait {
    fn clock(&self, queued: bool) -> &Mutex<WaitState> {
        if queued { &self.queued } else { &self.state }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if let Some(w) = &self.0 {
            lock(w.clock(self.1)).exit(Instant::now());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn overlapping_calls_count_once_and_gaps_not_at_all() {
        let t0 = Instant::now();
        let mut s = WaitState::default();
        s.enter(t0);
        s.enter(t0 + ms(2)); // a second read beside the first
        s.exit(t0 + ms(5));
        assert_eq!(s.total_at(t0 + ms(6)), ms(6), "still one call in flight");
        s.exit(t0 + ms(7));
        assert_eq!(
            s.total_at(t0 + ms(20)),
            ms(7),
            "the gap after is not the runtime's"
        );
        s.enter(t0 + ms(30));
        s.exit(t0 + ms(33));
        assert_eq!(s.total_at(t0 + ms(40)), ms(10));
    }

    #[test]
    fn an_unmatched_exit_does_not_underflow() {
        let t0 = Instant::now();
        let mut s = WaitState::default();
        s.exit(t0);
        assert_eq!(s, WaitState::default());
    }

    #[tokio::test]
    async fn counts_only_inside_the_scope() {
        let wait = Arc::new(RuntimeWait::default());
        drop(InFlight::enter()); // outside: nothing to count on
        scope(wait.clone(), async {
            let call = InFlight::enter();
            std::thread::sleep(ms(3));
            drop(call);
        })
        .await;
        let total = wait.total();
        assert!(total >= ms(3), "{total:?}");
        std::thread::sleep(ms(3));
        assert_eq!(wait.total(), total, "nothing in flight after the scope");
        assert_eq!(wait.queued(), Duration::ZERO, "a call is not a queue");
    }

    #[tokio::test]
    async fn a_queued_call_counts_on_its_own_clock() {
        let wait = Arc::new(RuntimeWait::default());
        scope(wait.clone(), async {
            let queued = InFlight::queue();
            std::thread::sleep(ms(2));
            drop(queued);
        })
        .await;
        assert!(wait.queued() >= ms(2));
        assert_eq!(wait.total(), Duration::ZERO);
    }
}
