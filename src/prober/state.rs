//! The state machine of one probe worker (the kubelet's
//! `pkg/kubelet/prober/worker.go`), one per (pod UID, container name, probe
//! type). Part of [`super`].
//!
//! Invariant: deterministic. Time arrives as `now`, the start jitter as a
//! fraction the caller drew; [`ProbeState::tick`] says whether to run the
//! probe and [`ProbeState::record`] takes what the run found. The standing
//! [`ProbeResult`] changes only on a new container instance (to the initial
//! value), on a container that is not running (to Failure), and when a run
//! of identical outcomes reaches its threshold.
//!
//! Transitions, in the order [`ProbeState::tick`] checks them:
//!
//! | # | observed at a due tick                          | effect                           | returns                 |
//! |---|-------------------------------------------------|----------------------------------|-------------------------|
//! | 1 | no container with an ID yet                     | none                             | `Skip(NoContainer)`     |
//! | 2 | a container ID not seen before                  | result = initial, counters and hold cleared, error log re-armed | (continues) |
//! | 3 | on hold (liveness/startup failed this instance) | none                             | `Hold`                  |
//! | 4 | container not running                           | result = Failure                 | `Skip(NotRunning)`      |
//! | 5 | less than initialDelaySeconds since startedAt   | none                             | `Skip(InitialDelay)`    |
//! | 6 | startup probe, container already `started`      | none (idles until a restart)     | `Skip(Started)`         |
//! | 7 | liveness/readiness, container not `started`     | none                             | `Skip(NotStarted)`      |
//! | 8 | otherwise                                       | awaits an outcome                | `Probe`                 |
//!
//! Then [`ProbeState::record`]: Success and Warning count as success, Failure
//! as failure; a run of identical outcomes sets the result when it reaches
//! successThreshold / failureThreshold; a liveness or startup Failure so set
//! puts the worker on hold. An Error changes nothing.
//!
//! One deliberate difference from the kubelet: a new container instance also
//! clears the run of identical outcomes (the kubelet keeps it across
//! instances, so a restarted container could become ready on fewer
//! successes than successThreshold).

use std::time::Duration;

use jiff::Timestamp;

use super::{ContainerProbeResults, ProbeOutcome, ProbeReading, ProbeResult, ProbeSpec, ProbeType};
use crate::cri::types::{ContainerState, ContainerStatus};

/// The container a probe aims at, as observed at one tick: the newest
/// runtime container of that name (the one the pod status reports).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeTarget {
    /// Bare CRI container ID.
    pub container_id: String,
    pub running: bool,
    /// When it started running; `None` if the runtime did not say.
    pub started_at: Option<Timestamp>,
    /// The status's `started`: running and its startup probe (if any) has
    /// succeeded for this instance (see [`super::container_readiness`]).
    pub started: bool,
}

impl ProbeTarget {
    /// The newest runtime container named `name` (highest attempt, then
    /// newest), with `started` computed from `startup` (the container's
    /// startup probe reading; `None` if it has no startup probe).
    pub fn from_runtime(
        containers: &[ContainerStatus],
        name: &str,
        startup: Option<&ProbeReading>,
    ) -> Option<ProbeTarget> {
        let c = containers
            .iter()
            .filter(|c| c.metadata.name == name && !c.id.is_empty())
            .max_by_key(|c| (c.metadata.attempt, c.created_at))?;
        let running = c.state == ContainerState::Running;
        let probes = ContainerProbeResults {
            readiness: None,
            startup: startup.cloned(),
        };
        Some(ProbeTarget {
            container_id: c.id.clone(),
            running,
            started_at: (c.started_at > 0)
                .then(|| Timestamp::from_nanosecond(i128::from(c.started_at)).ok())
                .flatten(),
            started: super::container_readiness(running, &c.id, Some(&probes)).started,
        })
    }
}

/// What to do at a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tick {
    /// Run the probe now against the target's container, then call
    /// [`ProbeState::record`] with the outcome.
    Probe,
    /// Nothing to run at this tick.
    Skip(SkipReason),
    /// A liveness or startup failure was recorded for this container
    /// instance: nothing runs until a new container ID appears (probing a
    /// container that is being killed only races its stop).
    Hold,
}

/// Why a tick runs nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SkipReason {
    /// Before [`ProbeState::next_due`] and not triggered.
    NotDue,
    /// No container of that name has been created (or it was removed).
    NoContainer,
    /// The container is not running; the result is now Failure. The driver
    /// may end the worker if the container will not be restarted
    /// (terminated with restartPolicy Never), as the kubelet does.
    NotRunning,
    /// Within initialDelaySeconds of the container's startedAt.
    InitialDelay,
    /// A startup probe whose container has started: idle until a restart.
    Started,
    /// A liveness or readiness probe whose container has not started yet
    /// (its startup probe has not succeeded).
    NotStarted,
}

/// What [`ProbeState::record`] did with an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recorded {
    /// The standing result after this outcome.
    pub result: ProbeResult,
    /// The standing result changed. For liveness and startup a change to
    /// Failure means: kill the container (restart per restartPolicy).
    pub changed: bool,
    /// An Error outcome that is the first for this container instance: log
    /// it (with its reason). Later errors of the same instance are quiet.
    pub log_error: bool,
}

/// One probe worker's state. See the module doc for the transitions.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeState {
    probe_type: ProbeType,
    initial_delay: Duration,
    period: Duration,
    success_threshold: u32,
    failure_threshold: u32,
    next_due: Timestamp,
    triggered: bool,
    /// The container instance the result is about.
    container_id: Option<String>,
    result: ProbeResult,
    /// The last outcome (as a result) and how many in a row.
    last: Option<ProbeResult>,
    run: u32,
    on_hold: bool,
    error_logged: bool,
    /// A `Probe` tick is waiting for its outcome.
    awaiting: bool,
}

impl ProbeState {
    /// A worker started at `now`. Its first tick is due at once, unless the
    /// agent started less than one period before `now`: then it waits
    /// `jitter_fraction` (drawn by the caller from `0.0..1.0`) of a period,
    /// so that the probes of every pod found at start-up do not all run in
    /// the same instant. Later ticks follow every period.
    pub fn new(
        probe_type: ProbeType,
        spec: &ProbeSpec,
        now: Timestamp,
        agent_started: Timestamp,
        jitter_fraction: f64,
    ) -> ProbeState {
        let since_start = now.duration_since(agent_started);
        let recent = since_start < jiff::SignedDuration::try_from(spec.period).unwrap_or_default();
        let fraction = if jitter_fraction.is_finite() {
            jitter_fraction.clamp(0.0, 1.0)
        } else {
            0.0
        };
        let jitter = if recent {
            spec.period.mul_f64(fraction)
        } else {
            Duration::ZERO
        };
        ProbeState {
            probe_type,
            initial_delay: spec.initial_delay,
            period: spec.period,
            success_threshold: spec.success_threshold.max(1),
            failure_threshold: spec.failure_threshold.max(1),
            next_due: add(now, jitter),
            triggered: false,
            container_id: None,
            result: probe_type.initial_result(),
            last: None,
            run: 0,
            on_hold: false,
            error_logged: false,
            awaiting: false,
        }
    }

    pub fn probe_type(&self) -> ProbeType {
        self.probe_type
    }

    /// When the next tick is due; the driver sleeps until then.
    pub fn next_due(&self) -> Timestamp {
        self.next_due
    }

    /// Makes the next tick due whatever the time, once, without moving the
    /// period's schedule (the kubelet's manual trigger, which it pulls for a
    /// readiness probe that has no result yet when the status is updated).
    pub fn trigger(&mut self) {
        self.triggered = true;
    }

    /// The standing result (the initial one until something is decided).
    pub fn result(&self) -> ProbeResult {
        self.result
    }

    /// The container instance the result is about, once one was seen.
    pub fn container_id(&self) -> Option<&str> {
        self.container_id.as_deref()
    }

    /// True while on hold after a liveness or startup failure.
    pub fn on_hold(&self) -> bool {
        self.on_hold
    }

    /// The result and the instance it is about, for
    /// [`super::ContainerProbeResults`].
    pub fn reading(&self) -> ProbeReading {
        ProbeReading {
            container_id: self.container_id.clone(),
            result: self.result,
        }
    }

    /// One tick at `now` with the observed container (`None`: none has been
    /// created). Returns what to do; see the module doc's table. The result
    /// may change here (rows 2 and 4): compare [`Self::reading`] before and
    /// after when that matters (readiness and startup feed the status).
    pub fn tick(&mut self, now: Timestamp, target: Option<&ProbeTarget>) -> Tick {
        // The next tick is never more than a period (plus the start-up
        // jitter, itself under a period) ahead: further means the wall
        // clock stepped back, and the schedule restarts from `now` rather
        // than hold every probe for the length of the step.
        let ahead = self.next_due.duration_since(now);
        if ahead > jiff::SignedDuration::try_from(self.period.saturating_mul(2)).unwrap_or_default()
        {
            self.next_due = now;
        }
        let scheduled = now >= self.next_due;
        if !scheduled && !self.triggered {
            return Tick::Skip(SkipReason::NotDue);
        }
        self.triggered = false;
        if scheduled {
            self.advance(now);
        }
        self.awaiting = false;
        let Some(target) = target.filter(|t| !t.container_id.is_empty()) else {
            return Tick::Skip(SkipReason::NoContainer);
        };
        if self.container_id.as_deref() != Some(target.container_id.as_str()) {
            self.container_id = Some(target.container_id.clone());
            self.result = self.probe_type.initial_result();
            self.last = None;
            self.run = 0;
            self.on_hold = false;
            self.error_logged = false;
        }
        if self.on_hold {
            return Tick::Hold;
        }
        if !target.running {
            self.result = ProbeResult::Failure;
            return Tick::Skip(SkipReason::NotRunning);
        }
        if let Some(started_at) = target.started_at {
            // Whole seconds, truncated, as the kubelet compares them.
            let elapsed = now.duration_since(started_at).as_secs();
            let delay = i64::try_from(self.initial_delay.as_secs()).unwrap_or(i64::MAX);
            if elapsed < delay {
                return Tick::Skip(SkipReason::InitialDelay);
            }
        }
        match (self.probe_type, target.started) {
            (ProbeType::Startup, true) => return Tick::Skip(SkipReason::Started),
            (ProbeType::Liveness | ProbeType::Readiness, false) => {
                return Tick::Skip(SkipReason::NotStarted);
            }
            _ => {}
        }
        self.awaiting = true;
        Tick::Probe
    }

    /// Takes the outcome of the run the last tick asked for. An outcome
    /// without such a tick (none, or already recorded) changes nothing.
    pub fn record(&mut self, outcome: &ProbeOutcome) -> Recorded {
        let unchanged = |s: &Self, log_error| Recorded {
            result: s.result,
            changed: false,
            log_error,
        };
        if !std::mem::take(&mut self.awaiting) {
            return unchanged(self, false);
        }
        let outcome = match outcome {
            ProbeOutcome::Success(_) | ProbeOutcome::Warning(_) => ProbeResult::Success,
            ProbeOutcome::Failure(_) => ProbeResult::Failure,
            ProbeOutcome::Error(_) => {
                let first = !std::mem::replace(&mut self.error_logged, true);
                return unchanged(self, first);
            }
        };
        if self.last == Some(outcome) {
            self.run = self.run.saturating_add(1);
        } else {
            self.last = Some(outcome);
            self.run = 1;
        }
        let threshold = match outcome {
            ProbeResult::Failure => self.failure_threshold,
            _ => self.success_threshold,
        };
        if self.run < threshold {
            return unchanged(self, false);
        }
        let changed = self.result != outcome;
        self.result = outcome;
        if outcome == ProbeResult::Failure && self.probe_type != ProbeType::Readiness {
            self.on_hold = true;
            self.last = None;
            self.run = 0;
        }
        Recorded {
            result: outcome,
            changed,
            log_error: false,
        }
    }

    /// The pod is being terminated. Liveness and startup report Success from
    /// now on (for the instance already seen), so that no failure restarts a
    /// container that is being stopped, and their worker should end (returns
    /// false). Readiness keeps probing (returns true): the pod's endpoints
    /// follow it until the container stops.
    pub fn pod_terminating(&mut self) -> bool {
        if self.probe_type == ProbeType::Readiness {
            return true;
        }
        if self.container_id.is_some() {
            self.result = ProbeResult::Success;
        }
        self.awaiting = false;
        false
    }

    /// Moves `next_due` to the first point of the period's schedule after
    /// `now`: a tick that came late does not cause a burst of catch-up runs.
    fn advance(&mut self, now: Timestamp) {
        let period = self.period.as_nanos().max(1);
        let late = now
            .duration_since(self.next_due)
            .as_nanos()
            .max(0)
            .unsigned_abs();
        let steps = late / period + 1;
        let ahead = u64::try_from(steps.saturating_mul(period)).unwrap_or(u64::MAX);
        self.next_due = add(self.next_due, Duration::from_nanos(ahead));
    }
}

fn add(t: Timestamp, d: Duration) -> Timestamp {
    t.checked_add(d).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
