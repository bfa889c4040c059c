//! The kubelet's events for probes (`pkg/kubelet/prober/prober.go`):
//! `Unhealthy` on a failed or errored run, `ProbeWarning` on a passing run
//! with a remark, with the probe's name as the action. They live beside
//! [`ProbeType`] so that `events` needs nothing of the prober.
//!
//! Invariant: pure; every probe message is built here and nowhere else.

use super::ProbeType;
use crate::events::recorder::{Event, EventType};

fn event(reason: &'static str, action: &'static str, message: String) -> Event {
    Event {
        type_: EventType::Warning,
        reason,
        action,
        message,
    }
}

fn probe_action(probe: ProbeType) -> &'static str {
    match probe {
        ProbeType::Liveness => "LivenessProbe",
        ProbeType::Readiness => "ReadinessProbe",
        ProbeType::Startup => "StartupProbe",
    }
}

/// A probe run that failed, with its output.
pub fn probe_failed(probe: ProbeType, output: &str) -> Event {
    let message = format!("{} probe failed: {output}", probe.as_str());
    event("Unhealthy", probe_action(probe), message)
}

/// A probe that could not run at all (the kubelet's probe error: result
/// unknown).
pub fn probe_errored(probe: ProbeType, error: &str) -> Event {
    let message = format!(
        "{} probe errored and resulted in unknown state: {error}",
        probe.as_str()
    );
    event("Unhealthy", probe_action(probe), message)
}

/// A probe that passed with a remark.
pub fn probe_warning(probe: ProbeType, output: &str) -> Event {
    let message = format!("{} probe warning: {output}", probe.as_str());
    event("ProbeWarning", probe_action(probe), message)
}

#[cfg(test)]
#[path = "probe_events_tests.rs"]
mod tests;
