//! Runtime calls in flight, counted by the pod workers for other tasks.
//! It lives beside the API adapter: its main readers are the API writers
//! (mirror pods, statuses, Events), which may not use `cri`.
//!
//! Two counts are kept, each for a reason of its own:
//! - **StopPodSandbox** (`sandbox_stops`), for the stats collector. CRI-O
//!   1.32 holds a `shareProcessNamespace` pod's StopPodSandbox for as long
//!   as the call's deadline allows (2 minutes), and a ListPodSandboxStats
//!   sent meanwhile makes every RemoveContainer and RemovePodSandbox sent
//!   after it wait until that stop ends (docs/runtimes.md). The kubelet
//!   takes pod stats from cAdvisor and never sends the call; the collector
//!   leaves it out of a round while any sandbox stops.
//! - **Pod starts** (`pod_starts`: a pod worker's pass that runs a sandbox
//!   or starts containers, from its first action to its last, the image
//!   pulls and postStart hooks in it included), for the API writers. The runtime,
//!   its shims and the API server share the node's cores; a mirror pod, a
//!   status patch or an Event written during a start takes CPU the start
//!   needs, so those writers wait until no start is in flight, for at most
//!   [`START_YIELD`], and then write everything that is due at once.
//!
//! Invariant: a count is the number of its live [`CountedCall`] guards.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;

/// How long an API writer waits for the pod starts in flight to end. A
/// burst of starts keeps some in flight for seconds; the writers then go
/// ahead once a second, each time with what the second gathered.
pub const START_YIELD: Duration = Duration::from_secs(1);

/// One kind of call in flight, shared by those who make the calls and
/// those who read the count.
#[derive(Debug, Clone)]
pub struct CallCount(Arc<watch::Sender<usize>>);

impl Default for CallCount {
    fn default() -> CallCount {
        CallCount(Arc::new(watch::Sender::new(0)))
    }
}

impl CallCount {
    /// Counts one call until the guard is dropped.
    pub fn begin(&self) -> CountedCall {
        self.0.send_modify(|n| *n += 1);
        CountedCall(Arc::clone(&self.0))
    }

    /// Whether any call is in flight now.
    pub fn any(&self) -> bool {
        *self.0.borrow() > 0
    }

    /// Waits until no call is in flight, or `at_most` has passed; answers
    /// whether none is.
    pub async fn settled(&self, at_most: Duration) -> bool {
        let mut rx = self.0.subscribe();
        tokio::time::timeout(at_most, rx.wait_for(|n| *n == 0))
            .await
            .is_ok()
    }
}

/// One call in flight.
#[derive(Debug)]
pub struct CountedCall(Arc<watch::Sender<usize>>);

impl Drop for CountedCall {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n -= 1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_call_until_its_guard_goes() {
        let calls = CallCount::default();
        assert!(!calls.any());
        let a = calls.begin();
        let b = calls.clone().begin();
        assert!(calls.any());
        drop(a);
        assert!(calls.any());
        drop(b);
        assert!(!calls.any());
    }

    #[tokio::test(start_paused = true)]
    async fn settled_waits_for_the_last_call_or_gives_up_at_the_limit() {
        let calls = CallCount::default();
        let t0 = tokio::time::Instant::now();
        assert!(calls.settled(START_YIELD).await, "nothing in flight");
        assert_eq!(t0.elapsed(), Duration::ZERO);

        let held = calls.begin();
        assert!(!calls.settled(START_YIELD).await, "a call held throughout");
        assert_eq!(t0.elapsed(), START_YIELD);

        let t1 = tokio::time::Instant::now();
        let ends = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(300)).await;
            drop(held);
        });
        assert!(calls.settled(START_YIELD).await);
        assert_eq!(t1.elapsed(), Duration::from_millis(300));
        ends.await.unwrap();
    }
}
