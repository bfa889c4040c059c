//! The kubelet's prober (`pkg/kubelet/prober`): probes (liveness,
//! readiness, startup) and the lifecycle hooks of running containers.
//!
//! The pure half is `spec` (what a probe or a lifecycle hook asks for),
//! `state` (the per-probe state machine) and this file (how probe results
//! make a container `started` and `ready`): nothing there runs a probe,
//! sleeps, or reads a clock. The driver half: `handlers` holds the I/O that
//! runs one probe or hook, `resolve` turns the spec's probe into what a
//! handler runs, `manager` schedules them per pod, container and probe
//! type, on `clock`'s time.
//!
//! Invariant: the pure files stay pure. The driver (`manager`) owns one
//! [`ProbeState`] per (pod UID, container name, [`ProbeType`]), passes `now`
//! and what it observed, runs the handler when told to, and hands the
//! [`ProbeOutcome`] back. The same inputs always give the same decisions.
//!
//! How a driver uses it, per probe worker:
//! 1. `let spec = ProbeSpec::from_probe(probe)?;` once, from the defaulted
//!    spec (a changed spec means a new pod UID, so never needs re-reading).
//! 2. `let mut state = ProbeState::new(probe_type, &spec, now, agent_started, fraction);`
//!    with `fraction` drawn from `0.0..1.0`.
//! 3. Sleep until [`ProbeState::next_due`], observe the container
//!    ([`ProbeTarget::from_runtime`]), call [`ProbeState::tick`]; on
//!    [`Tick::Probe`] run `spec.action` (ports via [`resolve_port`], exec
//!    commands via [`probe_command`], timeout `spec.timeout`) and pass the
//!    outcome to [`ProbeState::record`].
//! 4. Publish [`ProbeState::reading`] for readiness and startup into the
//!    [`ContainerProbeResults`] the status reads; act on a liveness or
//!    startup [`Recorded::changed`] to Failure by killing the container.

pub mod clock;
pub mod handlers;
pub mod manager;
pub mod probe_events;
pub mod resolve;
mod spec;
mod state;

pub use spec::{
    HttpGet, HttpScheme, LifecycleAction, PortRef, ProbeAction, ProbeSpec, TcpSocket,
    probe_command, resolve_port,
};
pub use state::{ProbeState, ProbeTarget, Recorded, SkipReason, Tick};

use k8s_openapi::api::core::v1::{Container, Probe};

/// Which of a container's three probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ProbeType {
    Liveness,
    Readiness,
    Startup,
}

impl ProbeType {
    pub const ALL: [ProbeType; 3] = [
        ProbeType::Liveness,
        ProbeType::Readiness,
        ProbeType::Startup,
    ];

    /// "Liveness", "Readiness" or "Startup": the kubelet's event wording
    /// ("Liveness probe failed: ...") and the `probe_type` label of its
    /// `prober_probe_total` metric.
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeType::Liveness => "Liveness",
            ProbeType::Readiness => "Readiness",
            ProbeType::Startup => "Startup",
        }
    }

    /// The result a probe has before it has decided anything about a
    /// container instance: a container is not ready until proven so, alive
    /// until proven dead, and not yet started.
    pub fn initial_result(self) -> ProbeResult {
        match self {
            ProbeType::Liveness => ProbeResult::Success,
            ProbeType::Readiness => ProbeResult::Failure,
            ProbeType::Startup => ProbeResult::Unknown,
        }
    }

    /// This probe of the container's spec, if it has one.
    pub fn probe_of(self, c: &Container) -> Option<&Probe> {
        match self {
            ProbeType::Liveness => c.liveness_probe.as_ref(),
            ProbeType::Readiness => c.readiness_probe.as_ref(),
            ProbeType::Startup => c.startup_probe.as_ref(),
        }
    }
}

/// A probe's standing verdict on a container instance (the kubelet's
/// `results.Result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeResult {
    Success,
    Failure,
    Unknown,
}

impl ProbeResult {
    /// "Success", "Failure" or "Unknown".
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeResult::Success => "Success",
            ProbeResult::Failure => "Failure",
            ProbeResult::Unknown => "Unknown",
        }
    }

    /// "successful", "failed" or "unknown": the `result` label of the
    /// kubelet's `prober_probe_total` metric.
    pub fn metric_label(self) -> &'static str {
        match self {
            ProbeResult::Success => "successful",
            ProbeResult::Failure => "failed",
            ProbeResult::Unknown => "unknown",
        }
    }
}

/// What one run of a probe handler found (the I/O side produces these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// Passed; the output (exec stdout+stderr, HTTP body), capped by the
    /// handler, for logs.
    Success(String),
    /// Passed with a remark, e.g. an HTTP redirect to another host that is
    /// not followed (the kubelet's `ProbeWarning` event). Counts as success.
    Warning(String),
    /// Failed (non-zero exit, HTTP status outside 200..=399, refused
    /// connection, timeout, gRPC not SERVING); the output says why.
    Failure(String),
    /// The probe could not be run at all (a named port that does not exist,
    /// a CRI error other than a timeout). Thrown away: it changes no result
    /// and no counter.
    Error(String),
}

/// The latest result of one probe the container has, and which container
/// instance (bare CRI container ID) it is about. A result about another
/// instance, or none yet, means "probe exists, no verdict".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReading {
    pub container_id: Option<String>,
    pub result: ProbeResult,
}

impl ProbeReading {
    /// The result if it is about `container_id`.
    pub fn result_for(&self, container_id: &str) -> Option<ProbeResult> {
        (self.container_id.as_deref() == Some(container_id)).then_some(self.result)
    }
}

/// What the status needs from the prober for one container: `None` means
/// the container has no such probe. A container without an entry in the
/// status's map has neither.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ContainerProbeResults {
    pub readiness: Option<ProbeReading>,
    pub startup: Option<ProbeReading>,
}

/// `containerStatuses[].started` and `.ready`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    pub started: bool,
    pub ready: bool,
}

/// The kubelet's rule (`prober_manager.go` UpdatePodStatus) for the current
/// instance `container_id` (bare CRI ID) of a container:
/// - `started` = running AND (startup result Success, or no startup probe);
/// - `ready` = started AND running AND (readiness result Success, or no
///   readiness probe).
///
/// A probe that exists but has no result for this instance counts as not
/// Success: a restarted container is neither started nor ready until its own
/// probes say so. `probes` is `None` for a container without probes.
pub fn container_readiness(
    running: bool,
    container_id: &str,
    probes: Option<&ContainerProbeResults>,
) -> Readiness {
    let passed = |reading: Option<&ProbeReading>| match reading {
        None => true,
        Some(r) => r.result_for(container_id) == Some(ProbeResult::Success),
    };
    let started = running && passed(probes.and_then(|p| p.startup.as_ref()));
    let ready = started && passed(probes.and_then(|p| p.readiness.as_ref()));
    Readiness { started, ready }
}

#[cfg(test)]
#[path = "prober_tests.rs"]
mod tests;
