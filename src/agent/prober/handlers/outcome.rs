//! The result of running one probe handler once, as the kubelet's
//! `pkg/probe` reports it.
//!
//! Invariant: the four variants and their `String` payloads are exactly
//! those of `kuberuntime::prober::ProbeOutcome`, so the handlers can switch
//! to that type by changing the one `pub use` in `handlers/mod.rs`.

/// What one probe run found. The payload is the output shown in events
/// and logs (a body, command output, or the reason it failed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeOutcome {
    /// The check passed (exit 0, HTTP 200–399, connected, SERVING).
    Success(String),
    /// Counts as a success, but the driver logs a warning (event reason
    /// `ProbeWarning`): an HTTP redirect to another host was not followed.
    Warning(String),
    /// The check ran and failed; counts towards `failureThreshold`.
    Failure(String),
    /// The check could not be run (the runtime's exec RPC failed): the
    /// kubelet's `Unknown`, discarded without changing the probe's state.
    Error(String),
}
