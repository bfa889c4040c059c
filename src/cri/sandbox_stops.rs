//! The StopPodSandbox calls in flight, counted for the stats collector.
//!
//! Why: CRI-O 1.32 holds a `shareProcessNamespace` pod's StopPodSandbox for
//! as long as the call's deadline allows (2 minutes), and a
//! ListPodSandboxStats sent meanwhile makes every RemoveContainer and
//! RemovePodSandbox sent after it wait until that stop ends (docs/runtimes.md).
//! The kubelet takes pod stats from cAdvisor and never sends the call; the
//! collector leaves it out of a round while any sandbox stops.
//!
//! Invariant: the count is the number of live [`SandboxStop`] guards.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Shared by the pod workers, which stop sandboxes, and the collector.
#[derive(Debug, Clone, Default)]
pub struct SandboxStops(Arc<AtomicUsize>);

impl SandboxStops {
    /// Counts one StopPodSandbox until the guard is dropped.
    pub fn begin(&self) -> SandboxStop {
        self.0.fetch_add(1, Ordering::SeqCst);
        SandboxStop(Arc::clone(&self.0))
    }

    /// Whether any sandbox is being stopped now.
    pub fn any(&self) -> bool {
        self.0.load(Ordering::SeqCst) > 0
    }
}

/// One StopPodSandbox in flight.
#[derive(Debug)]
pub struct SandboxStop(Arc<AtomicUsize>);

impl Drop for SandboxStop {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_each_stop_until_its_guard_goes() {
        let stops = SandboxStops::default();
        assert!(!stops.any());
        let a = stops.begin();
        let b = stops.clone().begin();
        assert!(stops.any());
        drop(a);
        assert!(stops.any());
        drop(b);
        assert!(!stops.any());
    }
}
