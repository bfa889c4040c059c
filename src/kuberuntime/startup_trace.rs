//! A pod's start-up, step by step (the kubelet's pod startup latency
//! tracker, `pkg/kubelet/util/pod_startup_latency_tracker.go`, in finer
//! steps): when each phase was first reached, from the manifest seen to the
//! Running status reported, and how much of each step was spent waiting on
//! the runtime, or queued for a slot of `--max-parallel-runtime-mutations`.
//! The rest of a step is crilet's own time.
//!
//! Invariant: pure (the driver passes the times); a phase is kept at its
//! first mark only, and a mark is never earlier than the one before it, so
//! every step's duration is non-negative and the steps add up to the total.

use std::fmt;
use std::time::Duration;

/// The phases of a start, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Phase {
    /// The file or URL source read the manifest (its `config.seen`).
    Seen,
    /// The pod's worker took the admitted pod up.
    Admitted,
    /// RunPodSandbox asked.
    SandboxRequested,
    /// RunPodSandbox answered.
    SandboxReady,
    /// The first container's image resolved (ImageStatus, or its pull).
    ImageResolved,
    /// CreateContainer asked (the config is built, the files made).
    CreateRequested,
    Created,
    StartRequested,
    Started,
    /// A status with every container running was generated.
    StatusSeen,
    /// That status was written where the mirror pod, `crilet pods` and
    /// stats read it.
    Reported,
}

impl Phase {
    pub fn name(self) -> &'static str {
        match self {
            Phase::Seen => "seen",
            Phase::Admitted => "admitted",
            Phase::SandboxRequested => "sandbox_requested",
            Phase::SandboxReady => "sandbox_ready",
            Phase::ImageResolved => "image_resolved",
            Phase::CreateRequested => "create_requested",
            Phase::Created => "created",
            Phase::StartRequested => "start_requested",
            Phase::Started => "started",
            Phase::StatusSeen => "status_seen",
            Phase::Reported => "reported",
        }
    }
}

/// A task's waits so far: in runtime calls, and queued for a mutation slot.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Waits {
    pub runtime: Duration,
    pub queued: Duration,
}

impl Waits {
    fn max(self, other: Waits) -> Waits {
        Waits {
            runtime: self.runtime.max(other.runtime),
            queued: self.queued.max(other.queued),
        }
    }
}

/// One phase reached: when (unix nanoseconds) and the wait clocks then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mark {
    phase: Phase,
    at: i64,
    waits: Waits,
}

/// One pod's start-up so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StartupTrace {
    marks: Vec<Mark>,
}

/// One step between two phases reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub to: Phase,
    pub took: Duration,
    /// The part of `took` waited on the runtime.
    pub runtime: Duration,
    /// The part of `took` queued for a mutation slot.
    pub queued: Duration,
}

impl StartupTrace {
    /// Records `phase` at `at` (unix ns) with the wait clocks at `waits`,
    /// unless the phase was reached already. A time before the last mark
    /// (clocks of two tasks) is taken as that mark's.
    pub fn mark(&mut self, phase: Phase, at: i64, waits: Waits) {
        if self.reached(phase) {
            return;
        }
        let (at, waits) = match self.marks.last() {
            Some(last) => (at.max(last.at), waits.max(last.waits)),
            None => (at, waits),
        };
        self.marks.push(Mark { phase, at, waits });
    }

    pub fn reached(&self, phase: Phase) -> bool {
        self.marks.iter().any(|m| m.phase == phase)
    }

    /// True once the Running status is reported: the trace is complete.
    pub fn is_done(&self) -> bool {
        self.reached(Phase::Reported)
    }

    /// The steps between consecutive marks.
    pub fn steps(&self) -> Vec<Step> {
        self.marks
            .windows(2)
            .map(|w| {
                let took = Duration::from_nanos(w[1].at.saturating_sub(w[0].at) as u64);
                // Each clock is capped by the wall time of the step, the
                // queue by what the runtime left of it.
                let runtime = (w[1].waits.runtime.saturating_sub(w[0].waits.runtime)).min(took);
                let queued =
                    (w[1].waits.queued.saturating_sub(w[0].waits.queued)).min(took - runtime);
                Step {
                    to: w[1].phase,
                    took,
                    runtime,
                    queued,
                }
            })
            .collect()
    }

    /// The whole trace as one step: from the first mark to the last, and
    /// the runtime's and the queue's shares of it.
    pub fn totals(&self) -> Step {
        let zero = Step {
            to: self.marks.last().map_or(Phase::Seen, |m| m.phase),
            took: Duration::ZERO,
            runtime: Duration::ZERO,
            queued: Duration::ZERO,
        };
        self.steps().iter().fold(zero, |t, s| Step {
            took: t.took + s.took,
            runtime: t.runtime + s.runtime,
            queued: t.queued + s.queued,
            ..t
        })
    }
}

/// `admitted=+0.412/0.000/0.000 sandbox_requested=+1.250/0.310/0.000 ...`:
/// each phase's time since the first mark, and the runtime's and the
/// queue's shares of its step, in ms; what the benches parse and an
/// operator reads.
impl fmt::Display for StartupTrace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut since = Duration::ZERO;
        for (i, step) in self.steps().iter().enumerate() {
            since += step.took;
            let sep = if i == 0 { "" } else { " " };
            let (name, at, rt, q) = (step.to.name(), ms(since), ms(step.runtime), ms(step.queued));
            write!(f, "{sep}{name}=+{at:.3}/{rt:.3}/{q:.3}")?;
        }
        Ok(())
    }
}

/// One step of a trace's text form: the phase's name, ms since the first
/// mark, and the runtime's and the queue's ms of the step to it.
#[derive(Debug, Clone, PartialEq)]
pub struct ParsedStep {
    pub phase: String,
    pub at_ms: f64,
    pub runtime_ms: f64,
    pub queued_ms: f64,
}

/// The steps of a trace's text form back, in order; what is not a step is
/// skipped (the benches read crilet's log with it).
pub fn parse_steps(text: &str) -> Vec<ParsedStep> {
    text.split_whitespace()
        .filter_map(|s| {
            let (name, v) = s.split_once("=+")?;
            let mut n = v.split('/').map(str::parse::<f64>);
            Some(ParsedStep {
                phase: name.to_string(),
                at_ms: n.next()?.ok()?,
                runtime_ms: n.next()?.ok()?,
                queued_ms: n.next()?.ok()?,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: i64 = 1_000_000;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Waits of `runtime` and `queued` ms.
    fn w(runtime: u64, queued: u64) -> Waits {
        Waits {
            runtime: ms(runtime),
            queued: ms(queued),
        }
    }

    fn totals(t: &StartupTrace) -> (Duration, Duration, Duration) {
        let s = t.totals();
        (s.took, s.runtime, s.queued)
    }

    #[test]
    fn steps_split_each_interval_between_the_runtime_the_queue_and_crilet() {
        let mut t = StartupTrace::default();
        t.mark(Phase::Seen, 100 * MS, w(0, 0));
        t.mark(Phase::Admitted, 101 * MS, w(0, 0));
        t.mark(Phase::SandboxRequested, 105 * MS, w(3, 0)); // observe: 3 of 4 ms
        t.mark(Phase::SandboxReady, 175 * MS, w(63, 10)); // 10 ms for a slot
        let steps = t.steps();
        assert_eq!(steps.len(), 3);
        let s = steps[1];
        assert_eq!(
            (s.to, s.took, s.runtime, s.queued),
            (Phase::SandboxRequested, ms(4), ms(3), ms(0))
        );
        let s = steps[2];
        assert_eq!((s.took, s.runtime, s.queued), (ms(70), ms(60), ms(10)));
        assert_eq!(totals(&t), (ms(75), ms(63), ms(10)));
        assert_eq!(
            t.to_string(),
            "admitted=+1.000/0.000/0.000 sandbox_requested=+5.000/3.000/0.000 \
             sandbox_ready=+75.000/60.000/10.000"
        );
    }

    #[test]
    fn a_phase_counts_at_its_first_mark_only() {
        let mut t = StartupTrace::default();
        t.mark(Phase::Seen, 0, w(0, 0));
        t.mark(Phase::Created, 10 * MS, w(5, 0));
        t.mark(Phase::Created, 50 * MS, w(40, 0)); // a second container
        assert_eq!(totals(&t), (ms(10), ms(5), ms(0)));
        assert!(!t.is_done());
        t.mark(Phase::Reported, 60 * MS, w(40, 0));
        assert!(t.is_done());
    }

    #[test]
    fn marks_never_go_back_and_the_waits_never_exceed_their_step() {
        let mut t = StartupTrace::default();
        t.mark(Phase::Seen, 10 * MS, w(0, 0));
        // The source's clock ahead of the worker's by a little.
        t.mark(Phase::Admitted, 9 * MS, w(0, 0));
        t.mark(Phase::SandboxRequested, 12 * MS, w(1, 50)); // clocks read late
        t.mark(Phase::SandboxReady, 13 * MS, w(0, 0)); // a clock going back
        let steps = t.steps();
        assert_eq!(steps[0].took, Duration::ZERO);
        assert_eq!(
            (steps[1].took, steps[1].runtime, steps[1].queued),
            (ms(2), ms(1), ms(1))
        );
        assert_eq!((steps[2].runtime, steps[2].queued), (ms(0), ms(0)));
    }

    #[test]
    fn the_text_form_reads_back() {
        let mut t = StartupTrace::default();
        t.mark(Phase::Seen, 0, w(0, 0));
        t.mark(Phase::Admitted, MS / 2, w(0, 0));
        t.mark(Phase::SandboxReady, 70 * MS, w(66, 2));
        let steps = parse_steps(&format!("{t} trailing=words bad=+1/x/0"));
        let step = |phase: &str, at_ms, runtime_ms, queued_ms| ParsedStep {
            phase: phase.into(),
            at_ms,
            runtime_ms,
            queued_ms,
        };
        assert_eq!(
            steps,
            vec![
                step("admitted", 0.5, 0.0, 0.0),
                step("sandbox_ready", 70.0, 66.0, 2.0)
            ]
        );
    }

    #[test]
    fn an_empty_or_single_mark_trace_has_no_steps() {
        let mut t = StartupTrace::default();
        assert_eq!(t.to_string(), "");
        t.mark(Phase::Seen, 5, w(0, 0));
        assert!(t.steps().is_empty());
        assert_eq!(totals(&t), (Duration::ZERO, Duration::ZERO, Duration::ZERO));
    }
}
