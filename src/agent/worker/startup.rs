//! The pod worker's start-up trace (`kuberuntime/startup_trace.rs`): marked
//! at each step of a new pod's first start, and logged once, when its
//! Running status is in the status cache, as one line under the target
//! `crilet::pod_startup` at debug level
//! (`CRILET_LOG=info,crilet::pod_startup=debug`). The runtime's share of
//! each step is the worker task's runtime clock (`cri/wait.rs`).
//!
//! Invariant: only a start this worker makes is traced: a pod whose sandbox
//! was already there (crilet restarted, the pod adopted) is not, and the
//! trace is dropped once logged or once the pod ends without running.

use super::*;
use crate::kuberuntime::startup_trace::{Phase, StartupTrace, Waits};

impl Worker {
    /// Opens the trace at the worker's first sync: the manifest was seen at
    /// the pod's `config.seen`, and the worker takes it up now.
    pub(super) fn begin_trace(&mut self, pod: &Pod) {
        let now = now_nanos();
        let seen = pod::annotation(pod, pod::CONFIG_SEEN_ANNOTATION)
            .and_then(|s| s.parse::<jiff::Timestamp>().ok())
            .map_or(now, |t| t.as_nanosecond() as i64);
        let mut trace = StartupTrace::default();
        trace.mark(Phase::Seen, seen.min(now), Waits::default());
        trace.mark(Phase::Admitted, now, self.waits());
        self.trace = Some(Box::new(trace));
    }

    pub(super) fn mark(&mut self, phase: Phase) {
        let waits = self.waits();
        if let Some(trace) = &mut self.trace {
            trace.mark(phase, now_nanos(), waits);
        }
    }

    /// This task's wait clocks now.
    pub(super) fn waits(&self) -> Waits {
        Waits {
            runtime: self.runtime_wait.total(),
            queued: self.runtime_wait.queued(),
        }
    }

    /// After a status was written: marks and logs the trace when the pod is
    /// Running; drops it when the pod will not start here.
    pub(super) fn end_trace(&mut self, pod: &Pod, phase: &str, seen_at: i64, then: Waits) {
        let waits = self.waits();
        let Some(trace) = &mut self.trace else {
            return;
        };
        if !trace.reached(Phase::SandboxRequested) || matches!(phase, "Succeeded" | "Failed") {
            self.trace = None;
            return;
        }
        if phase != "Running" {
            return;
        }
        trace.mark(Phase::StatusSeen, seen_at, then);
        trace.mark(Phase::Reported, now_nanos(), waits);
        let total = trace.totals();
        let ms = |d: Duration| (d.as_secs_f64() * 1e6).round() / 1e3;
        tracing::debug!(
            target: "crilet::pod_startup",
            pod = %pod::full_name(pod),
            uid = %pod::uid(pod),
            total_ms = ms(total.took),
            runtime_ms = ms(total.runtime),
            queued_ms = ms(total.queued),
            own_ms = ms(total.took - total.runtime - total.queued),
            steps = %trace,
            "pod startup trace"
        );
        self.trace = None;
    }
}
